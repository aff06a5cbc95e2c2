"""When a training run validates, beside Lightning's ``val_check_interval``: after its last step
(``ValidateAtEnd``) and on training time (``ValidateOnTime``, ``--val-every-minutes``)."""

from __future__ import annotations

import time

from lightning.pytorch.callbacks import Callback


class ValidateAtEnd(Callback):
    """Validate after the last step of training when the interval would not: with
    ``val_check_interval`` a number of batches, a run ending on ``max_steps`` or at the end
    of its last epoch left its last stretch (the end of the annealed schedule) unvalidated,
    so the best checkpoint and model.pt could be older than the trained net. Lightning
    validates after the step at which ``should_stop`` is set (a time budget's end already
    is); on an interval's own step it validates once, as before."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        steps_done = trainer.max_steps != -1 and trainer.global_step >= trainer.max_steps
        last_epoch = trainer.max_epochs not in (None, -1) and trainer.current_epoch + 1 >= trainer.max_epochs
        epoch_done = batch_idx + 1 >= trainer.num_training_batches
        if steps_done or (last_epoch and epoch_done):
            trainer.should_stop = True


class ValidateOnTime(Callback):
    """Validate also when ``every_seconds`` of training have passed since the last validation,
    whichever of it and ``val_check_interval`` comes first: the recipes validate every 2,000
    steps, 45 minutes on a CPU without bf16, so a new run drew no curve for most of an hour.

    The decision is Lightning's own check (the epoch loop's ``_should_check_val_fx``, wrapped),
    so a save due at that step waits for the validation (checkpoints.py's ``_validates_now``) as for a
    step-based one. It is made once a step: under DDP by rank 0's clock, agreed in one
    all-reduce, so every rank validates at the same step. The training time since the last
    validation and the batch of a time-based validation are in the checkpoint: a run resumed
    counts on from where it stood, and one stopped in such a validation does it again, as
    Lightning redoes a step-based one."""

    _clock = staticmethod(time.monotonic)

    def __init__(self, every_seconds: float):
        self.every_seconds = every_seconds
        self._last = self._clock()
        self._since = 0.0  # training seconds since the last validation, as the checkpoint had it
        self._due_batch: int | None = None  # the epoch loop's total_batch_idx of the validation decided
        self._step_seen: int | None = None

    @property
    def state_key(self) -> str:
        return type(self).__name__

    def state_dict(self) -> dict:
        return {"since": self._clock() - self._last, "due_batch": self._due_batch}

    def load_state_dict(self, state_dict: dict) -> None:
        self._since = float(state_dict.get("since", 0.0))
        self._due_batch = state_dict.get("due_batch")

    def on_train_start(self, trainer, pl_module) -> None:
        self._last = self._clock() - self._since
        self._step_seen = trainer.global_step
        loop = trainer.fit_loop.epoch_loop
        if "_should_check_val_fx" in vars(loop):  # wrapped already (a second fit of this Trainer)
            return
        lightnings = loop._should_check_val_fx

        def should_check_val(data_fetcher) -> bool:
            return lightnings(data_fetcher) or (self._due_batch == loop.total_batch_idx
                                                and loop._should_check_val_epoch())

        loop._should_check_val_fx = should_check_val

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self._step_seen:  # accumulating: no step yet
            return
        self._step_seen = trainer.global_step
        due = self._clock() - self._last >= self.every_seconds
        if getattr(trainer, "world_size", 1) > 1:
            import torch
            import torch.distributed as dist

            flag = torch.tensor([int(due and trainer.is_global_zero)], device=pl_module.device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            due = bool(flag[0])
        if due:
            self._due_batch = trainer.fit_loop.epoch_loop.total_batch_idx

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self._last = self._clock()
