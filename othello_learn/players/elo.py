"""A match's result from player A's side, and the Elo difference it implies
with its confidence interval."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

Z95 = 1.959963984540054


def elo_from_score(score: float) -> float:
    """Elo difference whose logistic expectation is ``score``; +-inf at 1 / 0."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0) + 0.0  # + 0.0: an even score is 0, not -0.0 in JSON


def finite_elo(elo: float | None, score: float, games: int) -> float:
    """A match's Elo on a curve: its estimate, or for a clean sweep (an infinite
    estimate, stored as None) the score with half a game given to the loser,
    (n - 1/2) / n. Why not the sweep's 95 % bound: for a few games it lies on
    the wrong side of 0 (a 2-0 win read -291)."""
    if elo is not None:
        return elo
    return elo_from_score((games - 0.5) / games if score >= 0.5 else 0.5 / games)


@dataclass
class MatchResult:
    """Outcome of a match from A's side, with one entry per game in the arrays."""

    a_name: str
    b_name: str
    outcomes: np.ndarray  # per game: 1 A won, 0.5 draw, 0 A lost
    disc_diffs: np.ndarray  # per game: final disc difference for A, empties to the winner
    a_black: np.ndarray  # per game: A played black
    openings: list[str] = field(default_factory=list)  # per game: the opening's moves
    distinct_openings: int = 0
    transcripts: list[str] = field(default_factory=list)  # per game: every move from the start, passes left out

    def game_rows(self) -> list[dict]:
        """One row per game, what ``--games-out`` writes: enough to replay and
        inspect every game (``Position.from_transcript`` infers the passes)."""
        rows = []
        for i in range(self.games):
            a_black = bool(self.a_black[i])
            d_black = int(self.disc_diffs[i]) * (1 if a_black else -1)
            rows.append({
                "game": i,
                "opening": self.openings[i] if i < len(self.openings) else "",
                "black": self.a_name if a_black else self.b_name,
                "white": self.b_name if a_black else self.a_name,
                "a_colour": "black" if a_black else "white",
                "transcript": self.transcripts[i] if i < len(self.transcripts) else "",
                "black_disc_diff": d_black,
                "winner": "black" if d_black > 0 else "white" if d_black < 0 else "draw",
            })
        return rows

    @property
    def games(self) -> int:
        return int(self.outcomes.size)

    @property
    def wins(self) -> int:
        return int((self.outcomes == 1.0).sum())

    @property
    def draws(self) -> int:
        return int((self.outcomes == 0.5).sum())

    @property
    def losses(self) -> int:
        return int((self.outcomes == 0.0).sum())

    @property
    def score(self) -> float:
        return float(self.outcomes.mean()) if self.games else float("nan")

    @property
    def disc_diff_mean(self) -> float:
        return float(self.disc_diffs.mean()) if self.games else float("nan")

    def by_colour(self) -> dict[str, dict]:
        """A's record as black and as white: a large gap means the openings or
        the players favour one colour."""
        out = {}
        for colour, mask in (("black", self.a_black), ("white", ~self.a_black)):
            x = self.outcomes[mask]
            out[colour] = {
                "games": int(x.size),
                "wins": int((x == 1.0).sum()),
                "draws": int((x == 0.5).sum()),
                "losses": int((x == 0.0).sum()),
                "score": float(x.mean()) if x.size else None,
                "disc_diff_mean": float(self.disc_diffs[mask].mean()) if x.size else None,
            }
        return out

    def pair_scores(self) -> np.ndarray | None:
        """A's mean score in each pair of games played on one opening with the colours
        swapped (the arena's paired openings), or None when the games are not so paired.
        The two games of a pair share an opening, so they are not independent: a pair is
        the unit the Elo interval counts."""
        n = self.games
        if n == 0 or n % 2 or len(self.openings) != n:
            return None
        if self.openings[0::2] != self.openings[1::2] or np.any(self.a_black[0::2] == self.a_black[1::2]):
            return None
        return (self.outcomes[0::2] + self.outcomes[1::2]) / 2.0

    def _replay_keys(self, paired: bool) -> list:
        """One key per unit of the interval (a pair, or a game), equal for units
        that replay one opening (a game: with the same colours); without the
        openings every unit is its own."""
        if len(self.openings) != self.games:
            return list(range(self.games // 2 if paired else self.games))
        if paired:
            return list(self.openings[0::2])
        return [f"{op} {bool(b)}" for op, b in zip(self.openings, self.a_black)]

    def elo(self, z: float = Z95) -> tuple[float, float, float]:
        """(Elo difference, low, high): A's Elo minus B's, 95% by default.

        The interval is the normal approximation score +- z * sd / sqrt(n),
        mapped through the logistic Elo curve; a bound past score 0 or 1 is
        reported as -inf / +inf. The units are the colour-swapped pairs of games
        of the arena's paired openings (the pentanomial estimate: a colour's
        advantage in an opening usually pulls a pair's two results apart, so
        pairs vary less than games do), or the games when they are not paired;
        sd is the units' sample deviation (draws count 1/2). The pairs' is taken
        with two pseudo-pairs more, one lost and one won (as Agresti and Coull add
        pseudo-observations to a binomial): a few pairs that all score alike (each
        split one win, one loss) are no proof of equal strength, and the interval
        stays continuous as results change; a few hundred pairs barely feel them.
        At a perfect score (all wins or all losses) sd is 0 and the approximation
        says nothing, so the estimate and the outer bound are +-inf and the inner
        bound is the exact binomial (Clopper-Pearson) one over the games, score
        (2.5%)^(1/n). All draws in unpaired games have sd 0 too, and an interval
        of width 0 would claim the players equal for certain: sd is then 1/2, the
        largest a game's can be.

        Units that replay one opening (too few distinct openings for the match:
        the arena reuses them) are not independent, and for deterministic players
        they are copies: their deviations from the score are summed before they
        are squared (the cluster-robust variance), and the exact bound counts each
        opening's game with each colour once. Ten replays of a 120-game match
        otherwise claimed a third of its interval. Without replays nothing changes.
        """
        n, s = self.games, self.score
        if n == 0:
            return float("nan"), float("nan"), float("nan")
        tail = 0.5 * math.erfc(z / math.sqrt(2.0))  # one-sided tail, 0.025 for z95
        if s >= 1.0 or s <= 0.0:
            n = len(set(self._replay_keys(paired=False)))  # a replayed game shows nothing new
            if s >= 1.0:
                return math.inf, elo_from_score(tail ** (1.0 / n)), math.inf
            return -math.inf, -math.inf, elo_from_score(1.0 - tail ** (1.0 / n))
        pairs = self.pair_scores()
        units = pairs if pairs is not None else self.outcomes
        _, replays = np.unique(np.asarray(self._replay_keys(paired=pairs is not None)), return_inverse=True)
        spread = float(np.sum(np.bincount(replays.ravel(), weights=units - s) ** 2))
        if pairs is not None:
            sd = float(np.sqrt((spread + s**2 + (1.0 - s) ** 2) / (pairs.size + 2)))
            n = pairs.size
        else:
            sd = float(np.sqrt(spread / n))
            if sd == 0.0:  # all draws: no spread measured, which is not a certain 0 Elo; the widest a game's can be
                sd = 0.5
        half = z * sd / math.sqrt(n)
        return elo_from_score(s), elo_from_score(s - half), elo_from_score(s + half)

    def to_dict(self) -> dict:
        """JSON-ready summary; infinite Elo figures become null."""
        def fin(x):
            return x if math.isfinite(x) else None

        elo, low, high = self.elo()
        pairs = self.pair_scores()
        return {
            "a": self.a_name,
            "b": self.b_name,
            "games": self.games,
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "score": self.score,
            "disc_diff_mean": self.disc_diff_mean,
            "elo": fin(elo),
            "elo_low": fin(low),
            "elo_high": fin(high),
            "elo_confidence": 0.95,
            # The interval's units, and for pairs how many scored 0, 1/4, ... 1 (the pentanomial counts).
            "elo_interval_units": "games" if pairs is None else "opening pairs",
            "pairs": None if pairs is None else {f"{k / 4:g}": int((pairs == k / 4).sum()) for k in range(5)},
            "by_colour": self.by_colour(),
            "distinct_openings": self.distinct_openings,
        }

    def summary(self) -> str:
        def fmt(x):
            if math.isinf(x) or math.isnan(x):
                return "+inf" if x == math.inf else "-inf" if x == -math.inf else "n/a"
            return "0" if round(x) == 0 else f"{x:+.0f}"  # not "-0" for a slightly negative estimate

        elo, low, high = self.elo()
        col = self.by_colour()
        colour_scores = ", ".join(
            f"{c} {col[c]['score']:.3f}" for c in ("black", "white") if col[c]["games"]
        )
        def n(count, one, many):
            return f"{count} {one if count == 1 else many}"

        return (
            f"{self.a_name} (A) vs {self.b_name} (B): {n(self.games, 'game', 'games')}, "
            f"{n(self.distinct_openings, 'opening', 'openings')}\n"
            f"A: {n(self.wins, 'win', 'wins')}, {n(self.draws, 'draw', 'draws')}, {n(self.losses, 'loss', 'losses')}; "
            f"score {self.score:.3f} ({colour_scores}); mean disc difference {self.disc_diff_mean:+.1f}\n"
            f"Elo difference {fmt(elo)} (95% interval {fmt(low)} .. {fmt(high)}"
            f"{'' if self.pair_scores() is None else ', the opening pairs as units'})"
        )
