"""Arena players that are other programs: ``nboard:CMD`` and ``gtp:CMD``.

    python selfplay/arena.py --a "nboard:python selfplay/nboard.py --player alphabeta:2" --b random
    python selfplay/arena.py --a "gtp:gtp-rhino -l 1 -b 0" --b alphabeta:2
    python selfplay/arena.py --a "nboard:depth=8:timeout=60:edax -q" --b alphabeta:3

Everything after the kind's colon is the command (split like a shell line,
``shlex``), colons included, except leading ``key=value:`` options:
``timeout=S`` (seconds the engine has to answer each command in full, default
30; ``inf``: no limit) and, for NBoard, ``depth=N`` (sent as ``set depth N``,
default 10). The limit is on the whole answer, not on each line, so an engine
that keeps writing status lines without ever moving is a hang too.

One engine process per player, started on first use and kept for the match.
The arena hands a player every game waiting on it at once; an engine thinks
about one position at a time, so the games are sent one after another, each
with its whole game (the arena passes the moves to players that ask with
``uses_moves``). The first time in a match that the engine hangs or dies,
the process is restarted (with a line on stderr) and the request sent again;
a second failure in the match, a refused command or a move that is not legal
is an ``EngineError`` naming the command and the game.
"""

from __future__ import annotations

import collections
import math
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time

import numpy as np

from othello_learn.files import UserError
from othello.formats import FormatError, GameRecord, board_to_text, format_ggf, parse_move, play_with_passes
from othello.game import Position
from othello.notation import PASS, format_transcript, square_name

from othello_learn.players.base import Player
from othello_learn.settings import Setting


class EngineError(UserError):
    """An external engine that hangs, dies, or plays an illegal move."""


class EngineTimeout(Exception):
    pass


class EngineDied(Exception):
    pass


class EngineRefused(Exception):
    """A GTP ``? error`` answer: the engine is alive and says no."""


class EngineProcess:
    """A long-lived child process spoken to line by line, with a deadline on every answer.

    Reading happens on a thread that puts lines into a queue, so a silent
    engine costs a timeout, never a hung arena; stderr is drained the same way
    and its last lines go into error messages. Each ``send`` starts the clock
    for its answer: ``timeout`` seconds for all the lines ``read_line`` takes
    until the next ``send``."""

    startup_timeout = 30.0
    reader_wait = 1.0  # seconds close() gives the reader threads to reach end of file

    def __init__(self, command: str, timeout: float):
        self.command = command
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("empty engine command")
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()
        self.stderr_tail: collections.deque = collections.deque(maxlen=10)
        self.readers: list[threading.Thread] = []
        self.deadline, self.allowed = math.inf, math.inf

    def start(self) -> None:
        try:
            # its own process group, so that killing it kills what it started too (_kill)
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, bufsize=1, start_new_session=True)
        except OSError as e:
            raise EngineError(f"cannot start engine {self.command!r}: {e}") from None
        self.lines = queue.Queue()
        self.fresh = True  # the first answer may wait on the engine loading (books, networks)
        self.readers = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True),
                        threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True)]
        for t in self.readers:
            t.start()

    @staticmethod
    def _pump(stream, q):
        """Each line with the time it arrived: ``read_line`` judges the deadline by that, since
        an engine writing lines faster than they are read kept the queue from ever running dry,
        and a limit checked only on an empty queue never came (0.5 s ran for minutes, the
        queue growing by the gigabyte)."""
        try:
            for line in stream:
                q.put((time.monotonic(), line.rstrip("\r\n")))
        except (ValueError, OSError):
            pass  # closed under us
        q.put(None)  # end of output: the engine exited

    def _drain(self, stream):
        try:
            for line in stream:
                self.stderr_tail.append(line.rstrip())
        except (ValueError, OSError):
            pass

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, line: str) -> None:
        if not self.running:
            raise EngineDied("the engine is not running")
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise EngineDied("the engine closed its input") from None
        self.allowed = max(self.timeout, self.startup_timeout) if self.fresh else self.timeout
        self.deadline = time.monotonic() + self.allowed

    def read_line(self) -> str:
        left = self.deadline - time.monotonic()
        try:
            if left == math.inf:
                item = self.lines.get()
            elif left <= 0:
                item = self.lines.get_nowait()
            else:
                item = self.lines.get(timeout=left)
        except queue.Empty:
            item = False
        if item is False or (item is not None and item[0] > self.deadline):  # a line that came too late
            raise EngineTimeout(f"no full answer within {self.allowed:g} s")
        if self.fresh and item is not None:  # it has loaded: the rest of the answer gets the usual time
            self.fresh = False
            self.allowed = self.timeout
            self.deadline = min(self.deadline, item[0] + self.timeout)
        if item is None:
            self.lines.put(None)
            try:
                status = self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                status = None
            raise EngineDied("the engine closed its output" if status is None else f"the engine exited (status {status})")
        return item[1]

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        """The engine's whole process group: a wrapper (``sh -c``, a launcher script) killed
        alone left the engine under it running and holding the pipes, and ``close`` waited on
        it for as long as it hung. Only while ``proc`` is unreaped, so its group id is ours."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()

    def close(self, polite: bool = True) -> None:
        """Stop the engine: ``quit`` and a moment to exit, or at once (a hung engine)."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            if polite and proc.poll() is None:
                try:
                    proc.stdin.write("quit\n")
                    proc.stdin.flush()
                except OSError:
                    pass
                try:
                    proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            # a hung engine, one that did not quit, or a second Ctrl-C during the polite wait
            if proc.poll() is None:
                self._kill(proc)
                try:
                    proc.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    pass
            # The readers reach end of file once the engine has exited; closing the
            # pipes under them instead raised "I/O operation on closed file" in them.
            # A reader still blocked (a process that left the group holds the pipe)
            # holds its stream's lock, and closing that stream would wait on it: leave it.
            deadline = time.monotonic() + self.reader_wait
            for t in self.readers:
                t.join(max(0.0, deadline - time.monotonic()))
            readers = dict(zip((proc.stdout, proc.stderr), self.readers))
            for s in (proc.stdin, proc.stdout, proc.stderr):
                if s in readers and readers[s].is_alive():
                    continue
                try:
                    s.close()
                except OSError:
                    pass


class ExternalPlayer(Player):
    """Shared driving: one process, restart-once, legality checks, clear errors."""

    uses_moves = True
    protocol = "external"

    def __init__(self, command: str, timeout: float = 30.0):
        self.engine = EngineProcess(command, timeout)
        self.command = command
        self.name = f"{self.protocol}:{command}"
        self.restarts = 0

    # -- subclass hooks
    def handshake(self) -> None:
        """Commands sent once after the process starts."""

    def ask(self, start: Position, moves: list[int], pos: Position) -> str:
        """The engine's move text for ``pos`` (reached from ``start`` by ``moves``)."""
        raise NotImplementedError

    def sync(self) -> None:
        """Wait until the engine has answered everything sent so far."""

    # --
    def check(self, keep_running: bool = False) -> None:
        """Start the engine and wait for one answer: a loop finds a broken ``--eval-vs``
        engine before it plays a generation rather than after. The engine is stopped
        again unless ``keep_running`` (the arena's match follows at once, and an engine
        that loads a book should not load it twice)."""
        ok = False
        try:
            self._ensure_started()
            self.sync()
            ok = True
        except (EngineTimeout, EngineDied) as e:
            raise self._error(f"does not answer ({e})") from None
        except EngineRefused as e:
            raise self._error(str(e)) from None
        finally:
            if not (ok and keep_running):
                self.engine.close(polite=False)

    def _ensure_started(self) -> None:
        proc = self.engine.proc
        if proc is not None and proc.poll() is not None:
            # Dead since its last answer: a failure like a death during one (a restart once a match,
            # said), where starting it again in silence restarted an engine that exits after every
            # move at every move, without a note and without end.
            raise EngineDied(f"the engine exited (status {proc.returncode}) after its last answer")
        if not self.engine.running:
            self.engine.start()
            self.handshake()

    def _where(self, start: Position, moves: list[int]) -> str:
        prefix = "" if start == Position() else "from a set-up position, "
        return f"{prefix}after {format_transcript(moves, passes=True) or '(no moves)'}"

    def _error(self, what: str) -> EngineError:
        """An EngineError naming the command, with the last lines the engine wrote to stderr."""
        tail = "; ".join(self.engine.stderr_tail)
        return EngineError(f"engine {self.command!r} ({self.protocol}) {what}"
                           + (f" [engine stderr: {tail}]" if tail else ""))

    def _fail(self, what: str, start, moves) -> EngineError:
        return self._error(f"{what}, {self._where(start, moves)}")

    def move_for(self, start: Position, moves: list[int], pos: Position) -> int:
        while True:
            try:
                self._ensure_started()
                text = self.ask(start, moves, pos)
                break
            except EngineRefused as e:
                raise self._fail(str(e), start, moves) from None
            except (EngineTimeout, EngineDied) as e:
                if self.restarts:  # once a match: an engine that fails again is broken, not unlucky
                    err = self._fail(f"failed again after a restart ({e})", start, moves)
                    self.engine.close(polite=False)
                    raise err from None
                # The restart happens in the next attempt's try: an engine that dies
                # again during its handshake is the second failure, not a traceback.
                self.engine.close(polite=False)
                self.restarts += 1
                print(f"note: {self._fail(f'failed ({e})', start, moves)}; restarting it "
                      "(once; a second failure ends the match, game or session)", file=sys.stderr)
        if text.strip().lower() == "resign":  # GTP allows it; every game here is played out to its end
            raise self._fail("resigned: games here are played to the end, for their disc difference; "
                             "turn the engine's resignation off", start, moves)
        try:
            sq = parse_move(text)
        except FormatError:
            raise self._fail(f"answered {text!r}, which is not a move", start, moves) from None
        if sq == PASS or sq not in pos.legal_moves():
            legal = ", ".join(square_name(s) for s in pos.legal_moves())
            raise self._fail(f"played {text!r}, which is illegal (legal: {legal})", start, moves)
        return sq

    def select(self, states, rng, moves=None):
        out = np.empty(len(states), dtype=np.int64)
        for i in range(len(states)):
            pos = states.position(i)
            start, game = pos, []
            if moves is not None:
                # Passes made explicit (the arena's moves carry them, a GUI's may not); -1: padding.
                game, reached = play_with_passes(Position(), [int(m) for m in moves[i] if m >= 0])
                start = Position()
                if reached != pos:  # not a game from the start: set the position up
                    start, game = pos, []
            out[i] = self.move_for(start, game, pos)
        return out

    def reset(self) -> None:
        self.restarts = 0  # a new match (or game, in play.py) may restart the engine once again

    def close(self) -> None:
        self.engine.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class NBoardPlayer(ExternalPlayer):
    """Any NBoard engine: ``set game <GGF>`` with the game so far, a ``ping``/``pong``
    to be sure the engine has caught up, then ``go`` and its ``=== move``."""

    protocol = "nboard"

    def __init__(self, command: str, timeout: float = 30.0, depth: int = 10):
        super().__init__(command, timeout)
        self.depth = depth
        self.ping = 0

    def handshake(self):
        self.engine.send("nboard 2")
        self.engine.send(f"set depth {self.depth}")

    def sync(self):
        self.ping += 1
        self.engine.send(f"ping {self.ping}")
        while self.engine.read_line().split()[:2] != ["pong", str(self.ping)]:
            pass  # name, status and earlier lines

    def ask(self, start, moves, pos):
        self.engine.send("set game " + format_ggf(GameRecord(moves=list(moves), start=start)))
        self.sync()
        self.engine.send("go")
        while True:
            line = self.engine.read_line()
            if line.startswith("==="):
                # "=== F5/eval/time" (the protocol) or "=== f5 eval time" (Edax)
                rest = line[3:].split()
                return rest[0].split("/")[0] if rest else ""


class GTPPlayer(ExternalPlayer):
    """A GTP engine as GRhino's ``gtp-rhino`` speaks it: ``boardsize 8``,
    ``clear_board``, the game replayed with ``play <colour> <move>``, then
    ``genmove <colour>`` (passes are implied by the colours, as gtp-rhino
    wants). A position that did not come from the start is set up with
    GRhino's ``grhino-setup_board <64 cells> <colour to move>`` (GTP itself has
    no set-up command for Othello): an engine that refuses it fails on that
    position, named."""

    protocol = "gtp"

    def handshake(self):
        self.command_ok("boardsize 8")

    def command_ok(self, cmd: str) -> str:
        """Send one GTP command; its answer text (``= text``), or EngineRefused on ``? error``."""
        self.engine.send(cmd)
        while True:
            line = self.engine.read_line().strip()
            if line.startswith(("=", "?")):
                break
        answer = [line[1:].strip()]
        while True:  # a GTP answer ends with an empty line
            try:
                more = self.engine.read_line()
            except EngineTimeout as e:
                raise EngineTimeout(f"answered {line!r} to {cmd!r} but never ended the answer with an "
                                    f"empty line, as GTP requires ({e})") from None
            if not more.strip():
                break
            answer.append(more.strip())
        text = " ".join(a for a in answer if a)
        if line.startswith("?"):
            raise EngineRefused(f"refused {cmd!r}: {text}")
        return text.split(maxsplit=1)[-1] if text and text.split()[0].isdigit() else text

    def ask(self, start, moves, pos):
        if start == Position():
            self.command_ok("clear_board")
        else:
            try:
                to_move = "black" if start.black_to_move else "white"
                self.command_ok(f"grhino-setup_board {board_to_text(start)} {to_move}")
            except EngineRefused as e:
                raise EngineRefused(f"cannot be given a position that is not reached from the start: {e} "
                                    "(GRhino's set-up command; GTP has none of its own)") from None
        colour = start.black_to_move
        for m in moves:
            # Passes are not sent: gtp-rhino refuses "play <colour> pass"; the
            # colour of the next move says who passed.
            if m != PASS:
                self.command_ok(f"play {'black' if colour else 'white'} {square_name(m)}")
            colour = not colour
        return self.command_ok(f"genmove {'black' if pos.black_to_move else 'white'}")


# nan too is refused: a read would never wait, or wait forever
_OPTIONS = {"timeout": (Setting(float, low=0, low_open=True, infinite=True), "a number of seconds or inf"),
            "depth": (Setting(int, low=0, low_open=True), "a whole number")}


def _external(cls, allowed):
    def factory(args: list[str]) -> Player:
        opts = {}
        while args and "=" in args[0] and args[0].split("=", 1)[0] in allowed:
            key, value = args.pop(0).split("=", 1)
            setting, expected = _OPTIONS[key]
            try:
                opts[key] = setting.kind(value)
            except ValueError:
                raise ValueError(f"{key}={value!r}: expected {expected}") from None
            setting.check(opts[key], key)  # a ValueError
        command = ":".join(args).strip()
        if not command:
            raise ValueError(f"expected {cls.protocol}:[option=value:]COMMAND")
        return cls(command, **opts)

    return factory


# The registry's "nboard" and "gtp" kinds.
nboard_from_args = _external(NBoardPlayer, ("timeout", "depth"))
gtp_from_args = _external(GTPPlayer, ("timeout",))
