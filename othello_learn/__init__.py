"""Learning Othello on top of the ``othello`` rules engine: the WTHOR dataset
(``othello_learn.data``), networks and encoders (``.models``), supervised training
(``.train``) and self-play (``.selfplay``), one installable package so no module
has to edit ``sys.path`` to find another."""

from pathlib import Path as _Path


def _home() -> _Path:
    """Where default paths (``data/wthor``, ``checkpoints/``) are resolved: the source checkout
    this package runs from (pyproject.toml beside the package), else the current folder; an
    installed copy in site-packages would otherwise read and write inside site-packages."""
    root = _Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else _Path.cwd()


HOME = _home()
HOME_HELP = "the repository when run from a checkout, else in the current folder"
