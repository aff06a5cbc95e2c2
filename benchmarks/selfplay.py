"""Benchmark: self-play throughput (games per hour, network evaluations per
second) of the batched search on each inference path of ``othello_learn.models.fastpath``,
PUCT and Gumbel at equal simulations, side by side: the plain fp32 network, batch norms
folded (fp32), folded in channels_last (fp32), folded and compiled (torch.compile,
inductor, frozen weights; its compile time is reported apart), and bf16 autocast where
the device has fast bf16. It says which path ``Evaluator``'s "auto" picks on this machine.

    python benchmarks/selfplay.py --games 32 --simulations 32 --blocks 4 --width 64 --rounds 3   # CPU scale
    python benchmarks/selfplay.py --games 512 --simulations 100 --blocks 10 --width 64 --arch reference --rounds 1
    python benchmarks/selfplay.py --checkpoint checkpoints/best_handcrafted.pt --games 512 --json OUT.json

Each round plays every (precision, search) configuration once, in turn, so
a load change on a shared machine hits all of them alike; the medians over
rounds are reported. Games are complete self-play games from the start
(resignation off, so the figure is not flattered by short games); the network
has random weights (the speed does not depend on them). ``--arch reference``
times the issue's 10x64 conv net (no value head: value 0), ``resnet`` a
residual net with one; ``--checkpoint`` times a trained net instead. ``--json``
writes the table's rows.

Measured on the project's 2-core AMD EPYC (AVX512-BF16), one thread, on cores shared with
other work (noisy), Gumbel, 32 games of 16 simulations, 4x64 resnet, 3 rounds: games/hour
plain fp32 1,809, folded 2,113 (1.17x), folded channels_last 2,053 (1.14x), compiled 1,888
(1.04x, after 202 s of compiling), bf16 folded channels_last 2,761 (1.53x; the pick there).
README, the self-play section, has the table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.files import check_output, write_json  # noqa: E402
from othello_learn.settings import Setting, at_least  # noqa: E402
from othello_learn.models import fastpath  # noqa: E402
from othello_learn.models.encoders import ENCODERS  # noqa: E402
from othello_learn.models.nets import ARCHITECTURES, SIZE_LIMITS, NetConfig, build_network, load_network  # noqa: E402
from othello_learn.search.gumbel import GumbelConfig  # noqa: E402
from othello_learn.search.mcts import Evaluator, MCTSConfig  # noqa: E402
from othello_learn.rl.selfplay import SelfPlayConfig, play_games  # noqa: E402


SEARCHES = ("puct", "gumbel")
PATHS = (*fastpath.INFERENCE_PATHS, "bf16")


class Timed:
    """An evaluator that also adds up the seconds spent in the network."""

    def __init__(self, ev: Evaluator):
        self.ev, self.seconds = ev, 0.0

    def __getattr__(self, name):
        return getattr(self.ev, name)

    def __call__(self, *args, **kw):
        _sync(self.ev.device)
        t = time.perf_counter()
        out = self.ev(*args, **kw)
        _sync(self.ev.device)
        self.seconds += time.perf_counter() - t
        return out


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _names(known, joined: str):
    """An argparse type: a comma-separated list of ``known`` names, checked before the first timed
    round (not a KeyError after it)."""
    def parse(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",")]
        if not names or any(name not in known for name in names):
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {joined(known)}, got {text!r}")
        return names
    return parse


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--games", type=at_least(1), default=32, help="games played at once (default: %(default)s)")
    ap.add_argument("--simulations", type=at_least(1), default=32, help="per move (default: %(default)s)")
    ap.add_argument("--arch", **Setting(str, "resnet", "(default: %(default)s)", choices=sorted(ARCHITECTURES)).argument())
    ap.add_argument("--blocks", type=at_least(1, most=SIZE_LIMITS["blocks"]), default=4,
                    help="depth (reference) or residual blocks (resnet) (default: %(default)s)")
    ap.add_argument("--width", type=at_least(1, most=SIZE_LIMITS["width"]), default=64, help="(default: %(default)s)")
    ap.add_argument("--encoder", **Setting(str, "raw", "(default: %(default)s)", choices=sorted(ENCODERS)).argument())
    ap.add_argument("--rounds", type=at_least(1), default=3, help="alternating rounds, medians reported "
                                                                  "(default: %(default)s)")
    ap.add_argument("--searches", type=_names(SEARCHES, " and ".join), default="puct,gumbel",
                    help="comma-separated, of puct and gumbel (default: %(default)s)")
    ap.add_argument("--paths", type=_names(PATHS, ", ".join), default=",".join(PATHS),
                    help="comma-separated inference paths, of " + ", ".join(PATHS) + " (default: all; bf16 only "
                         "where the device has it; compiled takes a minute or more to compile)")
    ap.add_argument("--device", default=fastpath.default_device(), help="(default: %(default)s)")
    ap.add_argument("--checkpoint", type=Path, help="time this network (its own architecture) instead of "
                                                    "--arch, --blocks, --width and --encoder with random weights")
    ap.add_argument("--json", type=Path, help="write the device, the settings and the table's rows here")
    args = ap.parse_args(argv)
    fastpath.usable_device(args.device)
    if args.json:  # before the minutes of timing
        check_output(args.json, "--json", suffixes=(".json",))
    torch.manual_seed(0)
    if args.checkpoint:
        net = load_network(args.checkpoint).to(args.device).eval()
        cfg = net.config
        args.arch, args.encoder = cfg.arch, cfg.encoder
        args.blocks, args.width = (cfg.blocks if cfg.arch == "resnet" else cfg.depth), cfg.width
    else:
        net = build_network(NetConfig(args.arch, encoder=args.encoder, depth=args.blocks, blocks=args.blocks,
                                      width=args.width, value_head=True)).to(args.device).eval()
    picked = Evaluator(net, args.device)
    print(f"this machine's pick (Evaluator's auto): {picked.describe()}", file=sys.stderr)
    fast = fastpath.auto_precision(args.device)
    paths = {f"fp32 {p}": (fastpath.FP32, p) for p in args.paths if p != "bf16"}
    if "bf16" in args.paths:
        if fastpath.is_bf16(fast):
            paths[fast] = (fast, fastpath.inference_path("auto", args.device, fast))
        else:
            print(f"note: no fast bf16 on this device ({args.device}): no bf16 row", file=sys.stderr)
    evaluators, setup = {}, {}
    for name, (precision, path) in paths.items():
        t = time.perf_counter()
        evaluators[name] = Evaluator(net, args.device, precision=precision, path=path)
        # warm-up (oneDNN kernels, the allocator; the compiled path compiles here)
        play_games(evaluators[name], min(8, args.games), MCTSConfig(simulations=2), SelfPlayConfig(), progress=False)
        setup[name] = time.perf_counter() - t
        print(f"{name}: {evaluators[name].describe()}, ready in {setup[name]:.1f} s", file=sys.stderr, flush=True)
    small = picked.min_fast_batch
    if fastpath.is_bf16(fast) and args.games < small:
        print(f"note: batches of fewer than {small} positions run in fp32 on a CPU (Evaluator.min_fast_batch): "
              f"with --games {args.games} the bf16 row is fp32", file=sys.stderr)
    configs = {"puct": MCTSConfig(simulations=args.simulations), "gumbel": GumbelConfig(simulations=args.simulations)}
    searches = args.searches
    sp = SelfPlayConfig(resign_threshold=None)
    results: dict[tuple, list] = {(p, s): [] for p in evaluators for s in searches}
    for r in range(args.rounds):
        for (prec, search), runs in (list(results.items()) if r % 2 == 0 else list(results.items())[::-1]):
            # (every other round in the reverse order: no setup always runs first)
            ev = Timed(evaluators[prec])
            ev.ev.calls = ev.ev.positions = 0
            _sync(args.device)
            t = time.perf_counter()
            games = play_games(ev, args.games, configs[search], sp, seed=r, progress=False)
            _sync(args.device)
            dt = time.perf_counter() - t
            runs.append((len(games.winner) / dt * 3600, ev.positions / dt, ev.positions / max(ev.calls, 1), dt,
                         ev.seconds / dt, ev.positions / ev.seconds))
            print(f"round {r + 1}: {prec:>18} {search:>6}: {runs[-1][0]:8,.0f} games/h {runs[-1][1]:8,.0f} evals/s "
                  f"({dt:.1f} s)", file=sys.stderr, flush=True)
    name = torch.cuda.get_device_name() if torch.device(args.device).type == "cuda" else "CPU"
    print(f"device {name}, {torch.get_num_threads()} threads; {args.arch} {args.blocks}x{args.width} {args.encoder}; "
          f"{args.simulations} simulations/move; {args.games} games at once; medians of {args.rounds} alternating rounds")
    print(f"this machine's pick: {picked.describe()}")
    print("| path | search | games/hour | network evaluations/s | mean batch | seconds | network share | "
          "evaluations/s inside the network | × first row | setup s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    first, rows = {}, []
    for (path, search), runs in results.items():
        gph, eps, batch, dt, share, net_eps = (statistics.median(x) for x in zip(*runs))
        first.setdefault(search, gph)
        print(f"| {path} | {search} | {gph:,.0f} | {eps:,.0f} | {batch:.0f} | {dt:.1f} | {share:.0%} | "
              f"{net_eps:,.0f} | {gph / first[search]:.2f} | {setup[path]:.1f} |")
        rows.append({"path": path, "search": search, "games_per_hour": gph, "evaluations_per_s": eps,
                     "mean_batch": batch, "seconds": dt, "network_share": share, "network_evaluations_per_s": net_eps,
                     "setup_s": setup[path]})
    if args.json:
        write_json(args.json, {"device": name, "threads": torch.get_num_threads(), "pick": picked.describe(),
                               "net": f"{args.arch} {args.blocks}x{args.width} {args.encoder}",
                               "checkpoint": None if args.checkpoint is None else str(args.checkpoint),
                               "games": args.games, "simulations": args.simulations, "rounds": args.rounds,
                               "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
