"""Evaluate a move predictor on held-out WTHOR years: top-1 accuracy overall
and per game phase, as a table, a PNG plot and JSON.

    othello-eval --checkpoint checkpoints/cpu_hc_long.pt --years 2016 --json runs/eval/cpu_hc_long_2016.json
    othello-eval --checkpoint checkpoints/cpu_raw_long.pt --years 2015-2016 --tta 8
    othello-eval --checkpoint checkpoints/rl_hc_gen19.pt --years 2015 --calibrate --export calibrated.pt

The positions come from the built dataset (``--data``, as in training, so the
figures are on exactly the positions the test split holds); ``--wthor-dir DIR``
replays raw WTHOR files instead, for years the dataset lacks.

Accuracy is exact (the predicted move is the move played). The reference's
symmetric variant, where a move equivalent to the played one under a symmetry
of the position also counts, is reported beside it. ``--tta 8`` (or 4)
averages the predicted move distribution over the board's symmetries.
``--calibrate`` fits the temperature that best matches the moves played (a
self-play net's policy comes out over-confident, which costs its search) and
``--export`` then writes the net with its logits divided by it. ``--average NET.pt ...``
evaluates (and exports) the element-wise mean of ``--checkpoint`` and those nets of its
architecture: weight averaging, of consecutive self-play generations say.

``--precision auto`` (the default) runs the network as training and
self-play's batched search run it: bf16 autocast + channels_last where the
hardware has fast bf16, else fp32, so the figure agrees with the test at the
end of training. A net trained under bf16 can read differently in fp32 (the
reference FCN ``checkpoints/cpu_raw_fast.pt``: 57.13 % bf16, 56.58 % fp32; the
residual nets with batch norm nearly agree: ``cpu_resnet.pt`` 49.10 % bf16,
49.08 % fp32); ``--precision 32`` gives the fp32 figure.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from othello import bitboard as bb
from othello_learn.cli import STOP_SIGNALS, ArgumentParser, bar_pacing, run_main, stop_signals_raise
from othello_learn.settings import Setting
from othello_learn.files import UserError, check_distinct, check_input, check_output, write_json
from othello.symmetry import SQUARE_MAP, transform
from othello_learn.plots import check_plot_path
from othello_learn.evaluation.phase_report import format_table, plot
from othello_learn import HOME, HOME_HELP

# torch, pandas and the modules that import them load inside the functions, after the
# arguments are parsed: --help and a bad flag answer in half a second, not three.
if TYPE_CHECKING:
    import torch

    from othello_learn.data.dataset import WthorDataset



def predict(net, batch: dict, tta: int = 1) -> torch.Tensor:
    """Move probabilities (N, 64), optionally averaged over ``tta`` symmetries
    (1, 4: those keeping the start position, or 8).

    In a position a symmetry leaves unchanged, the average gives equivalent moves
    the same probability; the untransformed view breaks such ties (a weight of
    1e-4), so the start position keeps the recorded convention (f5) and exact
    accuracy is not lost to the order of the squares."""
    import torch

    from othello_learn.models.batch import SYMMETRY_GROUPS, transform_batch

    with torch.no_grad():
        group = {len(g): g for g in SYMMETRY_GROUPS.values()}[tta]  # 1, 4 or 8 symmetries
        if len(group) == 1:
            return torch.softmax(net(batch)["policy"].float(), -1)
        total = 0
        for k in group:
            b = transform_batch(batch, torch.full((batch["player"].shape[0],), k, device=batch["player"].device)) \
                if k else batch
            probs = torch.softmax(net(b)["policy"].float(), -1)
            total = total + probs[:, torch.as_tensor(SQUARE_MAP[k], device=probs.device)]
            if k == 0:
                identity = probs
        return (total / len(group) + 1e-4 * identity) / (1 + 1e-4)


def symmetric_hits(player, opponent, move, pred) -> np.ndarray:
    """True where ``pred`` is the move played or its image under a symmetry
    that leaves the position unchanged."""
    hit = pred == move
    for k in range(1, 8):
        same = (transform(player, k) == player) & (transform(opponent, k) == opponent)
        hit |= same & (pred == SQUARE_MAP[k][move])
    return hit


def fit_temperature(logp: torch.Tensor, move: torch.Tensor) -> float:
    """The T that minimises the mean cross-entropy of softmax(logp / T) against the moves played:
    post-hoc temperature scaling (Guo et al., 2017). The loss is convex in 1/T, so a golden-section
    search over 1/T in [1/8, 8] finds it (40 steps: to about 1e-7)."""
    import torch

    logp, move = logp.double(), move.long()
    picked = logp.gather(1, move[:, None]).squeeze(1)

    def loss(beta: float) -> float:
        return float((torch.logsumexp(beta * logp, -1) - beta * picked).mean())

    lo, hi, g = 1 / 8, 8.0, (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = loss(a), loss(b)
    for _ in range(40):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = loss(b)
    return 2 / (lo + hi)


CALIBRATION_POSITIONS = 200_000  # the most positions the temperature is fitted on (a year has ~400 k)


def evaluate(net, positions: np.ndarray, batch_size: int = 2048, tta: int = 1, device="cpu", progress=True,
             precision: str = "32", calibrate: bool = False) -> dict:
    """``calibrate``: also fit the policy temperature on these positions (``fit_temperature``, on
    at most ~``CALIBRATION_POSITIONS`` of them, evenly spread) and report the cross-entropy at it."""
    import torch

    from othello_learn.models.batch import from_records
    from othello_learn.models.fastpath import autocast, prepare, resolve

    precision = resolve(precision, device)
    net = prepare(net.to(device).eval(), device, precision)
    preds, top3, nll, kept = [], [], [], []
    stride = max(1, math.ceil(len(positions) / CALIBRATION_POSITIONS))
    from tqdm.auto import tqdm

    from othello_learn.train.metrics import PhaseAccuracy  # torchmetrics: seconds to import, not for --help

    for s in tqdm(range(0, len(positions), batch_size), disable=not progress, desc="evaluating",
                  file=sys.stderr, **bar_pacing()):
        batch = {k: v.to(device) for k, v in from_records(positions[s:s + batch_size]).items()}
        with autocast(device, precision):
            probs = predict(net, batch, tta)
        preds.append(probs.argmax(-1).cpu().numpy())
        top3.append((probs.topk(3, -1).indices == batch["move"][:, None]).any(-1).cpu().numpy())
        logp = probs.clamp_min(1e-30).log()  # an illegal square's 0 reads as -69, never -inf
        nll.append(-logp.gather(1, batch["move"][:, None]).squeeze(1).cpu().numpy())
        if calibrate:
            kept.append(logp[(s + torch.arange(len(logp), device=logp.device)) % stride == 0].cpu())
    pred = np.concatenate(preds) if preds else np.zeros(0, np.int64)
    in_top3 = np.concatenate(top3) if top3 else np.zeros(0, bool)
    move = positions["move"].astype(np.int64)
    p, o = positions["player"], positions["opponent"]
    exact = pred == move
    sym = symmetric_hits(p, o, move, pred)
    ply = torch.from_numpy(positions["ply"].astype(np.int64))
    branching = torch.from_numpy(bb.popcount(bb.legal_moves(p, o)).astype(np.int64))
    by_phase = {}
    for name, hits in (("accuracy", exact), ("symmetric_accuracy", sym)):
        metric = PhaseAccuracy()
        metric.update(torch.from_numpy(hits), ply, branching)
        by_phase[name] = metric.compute()
    phases = []
    for e, es in zip(by_phase["accuracy"], by_phase["symmetric_accuracy"]):
        n = e["positions"]  # an empty phase reads null in the JSON, not NaN
        phases.append({"moves": e["moves"], "accuracy": e["accuracy"] if n else None,
                       "symmetric_accuracy": es["accuracy"] if n else None, "positions": n,
                       "branching_factor": e["branching_factor"] if n else None})
    result = {
        "accuracy": float(exact.mean()),
        "symmetric_accuracy": float(sym.mean()),
        "top3_accuracy": float(in_top3.mean()),
        "cross_entropy": float(np.concatenate(nll).mean()) if nll else None,
        "positions": int(len(positions)),
        "tta": tta,
        "precision": str(precision),
        "phases": phases,
    }
    if calibrate and kept:
        logp = torch.cat(kept)
        moves = torch.from_numpy(move[::stride])
        t = fit_temperature(logp, moves)
        result["policy_temperature"] = t
        result["cross_entropy_at_temperature"] = float(torch.nn.functional.cross_entropy(logp.double() / t, moves))
        result["calibration_positions"] = int(len(moves))
    return result


def open_dataset(path: Path) -> WthorDataset:
    from othello_learn.data.dataset import WthorDataset

    try:
        return WthorDataset(path)
    except (OSError, ValueError) as e:
        build = "" if "rebuild" in str(e) else "build it with othello-dataset --out DIR, or "
        raise UserError(f"--data {path}: not a usable dataset ({e}); {build}replay raw files with --wthor-dir DIR") \
            from None


def build_parser() -> argparse.ArgumentParser:
    """The command's parser (the command reference in docs/ is generated from it)."""
    ap = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=Path, required=True, help="Lightning .ckpt or exported model.pt")
    ap.add_argument("--data", type=Path, default=HOME / "data" / "wthor",
                    help="dataset folder from othello-dataset (default: data/wthor in " + HOME_HELP + ")")
    ap.add_argument("--wthor-dir", type=Path, default=None,
                    help="replay the WTH_YYYY.wtb files of this folder instead of reading --data")
    ap.add_argument("--years", default="2016", help="years to evaluate, e.g. 2016 or 2015-2016; each must be in "
                    "the dataset, or have its file in --wthor-dir (default: %(default)s)")
    ap.add_argument("--json", type=Path, help="write the result here (its folder is created)")
    ap.add_argument("--plot", type=Path, help="PNG of accuracy by phase (default: beside --json)")
    ap.add_argument("--tta", **Setting(int, 1, "symmetries averaged at test time (default: %(default)s)",
                                       choices=[1, 4, 8]).argument())
    ap.add_argument("--batch-size", **Setting(int, 2048, "positions a forward pass (default: %(default)s)", low=1)
                    .argument())
    ap.add_argument("--device",
                    help="torch device (default: cuda when there is a GPU, else cpu)")
    ap.add_argument("--precision", **Setting(str, "auto", choices=["auto", "32", "bf16"]).argument(
                    help="auto: bf16 autocast + channels_last where the device has fast bf16 (as in training), "
                         "else fp32; 32: fp32 (default: %(default)s)"))
    ap.add_argument("--limit", type=Setting(low=1).parse,
                    help="evaluate only the first N positions, in file order: the years' first games, not a sample "
                         "(smoke tests)")
    ap.add_argument("--export", type=Path, metavar="NET.pt",
                    help="also write the network as an exported .pt, the file the arena, play, the engines and "
                         "--init take, with this evaluation in its metrics: how to use a run stopped before "
                         "train.py wrote OUT/model.pt (give its last.ckpt or best-*.ckpt)")
    ap.add_argument("--average", type=Path, nargs="+", metavar="NET.pt",
                    help="evaluate the element-wise mean of --checkpoint and these exported nets of its architecture "
                         "(weight averaging); --export writes the mean")
    ap.add_argument("--calibrate", action="store_true",
                    help="also fit the policy temperature T that best matches the moves played (temperature "
                         "scaling); with --export, the exported net's logits are divided by T: the same 1-ply "
                         "moves, calibrated priors for a search. Calibrate on the validation year (--years 2015); it fits the "
                         "net's own logits, so --tta stays 1")
    return ap


def evaluate_command(argv=None) -> dict:
    """The whole command; returns the result written to ``--json``."""
    ap = build_parser()
    args = ap.parse_args(argv)
    from othello_learn.data.dataset import build, format_years, parse_years
    from othello_learn.models.fastpath import default_device, usable_device
    from othello_learn.models.nets import (average_networks, is_training_checkpoint, load_network, network_from_export,
                                           read_checkpoint, save_network, temper_policy)

    args.device = args.device or default_device()
    if args.calibrate and args.tta != 1:
        raise UserError(f"--calibrate fits the network's own logits: use it with --tta 1, not --tta {args.tta}")

    if args.json is not None:  # found now, not after the whole evaluation
        check_output(args.json, "--json", suffixes=(".json",))
    plot_path = args.plot or (args.json.with_suffix(".png") if args.json else None)
    if plot_path is not None:
        check_plot_path(plot_path, "--plot")
    if args.export is not None:
        check_output(args.export, "--export", suffixes=(".pt", ".pth"))
    # the dataset's summary.json is an input too: --json DATA/summary.json replaced it with the result,
    # and the dataset could no longer be opened
    check_distinct({"--json": args.json, "--plot": plot_path, "--export": args.export},
                   {"--checkpoint": args.checkpoint,
                    "--data": None if args.wthor_dir else args.data / "summary.json"})
    usable_device(args.device)
    check_input(args.checkpoint, "--checkpoint")
    for path in args.average or []:
        check_distinct({"--json": args.json, "--plot": plot_path, "--export": args.export}, {"--average": path})
        check_input(path, "--average")
    check_input(args.wthor_dir, "--wthor-dir", folder=True)
    try:
        years = parse_years(args.years)
    except ValueError as e:
        raise UserError(f"--years: {e}") from None
    source = f"--wthor-dir {args.wthor_dir}" if args.wthor_dir else f"--data {args.data}"
    # The dataset is opened (and its years checked) before the network: a wrong folder is found at once.
    dataset = None if args.wthor_dir else open_dataset(args.data)
    ckpt = read_checkpoint(args.checkpoint)  # a UserError naming the file if it is not a safe, whole checkpoint
    if is_training_checkpoint(ckpt):
        from othello_learn.train.module import network_from_any  # Lightning (seconds to import): a .ckpt only

        net = network_from_any(ckpt, args.checkpoint)
    else:
        net = network_from_export(ckpt, args.checkpoint)
    if args.average:
        try:
            net = average_networks([net] + [load_network(p) for p in args.average])
        except ValueError as e:  # another architecture: which net, and what it is
            raise UserError(f"--average: {e} (--checkpoint {args.checkpoint})") from None
    if dataset is not None:
        try:  # in the dataset's order (year, game, ply), the order a replay of the raw files gives
            positions = dataset.positions_of(years)
        except ValueError as e:
            raise UserError(f"--data {e}; rebuild it with those years or use --wthor-dir DIR") from None
        per_year = dataset.summary["years"]
    else:
        try:
            built = build(args.wthor_dir, years, progress=False, warn=lambda m: print(m, file=sys.stderr))
        except ValueError as e:
            raise UserError(f"--wthor-dir {args.wthor_dir}: {e}") from None
        positions, per_year = built.positions, built.summary["years"]
    empty = sorted(int(y) for y, v in per_year.items() if (years is None or int(y) in years) and not v["positions"])
    if empty:  # the figures would be reported as covering years they do not
        raise UserError(f"{source}: no positions for {format_years(empty)} (no games, or all skipped); "
                        f"leave {'it' if len(empty) == 1 else 'them'} out of --years")
    if args.limit is not None:
        positions = positions[: args.limit]
    if len(positions) == 0:
        raise UserError(f"{source}: no positions for --years {args.years}")
    t = time.perf_counter()
    result = evaluate(net, positions, args.batch_size, args.tta, args.device, precision=args.precision,
                      calibrate=args.calibrate)
    result.update(checkpoint=str(args.checkpoint), years=args.years, seconds=round(time.perf_counter() - t, 2),
                  model=net.config.to_dict())
    # The files before any print: a reader that stops early (| head) ends us at a print, and
    # the result must not be lost with it; the JSON before the plot, the lesser loss if the disk fills.
    if args.json:
        write_json(args.json, result)
    if args.export:
        # An exported .pt keeps what it said of itself (a self-play net's generation, a training run's
        # metrics); a Lightning .ckpt's training state is not carried over.
        exported = not is_training_checkpoint(ckpt) and not args.average  # a mean is no one net's
        carried = {k: v for k, v in ckpt.items()
                   if exported and k not in ("config", "state_dict", "hparams", "metrics")}
        metrics = {"exported_from": str(args.checkpoint),
                   "evaluation": {k: v for k, v in result.items() if k != "model"}}
        if args.average:
            metrics["averaged"] = [str(args.checkpoint)] + [str(p) for p in args.average]
        if exported and isinstance(ckpt.get("metrics"), dict):
            metrics["source_metrics"] = ckpt["metrics"]
        if args.calibrate:  # the accuracies hold for the tempered net too: the argmax is the same
            metrics["policy_temperature"] = result["policy_temperature"]
            temper_policy(net, result["policy_temperature"])
        save_network(net, args.export, **carried, metrics=metrics)
    if plot_path:
        plot(result, plot_path, f"{args.checkpoint.name} on {args.years} ({result['positions']:,} positions)")
    print(format_table(result))
    if args.json:
        print(f"json: {args.json}")
    if plot_path:
        print(f"plot: {plot_path}")
    if args.export:
        print(f"network: {args.export}")
    return result


def main(argv=None) -> int:
    with stop_signals_raise(STOP_SIGNALS):  # a kill or a closed terminal: "terminated", the --json/--export unwritten
        evaluate_command(argv)
    return 0


def cli() -> None:
    """The ``othello-eval`` entry point, and ``python train/evaluate.py``."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
