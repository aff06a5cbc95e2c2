"""One process per run folder: two trainings (or two RL loops) into the same ``--out``
would overwrite each other's checkpoints, generations and state without a word.

The lock is a file created with ``O_EXCL`` holding ``PID HOST START``, START the
process's start time (Linux's ``/proc/PID/stat``; absent elsewhere and in locks of earlier
versions). A lock whose process is gone (same host, no such PID, or that PID now another
process's, started at another time: after a reboot or a container's restart, PIDs are
handed out again from the start) is stale, left by a kill -9 or a lost machine, and is
taken over; a live one makes the second run stop with a message naming its holder.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from othello_learn.files import UserError, process_exists

FRESH_SECONDS = 10.0  # an empty lock younger than this is being written by its creator


def process_start(pid: int | str) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot, as Linux's
    ``/proc/PID/stat`` gives it (its 22nd field, after the command name in parentheses,
    which may hold spaces), or None where it cannot be read (no such process, no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError, ValueError):
        return None


def _read(path: Path) -> str:
    """A lock file's text; bytes that are not UTF-8 (a lock garbled by a crash) are garbage like
    any other, not a UnicodeDecodeError traceback that failed every run into the folder."""
    return path.read_bytes().decode("utf-8", errors="replace")


class RunLock:
    def __init__(self, folder: str | Path, name: str = ".lock"):
        self.path = Path(folder) / name
        start = process_start("self")
        self.token = f"{os.getpid()} {socket.gethostname()}{'' if start is None else ' ' + start}\n"
        self.held = False

    def _holder(self) -> tuple[str, bool]:
        """(the lock's text, whether its holder may still be running)."""
        try:
            text = _read(self.path)
            age = time.time() - self.path.stat().st_mtime
        except FileNotFoundError:
            return "", False
        parts = text.split()
        if len(parts) not in (2, 3) or not (parts[0].isascii() and parts[0].isdigit()):  # "²" is a digit to str
            return text, age < FRESH_SECONDS  # being written, or garbage left long ago
        pid, host = int(parts[0]), parts[1]
        if host != socket.gethostname():
            return text, True  # cannot tell from here
        if not process_exists(pid):
            return text, False
        now = process_start(pid) if len(parts) == 3 else None
        return text, now is None or now == parts[2]  # another start time: the PID was handed out again

    def acquire(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                text, alive = self._holder()
                if alive:
                    parts = text.split()
                    who = f"process {parts[0]} on {parts[1]}" if len(parts) in (2, 3) else "another process"
                    raise UserError(f"{self.path.parent} is in use by {who} (lock file {self.path}): "
                                    "wait for it to finish, stop it, or give another --out; "
                                    "delete the lock file only if that process is gone") from None
                self._take_over(text)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(self.token)
            self.held = True
            return self
        raise UserError(f"{self.path}: could not take the lock: other processes keep taking it")

    def _take_over(self, stale: str) -> None:
        """Move the stale lock aside, so that of two runs taking over at once only one
        removes it; put it back if it turns out to be a fresh lock taken meanwhile. An empty
        stale lock (a machine lost before its holder wrote it) reads as a fresh one does between
        its creator's open and write: it is the stale one only if it is still old, else the other
        run that took it over first lost its new lock here and both ran."""
        aside = self.path.with_name(f"{self.path.name}.stale.{os.getpid()}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        text = _read(aside)
        if text == stale and (text or time.time() - aside.stat().st_mtime >= FRESH_SECONDS):
            aside.unlink()
        else:
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
            aside.unlink()

    def release(self) -> None:
        if self.held:
            try:
                if _read(self.path) == self.token:
                    self.path.unlink()
            except FileNotFoundError:
                pass
            self.held = False

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
