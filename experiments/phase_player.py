"""``phase:E:LATE:EARLY``: the 1-ply policy of checkpoint LATE while at most E
squares are empty, of EARLY before. A research player (arena ``--import
experiments.phase_player``): it measures what an endgame specialist net, trained
on exactly solved endgames alone, adds to a net whose midgame it leaves as it was."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
import numpy as np

from othello import bitboard as bb
from othello_learn.players.base import Player, spec_int
from othello_learn.players.specs import make_player, register_player


class PhasePlayer(Player):
    def __init__(self, late, early, empties):
        self.late, self.early, self.empties = late, early, empties

    @classmethod
    def from_args(cls, args):
        if len(args) != 3:
            raise ValueError("expected phase:EMPTIES:LATE_CKPT:EARLY_CKPT")
        return cls(make_player("policy:" + args[1]), make_player("policy:" + args[2]), spec_int(args[0], "empties"))

    def select(self, states, rng, moves=None):
        discs = bb.popcount(np.asarray(states.player) | np.asarray(states.opponent)).astype(np.int64)
        late = 64 - discs <= self.empties
        out = np.empty(len(states), dtype=np.int64)
        for mask, p in ((late, self.late), (~late, self.early)):
            idx = np.nonzero(mask)[0]
            if idx.size:
                out[idx] = p.select(states[idx], rng)
        return out

    def reset(self):
        self.late.reset(); self.early.reset()


register_player("phase", PhasePlayer.from_args)
