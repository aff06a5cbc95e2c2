"""A wrapper kept so the documented ``python train/evaluate.py`` works from a checkout;
the command is ``othello_learn.evaluation.evaluate``
(console script ``othello-eval``, or ``python -m othello_learn.evaluation.evaluate``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout without ``pip install -e .``

from othello_learn.commands import start  # noqa: E402

if __name__ == "__main__":  # not when a spawned worker process imports this file
    start("othello_learn.evaluation.evaluate")
