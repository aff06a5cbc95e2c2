"""Writing files so that nothing is ever half-written, and saying in one line what went wrong.

Every command writes through ``atomic_write`` (a temporary file in the target's folder,
then a rename: a reader, a kill or a full disk never leaves a truncated file under the real
name) and checks its paths before the work (``check_output``, ``check_input``,
``check_distinct``). A ``UserError`` is bad input the user can fix; ``describe_os_error`` and
``one_line`` word an OS error or a library's long message as the one line a command prints
(``othello_learn.cli.run_main``).
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import tempfile
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
    try:
        fd, name = tempfile.mkstemp(prefix=f".{_temp_stem(path.name)}.{_writer_tag()}.", suffix=".tmp",
                                    dir=path.parent)
    except OSError as e:  # named as the target: the one-line error says what was not written
        raise OSError(e.errno, e.strerror or str(e), str(path)) from e
    tmp = Path(name)
    try:  # from here on the temporary file is removed on any way out: a stop landing in the chmod left it
        os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; the file should have a plain file's mode
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


# atomic_path's temporary names: ``.NAME.`` (``short_name``'s form of a long one), the writer's tag
# ``pPID-HOST.`` (HOST: 8 hex digits of the host's name; absent in files of earlier versions), mkstemp's
# 8 random characters, ``.tmp``.
_TEMP_NAME = re.compile(r"\.(?P<name>.+?)(\.p(?P<pid>\d{1,9})-(?P<host>[0-9a-f]{8}))?\.[a-z0-9_]{8}\.tmp")
_TEMP_ROOM = len("." + ".p123456789-0123abcd" + ".abcdefgh.tmp")  # the most a temporary name adds
STALE_TEMP_SECONDS = 60.0
NAME_MAX = 255  # the longest file name, in bytes, most file systems take


def short_name(name: str, room: int) -> str:
    """``name``, or where ``room`` more bytes would take it past ``NAME_MAX``, its start cut to fit
    and ``~`` and 8 hex digits of the whole name added: the temporary names beside a target
    (``atomic_path``'s, a dataset build's) must fit where the target's own name does, and stay
    one target's (two long names with one start differ in the digits). Lengths are counted in
    the bytes the OS is given (a name that is not UTF-8, surrogate-escaped, cannot be .encode()d)."""
    raw = os.fsencode(name)
    if len(raw) + room <= NAME_MAX:
        return name
    digest = f"~{zlib.crc32(raw):08x}"
    keep = NAME_MAX - room - len(digest)
    stem = name
    while len(os.fsencode(stem)) > keep:  # whole characters: a UTF-8 one is not cut in two
        stem = stem[:-1]
    return stem + digest


def _temp_stem(name: str) -> str:
    """What ``atomic_path``'s temporary names for a target named ``name`` start with, after the dot."""
    return short_name(name, _TEMP_ROOM)


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
        if not m or m["name"] != _temp_stem(path.name) or m["host"] != host or int(m["pid"]) == os.getpid():
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
    """The file an ``atomic_path`` temporary copy named ``name`` was to become (``short_name``'s
    form of a long one), or None when ``name`` is not one: a folder holding only such leftovers
    holds nothing of anyone's."""
    m = _TEMP_NAME.fullmatch(name)
    return m.group("name") if m else None


def check_output(path: str | os.PathLike, flag: str, folder: bool = False, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse an output path that cannot be written before the work that would fill it:
    a folder given for a file (or a file for a ``folder``), a path under a file, or a
    folder this user may not write in. Missing folders are fine: writing creates them.
    ``suffixes``: the file's kinds, so a slip of the shell (``--json train.py``) does not
    replace a file of another kind."""
    path = Path(path)
    if loop := link_loop_in(path):
        raise UserError(f"{flag} {path}: {'it' if loop == path else loop} is a symbolic link loop; give another path")
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
    if loop := link_loop_in(path):
        raise UserError(f"{flag} {path}: {'it' if loop == path else loop} is a symbolic link loop; "
                        "give the file or folder itself")
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
    """Write ``data`` (text as UTF-8) to ``path`` atomically. A file name in the text that is not
    UTF-8 (Python's surrogate escapes: a player spec's checkpoint in arena's games CSV) is written
    as the bytes it was read from; as a UnicodeEncodeError it lost the file after the work."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode(errors="surrogateescape") if isinstance(data, str) else data)


def write_json(path: str | os.PathLike, obj) -> None:
    """``obj`` as indented JSON, atomically: every command's --json and the runs' records."""
    atomic_write(path, json.dumps(obj, indent=2) + "\n")


MAX_NESTING = 100  # levels of lists and mappings in a settings or record file; ours go three or four deep


class NestingError(ValueError):
    """A settings or record file whose lists and mappings go deeper than ``MAX_NESTING``: a
    ValueError, as the parsers' own errors are, so each reader names its file as for those."""


def parse_nested(load: Callable, text: str):
    """``load(text)`` (``json.loads``, a YAML load) refused past ``MAX_NESTING`` levels. The parsers
    recurse per level: 1,000 was a RecursionError there, and a little less one in the first code to
    walk the result (a repr, a copy, a dump); the depth is measured here without recursing."""
    try:
        data = load(text)
    except RecursionError:
        raise NestingError(f"lists or mappings nested more than {MAX_NESTING} levels deep") from None
    stack, deepest = [(data, 1)], {}  # a YAML alias shares a list: walked again only where deeper
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)) and deepest.get(id(child), 0) <= depth:
                if depth >= MAX_NESTING:
                    raise NestingError(f"lists or mappings nested more than {MAX_NESTING} levels deep")
                deepest[id(child)] = depth + 1
                stack.append((child, depth + 1))
    return data


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
    if e.errno == errno.ELOOP or (isinstance(e, FileExistsError) and is_link_loop(e.filename)):
        # a folder made through a link that leads back to itself fails with EEXIST: "File exists" misled
        return f"symbolic link loop{where}: a link on this path leads back to itself"
    if isinstance(e, FileNotFoundError):
        return f"no such file or folder{where}"
    if isinstance(e, IsADirectoryError):
        return f"expected a file, found a folder{where}"
    if isinstance(e, PermissionError):
        return f"permission denied{where}"
    return f"{e.strerror or e}{where}"


def is_link_loop(path) -> bool:
    """Whether ``path`` cannot be followed because its links lead round in a circle
    (ELOOP): ``exists()`` calls it missing, and making a folder there says "File exists"."""
    if path is None or path == "":
        return False
    try:
        os.stat(path)
    except OSError as e:
        return e.errno == errno.ELOOP
    except (ValueError, TypeError):
        return False
    return False


def link_loop_in(path) -> Path | None:
    """The first part of ``path`` that is a symbolic link loop (the part to name in the error), or None."""
    path = Path(path)
    if not is_link_loop(path):
        return None
    return next(p for p in [*reversed(path.parents), path] if is_link_loop(p))


def one_line(e: BaseException) -> str:
    """The first line of an exception's message (a library's may run to a
    traceback), or its type's name: what a one-line error quotes."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__
