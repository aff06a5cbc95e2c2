"""An example plug-in: a player kind of your own for every command that takes player specs.

    othello-arena --import examples/plugin_player.py --a corners:greedy --b greedy --games 100

``--import`` takes a Python file (as here) or an importable module name; the module registers
its kinds with ``register_player`` when imported, and from then on ``corners[:SPEC]`` is a spec
like any other. The player receives the games waiting on it as one ``States`` batch and
answers one square each (``othello_learn.players.base.Player``); the arena checks every
answer is legal. This one takes a corner whenever one is legal and otherwise plays as SPEC
(``random`` when not given): a rule of thumb on top of any player, networks included.
"""

from __future__ import annotations

import numpy as np

from othello_learn.players.base import Player
from othello_learn.players.specs import join_spec, make_player, register_player

CORNERS = np.array([0, 7, 56, 63])  # a1, h1, a8, h8


class CornersPlayer(Player):
    def __init__(self, inner: Player):
        self.inner = inner
        self.uses_moves = inner.uses_moves  # an external engine as SPEC is told each game's moves

    @classmethod
    def from_args(cls, args: list[str]) -> CornersPlayer:
        """``corners[:SPEC]``: SPEC is any player spec, itself with colons (``corners:alphabeta:2``)."""
        return cls(make_player(join_spec(args) if args else "random"))

    def select(self, states, rng, moves=None):
        chosen = np.asarray(self.inner.select(states, rng, moves), dtype=np.int64).copy()
        legal = np.asarray(states.legal_actions())[:, CORNERS]  # [N, 4]: which corners each game may take
        has = legal.any(axis=1)
        chosen[has] = CORNERS[legal[has].argmax(axis=1)]
        return chosen

    def check(self, keep_running: bool = False) -> None:
        self.inner.check(keep_running)

    def reset(self) -> None:
        self.inner.reset()

    def close(self) -> None:  # an external engine as SPEC ends with the match
        if hasattr(self.inner, "close"):
            self.inner.close()


register_player("corners", CornersPlayer.from_args)
