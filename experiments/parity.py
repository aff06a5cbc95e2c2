"""Endgame inputs a 3x3 convolutional net cannot compute in one pass: the
parity of each empty region, the parity of the empty squares, how many are
left and the disc difference. ``handcrafted_parity`` = the 42 handcrafted
planes + 5:

    42  empty squares in an odd-sized region (8-connected empty squares)
    43  empty squares in an even-sized region
    44  ones if the number of empty squares is odd
    45  empty squares / 16, everywhere
    46  (own discs - opponent's) / 64, everywhere

Research script (issue 9: is the 1-ply policy's endgame limited by what its
input lets it see?), not tested:

    python experiments/parity.py grow checkpoints/best_selfplay.pt sp_parity.pt   # plays as its source at step 0
    python experiments/parity.py run experiments/finetune.py --init sp_parity.pt ...   # any script, encoder registered
"""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
import numpy as np
import torch

from othello_learn.models import encoders

EXTRA = 5
_NEIGHBOURS = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc]


def _bits(boards: torch.Tensor) -> np.ndarray:
    return encoders.unpack(boards.cpu()).numpy().reshape(-1, 64) > 0.5


def parity_extra(player: torch.Tensor, opponent: torch.Tensor) -> np.ndarray:
    p, o = _bits(player), _bits(opponent)
    empty = ~(p | o)
    n = len(empty)
    big = 64
    label = np.where(empty, np.arange(64)[None, :], big).reshape(n, 8, 8)
    emp = empty.reshape(n, 8, 8)
    while True:  # each empty square takes the smallest label of its empty 8-neighbours, until stable
        padded = np.pad(label, ((0, 0), (1, 1), (1, 1)), constant_values=big)
        best = label.copy()
        for dr, dc in _NEIGHBOURS:
            best = np.minimum(best, padded[:, 1 + dr:9 + dr, 1 + dc:9 + dc])
        best = np.where(emp, best, big)
        if np.array_equal(best, label):
            break
        label = best
    lab = label.reshape(n, 64)
    counts = np.zeros((n, big + 1), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(n), 64), lab.ravel()), 1)
    size = counts[np.arange(n)[:, None], lab]
    left = empty.sum(1)
    out = np.zeros((n, EXTRA, 64), dtype=np.float32)
    out[:, 0] = empty & (size % 2 == 1)
    out[:, 1] = empty & (size % 2 == 0)
    out[:, 2] = (left % 2 == 1)[:, None]
    out[:, 3] = (left / 16.0)[:, None]
    out[:, 4] = ((p.sum(1) - o.sum(1)) / 64.0)[:, None]
    return out.reshape(n, EXTRA, 8, 8)


def parity_planes(batch: dict, backend=None) -> torch.Tensor:
    base = encoders.handcrafted_planes(batch, backend)
    extra = torch.from_numpy(parity_extra(batch["player"], batch["opponent"])).to(base.device)
    return torch.cat([base, extra], 1)


encoders.ENCODERS["handcrafted_parity"] = (parity_planes, encoders.HANDCRAFTED_PLANES + EXTRA)


def grow(src: str, dst: str) -> None:
    import dataclasses
    from othello_learn.models.nets import build_network, load_network, save_network

    s = load_network(src)
    net = build_network(dataclasses.replace(s.config, encoder="handcrafted_parity"))
    state = s.state_dict()
    w = state["stem.0.weight"]
    state["stem.0.weight"] = torch.cat([w, torch.zeros(w.shape[0], EXTRA, *w.shape[2:])], 1)
    net.load_state_dict(state)
    save_network(net, dst)


if __name__ == "__main__":
    from experiments.grow_or_run import main

    main(__doc__, grow)
