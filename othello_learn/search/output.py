"""What a search gives back, whichever it is (after mctx's ``PolicyOutput``).

Why one type: PUCT and Gumbel both end in a move to play and a policy target, read off
different statistics (visit counts, the improved policy). Self-play records the target and
plays the move, a player plays it and an engine shows the root's statistics; with one output
none of them needs to know which search ran (``BatchedMCTS.run``, ``GumbelMCTS.run``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PolicyOutput:
    """One search of n games (the ``games`` a search ran on, in their order), on the search's device.

    ``action``: [n] int64, the move to play (0-63 a square, 64 the pass; the pass at a finished game).
    ``action_weights``: [n, 65] float32, the policy target: the root's visit distribution (PUCT) or its
    improved policy (Gumbel); a row sums to 1, all on the pass at a finished game.
    ``value``: [n] float32, the root's mean backed-up value, from its side to move's view.
    ``visits``: [n, 65] float32, the visit counts of the root's actions.
    ``q``: [n, 65] float32, each root action's mean backed-up value from the root's side to move's view,
    NaN where unvisited.
    """

    action: torch.Tensor
    action_weights: torch.Tensor
    value: torch.Tensor
    visits: torch.Tensor
    q: torch.Tensor
