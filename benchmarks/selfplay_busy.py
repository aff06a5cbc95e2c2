"""Benchmark: the share of wall time the self-play actors are busy, synchronous generations
against ``--async`` (``othello-rl --backend ray``), side by side on the same small runs.

    OMP_NUM_THREADS=2 python benchmarks/selfplay_busy.py --generations 3 --games 16 --parallel 4 --rounds 2

Each round runs the whole loop (self-play, training, gating, commit) on a fresh run folder, once
per mode, in turn, on one local Ray started for the benchmark (its start-up is not counted; each
run starts its actors). Busy: the seconds the actors spent playing the parts that were written,
over the run's wall time times the actors. Both modes train the same steps a generation: the
synchronous runs take the steps the first ``--async`` run's ratio gave (round 1 runs it first).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.settings import at_least  # noqa: E402
from othello_learn.files import check_output, write_json  # noqa: E402
from othello_learn.rl import loop as rl_loop  # noqa: E402
from othello_learn.rl import ray_backend  # noqa: E402
from othello_learn.rl.settings import RunConfig  # noqa: E402


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--generations", type=at_least(2), default=3, help="generations a run")
    ap.add_argument("--games", type=at_least(1), default=16, help="self-play games a generation")
    ap.add_argument("--parallel", type=at_least(1), default=4, help="games a part")
    ap.add_argument("--simulations", type=at_least(1), default=8, help="Gumbel simulations a move")
    ap.add_argument("--workers", type=at_least(1), default=2, help="Ray actors")
    ap.add_argument("--train-ratio", type=float, default=2.0, help="--async's training samples per new sample")
    ap.add_argument("--rounds", type=at_least(1), default=1, help="alternating rounds (medians)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    if args.json:
        check_output(Path(args.json), "--json")
    ray_backend.import_ray()
    ray_backend.start_local_ray(args.workers, log_to_driver=False, configure_logging=False, logging_level="warning")
    busy: dict[str, list[float]] = {"sync": [], "async": []}
    wall: dict[str, list[float]] = {"sync": [], "async": []}
    steps = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                for mode in (["async", "sync"] if r % 2 == 0 else ["sync", "async"]):
                    out = Path(tmp) / f"round{r}_{mode}"
                    run_argv = ["--init", "random", "--arch-blocks", "2", "--arch-width", "32", "--out", str(out),
                            "--generations", str(args.generations), "--games", str(args.games),
                            "--parallel", str(args.parallel), "--simulations", str(args.simulations),
                            "--search", "gumbel", "--batch-size", "64", "--gate-games", "8",
                            "--gate-simulations", "4", "--backend", "ray", "--workers", str(args.workers),
                            "--logger", "none", "--quiet", "--seed", str(r)]
                    run_argv += (["--async", "--train-ratio", str(args.train_ratio)] if mode == "async"
                             else ["--train-steps", str(steps)])
                    before, t0 = ray_backend.busy_seconds, time.perf_counter()
                    state = rl_loop.run(RunConfig.from_args(run_argv))
                    seconds = time.perf_counter() - t0
                    share = (ray_backend.busy_seconds - before) / (seconds * args.workers)
                    busy[mode].append(share)
                    wall[mode].append(seconds)
                    if steps is None:  # round 1 runs async first: the sync runs train as many steps
                        steps = round(statistics.mean(h["train_steps"] for h in state["history"]))
                    print(f"round {r + 1}: {mode}: actors busy {share:.0%} of {seconds:.0f} s", file=sys.stderr,
                          flush=True)
    finally:
        import ray

        ray.shutdown()
    figures = {mode: {"busy": statistics.median(v), "seconds": statistics.median(wall[mode])}
               for mode, v in busy.items() if v}
    print(f"{args.generations} generations of {args.games} Gumbel-{args.simulations} games, {args.workers} actors, "
          f"{steps} training steps of 64 a generation; medians of {args.rounds} round(s)")
    print("| mode | actors busy | wall seconds |")
    print("|---|---:|---:|")
    for mode, f in figures.items():
        print(f"| {mode} | {f['busy']:.0%} | {f['seconds']:.0f} |")
    if args.json:
        write_json(Path(args.json), {"busy_share": {m: f["busy"] for m, f in figures.items()},
                                     "seconds": {m: f["seconds"] for m, f in figures.items()}, "steps": steps,
                                     "argv": sys.argv[1:] if argv is None else argv})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
