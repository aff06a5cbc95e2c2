"""Experiment: recipe variants side by side at a small, equal budget of positions.

Each variant is the base config with a few ``--set`` overrides, trained by
``train/train.py`` for one pass over the same random subset of 1977-2014 (same
seed: same positions, same order, same initial weights where the net is the
same), validated four times on the same positions of 2015. One job per core
(``OMP_NUM_THREADS=1``), ``--jobs`` at a time. A finished variant (its
``metrics.json`` exists) is skipped, an interrupted one resumes, so rerunning
the command continues the comparison.

    python benchmarks/recipe_compare.py --positions 500000 --jobs 2 \\
        --json results/recipe_compare.json --plot results/recipe_compare.png

Differences of a few tenths of a point are within the noise of one seed
(``--seeds 2`` runs each variant twice); what wins at 0.5 M positions need not
win at 10 M.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.settings import Setting, at_least  # noqa: E402
from othello_learn.files import UserError, atomic_write, check_input, check_output  # noqa: E402
from othello_learn.data.dataset import WthorDataset  # noqa: E402
from othello_learn.plots import check_plot_path  # noqa: E402
from othello_learn.evaluation.curves import load_curve, plot  # noqa: E402
from othello_learn.train.config import load_config  # noqa: E402

# name -> overrides of the base config (train.py --set items)
VARIANTS = {
    "base": [],
    "no_value_head": ["model.value_head=false"],
    "label_smoothing_0.1": ["optim.label_smoothing=0.1"],
    "ema_0.995": ["optim.ema=0.995"],  # a horizon of ~200 steps (50k positions) at batch 256
    "batch_1024_lr_0.006": ["data.batch_size=1024", "optim.lr=0.006"],
    "cosine": ["optim.scheduler=cosine"],
    "symmetries_start": ["data.symmetries=start"],
    "reference_fcn": ["model.arch=reference", "model.depth=8"],
}


def command(args, name: str, seed: int) -> list[str]:
    out = args.out / f"{name}_seed{seed}"
    cmd = [sys.executable, str(REPO / "train" / "train.py"), "--config", str(args.config), "--data", str(args.data),
           "--out", str(out), "--logger", "csv", "--no-test", "--seed", str(seed),
           "--train-positions", str(args.positions), "--max-epochs", "1",
           # a budget far beyond one pass: the schedule follows the steps, the Timer logs the hours
           "--max-minutes", "100000", "--set", "trainer.val_check_interval=0.25",
           "--set", f"data.val_positions={args.val_positions}", "--set", "trainer.enable_progress_bar=false",
           "--set", "trainer.enable_model_summary=false"]
    for item in [*args.set, *VARIANTS[name]]:
        cmd += ["--set", item]
    return cmd


def run_one(args, name: str, seed: int) -> dict:
    out = args.out / f"{name}_seed{seed}"
    if not (out / "metrics.json").exists():
        # The log lies beside the run folder: train.py refuses a folder that holds anything but its own run.
        logfile = args.out / f"{name}_seed{seed}.log"
        args.out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        with open(logfile, "ab") as log:
            rc = subprocess.run(command(args, name, seed), env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            raise UserError(f"variant {name} (seed {seed}) failed with exit status {rc}; see {logfile}")
    curve = load_curve(out)
    last = curve.iloc[-1]
    hours = float(last["hours"])
    return {"variant": name, "seed": seed, "overrides": VARIANTS[name], "final_val_acc": float(last["val/acc"]),
            "best_val_acc": float(curve["val/acc"].max()), "positions": int(last["positions"]),
            "minutes": round(hours * 60, 2), "positions_per_s": round(last["positions"] / (hours * 3600), 1)}


def summarize(rows: list[dict]) -> list[dict]:
    """Per variant: the mean final validation accuracy over seeds and its gap to ``base``."""
    by = {}
    for r in rows:
        by.setdefault(r["variant"], []).append(r)
    table = [{"variant": v, "seeds": len(rs), "final_val_acc": statistics.mean(r["final_val_acc"] for r in rs),
              "positions_per_s": statistics.mean(r["positions_per_s"] for r in rs)} for v, rs in by.items()]
    base = next((t["final_val_acc"] for t in table if t["variant"] == "base"), None)
    for t in table:
        t["vs_base_points"] = None if base is None else round(100 * (t["final_val_acc"] - base), 2)
    return table


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=REPO / "train" / "configs" / "cpu_raw_resnet_fast.yaml",
                    help="base config (default: %(default)s)")
    ap.add_argument("--data", type=Path, default=REPO / "data" / "wthor", help="dataset folder (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "compare", help="folder of the runs (default: %(default)s)")
    ap.add_argument("--variants", nargs="+", **Setting(str, list(VARIANTS), choices=list(VARIANTS)).argument(metavar="NAME"),
                    help=f"which to run (default: all: {', '.join(VARIANTS)})")
    ap.add_argument("--positions", type=at_least(1), default=500_000, help="training positions per run (default: %(default)s)")
    ap.add_argument("--val-positions", type=at_least(1), default=50_000, help="validation positions (default: %(default)s)")
    ap.add_argument("--seeds", type=at_least(1), default=1, help="seeds per variant (default: %(default)s)")
    ap.add_argument("--jobs", type=at_least(1), default=2, help="runs at a time (default: %(default)s)")
    ap.add_argument("--threads", type=at_least(1), default=1, help="threads per run (default: %(default)s)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="an override for every variant (before the variant's own)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--plot", type=Path, help="write the validation curves here (PNG)")
    args = ap.parse_args(argv)
    if not args.config.is_file():
        raise UserError(f"--config {args.config}: no such file")
    check_input(args.data, "--data", folder=True)
    # Outputs before the hours of training: --out holds the comparison's runs and logs, nothing else.
    check_output(args.out, "--out", folder=True)
    ours = re.compile(rf"({'|'.join(map(re.escape, VARIANTS))})_seed\d+(\.log)?")
    outputs = {Path(p).resolve() for p in (args.json, args.plot) if p}  # a rerun's own report, written there
    theirs = sorted(p.name for p in args.out.iterdir() if not ours.fullmatch(p.name) and p.resolve() not in outputs) \
        if args.out.is_dir() else []
    if theirs:
        raise UserError(f"--out {args.out}: holds {theirs[0]!r}, not a comparison's run; "
                        "choose a new or an empty folder")
    if args.json:
        check_output(args.json, "--json", suffixes=(".json",))
    if args.plot:
        check_plot_path(args.plot, "--plot")
    # The settings and the dataset before the hours of training: each used to fail inside the first run, one
    # line pointing at its log (and a variant's bad setting only after the variants before it had trained).
    for name in args.variants:
        try:
            load_config(args.config, [*args.set, *VARIANTS[name]])
        except UserError as e:
            raise UserError(f"variant {name}: {e}") from None
    try:
        WthorDataset(args.data)
    except (OSError, ValueError) as e:
        raise UserError(f"--data {args.data}: not a dataset data_tools/wthor.py built ({e})") from None

    todo = [(name, seed) for seed in range(args.seeds) for name in args.variants]
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda job: run_one(args, *job), todo))
    table = summarize(rows)
    print(f"{'variant':<22} {'seeds':>5} {'val acc':>8} {'vs base':>8} {'pos/s':>7}")
    for t in table:
        gap = "" if t["vs_base_points"] is None else f"{t['vs_base_points']:+.2f}"
        print(f"{t['variant']:<22} {t['seeds']:>5} {100 * t['final_val_acc']:>7.2f}% {gap:>8} {t['positions_per_s']:>7.0f}")
    if args.json:
        report = {"config": str(args.config), "positions": args.positions, "val_positions": args.val_positions,
                  "runs": rows, "summary": table}
        atomic_write(args.json, json.dumps(report, indent=2) + "\n")
    if args.plot:
        plot([args.out / f"{name}_seed0" for name in args.variants], args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
