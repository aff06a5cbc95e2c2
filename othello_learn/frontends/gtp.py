"""Our players as a GTP engine, for the match tools and GUIs that speak GTP (GRhino's
``gtp-rhino`` does; Quarry and twogtp-style referees drive such engines).

    othello-gtp --player policy:checkpoints/best_selfplay.pt
    othello-gtp --player alphabeta:3

The Go Text Protocol, version 2, as Othello engines speak it: one command a line
(an optional numeric id first), each answered ``=[id] text`` or ``?[id] error``
and an empty line. The engine keeps the game: ``clear_board`` (or GRhino's
``grhino-setup_board <64 cells> [colour]`` for a set-up position), ``play <colour>
<move>`` (a1..h8, case as you like, or ``pass``), ``genmove <colour>`` (the move is
played and answered, ``pass`` when forced), ``reg_genmove`` (answered, not
played), ``undo``, ``showboard``, ``final_score`` (``B+12``, ``W+4``, ``0``, empties
to the winner; ``cannot score`` before the end, as gtp-rhino), ``boardsize 8``
(another size is refused), ``komi``, ``time_settings``, ``time_left`` (accepted,
unused), ``list_games`` and ``set_game`` (Quarry's way of telling an Othello engine
from a Go one), ``name``, ``version``, ``protocol_version``, ``known_command``,
``list_commands``, ``quit``.

Passes are implied by the colours, as GRhino and most GTP referees send them: a
move for the side not to move, when the side to move has none, passes for it first.
When the side to move has a move, the other colour cannot move (Othello has no
voluntary pass): ``play`` for it is an ``illegal move``, ``genmove`` or ``reg_genmove``
for it answers ``? wrong color: it is black's turn`` (as Edax's GTP mode refuses it).
A bad command, colour or move is a ``?`` answer with GTP's standard message
(``unknown command``, ``syntax error``, ``illegal move``, ...; a controller may
compare it) and a line on stderr saying why (an illegal move names the legal ones),
and leaves the game as it was; a player that fails (an external engine, say)
answers ``? genmove failed: ...`` and the session goes on. An
external ``--player`` (``nboard:CMD``, ``gtp:CMD``) is started once before the
session: one that cannot start is one line, exit 2.
"""

from __future__ import annotations

import sys
from importlib import metadata

from othello_learn.cli import run_main
from othello_learn.files import UserError, one_line
from othello.formats import FormatError, board_from_text
from othello.game import Game, IllegalMoveError, Position
from othello.notation import PASS, parse_square, square_name
from othello_learn.frontends.analysis import Analyst
from othello_learn.players.base import Player
from othello_learn.frontends.session import ECHO, GuiGone, engine_main, engine_parser, serve_lines

COMMANDS = ("protocol_version", "name", "version", "known_command", "list_commands", "quit", "boardsize",
            "clear_board", "komi", "play", "genmove", "reg_genmove", "undo", "showboard", "final_score",
            "time_settings", "time_left", "list_games", "set_game", "grhino-setup_board")
# Quarry asks list_games (and set_game) to tell an Othello engine from a Go one, as gtp-rhino answers.
GAME = "Othello"
COLOURS = {"b": True, "black": True, "w": False, "white": False}


class Refused(ValueError):
    """A command that cannot be done: ``"<GTP's standard message>: <why>"``. ``answer``: the
    answer's text where no standard message fits, so the answer itself says why (by default
    the standard message alone, which a controller may compare, or the whole text)."""

    def __init__(self, message: str, answer: str | None = None):
        super().__init__(message)
        self.answer = answer


# GTP's standard error messages: a controller may compare the answer with them, so the answer
# is the message alone and the why goes to stderr.
STANDARD_ERRORS = ("unknown command", "unacceptable size", "syntax error", "illegal move", "cannot undo",
                   "cannot score", "unsupported game")


def colour_of(text: str) -> bool:
    try:
        return COLOURS[text.lower()]
    except KeyError:
        raise Refused(f"syntax error: {text!r} is not a colour (black, white, b or w)") from None


def vertex(sq: int) -> str:
    return "pass" if sq == PASS else square_name(sq).upper()


class GTPEngine:
    """The protocol's state machine: the game (``othello.Game``: the standard start or a set-up
    board, the moves from it, passes explicit), and one handler per command."""

    def __init__(self, player: Player, name: str, out=None, err=None, seed: int = 0):
        self.analyst = Analyst(player, seed)
        self.name = name
        self.out = sys.stdout if out is None else out
        self.err = err or sys.stderr
        self.game = Game()
        # What each accepted play or genmove added to the game's moves: 1, 2 with the pass inferred before
        # it, 0 for a pass at the end of the game. ``undo`` takes back one of these, as the controller counts.
        self.turns: list[int] = []

    def handle(self, line: str) -> bool:
        """Answer one line; False after ``quit``."""
        # GTP's preprocessing: control characters but tab and newline removed, then the comment.
        line = "".join(c for c in line if c >= " " or c in "\t\n").replace("\x7f", "")
        words = line.split("#", 1)[0].split()
        if not words:
            return True
        ident = words.pop(0) if words[0].isascii() and words[0].isdigit() else ""
        command, args = (words[0].lower(), words[1:]) if words else ("", [])
        try:
            if not command:
                raise Refused("syntax error: an id and no command")
            if command not in COMMANDS:
                raise Refused(f"unknown command: {command}")
            text = getattr(self, f"cmd_{command.replace('-', '_')}")(args)
        except Refused as e:
            standard = str(e).split(":", 1)[0]
            self.answer(False, ident, e.answer or (standard if standard in STANDARD_ERRORS else str(e)))
            said = " ".join(words)
            self.note(f"{said[:ECHO]}{'...' if len(said) > ECHO else ''}: {str(e)[:2 * ECHO]}")
            return True
        self.answer(True, ident, text)
        return command != "quit"

    def answer(self, ok: bool, ident: str, text: str) -> None:
        try:
            self.out.write(f"{'=' if ok else '?'}{ident} {text}".rstrip() + "\n\n")
            self.out.flush()
        except BrokenPipeError:  # the referee closed our output: nobody is listening any more
            raise GuiGone from None

    def note(self, text: str) -> None:
        """A line on stderr, for a person or a log: a controller that closed it, or one that
        does not read it, costs the note, not the session."""
        try:
            self.err.write(f"gtp: {text}\n")
            self.err.flush()
        except (OSError, ValueError):
            pass

    # ----------------------------------------------------------------------
    # Commands: each returns the answer's text or raises Refused.

    def cmd_protocol_version(self, args):
        return "2"

    def cmd_name(self, args):
        return self.name

    def cmd_version(self, args):
        try:
            return metadata.version("othello-learn")
        except metadata.PackageNotFoundError:  # a checkout that was never installed
            return "unknown"

    def cmd_known_command(self, args):
        return "true" if args and args[0].lower() in COMMANDS else "false"

    def cmd_list_commands(self, args):
        return "\n".join(COMMANDS)

    def cmd_quit(self, args):
        return ""

    def cmd_boardsize(self, args):
        if not args or not args[0].isascii() or not args[0].isdigit():
            raise Refused(f"syntax error: boardsize takes a number, not {' '.join(args) or 'nothing'}")
        if args[0] != "8":
            raise Refused(f"unacceptable size: Othello here is 8x8, not {' '.join(args) or 'nothing'}")
        return self.cmd_clear_board(args)  # GTP leaves the board arbitrary after boardsize; ours is the start

    def cmd_clear_board(self, args, start: Position | None = None):
        self.game, self.turns = Game(start), []
        return ""

    def cmd_grhino_setup_board(self, args):
        """GRhino's set-up, which GTP lacks: ``grhino-setup_board <64 cells a1..h8> [colour]``
        (cells ``X``/``*``/``x`` black, ``O``/``o``/``0`` white, ``-``/``.`` empty; black to move
        unless the colour says otherwise)."""
        if not 1 <= len(args) <= 2:
            raise Refused("syntax error: grhino-setup_board takes 64 cells and an optional colour")
        black = colour_of(args[1]) if len(args) == 2 else True
        try:
            start = board_from_text(args[0].replace("0", "o"), black, "grhino-setup_board")
        except FormatError as e:
            raise Refused(f"syntax error: {e}") from None
        return self.cmd_clear_board([], start)

    def cmd_komi(self, args):
        try:
            float(args[0])
        except (IndexError, ValueError):
            raise Refused(f"syntax error: komi takes a number, not {' '.join(args) or 'nothing'}") from None
        return ""

    def _to_move(self, args, command: str) -> bool:
        """The colour of ``args[0]``, made the side to move by a forced pass where one is due.

        The other colour, while the side to move has a move, is refused: Othello has no
        voluntary pass, so unlike Go's GTP (where either colour may move at any time) that
        colour cannot move now without an illegal pass in the game. ``play`` answers GTP's
        ``illegal move``, which a referee compares; ``genmove``, which GTP says never fails
        and so has no standard message, answers ``wrong color`` with the side to move, as
        Edax's GTP mode answers it: a controller sees why without our stderr."""
        if not args:
            raise Refused(f"syntax error: {command} takes a colour")
        black = colour_of(args[0])
        pos = self.game.position
        if black != pos.black_to_move and pos.must_pass():
            self.game.play(PASS)  # passes are implied by the colours
        elif black != pos.black_to_move and not pos.is_over():
            turn = f"it is {'black' if pos.black_to_move else 'white'}'s turn"
            legal = f"(legal: {', '.join(pos.legal_moves(names=True))})"
            if command == "play":
                raise Refused(f"illegal move: {turn} {legal}")
            raise Refused(f"wrong color: {turn} {legal}", answer=f"wrong color: {turn}")
        return black

    def cmd_play(self, args):
        if len(args) != 2:
            raise Refused("syntax error: play takes a colour and a move, as in 'play black d3'")
        try:
            sq = PASS if args[1].lower() == "pass" else parse_square(args[1])
        except ValueError:
            raise Refused(f"syntax error: {args[1]!r} is not a move (a1..h8 or pass)") from None
        before = len(self.game.moves)
        self._to_move(args, "play")
        if sq == PASS and self.game.position.is_over():  # as genmove answers there: a referee relays it
            self.turns.append(0)
            return ""
        try:
            self.game.play(sq)
        except IllegalMoveError as e:
            self.game.truncate(before)  # the inferred pass too: as it was
            raise Refused(f"illegal move: {e}") from None
        self.turns.append(len(self.game.moves) - before)
        return ""

    def cmd_genmove(self, args, play: bool = True):
        before = len(self.game.moves)
        self._to_move(args, "genmove")
        pos = self.game.position
        if pos.is_over() or pos.must_pass():
            sq = PASS
        else:
            try:
                sq = self.analyst.choose(pos, list(self.game.moves), self.game.start)
            except (GuiGone, KeyboardInterrupt):
                raise
            except Exception as e:
                self.game.truncate(before)
                why = one_line(e) if isinstance(e, UserError) else f"{type(e).__name__}: {one_line(e)}"
                raise Refused(f"genmove failed: {why}") from None
        if not play:
            self.game.truncate(before)
            return vertex(sq)
        if not pos.is_over():
            self.game.play(sq)
        self.turns.append(len(self.game.moves) - before)
        return vertex(sq)

    def cmd_reg_genmove(self, args):
        return self.cmd_genmove(args, play=False)

    def cmd_undo(self, args):
        if not self.turns:
            raise Refused("cannot undo: no move has been played")
        n = self.turns.pop()  # the move, with the pass inferred before it
        self.game.truncate(len(self.game.moves) - n)
        return ""

    def cmd_showboard(self, args):
        return "\n" + str(self.game.position)

    def cmd_final_score(self, args):
        if not self.game.position.is_over():  # as gtp-rhino: a count before the end is no final score
            raise Refused("cannot score: the game is not over")
        d = self.game.position.score()
        return "0" if d == 0 else f"{'B' if d > 0 else 'W'}+{abs(d)}"

    def cmd_time_settings(self, args):
        if len(args) != 3 or not all(a.isascii() and a.isdigit() for a in args):
            raise Refused("syntax error: time_settings takes main time, byo-yomi time and stones, as in "
                          "'time_settings 300 0 0'")
        return ""  # accepted, as gtp-rhino does: the player's spec fixes its effort

    def cmd_time_left(self, args):
        if len(args) != 3 or not all(a.isascii() and a.isdigit() for a in args[1:]):
            raise Refused("syntax error: time_left takes a colour, seconds and stones, as in 'time_left b 120 0'")
        colour_of(args[0])
        return ""

    def cmd_list_games(self, args):
        return GAME

    def cmd_set_game(self, args):
        if not args:
            raise Refused(f"syntax error: set_game takes a game's name ({GAME})")
        if " ".join(args).lower() != GAME.lower():
            raise Refused(f"unsupported game: {' '.join(args) or 'nothing'} (this engine plays {GAME})")
        return ""


def serve(player: Player, name: str, inp=None, out=None, err=None, seed: int = 0, stop=None) -> int:
    # a name of one line: an empty line in the answer to ``name`` would end it early
    return serve_lines(GTPEngine(player, " ".join(name.split()) or "othello-learn", out, err, seed), inp, out, stop)


NAME_HELP = "the answer to 'name'"  # --name's help


def build_parser():
    """The command's parser (the command reference in docs/ is generated from it)."""
    return engine_parser(__doc__, NAME_HELP)


def main(argv=None) -> int:
    return engine_main(argv, __doc__, serve, NAME_HELP)


def cli() -> None:
    """The ``othello-gtp`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
