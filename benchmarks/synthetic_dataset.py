"""A dataset of random legal games, for the benchmarks on a machine without the WTHOR files.

    python benchmarks/synthetic_dataset.py --out DIR [--positions 100000] [--seed 0]

The games are played at random by the batched engine, written as WTHOR files by the
project's writer and built by the dataset command, so the positions go through the same
files and loader as a real dataset's. Its years are the default split's (training 1977-2014,
validation 2015, test 2016; one game in ten each for the last two), so every command reads
it without settings. Training's speed does not depend on what the positions are.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from othello import bitboard as bb  # noqa: E402
from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.settings import at_least  # noqa: E402
from othello_learn.data.dataset import REFERENCE_SPLIT  # noqa: E402
from othello_learn.files import UserError  # noqa: E402


def random_games(n: int, rng: np.random.Generator) -> tuple[list[list[int]], np.ndarray]:
    """``n`` games of uniformly random legal moves, all at once: each game's squares (passes
    left out, as WTHOR records them) and Black's final disc count (empties to the winner)."""
    player = np.full(n, bb.BLACK_START, dtype=np.uint64)
    opponent = np.full(n, bb.WHITE_START, dtype=np.uint64)
    black = np.ones(n, dtype=bool)  # Black is to move
    moves = np.full((n, 60), -1, dtype=np.int64)
    for ply in range(60):  # a move fills a square: no game runs past 60 moves
        legal = bb.legal_moves(player, opponent)
        passing = legal == 0
        if passing.any():  # the other side moves, or the game is over
            player[passing], opponent[passing] = opponent[passing], player[passing]
            black[passing] = ~black[passing]
            legal[passing] = bb.legal_moves(player[passing], opponent[passing])
        live = legal != 0
        if not live.any():
            break
        pick = np.where(bb.bits(legal), rng.random((n, 64)), -1.0).argmax(axis=1)
        moves[live, ply] = pick[live]
        move = np.where(live, bb.bit(pick), np.uint64(0))
        nxt_p, nxt_o = bb.play(player, opponent, move)
        player, opponent = np.where(live, nxt_p, player), np.where(live, nxt_o, opponent)
        black = np.where(live, ~black, black)
    diff = bb.final_disc_difference(player, opponent)  # the side to move's view
    black_diff = np.where(black, diff, -diff)
    return [[int(m) for m in row if m >= 0] for row in moves], (64 + black_diff) // 2


def build(out: Path, positions: int, seed: int = 0, quiet: bool = True) -> Path:
    """Write a dataset of about ``positions`` positions (at least one game a split) to ``out``."""
    from othello_learn.data import wtb
    from othello_learn.data.wthor import main as wthor_main

    rng = np.random.default_rng(seed)
    first, last = REFERENCE_SPLIT["train"]
    years = [*range(first, last + 1), REFERENCE_SPLIT["val"][0], REFERENCE_SPLIT["test"][0]]
    n = max(len(years) + 2, -(-positions // 58))  # a random game runs to about 58 moves
    moves, black = random_games(n, rng)
    held = max(1, n // 10)
    # the held-out years' games first, then the training games dealt round the training years
    year = np.concatenate([np.full(held, years[-2]), np.full(held, years[-1]),
                           np.resize(np.array(years[:-2]), n - 2 * held)])
    with tempfile.TemporaryDirectory() as src:
        for y in years:
            pick = np.flatnonzero(year == y)
            games = wtb.make_games([moves[i] for i in pick], black[pick])
            wtb.write_wtb(Path(src) / f"WTH_{y}.wtb", games, y)
        code = run_main(wthor_main, ["--wthor-dir", src, "--out", str(out), *(["--quiet"] if quiet else [])])
    if code:  # the builder has said why, in one line, above
        raise UserError(f"{out}: the synthetic dataset's build failed (exit status {code})")
    return out


def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="dataset folder to write (new, or a dataset to replace)")
    ap.add_argument("--positions", type=at_least(1), default=100_000, help="about this many (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    args = ap.parse_args(argv)
    build(args.out, args.positions, args.seed, quiet=False)


if __name__ == "__main__":
    sys.exit(run_main(main))
