"""How often nets' 1-ply argmax equals the search's move of relabelled positions
(reanalyse.py output), overall and by phase (plies 0-19 / 20-39 / 40-59).
Usage: python experiments/agreement.py LABELS.npz NET.pt [NET.pt ...]
With dagger_label.py labels, also how often the nets fix its clear mistakes (root Q gap).
With dagger_label.py --solve-empties labels: how often each net's move keeps a won or
drawn position's perfect-play result, and how often it changes the labelling net's move
where that move kept it."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import sys

import numpy as np
import torch

from othello import bitboard as bb
from othello_learn.models.batch import from_arrays
from othello_learn.models.nets import load_network

d = np.load(sys.argv[1])
if "wdl" in d.files:  # solved endgames
    wdl, own = d["wdl"].astype(int), d["own"].astype(int)
    n, top = len(own), wdl.max(1)
    good = wdl == top[:, None]
    for ck in sys.argv[2:]:
        net = load_network(ck).eval()
        with torch.inference_mode():
            b = from_arrays(d["player"], d["opponent"], d["black"], d["history"].astype(np.int64), "cpu")
            a = net(b)["policy"].masked_fill(torch.from_numpy(wdl == -2), -1e9).argmax(1).numpy()
        keep = good[np.arange(n), a]
        ok_before = good[np.arange(n), own]
        for name, s_ in (("won", top == 1), ("won or drawn", top >= 0)):
            print(ck, f"{name} ({s_.mean():.3f}): keeps the result {keep[s_].mean():.3f}")
        s_ = top >= 0
        emp = 64 - bb.popcount(d["player"] | d["opponent"]).astype(np.int64)
        print("  keeps the result by empty squares (2..10):",
              " ".join(f"{e}:{keep[s_ & (emp == e)].mean():.3f}" for e in range(2, 11) if (s_ & (emp == e)).any()))
        print(f"  fixes {(keep & ~ok_before)[s_].sum()} of the labelling net's {(~ok_before)[s_].sum()} result-losing moves, "
              f"breaks {(~keep & ok_before)[s_].sum()} of its {ok_before[s_].sum()} good ones")
    sys.exit()
m = d["move"].astype(int)
for ck in sys.argv[2:]:
    net = load_network(ck).eval()
    with torch.inference_mode():
        b = from_arrays(d["player"], d["opponent"], d["black"], d["history"].astype(np.int64), "cpu")
        a = net(b)["policy"].argmax(1).numpy()
    phases = [(d["ply"] >= lo) & (d["ply"] < hi) for lo, hi in [(0, 20), (20, 40), (40, 60)]]
    print(ck, "agreement", round(float((a == m).mean()), 3), [round(float((a[s] == m[s]).mean()), 3) for s in phases])
    if "q_move" in d.files:  # dagger_label.py output: how the labelling net's clear mistakes fare
        own, gap = d["own"].astype(int), d["q_move"].astype(float) - d["q_own"].astype(float)
        for t in (0.1, 0.2):
            wrong = (m != own) & (gap >= t)
            print(f"  where the search leads the labelling net's move by >= {t} in Q ({wrong.mean():.3f} of positions):"
                  f" plays the search's move {(a[wrong] == m[wrong]).mean():.3f}")
        print(f"  where the search agrees with the labelling net: keeps that move {(a[m == own] == m[m == own]).mean():.3f}")
