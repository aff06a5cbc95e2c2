"""Waiting on processes the tests start (engines, commands) in one place."""

import os
import time

import pytest


def gone_soon(pid: int, what: str, seconds: float = 5.0) -> None:
    """Fails unless process ``pid`` is gone (killed and reaped) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"process {pid} outlived {what}")


def pid_written(path, process=None, seconds: float = 60.0) -> int:
    """The pid a fake engine writes to ``path`` (``--pid-file``) once it runs; fails if
    ``process`` (the command that starts it) ends first, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline and (process is None or process.poll() is None)
        time.sleep(0.05)
    return int(path.read_text())
