"""The run's experiment loggers: CSV, or W&B (offline unless asked, one W&B run across the
run's resumes), and the test results in the W&B run's summary."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from othello_learn.files import UserError, atomic_write


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
