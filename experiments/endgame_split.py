"""``egsplit:E:WHEN:SPEC``: SPEC's player with perfect play from E empty squares on in
part of the endgame only. A research player (arena ``--import experiments.endgame_split``):
it splits what ``endgame:E:SPEC`` is worth between the positions a net would have to
learn it in.

WHEN is
- ``won``: the exact solver's move where the position is won or drawn for the side to
  move, SPEC's move where it is lost;
- ``lost``: the converse (the solver's move loses by the fewest discs);
- ``keep``: SPEC's move where it keeps the position's win/draw/loss result, else a random
  one of the moves that do; in a lost position SPEC's move. The ceiling of a net that has
  learnt exactly what a result-only (win/draw/loss) target teaches.
"""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
import numpy as np

from othello import bitboard as bb
from othello_learn.search.endgame import move_results, solve
from othello_learn.players.base import Player, spec_int
from othello_learn.players.specs import make_player, register_player

WHENS = ("won", "lost", "keep")


class SplitEndgamePlayer(Player):
    def __init__(self, inner, empties, when):
        if when not in WHENS:
            raise ValueError(f"egsplit WHEN must be one of {WHENS}, got {when!r}")
        self.inner, self.empties, self.when = inner, empties, when
        self.name = f"egsplit:{empties}:{when}:{inner.name}"
        self.uses_moves = inner.uses_moves
        self.used = 0  # positions where the solver's move was played instead of SPEC's choice
        self.seen = 0  # positions in the split's part of the endgame (keep: won or drawn ones)

    @classmethod
    def from_args(cls, args):
        if len(args) < 3:
            raise ValueError("expected egsplit:EMPTIES:won|lost|keep:SPEC")
        return cls(make_player(":".join(args[2:])), spec_int(args[0], "empties"), args[1])

    def select(self, states, rng, moves=None):
        player, opponent = np.asarray(states.player), np.asarray(states.opponent)
        out = self.inner.select(states, rng, moves=moves)
        left = 64 - bb.popcount(player | opponent).astype(np.int64)
        for i in np.nonzero(left <= self.empties)[0]:
            p, o = int(player[i]), int(opponent[i])
            if self.when == "keep":
                res = move_results(p, o)
                top = max(res.values())
                self.seen += top >= 0
                if top >= 0 and res[int(out[i])] < top:
                    keep = [sq for sq, r in res.items() if r == top]
                    out[i] = keep[rng.integers(len(keep))]
                    self.used += 1
                continue
            value, best = solve(p, o)
            if (value >= 0) == (self.when == "won"):
                self.seen += 1
                if int(out[i]) not in best:
                    self.used += 1
                out[i] = best[rng.integers(len(best))]
        return out

    def reset(self):
        self.inner.reset()

    def close(self):
        """The arena closes its players when a match ends: say how often the solver stepped in."""
        part = "won or drawn positions" if self.when == "keep" else f"{self.when} positions (drawn count as won)"
        print(f"{self.name}: {self.seen} {part} with <= {self.empties} empties; "
              f"SPEC's move {'gave up the result' if self.when == 'keep' else 'was not an optimal one'} "
              f"in {self.used} of them", file=_sys.stderr)
        if hasattr(self.inner, "close"):
            self.inner.close()


register_player("egsplit", SplitEndgamePlayer.from_args)
