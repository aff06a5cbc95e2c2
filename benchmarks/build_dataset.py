"""Benchmark: building the dataset from all WTHOR years, against a plain Python replay.

    python benchmarks/build_dataset.py [--wthor-dir DIR] [--repeats 3] [--sample 3000]

Prints the median wall time and the peak memory of ``data_tools/wthor.py``
(each run in its own process), and the time per position of a plain Python
replay (one game at a time, one move at a time, on Python-int bitboards) over
a sample of games, with the ratio between the two.
"""

from __future__ import annotations

import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from othello import bitboard as bb  # noqa: E402
from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.settings import at_least  # noqa: E402
from othello_learn.files import UserError  # noqa: E402
from othello.notation import wthor_to_square  # noqa: E402
from othello_learn.data.dataset import find_wtb_files  # noqa: E402
from othello_learn.data.wtb import read_wtb  # noqa: E402
from othello_learn.data.wthor import NO_WTHOR_DIR, default_wthor_dir  # noqa: E402


def plain_python_replay(move_bytes: np.ndarray) -> int:
    """The obvious loop: each game, each move, Python ints. Returns positions."""
    count = 0
    for row in move_bytes.tolist():
        p, o = bb.BLACK_START, bb.WHITE_START
        for byte in row:
            if byte == 0:
                break
            m = 1 << int(wthor_to_square(byte))
            if (p | o) & m or not bb.flips(p, o, m):
                p, o = o, p  # a pass
            p, o = bb.play(p, o, m)
            count += 1
    return count


def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wthor-dir", type=Path, help="the WTH_YYYY.wtb files (default: $OTHELLO_WTHOR_DIR, else "
                                                   "../shared/data/wthor)")
    ap.add_argument("--repeats", type=at_least(1), default=3, help="timed builds (default: %(default)s)")
    ap.add_argument("--sample", type=at_least(1), default=3000,
                    help="games for the plain Python replay (default: %(default)s)")
    args = ap.parse_args(argv)
    args.wthor_dir = args.wthor_dir or default_wthor_dir()
    if args.wthor_dir is None:
        raise UserError(NO_WTHOR_DIR)

    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            t = time.perf_counter()
            built = subprocess.run([sys.executable, str(REPO / "data_tools" / "wthor.py"), "--wthor-dir",
                                    str(args.wthor_dir), "--out", f"{tmp}/ds", "--quiet"])
            if built.returncode:  # the builder has said why, in one line, above
                raise UserError(f"the dataset build failed (exit status {built.returncode})")
            times.append(time.perf_counter() - t)
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        import json

        summary = json.loads(Path(f"{tmp}/ds/summary.json").read_text())
    n_pos = summary["total"]["positions"]
    build = statistics.median(times)

    games = np.concatenate([read_wtb(p).games for _, p in find_wtb_files(args.wthor_dir)])
    sample = games["moves"][np.random.default_rng(0).choice(len(games), min(args.sample, len(games)), replace=False)]
    t = time.perf_counter()
    n_sample = plain_python_replay(sample)
    plain = (time.perf_counter() - t) / n_sample

    fast = build / n_pos
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.machine()) if Path("/proc/cpuinfo").exists() else platform.machine()
    print(f"machine: {cpu}, {len(__import__('os').sched_getaffinity(0))} cores, "
          f"Python {platform.python_version()}, numpy {np.__version__}")
    print(f"build all years ({summary['total']['games']:,} games, {n_pos:,} positions), whole command incl. start-up "
          f"and writing: median {build:.2f} s over {args.repeats} runs {[round(x, 2) for x in times]}")
    print(f"peak memory (max RSS of a build process): {peak_mib:.0f} MiB")
    print(f"per position: batched {fast * 1e6:.2f} us, plain Python replay {plain * 1e6:.2f} us "
          f"({n_sample:,} positions) -> {plain / fast:.0f}x faster")
    print(f"plain Python replay extrapolated to all positions: {plain * n_pos:.0f} s")


if __name__ == "__main__":
    sys.exit(run_main(main))
