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
