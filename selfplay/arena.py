"""Play two players against each other and measure the difference in strength.

    python selfplay/arena.py --a alphabeta:2 --b random --games 100
    python selfplay/arena.py --a policy:ckpt.pt --b alphabeta:3 --games 400 --json out.json

All games advance together, one ply per step, so each player sees the games
waiting on it as one batch (one forward pass for a network player). Every
opening (``--opening-plies`` random plies, distinct up to the board's eight
symmetries) is played twice with the colours swapped: deterministic players
do not replay one game, and an opening's bias toward one colour cancels.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from othello import bitboard as bb  # noqa: E402
from othello.files import UserError, atomic_write, run_main  # noqa: E402
from othello.game import IllegalMoveError, Position  # noqa: E402
from othello.notation import format_transcript, square_name  # noqa: E402
from othello.symmetry import transform  # noqa: E402
from selfplay.players import Player, legal_squares, make_player, random_legal_squares  # noqa: E402

Z95 = 1.959963984540054
# After 60 moves the board is full: an opening must leave at least one move to play.
MAX_OPENING_PLIES = 59
_ONE = np.uint64(1)


# --------------------------------------------------------------------------
# Openings


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
    black: int
    white: int
    black_to_move: bool
    moves: list[int]

    @property
    def transcript(self) -> str:
        return format_transcript(self.moves)


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
        p = np.full(n, bb.BLACK_START, dtype=np.uint64)
        o = np.full(n, bb.WHITE_START, dtype=np.uint64)
        btm = np.ones(n, dtype=bool)
        alive = np.ones(n, dtype=bool)
        moves = np.full((n, plies), -1, dtype=np.int64)
        for ply in range(plies):
            for _ in range(2):  # at most one pass before a move
                stuck = bb.legal_moves(p, o) == 0
                if not stuck.any():
                    break
                p[stuck], o[stuck], btm[stuck] = o[stuck], p[stuck], ~btm[stuck]
            legal = legal_squares(p, o)
            alive &= legal.any(axis=1)  # neither side could move: the game ended
            sq = random_legal_squares(legal | ~alive[:, None], rng)
            moves[:, ply] = sq
            np_, no = bb.play(p, o, _ONE << sq.astype(np.uint64))
            p = np.where(alive, np_, p)
            o = np.where(alive, no, o)
            btm = np.where(alive, ~btm, btm)
        black, white = np.where(btm, p, o), np.where(btm, o, p)
        new = 0
        for i, key in enumerate(canonical_keys(black, white, btm)):
            if alive[i] and key not in seen:
                seen.add(key)
                new += 1
                out.append(Opening(int(black[i]), int(white[i]), bool(btm[i]), moves[i].tolist()))
                if len(out) == count:
                    break
        if new == 0:
            break
    return out


# --------------------------------------------------------------------------
# Results


def elo_from_score(score: float) -> float:
    """Elo difference whose logistic expectation is ``score``; +-inf at 1 / 0."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0)


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

    def elo(self, z: float = Z95) -> tuple[float, float, float]:
        """(Elo difference, low, high): A's Elo minus B's, 95% by default.

        The interval is the normal approximation score +- z * sd / sqrt(n),
        with sd the per-game score's sample deviation (draws count 1/2, so
        they narrow it), mapped through the logistic Elo curve; a bound past
        score 0 or 1 is reported as -inf / +inf. At a perfect score (all
        wins or all losses) sd is 0 and the approximation says nothing, so
        the estimate and the outer bound are +-inf and the inner bound is
        the exact binomial (Clopper-Pearson) one, score (2.5%)^(1/n).
        """
        n, s = self.games, self.score
        if n == 0:
            return float("nan"), float("nan"), float("nan")
        tail = 0.5 * math.erfc(z / math.sqrt(2.0))  # one-sided tail, 0.025 for z95
        if s >= 1.0:
            return math.inf, elo_from_score(tail ** (1.0 / n)), math.inf
        if s <= 0.0:
            return -math.inf, -math.inf, elo_from_score(1.0 - tail ** (1.0 / n))
        sd = float(np.sqrt(np.mean((self.outcomes - s) ** 2)))
        half = z * sd / math.sqrt(n)
        return elo_from_score(s), elo_from_score(s - half), elo_from_score(s + half)

    def to_dict(self) -> dict:
        """JSON-ready summary; infinite Elo figures become null."""
        def fin(x):
            return x if math.isfinite(x) else None

        elo, low, high = self.elo()
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
            "by_colour": self.by_colour(),
            "distinct_openings": self.distinct_openings,
        }

    def summary(self) -> str:
        def fmt(x):
            return "+inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:+.0f}"

        elo, low, high = self.elo()
        col = self.by_colour()
        colour_scores = ", ".join(
            f"{c} {col[c]['score']:.3f}" for c in ("black", "white") if col[c]["games"]
        )
        return (
            f"{self.a_name} (A) vs {self.b_name} (B): {self.games} games, "
            f"{self.distinct_openings} openings\n"
            f"A: {self.wins} wins, {self.draws} draws, {self.losses} losses; "
            f"score {self.score:.3f} ({colour_scores}); mean disc difference {self.disc_diff_mean:+.1f}\n"
            f"Elo difference {fmt(elo)} (95% interval {fmt(low)} .. {fmt(high)})"
        )


# --------------------------------------------------------------------------
# The match


def _validate(player: Player, moves, p, o, btm, games_idx) -> np.ndarray:
    """The moves as int64, or an IllegalMoveError naming the player and the position."""
    if hasattr(moves, "detach"):  # a torch tensor, possibly on the GPU
        moves = moves.detach().cpu().numpy()
    mv = np.asarray(moves)
    if mv.shape != (len(p),) or not np.issubdtype(mv.dtype, np.integer):
        raise IllegalMoveError(
            f"player {player.name!r} returned {mv.dtype} moves of shape {mv.shape}, "
            f"expected {len(p)} square indices (integers 0..63)"
        )
    mv = mv.astype(np.int64)
    inside = (mv >= 0) & (mv < 64)
    ok = inside.copy()
    legal = bb.legal_moves(p, o)
    ok[inside] = ((legal[inside] >> mv[inside].astype(np.uint64)) & _ONE) != 0
    if not ok.all():
        i = int(np.nonzero(~ok)[0][0])
        sq = int(mv[i])
        name = square_name(sq) if 0 <= sq < 64 else str(sq)
        pos = Position(int(p[i]), int(o[i]), bool(btm[i]))
        raise IllegalMoveError(
            f"player {player.name!r} played {name}, which is illegal, in game {int(games_idx[i])} "
            f"(legal: {', '.join(square_name(s) for s in pos.legal_moves())}):\n{pos}"
        )
    return mv


def play_match(
    a: Player,
    b: Player,
    games: int,
    seed: int = 0,
    opening_plies: int = 4,
    progress: bool = True,
) -> MatchResult:
    """Play ``games`` games of A against B, all at once in lockstep.

    Game ``2i`` has A black and game ``2i + 1`` A white, both from opening
    ``i``. When fewer distinct openings exist than pairs of games, they are
    reused in turn (with a warning). The openings and each player's choices
    draw from separate streams of ``seed``, so a match replays exactly.
    """
    if games < 1:
        raise ValueError(f"games must be >= 1, got {games}")
    if not 0 <= opening_plies <= MAX_OPENING_PLIES:
        raise ValueError(f"opening_plies must be 0..{MAX_OPENING_PLIES}, got {opening_plies}")
    rng_open, rng_a, rng_b = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    pairs = (games + 1) // 2
    openings = random_openings(pairs, opening_plies, rng_open)
    if not openings:  # random play ended every game within the opening
        raise ValueError(f"no opening of {opening_plies} plies was found where the game goes on; use fewer plies")
    if len(openings) < pairs:
        warnings.warn(
            f"only {len(openings)} distinct openings of {opening_plies} plies exist; "
            f"{pairs} pairs of games reuse them in turn",
            stacklevel=2,
        )
    per_game = [openings[(g // 2) % len(openings)] for g in range(games)]
    a_black = np.arange(games) % 2 == 0
    btm = np.array([op.black_to_move for op in per_game], dtype=bool)
    black = np.array([op.black for op in per_game], dtype=np.uint64)
    white = np.array([op.white for op in per_game], dtype=np.uint64)
    p, o = np.where(btm, black, white), np.where(btm, white, black)

    # Last four moves of each game, most recent first (64 = pass, -1 = none):
    # network players with history planes need them.
    hist = np.full((games, 4), -1, dtype=np.int64)
    for i, op in enumerate(per_game):
        recent = list(reversed(op.moves))[:4]
        hist[i, : len(recent)] = recent
    # Every move of each game from the start (64 = a pass the arena played):
    # players that drive an external engine (``uses_moves``) replay them.
    game_moves = [list(op.moves) for op in per_game]

    a.reset()
    if b is not a:
        b.reset()
    done = np.zeros(games, dtype=bool)
    disc_a = np.zeros(games, dtype=np.int64)
    if any(getattr(x, "interactive", False) for x in (a, b)):
        progress = False  # a bar would garble the board a person is reading

    from tqdm import tqdm

    with tqdm(total=games, disable=not progress, file=sys.stderr, desc=f"{a.name} vs {b.name}",
              unit="game", leave=False) as bar:
        while not done.all():
            idx = np.nonzero(~done)[0]
            legal = bb.legal_moves(p[idx], o[idx])
            stuck = idx[legal == 0]
            if stuck.size:
                over = bb.legal_moves(o[stuck], p[stuck]) == 0
                ended, passing = stuck[over], stuck[~over]
                if ended.size:
                    d = bb.final_disc_difference(p[ended], o[ended]).astype(np.int64)
                    d_black = np.where(btm[ended], d, -d)
                    disc_a[ended] = np.where(a_black[ended], d_black, -d_black)
                    done[ended] = True
                    bar.update(int(ended.size))
                p[passing], o[passing], btm[passing] = o[passing], p[passing], ~btm[passing]
                hist[passing] = np.concatenate([np.full((passing.size, 1), 64), hist[passing, :3]], 1)
                for j in passing.tolist():
                    game_moves[j].append(64)
            movers = idx[legal != 0]
            if not movers.size:
                continue
            a_turn = btm[movers] == a_black[movers]
            sq = np.empty(movers.size, dtype=np.int64)
            for player, mask, rng in ((a, a_turn, rng_a), (b, ~a_turn, rng_b)):
                g = movers[mask]
                if g.size:
                    extra = {"history": hist[g].copy()} if getattr(player, "uses_history", False) else {}
                    if getattr(player, "uses_moves", False):
                        extra["moves"] = [list(game_moves[j]) for j in g.tolist()]
                    chosen = player.select(p[g].copy(), o[g].copy(), btm[g].copy(), rng, **extra)
                    sq[mask] = _validate(player, chosen, p[g], o[g], btm[g], g)
            p[movers], o[movers] = bb.play(p[movers], o[movers], _ONE << sq.astype(np.uint64))
            btm[movers] = ~btm[movers]
            hist[movers] = np.concatenate([sq[:, None], hist[movers, :3]], 1)
            for j, s in zip(movers.tolist(), sq.tolist()):
                game_moves[j].append(s)

    outcomes = np.where(disc_a > 0, 1.0, np.where(disc_a < 0, 0.0, 0.5))
    return MatchResult(
        a_name=a.name,
        b_name=b.name,
        outcomes=outcomes,
        disc_diffs=disc_a,
        a_black=a_black,
        openings=[op.transcript for op in per_game],
        distinct_openings=len(openings),
        transcripts=[format_transcript([m for m in gm if m != 64]) for gm in game_moves],
    )


def write_games(path: Path, result: MatchResult) -> None:
    """Every game of a match: ``.csv`` (one row per game, ``MatchResult.game_rows``)
    or ``.ggf`` (what other Othello programs read); written atomically."""
    import csv
    import io

    from othello.files import UserError, atomic_write

    rows = result.game_rows()
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["game"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write(path, buf.getvalue())
    elif suffix == ".ggf":
        from othello.formats import GameRecord, format_ggf

        records = [GameRecord.from_transcript(r["transcript"], black=r["black"], white=r["white"], place="othello-learn arena",
                                              result=float(r["black_disc_diff"])) for r in rows]
        atomic_write(path, "".join(format_ggf(rec) + "\n" for rec in records))
    else:
        raise UserError(f"--games-out {path}: expected a .csv or .ggf file name")


# --------------------------------------------------------------------------
# Command line


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="player A's spec, e.g. alphabeta:3 (scores are A's)")
    parser.add_argument("--b", required=True, help="player B's spec, e.g. random, greedy")
    parser.add_argument("--games", type=int, default=100, help="number of games (default 100)")
    parser.add_argument("--json", type=Path, help="write the result here as JSON")
    parser.add_argument("--seed", type=int, default=0, help="seed of the openings and the players' draws")
    parser.add_argument("--opening-plies", type=int, default=4, help="random plies before the players take over")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--games-out", type=Path, metavar="FILE",
                        help="write every game played: FILE.csv (opening, colours, players, transcript, result) or FILE.ggf")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE first, for the player kinds it registers (repeatable)")
    args = parser.parse_args(argv)
    check_settings(args)
    for module in args.imports:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise UserError(f"--import {module}: {e}") from e
    a, b = make_player(args.a), make_player(args.b)  # a bad spec: PlayerSpecError, one line naming it
    if args.games_out and args.games_out.suffix.lower() not in (".csv", ".ggf"):
        parser.error(f"--games-out {args.games_out}: expected a .csv or .ggf file name")
    from selfplay.play import HumanQuit

    try:
        result = play_match(a, b, args.games, seed=args.seed, opening_plies=args.opening_plies,
                            progress=not args.quiet)
    except HumanQuit as e:
        print(f"match abandoned: {e}", file=sys.stderr)
        return 1
    print(result.summary())
    if args.games_out:
        write_games(args.games_out, result)
    if args.json:
        out = result.to_dict()
        out.update(a_spec=args.a, b_spec=args.b, seed=args.seed, opening_plies=args.opening_plies)
        atomic_write(args.json, json.dumps(out, indent=2) + "\n")
    return 0


def check_settings(args) -> None:
    """Refuse numbers that would crash or mislead a match before any checkpoint
    is loaded or game played: a bad setting should cost a second, not a match."""
    if args.games < 1:
        raise UserError(f"--games must be at least 1, got {args.games}")
    if not 0 <= args.opening_plies <= MAX_OPENING_PLIES:
        raise UserError(f"--opening-plies must be 0..{MAX_OPENING_PLIES} (a game has at most 60 moves), "
                        f"got {args.opening_plies}")
    if args.seed < 0:
        raise UserError(f"--seed must be 0 or more, got {args.seed}")
    if args.json is not None and args.json.is_dir():
        raise UserError(f"--json {args.json}: is a folder; give a file name")


if __name__ == "__main__":
    sys.exit(run_main(main))
