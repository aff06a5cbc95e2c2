"""Match openings: random starts that are distinct up to the board's symmetries.

An arena plays each opening twice with the colours swapped; two openings that
a rotation or reflection maps onto each other are the same game for both
players, so they would count one test twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from othello.notation import PASS, format_transcript
from othello.states import States, last_actions
from othello.symmetry import transform
from othello_learn.players.base import random_legal_squares

# After 60 moves the board is full: an opening must leave at least one move to play.
MAX_OPENING_PLIES = 59


def canonical_keys(black: np.ndarray, white: np.ndarray, black_to_move: np.ndarray) -> list[tuple[int, int, bool]]:
    """One key per position, equal for positions that a symmetry of the board
    maps onto each other: the least (black, white) image over all eight."""
    black = np.asarray(black, dtype=np.uint64)
    white = np.asarray(white, dtype=np.uint64)
    tb = np.stack([transform(black, k) for k in range(8)], axis=1)  # [N, 8]
    tw = np.stack([transform(white, k) for k in range(8)], axis=1)
    first = np.lexsort((tw, tb), axis=1)[:, 0]
    rows = np.arange(len(black))
    return list(zip(tb[rows, first].tolist(), tw[rows, first].tolist(), np.asarray(black_to_move).tolist()))


@dataclass
class Opening:
    """A start for a pair of games: the position reached and every action
    from the start that reached it (``PASS`` for a forced pass), so the
    arena's history planes and external engines see the real game."""

    black: int
    white: int
    black_to_move: bool
    actions: list[int]

    @property
    def moves(self) -> list[int]:
        """The squares played, passes left out (what a transcript records)."""
        return [a for a in self.actions if a != PASS]

    @property
    def transcript(self) -> str:
        return format_transcript(self.moves)


def opening_states(openings: list[Opening]) -> States:
    """The openings as one numpy ``States`` batch, each history its last four actions."""
    history = np.array([last_actions(op.actions) for op in openings], dtype=np.int64).reshape(-1, 4)
    btm = np.array([op.black_to_move for op in openings], dtype=bool)
    black = np.array([op.black for op in openings], dtype=np.uint64)
    white = np.array([op.white for op in openings], dtype=np.uint64)
    return States(np.where(btm, black, white), np.where(btm, white, black), btm, history)


def random_openings(count: int, plies: int, rng: np.random.Generator, batch: int = 1024) -> list[Opening]:
    """Up to ``count`` openings reached by uniform random play, distinct up to
    symmetry, in the order they were first drawn.

    Fewer come back when fewer exist (``plies = 0`` has one); drawing stops
    once a whole batch of random games finds nothing new. A forced pass is
    played but not counted as a ply; an opening where the game ended is dropped.
    """
    seen: set = set()
    out: list[Opening] = []
    while len(out) < count:
        n = batch
        s = States.initial(n)
        alive = np.ones(n, dtype=bool)
        actions = np.full((n, 2 * plies), -1, dtype=np.int64)  # a pass at most before each move
        for ply in range(plies):
            passing = s.legal_actions()[:, PASS]
            actions[passing, 2 * ply] = PASS
            s = s.step_where(passing, np.full(n, PASS))
            legal = s.legal_actions()[:, :PASS]
            alive &= legal.any(axis=1)  # neither side could move: the game ended
            # Every row draws (finished ones over all squares), so the stream does not depend on which ended.
            sq = random_legal_squares(legal | ~alive[:, None], rng)
            actions[:, 2 * ply + 1] = sq
            s = s.step_where(alive, sq)
        alive &= ~np.asarray(s.is_over())  # the last ply may end the game too (it can at 59 plies)
        btm = s.black_to_move
        black, white = np.where(btm, s.player, s.opponent), np.where(btm, s.opponent, s.player)
        new = 0
        for i, key in enumerate(canonical_keys(black, white, btm)):
            if alive[i] and key not in seen:
                seen.add(key)
                new += 1
                out.append(Opening(int(black[i]), int(white[i]), bool(btm[i]), [a for a in actions[i].tolist() if a >= 0]))
                if len(out) == count:
                    break
        if new == 0:
            break
    return out
