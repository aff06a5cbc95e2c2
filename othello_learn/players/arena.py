"""Play two players against each other and measure the difference in strength.

    othello-arena --a alphabeta:2 --b random --games 100
    othello-arena --a policy:checkpoints/cpu_hc_long.pt --b alphabeta:3 --games 400 --json out.json

All games advance together, one ply per step, so each player sees the games
waiting on it as one batch (one forward pass for a network player). Every
opening (``--opening-plies`` random plies, distinct up to the board's eight
symmetries) is played twice with the colours swapped: deterministic players
do not replay one game, and an opening's bias toward one colour cancels.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from othello_learn.cli import ArgumentParser, bar_pacing, run_main, STOP_SIGNALS, stop_signals_raise
from othello_learn.settings import Setting, seed_arg
from othello_learn.files import UserError, atomic_write, check_distinct, check_output, write_json
from othello.notation import PASS, format_transcript
from othello_learn.players.elo import MatchResult
from othello_learn.players.openings import MAX_OPENING_PLIES, Opening, opening_states, random_openings
from othello_learn.players.base import HumanQuit, Player, checked_moves, close_players
from othello_learn.players.specs import SPEC_KINDS, make_player


# --------------------------------------------------------------------------
# The match


FEW_OPENING_PLIES, MANY_OPENING_PLIES = 4, 6
FEW_OPENINGS = 60  # distinct 4-ply openings up to symmetry that random play finds


def default_opening_plies(games: int) -> int:
    """4 random plies while there are enough distinct 4-ply openings for one
    per pair of games, else 6 (thousands): a 400-game match of deterministic
    players then plays 400 different games instead of repeating 120."""
    return FEW_OPENING_PLIES if (games + 1) // 2 <= FEW_OPENINGS else MANY_OPENING_PLIES


@dataclass(frozen=True)
class MatchPart:
    """Games ``first ..`` of a match, as one process plays them: each game's opening and colours,
    and the two players' random streams for these games alone. A part plays the same games
    wherever it runs, so a match split into parts gives one result whoever plays which part."""

    first: int
    openings: list[Opening]  # per game of the part
    a_black: np.ndarray  # per game: A plays black
    seeds: tuple[np.random.SeedSequence, np.random.SeedSequence]  # A's draws, B's

    @property
    def games(self) -> int:
        return len(self.openings)


@dataclass(frozen=True)
class PartResult:
    """What a part's games came to: A's disc difference and the transcript of each."""

    disc_diffs: np.ndarray
    transcripts: list[str]


@dataclass(frozen=True)
class MatchPlan:
    """A match's games dealt into parts (``plan_match``)."""

    games: int
    distinct_openings: int
    parts: list[MatchPart]


def plan_match(games: int, seed: int = 0, opening_plies: int | None = None,
               part_games: int | None = None) -> MatchPlan:
    """``games`` games in parts of ``part_games`` (None: one part).

    Game ``2i`` has A black and game ``2i + 1`` A white, both from opening
    ``i`` of ``opening_plies`` random plies (None: ``default_opening_plies``).
    When fewer distinct openings exist than pairs of games, they are
    reused in turn (with a warning). The openings and each player's choices
    draw from separate streams of ``seed``, and each part's players from
    their own, so a match replays exactly, part for part."""
    if games < 1 or seed < 0:
        raise ValueError(f"play_match needs games >= 1 and seed >= 0, got games={games}, seed={seed}")
    if opening_plies is None:
        opening_plies = default_opening_plies(games)
    OPENING_PLIES.check(opening_plies, "opening_plies")  # a ValueError, for a caller of the API
    ss_open, ss_a, ss_b = np.random.SeedSequence(seed).spawn(3)
    pairs = (games + 1) // 2
    openings = random_openings(pairs, opening_plies, np.random.default_rng(ss_open))
    if not openings:  # random play ended every game within the opening
        raise ValueError(f"no opening of {opening_plies} plies was found where the game goes on; use fewer plies")
    if len(openings) < pairs:
        k, rest = len(openings), pairs - len(openings)
        print(f"note: only {k} distinct opening{'s' * (k > 1)} of {opening_plies} pl{'y' if opening_plies == 1 else 'ies'} "
              f"exist{'s' * (k == 1)} for {pairs} pairs of games; {rest} pair{'s' * (rest > 1)} replay{'s' * (rest == 1)} one "
              "(more --opening-plies gives more)", file=sys.stderr)
    per_game = [openings[(g // 2) % len(openings)] for g in range(games)]
    a_black = np.arange(games) % 2 == 0
    size = games if part_games is None else max(1, part_games)
    starts = range(0, games, size)
    # One part draws from the match's own streams (a match played whole is as it always was).
    streams = [(ss_a, ss_b)] if len(starts) == 1 else list(zip(ss_a.spawn(len(starts)), ss_b.spawn(len(starts))))
    parts = [MatchPart(s, per_game[s:s + size], a_black[s:s + size], streams[k]) for k, s in enumerate(starts)]
    return MatchPlan(games, len(openings), parts)


def play_match(
    a: Player,
    b: Player,
    games: int,
    seed: int = 0,
    opening_plies: int | None = None,
    progress: bool = True,
    part_games: int | None = None,
) -> MatchResult:
    """Play ``games`` games of A against B, all of a part at once in lockstep
    (``plan_match`` says which games, and in which parts: one by default).

    Players with a ``close()`` (external engines) are closed when the match
    ends, however it ends: an engine process must not outlive its match, and
    one used again later simply starts afresh.
    """
    for who, player in (("a", a), ("b", b)):
        if not isinstance(player, Player):  # a spec string failed deep inside with an AttributeError
            raise TypeError(f"play_match's {who} is a player (registry.make_player({player!r}) makes one), "
                            f"not {type(player).__name__}")
    plan = plan_match(games, seed, opening_plies, part_games)
    from tqdm import tqdm

    try:
        with tqdm(total=games, disable=not progress or a.interactive or b.interactive, file=sys.stderr,
                  desc=f"{a.name} vs {b.name}", unit="game", leave=False, **bar_pacing()) as bar:
            # (no bar beside a person's game: it would garble the board they read)
            results = [play_part(a, b, part, bar) for part in plan.parts]
    except BaseException:
        try:
            close_players(a, b)
        except Exception:  # noqa: BLE001 - the match's own error is the one to report
            pass
        raise
    close_players(a, b)
    return match_result(a.name, b.name, plan, results)


def match_result(a_name: str, b_name: str, plan: MatchPlan, results: list[PartResult]) -> MatchResult:
    """The match whose parts ``plan`` dealt, from each part's result, in the plan's order."""
    disc_a = np.concatenate([r.disc_diffs for r in results])
    return MatchResult(
        a_name=a_name,
        b_name=b_name,
        outcomes=np.where(disc_a > 0, 1.0, np.where(disc_a < 0, 0.0, 0.5)),
        disc_diffs=disc_a,
        a_black=np.concatenate([part.a_black for part in plan.parts]),
        openings=[op.transcript for part in plan.parts for op in part.openings],
        distinct_openings=plan.distinct_openings,
        transcripts=[t for r in results for t in r.transcripts],
    )


def play_part(a: Player, b: Player, part: MatchPart, bar=None) -> PartResult:
    """A part's games of A against B, in lockstep: one ply of every game a step, each player
    shown the games waiting on it as one batch. ``bar``: a progress bar to count the games on."""
    games = part.games
    rng_a, rng_b = (np.random.default_rng(s) for s in part.seeds)
    a_black = part.a_black
    state = opening_states(part.openings)
    # Every action of each game from the start (64 = a pass): players that
    # drive an external engine (``uses_moves``) replay them.
    game_moves = [list(op.actions) for op in part.openings]

    a.reset()
    if b is not a:
        b.reset()
    done = np.zeros(games, dtype=bool)
    disc_a = np.zeros(games, dtype=np.int64)
    while not done.all():
        idx = np.nonzero(~done)[0]
        legal = state[idx].legal_actions()  # [n, 65]: a game that must pass has only the pass
        ended = idx[~legal.any(axis=1)]
        if ended.size:
            d_black = state[ended].outcome().astype(np.int64)
            disc_a[ended] = np.where(a_black[ended], d_black, -d_black)
            done[ended] = True
            if bar is not None:
                bar.update(int(ended.size))
        actions = np.full(games, PASS, dtype=np.int64)
        can_move = legal[:, :PASS].any(axis=1)
        movers, movers_legal = idx[can_move], legal[can_move, :PASS]
        a_turn = state.black_to_move[movers] == a_black[movers]
        for player, mask, rng in ((a, a_turn, rng_a), (b, ~a_turn, rng_b)):
            g = movers[mask]
            if g.size:
                asked = state[g]  # a copy: a player that writes to its inputs cannot disturb the games
                moves = [list(game_moves[j]) for j in g.tolist()] if player.uses_moves else None
                chosen = player.select(asked, rng, moves=moves)
                actions[g] = checked_moves(player, chosen, movers_legal[mask],
                                           lambda i, g=g: state.position(int(g[i])),
                                           lambda i, g=g: f"in game {part.first + int(g[i])}")
        going = np.zeros(games, dtype=bool)
        going[idx] = True
        going[ended] = False
        state = state.step_where(going, actions)
        for j in np.nonzero(going)[0].tolist():
            game_moves[j].append(int(actions[j]))
    return PartResult(disc_a, [format_transcript(gm) for gm in game_moves])


def write_games(path: Path, result: MatchResult) -> None:
    """Every game of a match: ``.csv`` (one row per game, ``MatchResult.game_rows``)
    or ``.ggf`` (what other Othello programs read); written atomically."""
    import csv
    import io

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


# Every game is in memory at once with its moves (random against random: 200,000 games in 350 MB and
# 20 s on one core); 10**11 games hung.
MAX_GAMES = 1_000_000
GAMES = Setting(int, 100, "number of games (default 100)", low=1, high=MAX_GAMES,
                note="a match plays its games side by side, each keeping its moves; more would fill memory: "
                     "run several with another --seed")
OPENING_PLIES = Setting(int, low=0, high=MAX_OPENING_PLIES, note="a game has at most 60 moves")


def import_plugin(module: str) -> None:
    """``--import``: a module name (``mypackage.players``), or a ``.py`` file, which a console
    script finds wherever it is run (the current folder is not on its import path)."""
    try:
        if module.endswith(".py"):
            path = Path(module)
            if not path.is_file():
                raise ImportError(f"no such file {path}")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            plugin = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = plugin  # as an import would: the module can find itself
            spec.loader.exec_module(plugin)
        else:
            importlib.import_module(module)
    except ImportError as e:
        raise UserError(f"--import {module}: {e}") from e


def build_parser() -> argparse.ArgumentParser:
    """The command's parser (the command reference in docs/ is generated from it)."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help=f"player A's spec ({SPEC_KINDS}); scores are A's")
    parser.add_argument("--b", required=True, help="player B's spec, as --a")
    parser.add_argument("--games", **GAMES.argument())
    parser.add_argument("--json", type=Path, help="write the result here as JSON")
    parser.add_argument("--seed", type=seed_arg, default=0, help="seed of the openings and the players' draws (default 0)")
    parser.add_argument("--opening-plies", **OPENING_PLIES.argument(),
                        help=f"random plies before the players take over (default {FEW_OPENING_PLIES}, or "
                             f"{MANY_OPENING_PLIES} for more than {2 * FEW_OPENINGS} games: one distinct opening a pair)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--games-out", type=Path, metavar="FILE",
                        help="write every game played: FILE.csv (opening, colours, players, transcript, result) or FILE.ggf")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE (a module name, or a .py file) first, for the player kinds it registers "
                             "with register_player (repeatable; example: examples/plugin_player.py)")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_settings(args)
    for module in args.imports:
        import_plugin(module)
    a, b = make_player(args.a), make_player(args.b)  # a bad spec: PlayerSpecError, one line naming it

    plies = args.opening_plies if args.opening_plies is not None else default_opening_plies(args.games)
    # SIGTERM and SIGHUP unwind like Ctrl-C, so the engines' processes are stopped with the match.
    with stop_signals_raise(STOP_SIGNALS):
        try:
            for flag, player in (("--a", a), ("--b", b)):
                try:
                    # A broken engine is found before a human at the keyboard has played a move;
                    # a working one stays up for the match (an engine's start-up is paid once).
                    player.check(keep_running=True)
                except UserError as e:
                    raise UserError(f"{flag}: {e}") from None
        except BaseException:
            close_players(a, b)
            raise
        try:
            result = play_match(a, b, args.games, seed=args.seed, opening_plies=plies, progress=not args.quiet)
        except HumanQuit as e:
            print(f"match abandoned: {e}", file=sys.stderr)
            return 1
        # The files first, and inside the block: a reader that stops early (| head) ends us at
        # the print, and a stop something swallowed during the match is raised at the block's
        # end; the finished match's results must be lost with neither. A file that cannot be
        # written (a full disk) is said after the summary, so the results are not lost with it.
        out = result.to_dict()
        out.update(a_spec=args.a, b_spec=args.b, seed=args.seed, opening_plies=plies)
        writes = [(args.games_out, write_games, result), (args.json, write_json, out)]
        unwritten = None
        for path, write, what in writes:
            try:
                if path:
                    write(path, what)
            except OSError as e:
                unwritten = unwritten or e
    try:
        print(result.summary())
    finally:
        if unwritten is not None:
            raise unwritten
    return 0


def check_settings(args) -> None:
    """Refuse output paths that would crash or mislead a match before any checkpoint
    is loaded or game played: a bad setting should cost a second, not a match."""
    for flag, path, kinds in (("--json", args.json, (".json",)), ("--games-out", args.games_out, (".csv", ".ggf"))):
        if path is not None:
            check_output(path, flag, suffixes=kinds)
    check_distinct({"--json": args.json, "--games-out": args.games_out})


def cli() -> None:
    """The ``othello-arena`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
