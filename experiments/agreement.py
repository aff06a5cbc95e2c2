"""How often nets' 1-ply argmax equals the search's move of relabelled positions
(reanalyse.py output), overall and by phase (plies 0-19 / 20-39 / 40-59).
Usage: python experiments/agreement.py LABELS.npz NET.pt [NET.pt ...]"""
import sys

import numpy as np
import torch

from othello_learn.models.batch import from_arrays
from othello_learn.models.nets import load_network

d = np.load(sys.argv[1])
m = d["move"].astype(int)
for ck in sys.argv[2:]:
    net = load_network(ck).eval()
    with torch.inference_mode():
        b = from_arrays(d["player"], d["opponent"], d["black"], d["history"].astype(np.int64), "cpu")
        a = net(b)["policy"].argmax(1).numpy()
    phases = [(d["ply"] >= lo) & (d["ply"] < hi) for lo, hi in [(0, 20), (20, 40), (40, 60)]]
    print(ck, "agreement", round(float((a == m).mean()), 3), [round(float((a[s] == m[s]).mean()), 3) for s in phases])
