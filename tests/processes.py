"""Waiting on processes the tests start (engines, commands) in one place."""

import os
import time

import pytest


def gone_soon(pid: int, what: str, seconds: float = 5.0, orphan: bool = False) -> None:
    """Fails unless process ``pid`` is gone (killed and reaped) within ``seconds``. An ``orphan``
    (its parent killed with it) may be dead and not yet reaped: init reaps it, and some inits
    only every second or two."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if orphan and _zombie(pid):
            return
        time.sleep(0.05)
    pytest.fail(f"process {pid} outlived {what}")


def _zombie(pid: int) -> bool:
    """Dead and unreaped (Linux's /proc; elsewhere only a gone process counts)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # the state, after the name in parentheses
    except (OSError, IndexError):
        return False


def pid_written(path, process=None, seconds: float = 60.0) -> int:
    """The pid a fake engine writes to ``path`` (``--pid-file``) once it runs; fails if
    ``process`` (the command that starts it) ends first, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline and (process is None or process.poll() is None)
        time.sleep(0.05)
    return int(path.read_text())
