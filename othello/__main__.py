"""``python -m othello perft N``: leaf counts from the start position."""

from __future__ import annotations

import sys
import time

from othello.perft import perft
# The command line is othello_learn's (one home for exit codes, signals and argument errors); the
# rules library itself, every other module of othello/, imports nothing of othello_learn.
from othello_learn.cli import ArgumentParser, run_main

MAX_DEPTH = 11  # ~0.2 G positions, ~8 GB; depth 12 needs ~60 GB and was killed for memory, not refused

def main(argv=None) -> None:
    parser = ArgumentParser(prog="python -m othello", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("perft", help="count the leaves N plies from the start position")
    p.add_argument("depth", type=int, help="plies (a pass is a ply)")
    p.add_argument("--all", action="store_true", help="print every depth from 1 to N, with timings")
    args = parser.parse_args(argv)
    if not 0 <= args.depth <= MAX_DEPTH:
        parser.error(f"depth {args.depth}: must be 0..{MAX_DEPTH}; the count is breadth-first and holds every "
                     f"position of a depth at once (depth 10: 25 M, ~1 GB; each ply ~8x more)")
    for d in range(1 if args.all else args.depth, args.depth + 1):
        t = time.perf_counter()
        n = perft(d)
        print(f"{d}\t{n}\t{time.perf_counter() - t:.3f}s" if args.all else n)


if __name__ == "__main__":
    sys.exit(run_main(main))  # as every command: `| head` ends quietly (141), Ctrl-C is one line (130)
