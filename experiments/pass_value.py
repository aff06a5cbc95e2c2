"""How well a net's value head reads forced-pass positions, two ways: at the pass position
itself (which self-play never records, so the head never trains on it) and as the negated
value of the position after the pass (what the search uses since 2026-11-25). Ground truth:
the exact result's sign, on every forced pass with at most 12 empty squares in the expert
games of the given years.
Usage: python experiments/pass_value.py [NET.pt] [YEARS]   (default best_selfplay.pt, 2015-2016)"""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import sys

import numpy as np
import pandas as pd
import torch

from othello_learn.data.dataset import parse_years
from othello_learn.models.batch import from_arrays
from othello_learn.models.nets import load_network
from othello_learn.search.endgame import value as exact

net_path = sys.argv[1] if len(sys.argv) > 1 else "checkpoints/best_selfplay.pt"
years = parse_years(sys.argv[2] if len(sys.argv) > 2 else "2015-2016")
d = np.load("data/wthor/positions.npy", mmap_mode="r")
game_year = pd.read_csv("data/wthor/games.csv", usecols=["year"])["year"].to_numpy()
idx = np.nonzero(d["history"][:, 0] == 64)[0]  # positions right after a pass
idx = idx[np.isin(game_year[d["game"][idx]], list(years))]
empties = 64 - np.bitwise_count(d["player"][idx] | d["opponent"][idx]).astype(int)
idx = idx[empties <= 12]
P, O = d["player"][idx].astype(np.uint64), d["opponent"][idx].astype(np.uint64)
B, H = d["black_to_move"][idx], d["history"][idx].astype(np.int64)
net = load_network(net_path).eval()
with torch.no_grad():
    after = net(from_arrays(P, O, B, H, "cpu"))["value"].float().numpy().ravel()
    # the pass position: the other side to move, its history one action shorter
    H_before = np.concatenate([H[:, 1:], np.full((len(H), 1), -1)], 1)
    at_pass = net(from_arrays(O, P, ~B, H_before, "cpu"))["value"].float().numpy().ravel()
truth = np.sign([exact(int(o), int(p)) for p, o in zip(P, O)])  # for the side that must pass
decided = truth != 0
print(f"{net_path}: {len(idx)} forced passes with <= 12 empties ({int((~decided).sum())} draws)")
for name, v in (("v(pass position)", at_pass), ("-v(position after the pass)", -after)):
    print(f"{name:28s} sign right {np.mean(np.sign(v[decided]) == truth[decided]):.4f}   "
          f"MSE against the result {np.mean((v - truth) ** 2):.4f}")
