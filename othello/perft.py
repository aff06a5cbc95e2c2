"""Perft: leaf counts of the game tree, computed level by level over a batch."""

from __future__ import annotations

import numpy as np

from . import bitboard as bb

_ONE = np.uint64(1)


def expand(player: np.ndarray, opponent: np.ndarray):
    """All children of a batch of positions (a forced pass is one child).

    Returns the children's boards and a mask of the parents that were
    terminal (no child: the game is over).
    """
    legal = bb.legal_moves(player, opponent)
    children_p, children_o = [], []
    for sq in range(64):
        idx = np.nonzero((legal >> np.uint64(sq)) & _ONE)[0]
        if idx.size:
            p, o = bb.play(player[idx], opponent[idx], np.full(idx.size, _ONE << np.uint64(sq)))
            children_p.append(p)
            children_o.append(o)
    no_move = legal == 0
    opp_moves = bb.legal_moves(opponent[no_move], player[no_move])
    passing = np.nonzero(no_move)[0][opp_moves != 0]
    children_p.append(opponent[passing])
    children_o.append(player[passing])
    terminal = no_move.copy()
    terminal[passing] = False
    return np.concatenate(children_p), np.concatenate(children_o), terminal


def perft(depth: int, player=bb.BLACK_START, opponent=bb.WHITE_START) -> int:
    """Leaves ``depth`` plies below the position; a pass counts as a ply and a
    finished game is a leaf wherever it ends."""
    p = np.array([player], dtype=np.uint64)
    o = np.array([opponent], dtype=np.uint64)
    finished = 0
    for _ in range(depth):
        p, o, terminal = expand(p, o)
        finished += int(terminal.sum())
    return finished + p.size
