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


# Module fixtures worth seconds, run once: the tests that share one run on one xdist worker
# (pyproject's "--dist loadgroup"), not each worker building its own. A name used by fixtures of
# several modules is given as MODULE::NAME.
SHARED_ONCE = ("ray_cluster", "rl_run", "reference_positions", "selfplay_games", "test_selfplay.py::games", "test_wthor.py::games")


# The groups that take longest, started first: a group runs on one worker, so one started late ends the
# run alone (the Ray group is about a minute). Then the other groups, largest first, then single tests.
LONGEST_FIRST = ("ray_cluster", "ddp")


def _group(item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return None if mark is None else str(mark.args[0] if mark.args else mark.kwargs.get("name"))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(items):
    for item in items:
        for shared in SHARED_ONCE:
            module, _, name = shared.rpartition("::")
            if name in getattr(item, "fixturenames", ()) and (not module or item.path.name == module):
                item.add_marker(pytest.mark.xdist_group(shared))
    # xdist hands out the work in this order (pyproject's --no-loadscope-reorder); a stable sort
    # keeps each module's own order otherwise
    groups = [_group(item) for item in items]
    sizes = {g: groups.count(g) for g in set(groups) if g is not None}
    rank = {g: (LONGEST_FIRST.index(g) if g in LONGEST_FIRST else len(LONGEST_FIRST), -n) for g, n in sizes.items()}
    order = sorted(range(len(items)), key=lambda i: rank.get(groups[i], (len(LONGEST_FIRST) + 1, 0)))
    items[:] = [items[i] for i in order]


@pytest.fixture(scope="session")
def shared_wthor() -> Path:
    if not (SHARED_WTHOR / "WTH_2016.wtb").exists():
        pytest.skip(f"the real WTHOR files are not at {SHARED_WTHOR}")
    return SHARED_WTHOR


@pytest.fixture(scope="session")
def dataset_dir(tmp_path_factory):
    """A small dataset of random games: train 2001, val 2002, test 2003. Built once a session (once
    an xdist worker), not by each module that uses it; tests read it, and copy it to change it."""
    import random

    import reference_engine as ref
    from othello_learn.data import wtb
    from othello_learn.data.wthor import main as build_main

    root = tmp_path_factory.mktemp("wthor")
    rng = random.Random(11)
    for year, n in ((2001, 60), (2002, 12), (2003, 12)):
        games = [ref.random_game(rng) for _ in range(n)]
        moves = [[m for _, _, m in rec if m != 64] for rec, _, _ in games]
        scores = [(64 + ref.final_score(b)) // 2 for _, b, _ in games]
        wtb.write_wtb(root / f"WTH_{year}.wtb", wtb.make_games(moves, scores), year)
    out = root / "ds"
    assert build_main(["--wthor-dir", str(root), "--out", str(out), "--quiet"]) == 0
    return out
