import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parents[1]
SHARED_WTHOR = REPO.parent / "shared" / "data" / "wthor"


@pytest.fixture(scope="session")
def shared_wthor() -> Path:
    if not (SHARED_WTHOR / "WTH_2016.wtb").exists():
        pytest.skip(f"the real WTHOR files are not at {SHARED_WTHOR}")
    return SHARED_WTHOR
