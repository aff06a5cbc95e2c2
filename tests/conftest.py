import os
import sys
from pathlib import Path

import pytest

# Under pytest-xdist (the README's "-n auto"), share the cores among the workers: each one's torch
# and the commands it starts as subprocesses run cores/workers threads instead of all of them, so two
# workers on two cores do not each spin two threads. Set before any test module imports torch.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parents[1]
# the real files: $OTHELLO_WTHOR_DIR (as the dataset tool reads it), else the checkout's neighbour
SHARED_WTHOR = Path(os.environ.get("OTHELLO_WTHOR_DIR") or REPO.parent / "shared" / "data" / "wthor")


@pytest.fixture(scope="session")
def shared_wthor() -> Path:
    if not (SHARED_WTHOR / "WTH_2016.wtb").exists():
        pytest.skip(f"the real WTHOR files are not at {SHARED_WTHOR}")
    return SHARED_WTHOR
