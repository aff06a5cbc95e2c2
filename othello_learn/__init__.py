"""Learning Othello on top of the ``othello`` rules engine, one installable package so no
module has to edit ``sys.path`` to find another. Its subpackages by role, imports flowing down
the list: ``data`` (the WTHOR dataset), ``models`` (encoders and networks), ``train``
(supervised training and evaluation), ``search`` (tree search and the classical searches),
``players`` (players, the arena, Elo), ``rl`` (self-play and the AlphaZero loop) and
``frontends`` (the terminal game, the NBoard and GTP engines, OBF grading). ``cli`` and
``files`` are how every command runs and writes its files."""

from pathlib import Path as _Path


def _home() -> _Path:
    """Where default paths (``data/wthor``, ``checkpoints/``) are resolved: the source checkout
    this package runs from (pyproject.toml beside the package), else the current folder; an
    installed copy in site-packages would otherwise read and write inside site-packages."""
    root = _Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else _Path.cwd()


HOME = _home()
HOME_HELP = "the repository when run from a checkout, else in the current folder"
