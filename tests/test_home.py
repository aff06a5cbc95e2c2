"""Default paths: the checkout when run from one, else the current folder (an installed copy
would otherwise read and write inside site-packages)."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_defaults_resolve_in_the_checkout():
    import othello_learn

    assert othello_learn.HOME == REPO


def test_an_installed_copy_resolves_defaults_in_the_current_folder(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(REPO / "othello_learn", site / "othello_learn",
                    ignore=shutil.ignore_patterns("__pycache__"))  # as pip installs it: no pyproject.toml beside it
    work = tmp_path / "work"
    work.mkdir()
    code = ("import othello_learn, sys; from othello_learn.data import wthor; from pathlib import Path; "
            "print(othello_learn.HOME); print(wthor.HOME / 'data' / 'wthor')")
    out = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": f"{site}:{REPO}", "PATH": "/usr/bin:/bin"}).stdout.split()
    assert out == [str(work), str(work / "data" / "wthor")]
