"""Accuracy by game phase, as the reference reports it (moves 1-12, then every
four moves to 57-60), with the average branching factor of each phase: what the training's
validation and test log (``module.py``) and ``othello-eval`` reports. A module apart from
``module.py``, which imports Lightning: evaluating an exported net needs none."""

from __future__ import annotations

import torch
from torchmetrics import Metric

PHASES = [(1, 12)] + [(m, m + 3) for m in range(13, 61, 4)]
PHASE_NAMES = [f"{a}-{b}" for a, b in PHASES]


def phase_of(ply: torch.Tensor) -> torch.Tensor:
    """0-based ply (moves played before) -> phase index 0..12."""
    return torch.where(ply < 12, torch.zeros_like(ply), 1 + (ply - 12).clamp(min=0) // 4).clamp(max=len(PHASES) - 1)


class PhaseAccuracy(Metric):
    """Top-1 accuracy per phase; sums, so it is exact across batches and devices."""

    full_state_update = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        n = len(PHASES)
        self.add_state("correct", torch.zeros(n, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("total", torch.zeros(n, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("legal", torch.zeros(n, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, correct: torch.Tensor, ply: torch.Tensor, n_legal: torch.Tensor) -> None:
        phase = phase_of(ply)
        # Integer sums: bincount's weights are summed in float32, exact only up to 2**24 a call
        self.correct += torch.zeros_like(self.correct).scatter_add_(0, phase, correct.long())
        self.total += torch.bincount(phase, minlength=len(PHASES))
        self.legal += torch.zeros_like(self.legal).scatter_add_(0, phase, n_legal.long())

    def compute(self) -> list[dict]:
        out = []
        for i, name in enumerate(PHASE_NAMES):
            t = int(self.total[i])
            out.append({
                "moves": name,
                "accuracy": float(self.correct[i]) / t if t else float("nan"),
                "positions": t,
                "branching_factor": float(self.legal[i]) / t if t else float("nan"),
            })
        return out
