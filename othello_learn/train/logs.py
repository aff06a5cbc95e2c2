"""A training run's logs: its experiment loggers (CSV, or W&B: offline unless asked, one W&B run
across the run's resumes, the test results in its summary), the CSV logs of each start and where a
``--fresh`` run's begin (``train.py`` writes them, ``curves.py`` reads them), and Lightning's own
lines, sorted for a user of the training command: the warnings and tips that say nothing they can
act on are dropped, the info lines printed while the Trainer is built are held back until the W&B
run has started, and why ``fit`` stopped is said by ``stop_reason``."""

from __future__ import annotations

import logging
import os
import secrets
import time
import warnings
from pathlib import Path

from othello_learn.files import UserError, atomic_write, write_json


def make_logger(kind: str, out: Path, name: str, online: bool, project: str, fresh: bool = False):
    from lightning.pytorch.loggers import CSVLogger, WandbLogger

    if kind == "none":
        return False
    if kind == "csv":
        return CSVLogger(save_dir=out, name="csv")
    if kind == "wandb":
        if not online:
            os.environ.setdefault("WANDB_MODE", "offline")
        # Checkpoints go up as artifacts only when online: offline they are already in OUT.
        # mode said to wandb.init itself: its settings read WANDB_MODE once a process, so after another
        # W&B run in the same process (the loop's, a notebook's) an offline run asked for a login
        logger = _global_step_logger(WandbLogger)(project=project, name=name, save_dir=str(out), offline=not online,
                             id=wandb_run_id(out, fresh), resume="allow", log_model=online,
                             **({} if online else {"mode": "offline"}))
        # Lightning hands wandb.init anonymous=None, which wandb >= 0.19 warns of on every run ("has no
        # effect"); unset, it says nothing. A private dict: where it is not there, the warning stays.
        init_args = getattr(logger, "_wandb_init", None)
        if isinstance(init_args, dict) and init_args.get("anonymous", False) is None:
            del init_args["anonymous"]
        return logger
    raise UserError(f"--logger must be wandb, csv or none, got {kind!r}")


def _global_step_logger(base):
    """Lightning's WandbLogger with W&B's own step (``_step``) set to the global step. W&B
    numbers a run's rows from 0 in each process: a resumed offline run's second folder restarted
    at 0, and syncing it with ``--append`` after the first (W&B does not merge same-id offline
    folders by itself) landed on steps the first had taken. On the global step the folders
    are disjoint in steps and append in order (docs/training.md)."""
    from lightning.pytorch.utilities import rank_zero_only

    class GlobalStepWandbLogger(base):
        @rank_zero_only
        def log_metrics(self, metrics, step=None) -> None:
            if step is None:
                return super().log_metrics(metrics, step)
            self.experiment.log({**metrics, "trainer/global_step": step}, step=step)

    return GlobalStepWandbLogger


def wandb_run_id(out: Path, fresh: bool = False) -> str:
    """The W&B run id of the training run in OUT, kept in OUT/wandb_id: a resumed
    run's curves continue the same W&B run instead of starting a new one each
    time (as the RL loop's do). --fresh starts a new W&B run too."""
    path = out / "wandb_id"
    if path.exists() and not fresh:
        run_id = path.read_text().strip()
        if run_id and all(c.isalnum() or c in "-_" for c in run_id):
            return run_id
    run_id = f"train-{int(time.time())}-{secrets.token_hex(3)}"  # a --fresh within the second differs too
    atomic_write(path, run_id + "\n")
    return run_id


def log_test_results(logger, test: dict) -> None:
    """The test metrics in the W&B run's summary, and the accuracy by game phase as a
    table (one row a phase, in order), which the scalar charts cannot show."""
    from lightning.pytorch.loggers import WandbLogger

    if not isinstance(logger, WandbLogger):
        return
    import wandb

    prefix = "test/acc_moves_"
    rows = [[k[len(prefix):], v] for k, v in test.items() if k.startswith(prefix)]
    logger.experiment.summary.update(test)
    logger.experiment.log({"test/phases": wandb.Table(columns=["moves", "accuracy"], data=rows)})


# The CSV logs of each start, and how many batches a logged step is.
FRESH_START = "fresh_start.json"  # in OUT: where the logs of the run a --fresh began start


def csv_versions(out: Path) -> dict[int, Path]:
    """The CSV logger's folders in OUT, ``csv/version_N`` by N (one per start or resume)."""
    return {int(p.name[8:]): p for p in (out / "csv").glob("version_*") if p.name[8:].isdigit()}


def mark_fresh_start(out: Path) -> None:
    """``--fresh`` keeps the discarded run's logs (as its best checkpoints): the new run's CSV
    logs start at the next version, and ``curves.py`` joins none before it (the W&B files it
    tells apart by the run id, which ``--fresh`` renews)."""
    write_json(out / FRESH_START, {"csv_version": max(csv_versions(out), default=-1) + 1})


def batches_per_step(trainer: dict | None) -> int:
    """How many batches one logged step trained on (``trainer.accumulate_grad_batches``, 1 when
    unset): curves.py counts a run's positions by it, and a resume may not change it."""
    return int((trainer or {}).get("accumulate_grad_batches") or 1)


# Lightning's own lines.

# Lightning's own notes that a user of this command can do nothing about: its internal use of a
# deprecated torch API, the model summary's size estimate under bf16 (the parameter count stands), and
# under DDP its advice to sync the per-step training losses, rank 0's by choice (MovePredictor._step).
_LIGHTNING_NOISE = (r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                    r"Precision bf16-mixed is not supported by the model summary",
                    r"It is recommended to use `self.log\('train/")


def ignore_lightning_noise() -> None:
    """Within a ``warnings.catch_warnings()``."""
    for noise in _LIGHTNING_NOISE:
        warnings.filterwarnings("ignore", message=noise)


class _NoTips:
    """A logging filter on Lightning's info lines: the advertisement for its cloud logger, printed
    at every Trainer, and its line on why ``fit`` stopped, which reads "`max_epochs=1` reached"
    when the time budget stopped the epoch midway (``stop_reason`` says what did)."""

    def filter(self, record) -> bool:
        return not str(record.msg).startswith(("\N{ELECTRIC LIGHT BULB} Tip:", "`Trainer.fit` stopped: `max_"))


class HeldInfo:
    """A logging filter that holds Lightning's info lines back (the precision, the devices) while
    the Trainer is built before the W&B run is started: ``replay`` shows them once that worked, so
    an account problem stays the one line; a refused setting drops them with the run."""

    def __init__(self):
        self.log, self.records = logging.getLogger("lightning.pytorch.utilities.rank_zero"), []

    def filter(self, record) -> bool:
        self.records.append(record)
        return False

    def __enter__(self):
        self.log.addFilter(self)
        return self

    def __exit__(self, *exc):
        self.log.removeFilter(self)

    def replay(self) -> None:
        for record in self.records:
            self.log.handle(record)
        self.records = []


def drop_lightning_tips() -> None:
    log = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _NoTips) for f in log.filters):
        log.addFilter(_NoTips())


def stop_reason(trainer) -> str:
    """Which limit ended ``trainer.fit``: the steps, the time budget or the epochs, in the order
    Lightning checks them (the budget ends an epoch midway, and Lightning then counts the epoch
    as done and names max_epochs)."""
    from lightning.pytorch.callbacks import Timer

    if trainer.max_steps != -1 and trainer.global_step >= trainer.max_steps:
        return f"max_steps={trainer.max_steps} reached"
    timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
    left = None if timer is None else timer.time_remaining()
    if left is not None and left <= 0:
        return "the time budget (--max-minutes, trainer.max_time) is spent"
    return f"max_epochs={trainer.max_epochs} reached"
