"""A batch of game states: the one type self-play, search, the arena and
players step games with.

Stepping a game is more than ``bitboard.play``: a pass is an action (the
65th, index ``PASS``), the side to move swaps, and the last four actions are
kept for the handcrafted planes. Written once here, over numpy ``uint64`` or
torch ``int64`` arrays (CPU or GPU) alike, as pgx's ``State``/``step`` do for
JAX. A finished game has no legal action; stepping it is an error.

    s = States.initial(512, like=torch.zeros(0, dtype=torch.long))   # or like=np
    a = pick(s.legal_actions())        # [N] in 0..64
    s = s.step(a)
    s.is_over(), s.outcome()           # black's final disc difference (empties to the winner)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from . import bitboard as bb
from .notation import PASS

ACTIONS = 65  # the 64 squares, then the pass
NO_MOVE = -1  # history slot before the game's first move
HISTORY = 4  # actions a state keeps, most recent first: what the encoders' move planes read


def _torch():
    import torch

    return torch


@dataclass(frozen=True)
class States:
    """``N`` positions from the side to move's view.

    ``player``, ``opponent``: [N] boards (numpy uint64 or torch int64);
    ``black_to_move``: [N] bool; ``history``: [N, 4] int64, the last four
    actions, most recent first (``PASS`` = 64 for a pass, ``NO_MOVE`` = -1).
    """

    player: Any
    opponent: Any
    black_to_move: Any
    history: Any

    # ------------------------------------------------------------ building
    @classmethod
    def initial(cls, n: int, like: Any = np, device=None) -> "States":
        """``n`` start positions; ``like`` is ``np`` (numpy) or a torch tensor/``torch`` (torch)."""
        if like is np or isinstance(like, np.ndarray):
            return cls(np.full(n, bb.BLACK_START, np.uint64), np.full(n, bb.WHITE_START, np.uint64),
                       np.ones(n, bool), np.full((n, HISTORY), NO_MOVE, np.int64))
        torch = _torch()
        if device is None:  # the torch module itself has a ``device`` too: the class, not a device
            device = like.device if isinstance(like, torch.Tensor) else "cpu"
        return cls(torch.full((n,), bb.as_int64(bb.BLACK_START), dtype=torch.long, device=device),
                   torch.full((n,), bb.as_int64(bb.WHITE_START), dtype=torch.long, device=device),
                   torch.ones(n, dtype=torch.bool, device=device),
                   torch.full((n, HISTORY), NO_MOVE, dtype=torch.long, device=device))

    @classmethod
    def from_positions(cls, positions, histories=None) -> "States":
        """numpy states from ``othello.Position`` objects (history: none known, or given)."""
        n = len(positions)
        hist = np.full((n, HISTORY), NO_MOVE, np.int64) if histories is None else np.asarray(histories, np.int64)
        if hist.shape != (n, HISTORY):  # a shorter row made step's shifted history the wrong width
            raise ValueError(f"histories must be [{n}, {HISTORY}] (the last {HISTORY} actions, most recent first), "
                             f"got {hist.shape}")
        return cls(np.array([p.player for p in positions], np.uint64), np.array([p.opponent for p in positions], np.uint64),
                   np.array([p.black_to_move for p in positions], bool), hist)

    def position(self, i: int):
        """Game ``i`` as an ``othello.Position`` (the one-position API)."""
        from .game import Position

        return Position(int(self.player[i]) & bb.FULL, int(self.opponent[i]) & bb.FULL, bool(self.black_to_move[i]))

    # ------------------------------------------------------------ queries
    @property
    def is_torch(self) -> bool:
        return bb.is_torch(self.player)

    def __len__(self) -> int:
        return int(self.player.shape[0])

    def __getitem__(self, idx) -> "States":
        return States(self.player[idx], self.opponent[idx], self.black_to_move[idx], self.history[idx])

    def to(self, device) -> "States":
        """The same states on a torch device (numpy states become torch tensors)."""
        torch = _torch()
        if not self.is_torch:
            return States(torch.from_numpy(np.ascontiguousarray(self.player).view(np.int64)).to(device),
                          torch.from_numpy(np.ascontiguousarray(self.opponent).view(np.int64)).to(device),
                          torch.from_numpy(np.asarray(self.black_to_move, bool)).to(device),
                          torch.from_numpy(np.asarray(self.history, np.int64)).to(device))
        return States(*(getattr(self, f.name).to(device) for f in fields(self)))

    def numpy(self) -> "States":
        """numpy states (uint64 boards) from torch ones, on the CPU."""
        if not self.is_torch:
            return self
        return States(self.player.cpu().numpy().view(np.uint64), self.opponent.cpu().numpy().view(np.uint64),
                      self.black_to_move.cpu().numpy(), self.history.cpu().numpy())

    def legal_squares(self):
        """[N] boards of the legal squares of the side to move."""
        return bb.legal_moves(self.player, self.opponent)

    def legal_actions(self):
        """[N, 65] bool: the legal squares, or only the pass when there is none and
        the opponent can move; a finished game has no legal action."""
        legal = self.legal_squares()
        can_pass = (legal == 0) & (bb.legal_moves(self.opponent, self.player) != 0)
        squares = bb.bits(legal)
        if self.is_torch:
            return _torch().cat([squares, can_pass[:, None]], 1)
        return np.concatenate([squares, np.asarray(can_pass)[:, None]], 1)

    def is_over(self):
        """[N] bool: neither side can move."""
        return bb.is_terminal(self.player, self.opponent)

    def outcome(self):
        """[N] black's final disc difference (empties to the winner) of finished games;
        of a game still going, the difference of the discs on the board now."""
        over = self.is_over()
        final = bb.final_disc_difference(self.player, self.opponent)
        now = bb.disc_difference(self.player, self.opponent)
        mover = _where(over, final, now)
        return _where(self.black_to_move, mover, -mover)

    # ------------------------------------------------------------ stepping
    def step(self, actions, check: bool = True) -> "States":
        """Play one action per game (0..63 a square, 64 a pass). ``check``: raise
        ``ValueError`` naming the first game whose action is not legal."""
        if self.is_torch:
            torch = _torch()
            a = torch.as_tensor(actions, dtype=torch.long, device=self.player.device)
            is_move = a < PASS
            mv = torch.where(is_move, torch.ones_like(a) << a.clamp(0, 63), torch.zeros_like(a))
        else:
            a = np.asarray(actions, dtype=np.int64)
            is_move = a < PASS
            mv = np.where(is_move, np.uint64(1) << np.clip(a, 0, 63).astype(np.uint64), np.uint64(0))
        if check:
            legal = self.legal_actions()
            rows = np.arange(len(self)) if not self.is_torch else _torch().arange(len(self), device=a.device)
            ok = (a >= 0) & (a <= PASS)
            ok_idx = a.clamp(0, PASS) if self.is_torch else np.clip(a, 0, PASS)
            bad = ~(ok & legal[rows, ok_idx])
            if bad.any():
                i = int(bad.nonzero()[0][0]) if not self.is_torch else int(bad.nonzero()[0, 0])
                raise ValueError(f"game {i}: action {int(a[i])} is not legal here "
                                 f"(legal: {[int(x) for x in legal[i].nonzero()[0]] if not self.is_torch else legal[i].nonzero().flatten().tolist()})")
        p, o = bb.play(self.player, self.opponent, mv)
        if self.is_torch:
            history = _torch().cat([a[:, None], self.history[:, :HISTORY - 1]], 1)
        else:
            history = np.concatenate([a[:, None], self.history[:, :HISTORY - 1]], 1)
        # bb.play returns the boards from the next mover's view (a pass swaps them as well).
        return States(p, o, ~self.black_to_move, history)


    def put(self, idx, other: "States") -> None:
        """Write ``other`` into the games ``idx`` in place (the arrays are the
        owner's working storage: replay and the arena step a subset of their games)."""
        for f in fields(self):
            getattr(self, f.name)[idx] = getattr(other, f.name)

    def step_where(self, where, actions) -> "States":
        """A copy with the games in ``where`` (a bool mask) stepped by their
        ``actions`` (unchecked), the others unchanged."""
        out = States(*(_copy(getattr(self, f.name)) for f in fields(self)))
        if where.any():
            out.put(where, self[where].step(actions[where], check=False))
        return out


def last_actions(actions) -> np.ndarray:
    """A game's ``history`` row from its actions so far (squares, 64 = pass): the last
    four, most recent first, -1 where the game is younger; int64 [4]. One game's
    version of what ``States.step`` keeps for a batch."""
    row = np.full(HISTORY, NO_MOVE, dtype=np.int64)
    recent = list(actions)[::-1][:HISTORY]
    row[: len(recent)] = recent
    return row


def _copy(a):
    return a.clone() if bb.is_torch(a) else a.copy()


def _where(cond, a, b):
    if bb.is_torch(cond):
        return _torch().where(cond, a, b)
    return np.where(cond, a, b)
