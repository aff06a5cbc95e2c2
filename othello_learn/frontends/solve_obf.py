"""Ask a player about every position of an OBF file, like Edax's ``-solve``.

    othello-solve endgames --player policy:checkpoints/cpu_rl_warm_long.pt
    othello-solve problems.obf --player alphabeta:4 --json answers.json
    othello-solve --make-obf end12.obf --years 2016 --empties 12 --count 30
    othello-solve --make-obf mine.obf --random-games --empties 8-10 --count 20

'endgames' is the problem set the package ships (a file of that name in the
current folder comes first): 20 positions of random games with 8 to 10 empty
squares, every move scored by the project's exact solver.

One line per position: its number in the file, the side to move, the move the
player chooses (``PA`` when the side to move must pass, ``game over`` when
neither side can move). Network players add the policy's probability of that
move, the value head's evaluation of the position and the policy's top three
moves. The evaluation (``eval=``) is from the side to move's view on the disc scale,
the same figure the NBoard engine's ``analyze`` reports (``othello_learn.frontends.analysis.Analyst``
computes both), its unit said beside it: ``64 x net value`` for a network (its value
head's expected result, -1 lost .. +1 won, times 64: no count of discs),
``heuristic / 100`` for alpha-beta's search value short of the end, ``exact discs``
for a result seen to the end: alpha-beta's within its depth, or where an ``endgame:E:SPEC``
player solves the position (at most E empty squares), the exact final disc
difference (beyond E, SPEC plays, and its figure is given). All positions go to the player in one ``select`` call, so a network
sees them as one batch.

Where a line's comment scores moves, as Edax writes them and the FFO endgame test
suites carry them (``... X; g8:+18; h1:+12;``), each answer is graded against
them (the best score, or the discs the move gives up) and a last line sums up:
a player checked against a problem set in one command. A score that does not parse
(``h7:abc``, ``zz:+3``) or a move scored twice is an error naming the file and line;
so is an external engine's failure on a position (engines are asked one position at
a time). The side to move is X, * or B for black, O or W for white, as Edax reads it.

--make-obf OUT.obf writes such a scored problem set instead of asking a player: at most
one position a game, with E empty squares (a range E1-E2: one drawn at random a game),
kept where the side to move has two moves or more, each legal move scored exactly
(othello_learn.search.endgame; about 0.3 s a position at 10 empties, 5 s at 12 and a
minute at 14 on one core). The games are the expert games of --years (the built
dataset, --data, or the raw files of --wthor-dir: a file derived from WTHOR games
belongs outside a repository's history), or with --random-games, random legal play.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

from othello import bitboard as bb
from othello.formats import FormatError, ObfPosition, format_obf, parse_obf
from othello.game import Position
from othello.notation import PASS, move_name, parse_square, square_name
from othello.states import States
from othello_learn import HOME, HOME_HELP
from othello_learn.cli import STOP_SIGNALS, ArgumentParser, run_main, stop_signals_raise
from othello_learn.files import UserError, atomic_write, check_distinct, check_input, check_output, write_json
from othello_learn.settings import at_least, seed_arg
from othello_learn.frontends.analysis import NET_VALUE, Analyst
from othello_learn.frontends.session import session_player
from othello_learn.players.base import Player, checked_moves
from othello_learn.search.endgame import MAX_EMPTIES, move_value

TOP = 3
PROBLEMS = Path(__file__).with_name("problems")  # package data: the shipped problem sets


def problems_argument(text: str) -> Path:
    """The positional argument: an OBF file, or the name of a problem set the package ships
    (``endgames``), so an installed toolkit has one to try. A file of that name comes first."""
    path = Path(text)
    if text and not path.exists() and (PROBLEMS / f"{text}.obf").is_file():
        return PROBLEMS / f"{text}.obf"
    return path


def read_obf(path: Path) -> list[ObfPosition]:
    """The file's positions, or one UserError naming the file and the bad line."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is not text
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not a text (UTF-8) file: {e.reason} at byte {e.start}") from None
    try:
        positions = parse_obf(text, str(path))
    except FormatError as e:
        raise UserError(str(e)) from None
    if not positions:  # an empty answer would look like success
        raise UserError(f"{path}: no positions (expected lines like '<64 of X/O/-> X;')")
    for i, x in enumerate(positions, 1):  # a wrong comment would grade every answer against nonsense
        legal = set(x.position.legal_moves()) or {PASS}
        bad = [s for s in x.scores() if s not in legal]
        if bad:
            raise UserError(f"{label(x, i)} scores {move_name(bad[0])}, not a legal move there "
                            f"(legal: {', '.join(map(move_name, sorted(legal)))}; is the side to move right?)")
    return positions


def label(x: ObfPosition, number: int) -> str:
    """Where a position is, for errors: ``problems.obf line 7 (position 3)``."""
    return f"{x.what} (position {number})"


def solve(player: Player, positions: list[Position], seed: int = 0, labels: list[str] | None = None) -> list[dict]:
    """One record per position (``number`` counts from 1, in file order).

    Positions where the side to move has a move are sent to the player in one
    batch (an external engine's one at a time, so that one it fails on is named:
    ``labels[i]``, default ``position i+1``); forced passes and finished games are
    answered without asking it."""
    analyst = Analyst(player, seed)
    n = len(positions)
    where = labels or [f"position {i + 1}" for i in range(n)]
    movable = [i for i, pos in enumerate(positions) if pos.legal_moves()]
    chosen = np.full(n, PASS, dtype=np.int64)
    external = player.uses_moves
    for batch in ([[i] for i in movable] if external else [movable] if movable else []):
        s = States.from_positions([positions[i] for i in batch])  # OBF has no history: none known
        allowed = s.legal_actions()[:, :PASS]  # before the player, which could write to its inputs
        try:
            sq = player.select(s, analyst.rng)  # no moves: a set-up position each
        except UserError as e:  # an engine that fails: which position it failed on
            if not external:
                raise
            raise UserError(f"{where[batch[0]]}: {e}") from None
        chosen[batch] = checked_moves(player, sq, allowed, lambda j: positions[batch[j]],
                                      lambda j: f"at {where[batch[j]]}")

    probs = evals = None
    if analyst.net is not None and n:
        # No game history in OBF: the history planes are empty, as at a set-up position.
        probs, evals = analyst.net_evals(positions)

    records = []
    for i, pos in enumerate(positions):
        rec = {"number": i + 1, "to_move": "black" if pos.black_to_move else "white"}
        records.append(rec)
        legal = pos.legal_moves()
        if not legal and pos.is_over():
            d = int(bb.final_disc_difference(np.array([pos.player], np.uint64),
                                             np.array([pos.opponent], np.uint64))[0])
            rec.update(game_over=True, move=None, final_disc_difference=d)
            continue
        sq = int(chosen[i])
        rec.update(game_over=False, move=move_name(sq))
        if probs is not None:
            rec["probability"] = None if sq == PASS else float(probs[i, sq])
            # a forced pass as the NBoard engine's go values it
            rec["eval"], rec["eval_unit"] = (None, None) if evals is None else (float(evals[i]), NET_VALUE)
            ranked = sorted(legal, key=lambda s: -probs[i, s])[:TOP]
            rec["top"] = [{"move": square_name(s), "probability": float(probs[i, s])} for s in ranked]
        if analyst.exact(pos) or (probs is None and sq != PASS):
            # a solver's exact result (over its network's guess), alpha-beta's search value, None for the rest
            rec["eval"], rec["eval_unit"] = analyst.root_eval_unit(pos, [])
        elif probs is None:  # a forced pass, valued as the NBoard engine's hint and go value it
            rec["eval"], rec["eval_unit"] = analyst.pass_eval_unit(pos, [])
    return records


def grade(records: list[dict], scored: list[dict[int, int]]) -> dict | None:
    """Mark each answer against its position's scored moves (``ObfPosition.scores``,
    the side to move's disc difference): ``best`` (the move has the top score),
    ``loss`` (discs given up against the best; None when the move is not scored) and
    ``best_moves``. Returns the summary, or None when no position is scored."""
    graded = best_count = losses = total_loss = 0
    for rec, scores in zip(records, scored):
        if not scores or rec["game_over"]:
            continue
        move = parse_square(rec["move"])  # "PA" reads as PASS
        top = max(scores.values())
        rec["best_moves"] = [move_name(s) for s in sorted(scores) if scores[s] == top]
        rec["best"] = scores.get(move) == top
        rec["loss"] = top - scores[move] if move in scores else None
        graded += 1
        best_count += rec["best"]
        if rec["loss"] is not None:
            losses += 1
            total_loss += rec["loss"]
    if not graded:
        return None
    return {"scored": graded, "best": best_count, "loss_known": losses,
            "mean_loss": total_loss / losses if losses else None}


def format_summary(summary: dict) -> str:
    line = f"best move in {summary['best']} of {summary['scored']} scored positions"
    if summary["loss_known"]:
        line += (f"; discs given up where the move is scored: {summary['mean_loss']:.2f} a position "
                 f"({summary['loss_known']} position{'s' if summary['loss_known'] != 1 else ''})")
    return line


def format_record(rec: dict) -> str:
    head = f"{rec['number']:4d}  {rec['to_move']:<5}"
    if rec["game_over"]:
        return f"{head}  game over (final disc difference {rec['final_disc_difference']:+d} for {rec['to_move']})"
    line = f"{head}  {rec['move']:<2}"
    if rec.get("probability") is not None:
        line += f"  p={rec['probability']:.3f}"
    if rec.get("eval") is not None:
        line += f"  eval={rec['eval']:+.2f} ({rec['eval_unit']})"
    if rec.get("top"):
        line += "  top: " + ", ".join(f"{t['move']} {t['probability']:.3f}" for t in rec["top"])
    if "best" in rec:
        line += ("  [best]" if rec["best"] else
                 f"  [best {'/'.join(rec['best_moves'])}; " +
                 ("move not scored]" if rec["loss"] is None else f"gives up {rec['loss']}]"))
    return line


# --------------------------------------------------------------------------
# Scored problem sets (--make-obf)


def empties_range(text: str) -> tuple[int, int]:
    """``--empties``: E or E1-E2, within what the exact solver takes (2..MAX_EMPTIES: a problem has two moves)."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    lo, hi = (int(m.group(1)), int(m.group(2) or m.group(1))) if m else (0, -1)
    if not 2 <= lo <= hi <= MAX_EMPTIES:
        raise argparse.ArgumentTypeError(f"{text!r}: expected E or E1-E2 empty squares, 2 to {MAX_EMPTIES} "
                                         "(the exact solver's range), the first no more than the second")
    return lo, hi


def scored_line(pos: Position) -> str:
    """The position in OBF with every legal move's exact score, best first, as Edax writes them."""
    scores = sorted(((move_value(pos.player, pos.opponent, m), m) for m in pos.legal_moves()), reverse=True)
    return format_obf(pos) + "".join(f" {square_name(m)}:{v:+d};" for v, m in scores)


def records_problems(records: np.ndarray, empties: tuple[int, int], seed: int = 0):
    """Candidate positions of position records (``POSITION_DTYPE``): one a game, with an
    empty-square count drawn from ``empties`` for each game, the games in ``seed``'s random order."""
    rng = np.random.default_rng(seed)
    n = 64 - np.bitwise_count(records["player"] | records["opponent"]).astype(np.int64)
    idx = np.nonzero((n >= empties[0]) & (n <= empties[1]))[0]
    if empties[0] < empties[1]:  # (one count: no draw, so a seed gives the games it always gave)
        order = np.unique(records["game"][idx], return_inverse=True)[1]
        want = rng.integers(empties[0], empties[1] + 1, size=order.max() + 1 if len(order) else 0)
        idx = idx[n[idx] == want[order]]  # at most one a game: a game's disc count rises by one a move
    for i in rng.permutation(idx):
        yield Position(int(records["player"][i]), int(records["opponent"][i]), bool(records["black_to_move"][i]))


def random_problems(empties: tuple[int, int], seed: int = 0):
    """Endless candidate positions of random legal play, each game stopped at a count of
    empty squares drawn from ``empties`` (a game that ends before it gives none)."""
    rng = np.random.default_rng(seed)
    while True:
        target = int(rng.integers(empties[0], empties[1] + 1))
        pos = Position.from_transcript("")
        while not pos.is_over() and 64 - (pos.player | pos.opponent).bit_count() > target:
            legal = pos.legal_moves()
            pos = pos.play(int(rng.choice(legal)) if legal else PASS)
        if not pos.is_over() and 64 - (pos.player | pos.opponent).bit_count() == target:
            yield pos


def make_problems(candidates, count: int, progress=None) -> list[str]:
    """Up to ``count`` scored OBF lines of the candidates where the side to move has two moves or more."""
    lines = []
    for pos in candidates:
        if len(lines) == count:
            break
        if len(pos.legal_moves()) >= 2:
            lines.append(scored_line(pos))
            if progress is not None:
                progress(len(lines))
    return lines


def make_obf(args) -> int:
    """``--make-obf``: the problem set, written whole (or not at all) once every move is scored."""
    out = args.make_obf
    check_output(out, "--make-obf", suffixes=(".obf",))
    asking = [f for f, v in (("positions", args.positions), ("--player", args.player), ("--json", args.json)) if v]
    if asking:  # one command, one job: the set is graded by a second run, on the file written
        raise UserError(f"--make-obf writes a problem set, it asks no player: leave out {' and '.join(asking)}")
    if args.random_games and args.wthor_dir is not None:
        raise UserError("--make-obf: --random-games or --wthor-dir DIR, not both")
    empties = args.empties
    if args.random_games:
        source, candidates = "--random-games", random_problems(empties, args.seed)
    else:
        from othello_learn.data.dataset import DatasetError, WthorDataset, build, parse_years  # pandas: here only

        try:
            years = parse_years(args.years)
        except ValueError as e:
            raise UserError(f"--years: {e}") from None
        if args.wthor_dir is not None:
            check_input(args.wthor_dir, "--wthor-dir", folder=True)
            source = f"--wthor-dir {args.wthor_dir} --years {args.years}"
            try:
                records = build(args.wthor_dir, years, progress=False,
                                warn=lambda m: print(m, file=sys.stderr)).positions
            except ValueError as e:
                raise UserError(f"--wthor-dir {args.wthor_dir}: {e}") from None
        else:
            check_distinct({"--make-obf": out}, {"--data": args.data / "summary.json"})
            source = f"--data {args.data} --years {args.years}"
            try:
                records = WthorDataset(args.data).positions_of(years)
            except (OSError, DatasetError, ValueError) as e:
                raise UserError(f"--data {args.data}: not a usable dataset ({e}); build it with othello-dataset "
                                "--out DIR, or replay raw files with --wthor-dir DIR") from None
        candidates = records_problems(records, empties, args.seed)
    tty = sys.stderr.isatty()
    lines = make_problems(candidates, args.count,
                          progress=(lambda k: print(f"{k}/{args.count}", file=sys.stderr, end="\r")) if tty else None)
    if not lines:
        raise UserError(f"{source}: no position with {format_empties(empties)} empty squares and two moves or more")
    made = f"othello-solve --make-obf {out.name} {source} --empties {format_empties(empties)} --seed {args.seed}"
    head = (f"% {len(lines)} endgame problems, every move scored exactly (the side to move's final disc "
            f"difference under perfect play), made by: {made} --count {args.count}\n")
    atomic_write(out, head + "".join(line + "\n" for line in lines))
    print(f"wrote {out}: {len(lines)} positions with {format_empties(empties)} empty squares ({source})",
          file=sys.stderr)
    return 0


def format_empties(empties: tuple[int, int]) -> str:
    return str(empties[0]) if empties[0] == empties[1] else f"{empties[0]}-{empties[1]}"


def build_parser() -> argparse.ArgumentParser:
    """The command's parser (the command reference in docs/ is generated from it)."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("positions", type=problems_argument, nargs="?",
                        help="OBF file: one position a line ('<64 of X/O/-> X;'), optionally with Edax's scored moves "
                        "('... X; g8:+18; h1:+12;'), which grade the answers; or 'endgames', the shipped set")
    parser.add_argument("--player", help="player spec: alphabeta:3, policy:CKPT, mcts:CKPT:100, ... (required "
                        "with positions)")
    parser.add_argument("--json", type=Path, metavar="OUT.json", help="also write the answers here as a list of records")
    parser.add_argument("--seed", type=seed_arg, default=0,
                        help="seed of the player's random tie-breaks, or of --make-obf's draw of games (default 0)")
    make = parser.add_argument_group("making a scored problem set (instead of asking a player)")
    make.add_argument("--make-obf", type=Path, metavar="OUT.obf", help="write endgame problems, every move scored")
    make.add_argument("--empties", type=empties_range, default=(12, 12), metavar="E[-E2]",
                      help="empty squares of each problem (default 12)")
    make.add_argument("--count", type=at_least(1), default=30, help="problems at most (default 30)")
    make.add_argument("--years", default="2016", help="years of the expert games (default %(default)s)")
    make.add_argument("--data", type=Path, default=HOME / "data" / "wthor",
                      help="dataset folder from othello-dataset (default: data/wthor in " + HOME_HELP + ")")
    make.add_argument("--wthor-dir", type=Path, help="replay the WTH_YYYY.wtb files of this folder instead of --data")
    make.add_argument("--random-games", action="store_true", help="positions of random legal play, not expert games")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.make_obf is not None:
        return make_obf(args)
    if args.positions is None or args.player is None:
        parser.error("give an OBF file and --player SPEC (or --make-obf OUT.obf)")
    if args.json is not None:
        check_output(args.json, "--json", suffixes=(".json",))
    check_distinct({"--json": args.json}, {"positions": args.positions})
    check_input(args.positions, "positions")
    obf = read_obf(args.positions)  # a bad file costs nothing: read before loading any network
    # A kill or a closed terminal unwinds as Ctrl-C does, so an external engine is stopped with
    # the command instead of thinking on, orphaned (the player starts inside the block).
    with stop_signals_raise(STOP_SIGNALS):
        player = None
        try:
            player = session_player(args.player)  # an engine that cannot start is said as such, before the positions
            records = solve(player, [x.position for x in obf], seed=args.seed,
                            labels=[label(x, i) for i, x in enumerate(obf, 1)])
        finally:
            if hasattr(player, "close"):  # an external engine's process ends with the command
                player.close()
    summary = grade(records, [x.scores() for x in obf])
    unwritten = None
    if args.json is not None:  # first: a reader that stops early (| head) ends us at a print
        try:
            write_json(args.json, records)
        except OSError as e:  # a full disk: said after the answers, which are not lost with the file
            unwritten = e
    try:
        for rec in records:
            print(format_record(rec))
        if summary is not None:
            print(format_summary(summary))
    finally:
        if unwritten is not None:
            raise unwritten
    return 0


def cli() -> None:
    """The ``othello-solve`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
