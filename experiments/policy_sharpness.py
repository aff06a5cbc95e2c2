"""How sharp nets' policies are on expert positions: mean entropy (nats) over the legal
moves, mean probability of the top move, and the share of positions where the top move
holds over 0.9, overall and by game phase, on a random sample of one year's positions.
Why: self-play's Gumbel targets, softmax(logits + sigma(completed Q)), are sharper than
the prior they start from, and each generation trains on its own; a search that samples
its root moves from the prior and spends its visits by it sees less as the prior sharpens.
Usage: python experiments/policy_sharpness.py YEAR N NET.pt [NET.pt ...]"""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import sys

import numpy as np
import torch

from experiments.value_mse import sample_positions
from othello_learn.models.batch import from_records
from othello_learn.models.losses import entropy
from othello_learn.models.nets import load_network


def main(year: int, n: int, nets: list[str]) -> None:
    rec = sample_positions(year, n)
    ply = rec["ply"]
    for path in nets:
        net = load_network(path).eval()
        ent, top = [], []
        with torch.no_grad():
            for i in range(0, len(rec), 4096):
                batch = from_records(rec[i:i + 4096])
                p = torch.softmax(net(batch)["policy"].float(), -1)  # illegal moves: probability 0 (the net masks them)
                ent.append(entropy(p).numpy())
                top.append(p.max(-1).values.numpy())
        ent, top = np.concatenate(ent), np.concatenate(top)
        phases = [f"plies {lo}-{hi - 1}: {ent[m].mean():.3f} / {top[m].mean():.3f}"
                  for lo, hi in ((0, 20), (20, 40), (40, 60)) for m in [(ply >= lo) & (ply < hi)]]
        print(f"{path}: entropy {ent.mean():.3f} nats, top move {top.mean():.3f}, top > 0.9 in "
              f"{np.mean(top > 0.9):.3f} | entropy / top by phase: " + " | ".join(phases))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
