"""Endgame problems from the expert games, every move exactly scored, as an OBF file that
``selfplay/solve.py`` grades (Edax's form: ``<board> X; g8:+18; h1:+12;``): a test of any
player, external engines too, on set-up positions. At most one position per game: its
position with E empty squares, kept where the side to move has a choice of two moves or more.
Usage: python experiments/endgame_obf.py YEARS E N OUT.obf [SEED]   (e.g. 2016 12 30 end12.obf)
The file is derived from WTHOR games: write it outside the repository's history."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import sys

import numpy as np
import pandas as pd

from othello_learn.files import atomic_write
from othello.formats import format_obf
from othello.game import Position
from othello.notation import square_name
from othello_learn.data.dataset import parse_years
from othello_learn.search.endgame import move_value

years, E, N, out = parse_years(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
seed = int(sys.argv[5]) if len(sys.argv) > 5 else 0
d = np.load("data/wthor/positions.npy", mmap_mode="r")
game_year = pd.read_csv("data/wthor/games.csv", usecols=["year"])["year"].to_numpy()
empties = 64 - np.bitwise_count(d["player"] | d["opponent"]).astype(int)
in_years = np.ones(len(d), bool) if years is None else np.isin(game_year[d["game"]], list(years))  # None: all
idx = np.nonzero((empties == E) & in_years)[0]
idx = idx[np.unique(d["game"][idx], return_index=True)[1]]  # one position a game
np.random.default_rng(seed).shuffle(idx)
lines = []
for i in idx:
    pos = Position(int(d["player"][i]), int(d["opponent"][i]), bool(d["black_to_move"][i]))
    legal = pos.legal_moves()
    if len(legal) < 2:
        continue
    scores = sorted(((move_value(pos.player, pos.opponent, m), m) for m in legal), reverse=True)
    lines.append(format_obf(pos) + "".join(f" {square_name(m)}:{v:+d};" for v, m in scores))
    print(f"{len(lines)}/{N}", file=sys.stderr, end="\r")
    if len(lines) == N:
        break
atomic_write(out, "".join(line + "\n" for line in lines))
print(f"wrote {out}: {len(lines)} positions with {E} empties from {sys.argv[1]}", file=sys.stderr)
