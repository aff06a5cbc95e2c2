"""Lightning's own lines, sorted for a user of the training command: the warnings and tips that
say nothing they can act on are dropped, the info lines printed while the Trainer is built are
held back until the W&B run has started, and why ``fit`` stopped is said by ``stop_reason``."""

from __future__ import annotations

import logging
import warnings

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
