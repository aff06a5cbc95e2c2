"""Where every command starts: the console scripts (pyproject.toml) and the checkout's script
files (``python train/train.py``). The command's module is imported inside ``start``, so a
Ctrl-C while torch loads (about two seconds) ends as one during the work does, in one line and
exit 130, not in the import's traceback."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

COMMANDS = {
    "othello-dataset": "othello_learn.data.wthor",
    "othello-train": "othello_learn.train.train",
    "othello-eval": "othello_learn.evaluation.evaluate",
    "othello-rl": "othello_learn.rl.loop",
    "othello-arena": "othello_learn.players.arena",
    "othello-play": "othello_learn.frontends.terminal",
    "othello-engine": "othello_learn.frontends.nboard",
    "othello-gtp": "othello_learn.frontends.gtp",
    "othello-solve": "othello_learn.frontends.solve_obf",
    "othello-curves": "othello_learn.evaluation.curves",
}


def start(module: str) -> None:
    """Run ``module``'s ``cli()`` (which exits with the command's status)."""
    try:
        cli = importlib.import_module(module).cli
    except KeyboardInterrupt:
        print(f"{Path(sys.argv[0]).name}: interrupted", file=sys.stderr)
        sys.exit(130)
    cli()


# the console scripts, one each (pyproject.toml's [project.scripts] names them)


def dataset() -> None:
    start(COMMANDS["othello-dataset"])


def train() -> None:
    start(COMMANDS["othello-train"])


def evaluate() -> None:
    start(COMMANDS["othello-eval"])


def rl() -> None:
    start(COMMANDS["othello-rl"])


def arena() -> None:
    start(COMMANDS["othello-arena"])


def play() -> None:
    start(COMMANDS["othello-play"])


def engine() -> None:
    start(COMMANDS["othello-engine"])


def gtp() -> None:
    start(COMMANDS["othello-gtp"])


def solve() -> None:
    start(COMMANDS["othello-solve"])


def curves() -> None:
    start(COMMANDS["othello-curves"])
