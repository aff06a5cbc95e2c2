"""Writing files so that nothing is ever half-written, and failing in one line.

Every command of the toolkit writes through ``atomic_write`` (a temporary file
in the target's folder, then a rename: a reader, a kill or a full disk never
leaves a truncated file under the real name) and runs under ``run_main``, which
turns a ``UserError`` (bad input: a file, a game, a setting) or an OS error
(missing file, no space left) into one line on stderr and exit status 2, with
the traceback only under ``--debug``; Ctrl-C is exit 130, and SIGTERM, where a
command turns it into ``Terminated`` (``stop_signals_raise``), 143.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path


class UserError(Exception):
    """Bad input the user can fix; the message names the file, game, ply or setting."""


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path``; rename it onto ``path`` when the block succeeds.

    The folder is created if missing. The data reach the disk (fsync) before the
    rename, so a crash cannot leave an empty file under the real name. On failure
    the temporary file is removed and ``path`` is left as it was. An OS error of the
    write that names no file (a full disk: ``write`` gives ENOSPC without one) or the
    temporary one is raised naming ``path``, so the one-line error says what was lost."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_writers_temps(path)
    tag = _writer_tag()
    if len(f".{path.name}.{tag}.abcdefgh.tmp".encode()) > 255:  # the longest name most file systems take
        tag = ""  # a name this long keeps the untagged temporary name it always had
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.{tag}{'.' if tag else ''}", suffix=".tmp", dir=path.parent)
    except OSError as e:  # named as the target: the one-line error says what was not written
        raise OSError(e.errno, e.strerror or str(e), str(path)) from e
    os.close(fd)
    tmp = Path(name)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; the file should have a plain file's mode
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if e.filename is not None and str(e.filename) != str(tmp):
            raise
        raise OSError(e.errno, e.strerror or str(e), str(path)) from e
    finally:
        tmp.unlink(missing_ok=True)


# atomic_path's temporary names: ``.NAME.``, the writer's tag ``pPID-HOST.`` (HOST: 8 hex digits
# of the host's name; absent in files of earlier versions), mkstemp's 8 random characters, ``.tmp``.
_TEMP_NAME = re.compile(r"\.(?P<name>.+?)(\.p(?P<pid>\d{1,9})-(?P<host>[0-9a-f]{8}))?\.[a-z0-9_]{8}\.tmp")
STALE_TEMP_SECONDS = 60.0


def _host() -> str:
    return f"{zlib.crc32(socket.gethostname().encode()):08x}"


def _writer_tag() -> str:
    return f"p{os.getpid()}-{_host()}"


def process_exists(pid: int) -> bool:
    """Whether process ``pid`` of this machine may be running: the one probe behind every
    "is its writer gone" (run locks, temporary files, dataset builds). A number that cannot
    be a process (0 or less, which os.kill reads as a group; too large) is none; a check we
    cannot make (another user's process) counts as running, so nothing of it is taken."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:
        return True
    return True


def _remove_dead_writers_temps(path: Path) -> None:
    """Before writing ``path``, remove the temporary copies of it that a process of this
    machine killed outright (kill -9, the out-of-memory killer) left: the commands that
    write one file (``--json``, a download) hold no lock under which a sweep of the folder
    would be safe. Only files named as ours for this very target, whose writer no longer
    exists and which have not changed for a minute (a writer in another PID namespace of
    the same host could look dead), are touched. POSIX only: elsewhere os.kill(pid, 0)
    is not a probe."""
    if os.name != "posix":
        return
    host, now = _host(), time.time()
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return
    for p in siblings:
        m = _TEMP_NAME.fullmatch(p.name)
        if not m or m["name"] != path.name or m["host"] != host or int(m["pid"]) == os.getpid():
            continue
        try:
            if (p.is_file() and not p.is_symlink() and now - p.stat().st_mtime > STALE_TEMP_SECONDS
                    and not process_exists(int(m["pid"]))):
                p.unlink()
        except (OSError, ValueError, OverflowError):  # gone already, or not ours after all: the write goes on
            pass


def remove_stale_temps(folder: str | os.PathLike, ours: Callable[[str], bool]) -> list[Path]:
    """Remove the temporary files ``atomic_path`` left in ``folder`` for the targets whose
    names ``ours`` accepts: a process killed outright (kill -9, the out-of-memory killer)
    mid-write cannot remove its own. Only for a folder whose writer holds its lock (no
    live write of ours can be there); nothing else is touched. The paths removed."""
    removed = []
    if not Path(folder).is_dir():
        return removed
    for p in Path(folder).iterdir():
        target = temp_target(p.name)
        if target is not None and ours(target) and p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def temp_target(name: str) -> str | None:
    """The file an ``atomic_path`` temporary copy named ``name`` was to become, or None when
    ``name`` is not one: a folder holding only such leftovers holds nothing of anyone's."""
    m = _TEMP_NAME.fullmatch(name)
    return m.group("name") if m else None


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


def at_least(low: int | float, kind=int, above: bool = False, most: int | float | None = None):
    """An argparse ``type``: a number of ``kind`` no smaller than ``low`` (with
    ``above``, greater than it: a time budget of 0 minutes is as wrong as -1), and no
    larger than ``most`` where given (a network size, whose typo would allocate until
    memory runs out)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if not (value > low if above else value >= low):  # also refuses nan
            raise argparse.ArgumentTypeError(f"must be {'above' if above else 'at least'} {low}, got {text}")
        if value == float("inf"):  # a budget or interval that never comes
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most}, got {text}")
        return value
    return parse


def seed_below(limit: int):
    """An argparse ``type`` for a command's ``--seed``: 0 up to ``limit`` - 1, what its
    generators take (``torch.manual_seed``: below 2**64; numpy's legacy seeding, which
    Lightning's ``seed_everything`` uses: below 2**32); beyond it they fail with a traceback
    after the work has been set up."""
    def parse(text: str) -> int:
        value = at_least(0)(text)
        if value >= limit:
            raise argparse.ArgumentTypeError(f"must be below 2**{limit.bit_length() - 1}, got {text}")
        return value
    return parse


seed_arg = seed_below(2**64)


def check_output(path: str | os.PathLike, flag: str, folder: bool = False, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse an output path that cannot be written before the work that would fill it:
    a folder given for a file (or a file for a ``folder``), a path under a file, or a
    folder this user may not write in. Missing folders are fine: writing creates them.
    ``suffixes``: the file's kinds, so a slip of the shell (``--json train.py``) does not
    replace a file of another kind."""
    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path}: is a file; give a folder")
    if not folder and path.is_dir():
        raise UserError(f"{flag} {path}: is a folder; give a file name")
    if suffixes and path.suffix.lower() not in suffixes:
        raise UserError(f"{flag} {path}: expected a {' or '.join(suffixes)} file name")
    parent = path if folder and path.is_dir() else path.parent  # an existing output folder is written in itself
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{flag} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: cannot write in {parent} (permission denied)")


def check_input(path: str | os.PathLike | None, flag: str, folder: bool = False) -> None:
    """Refuse an input that is not there (or a folder given for a file) before any work, in one
    line naming ``flag``: the OSError met later named only the path. None: not given."""
    if path is None:
        return
    path = Path(path)
    if not path.exists():
        raise UserError(f"{flag} {path}: no such {'folder' if folder else 'file'}")
    if not folder and path.is_dir():
        raise UserError(f"{flag} {path}: is a folder; give a file")
    if folder and not path.is_dir():
        raise UserError(f"{flag} {path}: is a file; give a folder")


def check_distinct(outputs: dict, inputs: dict | None = None) -> None:
    """Refuse two outputs that are one file (the second would overwrite the first) and an
    output that is one of the inputs (it would be replaced by what was computed from it).
    ``outputs`` and ``inputs`` map a flag to its path (None: not given)."""
    seen: dict[str, str] = {}
    for flag, path in list((inputs or {}).items()) + list(outputs.items()):
        if path is None:
            continue
        key = os.path.realpath(path)
        if key in seen:
            what = "the input" if seen[key] in (inputs or {}) else "the output"
            raise UserError(f"{flag} {path}: is also {what} {seen[key]}; give another file name")
        seen[key] = flag


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, data: bytes | str) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


def write_json(path: str | os.PathLike, obj) -> None:
    """``obj`` as indented JSON, atomically: every command's --json and the runs' records."""
    atomic_write(path, json.dumps(obj, indent=2) + "\n")


def describe_os_error(e: OSError) -> str:
    where = f" ({e.filename})" if e.filename else " (an empty name)" if e.filename == "" else ""
    if e.errno == errno.ENOSPC:
        return f"no space left on device{where}: free some space and run the command again"
    if e.errno is None and re.fullmatch(r"\d+ requested and \d+ written", str(e.strerror or e)):
        # numpy's tofile (np.save of a large array) reports a short write, a full disk, without an errno
        return (f"could not write the whole file{where} ({e.strerror or e}): the disk is probably full: "
                "free some space and run the command again")
    if e.errno is None and e.filename is None and str(e):  # raised with a message of ours: it says it
        return str(e)
    if isinstance(e, FileNotFoundError):
        return f"no such file or folder{where}"
    if isinstance(e, IsADirectoryError):
        return f"expected a file, found a folder{where}"
    if isinstance(e, PermissionError):
        return f"permission denied{where}"
    return f"{e.strerror or e}{where}"


def one_line(e: BaseException) -> str:
    """The first line of an exception's message (a library's may run to a
    traceback), or its type's name: what a one-line error quotes."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


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
