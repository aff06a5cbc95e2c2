"""Our players as an NBoard-protocol engine, so GUIs and match tools can drive them.

    othello-engine --player policy:checkpoints/cpu_hc_long.pt
    othello-engine --player alphabeta:3

The protocol (Chris Welty's NBoard, version 2; Edax and NTest speak it) is one
command a line on stdin, answers on stdout, flushed at once. The GUI keeps the
game: ``set game <GGF>`` and ``move <sq>[/eval/time]`` say where we are,
``go`` asks for a move (``=== F5/eval/time``; the engine does not play it
until the GUI sends ``move``), ``hint N`` for the top N moves as
``search <move> <eval> 0 <depth> <text>`` lines, ``ping N`` for ``pong N``
once everything before it is done. ``set depth N`` is not followed (the ``--player``
spec fixes the strength; the protocol makes it optional): a ``status`` line says so
where N is not the player's own search depth. Commands we do not know are ignored, as the
protocol asks; a known one in the wrong form (``hint abc``) is ignored too, and a
bad game or move leaves the position as it was: each says why in one line on
stderr, so stdout only ever carries protocol lines and the session goes on. A ``hint``
or ``analyze`` that fails part way still ends with its empty ``status``. A ``go`` that
cannot produce a move (an external engine that fails, say) ends the session: the
protocol has no error answer and the GUI waits for ``=== move``, so a ``status go
failed: ...`` line tells it why, stderr gets the same in one line, exit status 2. An
external ``--player`` (``nboard:CMD``, ``gtp:CMD``) is started once before the session:
one that cannot start is one line, exit 2.

Evaluations are from the side to move's view, in discs (NBoard's scale). The
protocol's eval in ``=== move/eval`` and in a ``search`` line is the move's, and a
GUI shows them side by side, so both give a move the same figure: minus the value
head's expected result of the position it leads to, times 64, for network players;
the search value for ``alphabeta`` (exact disc difference once the search sees the
end, the heuristic / 100 before); the exact final disc difference where an
``endgame:E:SPEC`` player solves (at most E empty squares), and SPEC's figure
before, where SPEC plays; none otherwise. A network's figure is an expected result (-1 lost
.. +1 won) x 64, not a count of discs, so each ``search`` line's text says which its figure is:
``exact disc difference``, ``heuristic / 100``, or ``eval = 64 x the net's value +0.123
(-1 lost .. +1 won)``.
``analyze`` gives each position's own value.
"""

from __future__ import annotations

import sys
import time

from othello_learn.cli import run_main
from othello_learn.files import UserError, one_line
from othello.formats import FormatError, parse_ggf_game, parse_move, play_with_passes
from othello.game import Game, IllegalMoveError
from othello.notation import PASS, move_name
from othello_learn.frontends.analysis import Analyst
from othello_learn.players.base import Player
from othello_learn.frontends.session import ECHO, GuiGone, engine_main, engine_parser, serve_lines


class NoMove(UserError):
    """``go`` could not produce a move (an external engine that fails, a player that errs). The
    protocol has no error answer and the GUI waits for ``=== move``: the engine says why in a
    ``status`` line and ends the session, so the GUI sees it stop instead of waiting forever."""


class BadCommand(ValueError):
    """A known command in the wrong form; the message is the whole line to report."""


def number(command: str, rest: str, expected: str) -> int:
    """``rest``'s first word as a positive integer, or a BadCommand naming the command and what it
    takes: a GUI's odd command gets a line it can act on, not Python's int() message."""
    try:
        n = int(rest.split()[0])
    except (IndexError, ValueError):
        n = 0
    if n < 1:  # no move to hint, no depth to search
        raise BadCommand(f"{command} {rest}".strip() + f": expected {expected}; ignored")
    return n


class Engine:
    """The protocol's state machine: the game so far (``othello.Game``), and one handler per command."""

    def __init__(self, player: Player, name: str, out=None, err=None, seed: int = 0):
        self.analyst = Analyst(player, seed)
        self.name = "-".join(name.split()) or "othello-learn"  # NBoard reads the name as one word
        self.out = sys.stdout if out is None else out
        self.err = err or sys.stderr
        self.game = Game()
        self.busy = False

    def send(self, line: str, lasting: bool = False) -> None:
        """``lasting``: a status line left for the GUI to show until the next one (a note), not
        the busy status of a hint or go that an empty one must end."""
        if line.startswith("status") and not lasting:
            self.busy = line != "status"  # a "status Analyzing" the GUI sees until an empty one
        try:
            self.out.write(line + "\n")
            self.out.flush()
        except BrokenPipeError:  # the GUI closed our output: nobody is listening any more
            raise GuiGone from None

    def warn(self, msg: str) -> None:
        """A line on stderr, for a person or a log. A GUI that closed our stderr (or stopped
        reading it) costs the line, not the session, as for the GTP engine's notes: the
        BrokenPipeError used to end the session at its first ignored command or bad move."""
        if len(msg) > 2 * ECHO:  # a GUI's line quoted whole (a 100 kB game) is noise in its log
            msg = msg[:2 * ECHO] + "..."
        try:
            self.err.write(f"nboard: {msg}\n")
            self.err.flush()
        except (OSError, ValueError):
            pass

    def handle(self, line: str) -> bool:
        """One command; False when the session should end."""
        words = line.split()
        if not words:
            return True
        cmd, rest = words[0].lower(), line.strip()[len(words[0]):].strip()
        try:
            if cmd == "quit":
                return False
            handler = getattr(self, f"cmd_{cmd}", None)
            if handler is not None:
                handler(rest)
            elif len(cmd) == 2 and cmd.isascii() and cmd.isalnum() and cmd != "go":  # NBoard 1.1's bare "F5"
                self.cmd_move(cmd)
            else:
                self.warn(f"ignored unknown command: {line.strip()!r}")
        except (GuiGone, NoMove):
            raise
        except BadCommand as e:
            self.warn(str(e))
        except (FormatError, IllegalMoveError, ValueError) as e:
            # The first line, as go's status line quotes it: a player's illegal move brings the board
            # after it, which in a GUI's log is lines that look like the engine's own output.
            said = one_line(e)  # a set game's error names "set game" itself
            unchanged = "" if self.busy else " (position unchanged)"  # a hint changes nothing anyway
            self.warn(f"{'' if said.startswith(cmd) else cmd + ': '}{said}{unchanged}")
        except Exception as e:  # a GUI session must survive anything one command does
            self.warn(f"{cmd}: {type(e).__name__}: {one_line(e)}")
        if self.busy:  # a hint or analyze that failed part way: the GUI still sees it end
            self.send("status")
        return True

    # -- commands
    def cmd_nboard(self, rest):
        if rest.strip() not in ("1", "2"):
            self.warn(f"protocol version {rest!r}: speaking version 2")
        self.send(f"set myname {self.name}")

    def cmd_set(self, rest):
        what, _, value = rest.partition(" ")
        what = what.lower()
        if what == "game":
            record = parse_ggf_game(value, "set game")  # passes inferred, every move checked
            self.game = Game(record.start, record.moves)
        elif what == "depth":
            self.set_depth(number("set depth", value, "a search depth, as in 'set depth 6'"))
        # set contempt / set time / anything else: nothing for us to change

    def set_depth(self, depth: int) -> None:
        """The protocol makes following ``set depth`` optional, and here the ``--player`` spec
        fixes the strength: NBoard sends its level (and the arena's ``nboard:`` player its
        ``depth=``, 10 by default) whatever the engine, and an ``alphabeta:3`` that obeyed
        would search depth 10 in Python, minutes a move. So the depth is not followed, and
        where it differs from what the player does a status line says so in the GUI (which
        shows it until the next). The answer is ``set myname``, as NTest's and Edax's is."""
        self.send(f"set myname {self.name}")
        ab = self.analyst.ab
        if ab is not None and ab.depth == depth:
            return
        does = f"searches depth {ab.depth}" if ab is not None else "has no search depth"
        self.send(f"status set depth {depth} not followed: {self.analyst.player.name} {does}, as its "
                  "--player spec says", lasting=True)

    def cmd_move(self, rest):
        text = rest.split()[0] if rest.split() else ""
        sq = parse_move(text.split("/")[0])
        # The game replayed with the move, as ``set game`` reads one: a move by the side not to
        # move, where the side to move has none, passes for it first (GUIs send only the move).
        # An error names the game's ply.
        moves, _ = play_with_passes(self.game.start, self.game.moves + [sq], "game")
        self.game.extend(moves[len(self.game.moves):])

    def cmd_ping(self, rest):
        self.send(f"pong {rest}".rstrip())

    def cmd_learn(self, rest):
        self.send("learned")

    def cmd_hint(self, rest):
        n = number("hint", rest, "a number of moves, as in 'hint 3'") if rest.split() else 1
        self.send("status Analyzing")
        pos = self.game.position
        for sq, ev, text in self.analyst.hints(pos, self.game.moves, n, self.game.start):
            self.send(f"search {move_name(sq).upper()} {ev:.2f} 0 {self.analyst.depth(pos)} {text}")
        self.send("status")

    def cmd_go(self, rest):
        self.send("status Thinking")
        t0 = time.perf_counter()
        pos = self.game.position
        if pos.is_over():
            self.warn("go: the game is over; answering PA")
            self.send("=== PA")
        else:
            forced = pos.must_pass()
            try:
                if forced:
                    sq, ev = PASS, self.analyst.pass_eval(pos, self.game.moves)
                else:
                    sq = self.analyst.choose(pos, self.game.moves, self.game.start)
                    ev = self.analyst.move_eval(pos, self.game.moves, sq)  # the figure hint gives the move
            except (GuiGone, KeyboardInterrupt):
                raise
            except Exception as e:
                why = one_line(e) if isinstance(e, UserError) else f"{type(e).__name__}: {one_line(e)}"
                if not forced:
                    self.send(f"status go failed: {why}")
                    raise NoMove(f"go: {why}; no move to answer, so the session ends") from None
                self.warn(f"go: no evaluation of the forced pass ({why}); answering PA")  # the only move
                sq, ev = PASS, None
            dt = time.perf_counter() - t0
            self.send(f"=== {move_name(sq).upper()}" + (f"/{ev:.2f}/{dt:.3f}" if ev is not None else f"//{dt:.3f}"))
        self.send("status")

    def cmd_analyze(self, rest):
        """``analysis <ply> <eval>`` for each position of the game with an
        evaluation, from the end back (NBoard's order), then an empty status."""
        self.send("status Analyzing")
        positions = self.game.positions
        for i in range(len(positions) - 1, -1, -1):
            pos = positions[i]
            if pos.is_over() or pos.must_pass():
                continue
            ev = self.analyst.root_eval(pos, self.game.moves[:i])
            if ev is not None:
                self.send(f"analysis {i} {ev:.2f}")
        self.send("status")


def serve(player: Player, name: str, inp=None, out=None, err=None, seed: int = 0, stop=None) -> int:
    return serve_lines(Engine(player, name, out, err, seed), inp, out, stop)


NAME_HELP = 'name reported to the GUI'  # --name's help


def build_parser():
    """The command's parser (the command reference in docs/ is generated from it)."""
    return engine_parser(__doc__, NAME_HELP)


def main(argv=None) -> int:
    return engine_main(argv, __doc__, serve, NAME_HELP)


def cli() -> None:
    """The ``othello-engine`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
