"""Benchmark: the rules engine's inner loop, legal_moves and flips, against the plain loop.

    python benchmarks/engine.py [--rounds 11] [--calls 200]

The plain loop is the obvious flood fill (six one-square steps a direction through
``bitboard.shift``), kept here as the baseline: the engine's Kogge-Stone fill must give
the same boards and be faster, on every kind of board the engine takes (Python ints,
numpy uint64, torch int64 on CPU, and CUDA when there). Positions are those of random
games; a round times each function ``--calls`` times, the two in turns, first the one,
then the other, in an order reversed every other round; the figures are medians.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.encoders import machine, random_game_positions  # noqa: E402
from othello import bitboard as bb  # noqa: E402
from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.settings import at_least  # noqa: E402
from othello.perft import perft  # noqa: E402

BATCH_SIZES = (1, 64, 1024)


def plain_legal_moves(player, opponent):
    empty = ~(player | opponent)
    moves = player & 0
    for s, left, m in bb.shifters(player):
        x = bb.shift(player, s, left, m) & opponent
        for _ in range(5):
            x = x | (bb.shift(x, s, left, m) & opponent)
        moves = moves | (bb.shift(x, s, left, m) & empty)
    return moves & bb.const(bb.FULL, player)


def plain_flips(player, opponent, move):
    out = player & 0
    for s, left, m in bb.shifters(player):
        x = bb.shift(move, s, left, m) & opponent
        for _ in range(5):
            x = x | (bb.shift(x, s, left, m) & opponent)
        capped = bb.shift(x, s, left, m) & player
        if isinstance(x, int):
            out |= x if capped else 0
        else:
            out = out | (x * (capped != 0))
    return out


def random_positions(n_games: int):
    """Every position with a move of ``n_games`` random games (encoders.py's), and its lowest legal move."""
    player, opponent = random_game_positions(n_games)[:2]
    legal = bb.legal_moves(player, opponent)
    return player, opponent, legal & (~legal + np.uint64(1))


def boards(kind: str, arrays, size: int):
    """The first ``size`` positions as the engine takes them on ``kind``."""
    part = [a[:size] for a in arrays]
    if kind == "int":
        return [int(a[0]) for a in part]
    if kind == "numpy":
        return part
    return [torch.from_numpy(a.view(np.int64)).to(kind) for a in part]


def same(a, b) -> bool:
    return a == b if isinstance(a, int) else bool((a == b).all())


def time_calls(fn, args, calls: int, cuda: bool) -> float:
    if cuda:
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls


def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=at_least(1), default=11, help="timed rounds (default: %(default)s)")
    ap.add_argument("--calls", type=at_least(1), default=200, help="calls of each function a round "
                                                                   "(default: %(default)s)")
    args = ap.parse_args(argv)
    arrays = random_positions(64)
    kinds = ["int", "numpy", "cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(machine())
    t = time.perf_counter()
    leaves = perft(8)
    print(f"perft 8 (numpy, level by level): {leaves:,} leaves in {time.perf_counter() - t:.2f} s")
    print(f"positions: {len(arrays[0]):,} of 64 random games; median over {args.rounds} rounds of the time per call")
    print(f"{'kind':<6} {'batch':>6} {'function':<12} {'plain loop':>12} {'engine':>12} {'speed-up':>9}")
    for kind in kinds:
        for size in ([1] if kind == "int" else BATCH_SIZES):
            player, opponent, move = boards(kind, arrays, size)
            for name, plain, fast, fn_args in (("legal_moves", plain_legal_moves, bb.legal_moves, (player, opponent)),
                                              ("flips", plain_flips, bb.flips, (player, opponent, move))):
                if not same(plain(*fn_args), fast(*fn_args)):
                    raise AssertionError(f"{kind} {name}: the engine's boards differ from the plain loop's")
                times = {plain: [], fast: []}
                for r in range(args.rounds):
                    for fn in ((plain, fast) if r % 2 == 0 else (fast, plain)):
                        times[fn].append(time_calls(fn, fn_args, args.calls, kind == "cuda"))
                a, b = statistics.median(times[plain]), statistics.median(times[fast])
                print(f"{kind:<6} {size:>6} {name:<12} {a * 1e6:>9.1f} us {b * 1e6:>9.1f} us {a / b:>8.2f}x")


if __name__ == "__main__":
    sys.exit(run_main(main))
