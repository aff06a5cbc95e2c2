"""Benchmark: the loop's self-play stage played by one process with every
thread against ``--workers`` processes sharing them out (``selfplay/loop.py
--workers``), side by side on the same parts and seeds; with ``--backend ray``,
also one Ray actor against ``--workers`` actors.

    OMP_NUM_THREADS=2 python benchmarks/selfplay_workers.py --init checkpoints/best_handcrafted.pt --games 512 --parallel 256
    OMP_NUM_THREADS=2 python benchmarks/selfplay_workers.py --init random --games 128 --parallel 64 --rounds 3
    OMP_NUM_THREADS=16 python benchmarks/selfplay_workers.py --device cuda --workers 8 --games 2048   # processes sharing a GPU
    OMP_NUM_THREADS=2 python benchmarks/selfplay_workers.py --backend ray --games 64 --parallel 16 --rounds 3 --json w.json

Each round runs the real stage (``othello_learn.rl.stages.self_play``) on
a fresh run folder, once per worker count, in turn, so a load change on a
shared machine hits both alike; it reports the medians of the stage's own
games/hour. Gumbel search, resignation off (every game played out), exact
endgames from ``--solve-empties``: the CPU recipe of docs/results/selfplay.md#the-cpu-recipe.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.settings import at_least  # noqa: E402
from othello_learn.files import UserError, check_output, write_json  # noqa: E402
from othello_learn.models.fastpath import usable_device  # noqa: E402
from othello_learn.rl.records import open_run  # noqa: E402
from othello_learn.rl.settings import RunConfig, self_play_workers  # noqa: E402
from othello_learn.rl.stages import self_play  # noqa: E402


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--init", default="random", help="checkpoint with a value head, or random (a 4x64 raw net)")
    ap.add_argument("--games", type=at_least(1), default=512, help="self-play games a run")
    ap.add_argument("--parallel", type=at_least(1), default=256, help="games per part (at once in one process)")
    ap.add_argument("--simulations", type=at_least(1), default=32, help="Gumbel simulations a move")
    ap.add_argument("--solve-empties", type=at_least(0), default=10, help="exact endgames from this many empties")
    ap.add_argument("--workers", type=at_least(0), default=0, help="the processes to compare with one (0: the loop's default)")
    ap.add_argument("--rounds", type=at_least(1), default=1,
                    help="alternating rounds (one process and the workers, the order reversed every other round); "
                         "3 or more for medians")
    ap.add_argument("--device", default="cpu", help="where the network runs (on a GPU, --workers 0 means one process: "
                                                  "name the count to compare)")
    ap.add_argument("--backend", choices=["processes", "ray"], default="processes",
                    help="ray: also Ray actors (a local Ray), 1 and --workers of each backend in alternating rounds")
    ap.add_argument("--json", help="write the medians here: {\"games_per_hour\": {\"processes:1\": ..., ...}}")
    args = ap.parse_args(argv)
    if args.json:
        check_output(Path(args.json), "--json")
    threads = torch.get_num_threads()
    workers = self_play_workers(args.workers, usable_device(args.device), -(-args.games // args.parallel))[0]
    if workers == 1:
        raise UserError(f"nothing to compare: one process ({threads} thread(s), --device {args.device}, "
                        f"{-(-args.games // args.parallel)} part(s)); give --workers N, or OMP_NUM_THREADS=2 or more "
                        "on a CPU, and at least two parts (--games / --parallel)")
    backends = ["processes"] + (["ray"] if args.backend == "ray" else [])
    figures: dict[str, list[float]] = {f"{b}:{w}": [] for b in backends for w in (1, workers)}
    pool = None
    if args.backend == "ray":  # one Ray for every round: its start-up is not self-play (each run starts its actors)
        from othello_learn.rl.ray_backend import RayPool

        pool = RayPool(SimpleNamespace(ray_address=None))
        pool.connect(workers)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                for key in (list(figures) if r % 2 == 0 else list(figures)[::-1]):  # none always first
                    backend, w = key.split(":")
                    out = Path(tmp) / f"round{r}_{backend}{w}"
                    cfg = RunConfig.from_args([
                        "--init", args.init, "--out", str(out), "--games", str(args.games), "--parallel", str(args.parallel),
                        "--simulations", str(args.simulations), "--search", "gumbel", "--no-resign",
                        "--solve-empties", str(args.solve_empties), "--workers", w, "--backend", backend,
                        "--device", args.device, "--logger", "none", "--quiet", "--seed", str(r)]
                        + (["--arch-blocks", "4"] if args.init == "random" else []))  # a checkpoint brings its own
                    cfg.check()
                    open_run(cfg)
                    self_play(cfg, 1)
                    stats = json.loads((out / "stats" / "gen_0001_selfplay.json").read_text())
                    figures[key].append(stats["games_per_hour"])
                    print(f"round {r + 1}: {key}: {stats['games_per_hour']:8,.0f} games/h "
                          f"({stats['seconds']:.1f} s)", file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.close()
    medians = {key: statistics.median(runs) for key, runs in figures.items()}
    print(f"{args.device}, {threads} threads; {args.init}; {args.games} games in parts of {args.parallel}; Gumbel-{args.simulations}, "
          f"exact from {args.solve_empties} empties; "
          + (f"medians of {args.rounds} alternating rounds" if args.rounds > 1 else "one round (--rounds 3 for medians)"))
    print("| backend:workers | threads each | games/hour |")
    print("|---|---:|---:|")
    for key, rate in medians.items():
        w = int(key.split(":")[1])
        print(f"| {key} | {max(1, threads // w)} | {rate:,.0f} |")
    for b in backends:
        print(f"{b}: {workers} workers {medians[f'{b}:{workers}'] / medians[f'{b}:1']:.2f}x one's games/hour"
              + (f" (more workers than the {threads} threads)" if workers > threads else ""))
    if args.backend == "ray":
        print(f"ray:{workers} {medians[f'ray:{workers}'] / medians[f'processes:{workers}']:.2f}x "
              f"processes:{workers}")
    if args.json:
        write_json(Path(args.json), {"games_per_hour": medians, "device": args.device, "threads": threads,
                                     "games": args.games, "parallel": args.parallel, "simulations": args.simulations,
                                     "rounds": args.rounds, "init": args.init})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
