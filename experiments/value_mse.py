"""How well nets' value heads read the experts' results: mean squared error against the sign
of the final result (the supervised value target), overall and by game phase, on a random
sample of one year's positions. Expert results are not perfect-play values, so small
differences are readings, not proofs.
Usage: python experiments/value_mse.py YEAR N NET.pt [NET.pt ...]   (e.g. 2016 40000 checkpoints/best_*.pt)"""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import sys

import numpy as np
import torch

from othello_learn.data.dataset import WthorDataset
from othello_learn.models.batch import from_records
from othello_learn.models.nets import load_network


def sample_positions(year: int, n: int) -> np.ndarray:
    """``n`` random positions of ``year`` (seed 0, in the dataset's order) from data/wthor."""
    torch.set_num_threads(1)
    dataset = WthorDataset("data/wthor")
    positions = dataset.positions_of({year})
    return positions[np.sort(np.random.default_rng(0).choice(len(positions), min(n, len(positions)), replace=False))]


def main(year: int, n: int, nets: list[str]) -> None:
    rec = sample_positions(year, n)
    z, ply = np.sign(rec["result"]).astype(np.float32), rec["ply"]
    for path in nets:
        net = load_network(path).eval()
        with torch.no_grad():
            v = np.concatenate([net(from_records(rec[i:i + 4096]))["value"].float().numpy()
                                for i in range(0, len(rec), 4096)])
        phases = [f"plies {lo}-{hi - 1}: {np.mean((v[m] - z[m]) ** 2):.3f}"
                  for lo, hi in ((0, 20), (20, 40), (40, 60)) for m in [(ply >= lo) & (ply < hi)]]
        print(f"{path}: mse {np.mean((v - z) ** 2):.3f}, sign right {np.mean(np.sign(v) == z):.3f} | "
              + " | ".join(phases))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
