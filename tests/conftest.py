import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parents[1]
# the real files: $OTHELLO_WTHOR_DIR (as the dataset tool reads it), else the checkout's neighbour
SHARED_WTHOR = Path(os.environ.get("OTHELLO_WTHOR_DIR") or REPO.parent / "shared" / "data" / "wthor")


@pytest.fixture(scope="session")
def shared_wthor() -> Path:
    if not (SHARED_WTHOR / "WTH_2016.wtb").exists():
        pytest.skip(f"the real WTHOR files are not at {SHARED_WTHOR}")
    return SHARED_WTHOR
