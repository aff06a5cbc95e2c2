"""Accuracy by phase against a slow count in Python: the phases are the reference's
(moves 1-12, then every four moves to 57-60), split across batches."""

import math
import random

import torch

from othello_learn.train.metrics import PHASES, PhaseAccuracy, phase_of


def test_every_ply_falls_in_the_phase_of_its_move_number():
    for ply in range(60):
        lo, hi = PHASES[int(phase_of(torch.tensor([ply]))[0])]
        assert lo <= ply + 1 <= hi  # ply counts the moves before, so this is move ply + 1
    assert [PHASES[i] for i in (0, len(PHASES) - 1)] == [(1, 12), (57, 60)] and len(PHASES) == 13


def test_phase_accuracy_matches_a_slow_count_across_batches():
    rng = random.Random(0)
    rows = [(rng.random() < 0.6, rng.randrange(60), rng.randrange(1, 20)) for _ in range(1000)]
    metric = PhaseAccuracy()
    for start in range(0, len(rows), 256):  # batches, as validation sees them
        part = rows[start:start + 256]
        metric.update(torch.tensor([c for c, _, _ in part]), torch.tensor([p for _, p, _ in part]),
                      torch.tensor([n for _, _, n in part]))
    got = metric.compute()
    for (lo, hi), row in zip(PHASES, got):
        mine = [(c, n) for c, p, n in rows if lo <= p + 1 <= hi]
        assert row["positions"] == len(mine) and row["moves"] == f"{lo}-{hi}"
        if mine:
            assert math.isclose(row["accuracy"], sum(c for c, _ in mine) / len(mine))
            assert math.isclose(row["branching_factor"], sum(n for _, n in mine) / len(mine))
        else:
            assert math.isnan(row["accuracy"])


def test_phase_sums_are_exact_past_float32s_integers():
    """One update of 2**22 positions with 9 legal moves each: 37.7 M legal moves in one phase,
    past the 2**24 that float32 sums exactly (bincount's weights read it 0.2 % low)."""
    from othello_learn.train.metrics import PhaseAccuracy

    n = 1 << 22
    m = PhaseAccuracy()
    m.update(torch.ones(n, dtype=torch.bool), torch.full((n,), 20), torch.full((n,), 9))
    [row] = [r for r in m.compute() if r["positions"]]
    assert row["positions"] == n and row["accuracy"] == 1.0 and row["branching_factor"] == 9.0


def test_phase_states_from_two_devices_merge_by_summing():
    """What distributed validation does with the states (``dist_reduce_fx``), through
    torchmetrics' own merge: two halves merged give the counts of the whole."""
    rng = random.Random(1)
    rows = [(rng.random() < 0.5, rng.randrange(60), rng.randrange(1, 20)) for _ in range(400)]

    def updated(part):
        m = PhaseAccuracy()
        m.update(torch.tensor([c for c, _, _ in part]), torch.tensor([p for _, p, _ in part]),
                 torch.tensor([n for _, _, n in part]))
        return m

    merged = updated(rows[:150])
    merged.merge_state(updated(rows[150:]))
    whole = updated(rows).compute()
    assert [(r["positions"], r["accuracy"], r["branching_factor"]) for r in merged.compute()] == \
        [(r["positions"], r["accuracy"], r["branching_factor"]) for r in whole]
