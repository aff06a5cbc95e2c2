"""How every command runs: ``run_main`` turns a ``UserError`` (bad input: a file, a game, a
setting) or an OS error (missing file, no space left) into one line on stderr and exit
status 2, with the traceback only under ``--debug``; Ctrl-C is exit 130, and SIGTERM or
SIGHUP, where a command turns them into ``Terminated`` / ``HangUp``
(``stop_signals_raise``), 143 / 129. ``ArgumentParser`` gives argparse's errors the same
one line; ``bar_pacing`` keeps a progress bar readable in a log file.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from othello_learn.files import UserError, describe_os_error


class _RunMainFlag(argparse.Action):
    """A flag ``run_main`` reads: accepted, and left out of the parsed settings."""

    def __call__(self, parser, namespace, values, option_string=None):
        pass


def _path(text: str) -> Path:
    """A path argument; an empty one is refused: ``Path("")`` is the current folder, so
    ``--out ""`` would have trained into the checkout and ``--json ""`` failed late."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path; give a file or folder name")
    return Path(text)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the toolkit's errors: one line and exit 2 (argparse's own print
    the whole usage block first, which hides the line that says what was wrong)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("type", Path, _path)  # every type=Path argument, in groups too (they share the registry)
        if self.add_help:  # run_main takes it out of argv before parsing; here so that --help lists it
            self.add_argument("--debug", action=_RunMainFlag, nargs=0, default=argparse.SUPPRESS,
                              help="on an error, show the Python traceback (for a bug report)")

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def format_help(self) -> str:
        # The description and epilog are the command's module docstring, whose ``literals`` are
        # reStructuredText for the documentation; a terminal shows them as plain text.
        return super().format_help().replace("``", "")


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a scheduler ending a job) raised where the main process
    is, so it unwinds as Ctrl-C does: nothing half-written, what is done kept.
    A KeyboardInterrupt, so no ``except Exception`` on the way swallows it."""


class HangUp(Terminated):
    """SIGHUP (the terminal closed, an ssh session dropped) raised as ``Terminated`` is,
    where a command takes it: a game in play.py is saved before the process ends."""


class StopOnce:
    """A SIGINT / SIGTERM handler that raises KeyboardInterrupt / ``Terminated`` at the
    first of them and ignores the rest. ``timeout`` signals a process and then its group,
    and a worker process gets its parent's stop after the group's signal: a second
    exception would break into the unwinding the first began (a traceback from an exit
    function, a leaked semaphore, a half-written file's clean-up cut short). It ignores
    them itself, where SIG_IGN would not do: Python raises "Signal N ignored due to race
    condition" for a signal that arrives as the handler is swapped. ``done`` set: all are
    ignored (a process with nothing left to stop). ``raised``: the exception class raised."""

    def __init__(self):
        self.done = False
        self.raised: type[KeyboardInterrupt] | None = None
        self.caught = False  # the block caught the stop itself and reported it (stop_signals_raise)

    def __call__(self, signum, frame):
        if not self.done:
            self.done = True
            self.raised = (Terminated if signum == signal.SIGTERM else
                           HangUp if signum == getattr(signal, "SIGHUP", None) else KeyboardInterrupt)
            raise self.raised

    def check(self) -> None:
        """Raise again a stop that was swallowed on its way out (``stop_signals_raise``): a
        long-lived loop calls it between its units of work, so that it ends there rather
        than when its input does; any later signal is still ignored."""
        if self.raised is not None and not self.caught:
            raise self.raised


def stop_status(e: KeyboardInterrupt) -> tuple[str, int]:
    """What a command says of a stop, and its exit status: the shell's 128 + the signal."""
    return (("hung up", 129) if isinstance(e, HangUp) else ("terminated", 143) if isinstance(e, Terminated)
            else ("interrupted", 130))


def say_stopped(message: str) -> None:
    """Print a stop's message on stderr, which a hang-up may have taken away."""
    try:
        print(message, file=sys.stderr)
    except OSError:  # a hang-up's terminal is gone
        pass


# The stops a command that holds an external engine or unsaved work unwinds on as on Ctrl-C:
# a kill, and a closed terminal or dropped ssh session (SIGHUP, where the platform has it).
STOP_SIGNALS = (signal.SIGTERM,) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())


def taken(sig: int) -> bool:
    """Whether a command may take the stop signal ``sig``: not where it was ignored on purpose
    (``nohup`` ignores SIGHUP, a shell a background job's SIGINT), and SIGINT only where it
    is Python's Ctrl-C."""
    handler = signal.getsignal(sig)
    return handler is not signal.SIG_IGN and (sig != signal.SIGINT or handler is signal.default_int_handler)


@contextmanager
def stop_signals_raise(signals=(signal.SIGTERM,), handlers=None):
    """Inside the block the first of ``signals`` raises (``StopOnce``), so a command
    unwinds as on Ctrl-C: nothing half-written, what is done kept; the previous handlers
    are back after it. A signal ignored when the block begins stays ignored: ``nohup``'s
    SIGHUP, a background job's SIGINT (which is taken only where it is Python's Ctrl-C).
    Python lets only the main thread set handlers (a
    command's ``main`` may be called from another, a notebook's say): there the block
    runs with the handlers as they were.

    A stop whose exception was swallowed on its way out (raised where code catches everything:
    a Cython module's import does, so a SIGTERM that landed in ``np.random``'s first import left
    an engine session serving, to exit 0 at end of input) is raised again when the block ends,
    unless the block caught it itself (``as stop``: it sets ``stop.caught`` and reports it), and
    sooner by a loop that calls ``stop.check()`` between its units of work (an engine session
    before each line it reads).

    ``handlers(stop)``, if given, returns {signal: handler} to take some of ``signals`` in the
    block's stead, handlers that call ``stop`` when they stop (train.py's leave SIGTERM to
    Lightning where it listens)."""
    previous = {}
    stop = StopOnce()
    own = handlers(stop) if handlers else {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, own.get(sig, stop)) for sig in sorted(signals) if taken(sig)}
    try:
        yield stop
        stop.check()
    finally:
        for sig, handler in previous.items():  # None: a handler not set from Python, which cannot be put back
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def standard_input(what: str):
    """``sys.stdin`` for a command that reads ``what`` from it, or a UserError where it is
    closed: started with ``<&-`` (Python has None there) or by a launcher that closed it later
    (its file number gone). Either ended in a traceback at the first read."""
    stream = sys.stdin
    if stream is not None:
        try:
            os.fstat(stream.fileno())
        except OSError as e:  # a stream without a file number (a test's text) is open
            if e.errno == errno.EBADF:
                stream = None
        except (AttributeError, ValueError):
            pass
    if stream is None:
        raise UserError(f"standard input is closed, so {what} cannot be read; run it from a terminal, or give "
                        "it a pipe or a file (< FILE)")
    return stream


def stdout_to_devnull() -> None:
    """Standard output, whose reader has gone, points at /dev/null from here: what is still
    buffered, flushed at exit, does not fail a second time."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, sys.stdout.fileno())
    finally:
        os.close(null)


def _stdout_gone() -> bool:
    """Whether our standard output's reader has closed it (a pipe with no reader polls as an
    error); then it points at /dev/null from here, so the flush at exit does not fail again."""
    try:
        import select

        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        gone = any(ev & select.POLLERR for _, ev in poller.poll(0))
        if gone:
            stdout_to_devnull()
        return gone
    except (ValueError, AttributeError, OSError):  # closed, replaced (tests: no file number), no poll()
        return False


LOG_REDRAW_SECONDS = 60.0


def bar_pacing(stream=None) -> dict:
    """tqdm's keyword arguments for a progress bar on ``stream`` (stderr by default). On a
    terminal a redraw replaces the last; in a log file each one is more text (a training's test
    alone drew 471), so there a bar is redrawn at most once a minute: the file still shows how
    a long run goes."""
    stream = sys.stderr if stream is None else stream
    if getattr(stream, "isatty", lambda: False)():
        return {}
    return {"mininterval": LOG_REDRAW_SECONDS, "maxinterval": LOG_REDRAW_SECONDS}


def _close_progress_bars() -> None:
    """The stop message starts a line of its own. Progress bars a stop left open are closed (a
    bar of ``leave=False`` is cleared with a carriage return, which a terminal honours); in a
    log file the bar's text is still on the line, so where a bar may have been drawn, a newline."""
    std = sys.modules.get("tqdm.std")  # loaded only by a command that draws bars
    if std is None:
        return
    try:
        for bar in list(getattr(std.tqdm, "_instances", ())):
            bar.close()
        if not sys.stderr.isatty():
            sys.stderr.write("\n")
    except Exception:  # a bar that cannot draw any more (its stream gone) is no reason to fail here
        pass


def run_main(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> int:
    """Run a command's ``main``: user errors and OS errors become one line and exit 2,
    Ctrl-C a short message and exit 130 (``Terminated``: 143, ``HangUp``: 129); ``--debug`` in argv shows
    tracebacks."""
    args = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in args
    if debug:
        args.remove("--debug")
    prog = Path(sys.argv[0]).name or "othello"
    try:
        return int(main(args) or 0)
    except UserError as e:
        if debug:
            raise
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        if isinstance(e, BrokenPipeError) and _stdout_gone():
            return 141  # `... | head`: the reader has what it wanted; quiet, as a process SIGPIPE ends
        if debug:
            raise
        print(f"{prog}: error: {describe_os_error(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        if debug:
            raise
        _close_progress_bars()
        what, code = stop_status(e)
        say_stopped(f"{prog}: {what}")
        return code
