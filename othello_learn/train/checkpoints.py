"""How a training run saves itself: one ``last.ckpt``, always whole, always loadable safely.

Every checkpoint Lightning writes goes through ``AtomicCheckpointIO`` (serialized in
memory, written beside the target, renamed), so a kill or a full disk never leaves a
truncated ``last.ckpt`` for the rerun to trip on, and every one it reads is loaded
with ``weights_only=True``. ``LastCheckpoint`` is the one place that decides when the
resumable state is saved: every N steps (and at least every few minutes), after each
validation, at the end of training, and when training is interrupted (an exception,
Ctrl-C, SIGTERM at the end of a session) with progress not yet saved. ``TrainingProgressBar``
shows a run resumed mid-epoch as one that never stopped, and what is left of its time budget.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from pathlib import Path

from lightning.pytorch.callbacks import Checkpoint, ModelCheckpoint, Timer, TQDMProgressBar
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.trainer.states import TrainerFn

from othello_learn.cli import bar_pacing
from othello_learn.files import UserError
from othello_learn.models.nets import read_checkpoint, save_checkpoint_file


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint I/O with atomic, plain-typed writes and weights-only reads."""

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        save_checkpoint_file(checkpoint, path)

    def load_checkpoint(self, path, map_location=lambda storage, loc: storage, weights_only=None) -> dict:
        return read_checkpoint(path, map_location=map_location)


class BestCheckpoint(ModelCheckpoint):
    """Lightning's best-by-validation checkpoint, resumable from a run folder that was
    moved or copied, or whose best file was deleted.

    Lightning records the best file by its absolute path: from a moved folder it keeps
    that path (the export then reads the old folder's file, or fails) and forgets the
    best score (a worse validation becomes the best); with the file deleted, the export
    fails after all the training. Here a path in the recorded folder is read in this
    one, and a best file that is gone is forgotten with a note, so the next validation
    sets the best again. The state key stays ModelCheckpoint's, so runs saved before
    resume alike."""

    @property
    def state_key(self) -> str:
        return super().state_key.replace(type(self).__qualname__, ModelCheckpoint.__qualname__, 1)

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        old = state.get("dirpath")
        if old and self.dirpath and old != self.dirpath:
            def here(path):
                return str(Path(self.dirpath) / Path(path).name) if path and Path(path).parent == Path(old) else path

            for key in ("best_model_path", "kth_best_model_path", "last_model_path"):
                state[key] = here(state.get(key))
            state["best_k_models"] = {here(k): v for k, v in (state.get("best_k_models") or {}).items()}
            state["dirpath"] = self.dirpath
        # Lightning deletes the best files it replaces: a recorded path outside this run's folder
        # (a tampered or foreign last.ckpt, "../..") is never taken as one of ours
        folder = Path(self.dirpath).resolve() if self.dirpath else None

        def foreign(path) -> bool:
            return bool(path) and folder is not None and Path(path).resolve().parent != folder

        if foreign(state.get("last_model_path")):
            state["last_model_path"] = ""
        best = state.get("best_model_path")
        outside = [p for p in (best, state.get("kth_best_model_path"), *(state.get("best_k_models") or {}))
                   if foreign(p)]
        if outside:
            best = outside[0]  # named in the note
        why = ("is not in this run's checkpoints folder" if outside else
               "is gone" if best and not Path(best).exists() else _damaged(best) if best else None)
        if why:
            print(f"note: the best checkpoint this run recorded, {best}, {why}; the best is tracked "
                  "afresh from the next validation", file=sys.stderr)
            state.update(best_model_path="", best_model_score=None, best_k_models={}, kth_best_model_path="",
                         kth_value=self.kth_value)
        super().load_state_dict(state)


def _damaged(path: str) -> str | None:
    """Why the best file cannot be read, or None: read on resume, since the export reads it
    only after all the training, which then ended in an error with nothing to do about it."""
    try:
        read_checkpoint(path)
    except UserError as e:
        return f"is damaged and left as it is ({e})"
    return None


class TrainingProgressBar(TQDMProgressBar):
    """Lightning's bar with two fixes for long CPU runs. ``budget``: the time left of
    ``--max-minutes`` (over the resumes, as Lightning's timer counts it) beside the epoch's
    time left, which alone promised hours to a run stopping in minutes. And a run resumed
    mid-epoch is shown where it stands: Lightning does not call ``on_train_epoch_start`` for
    the epoch it resumes, so the bar read ``Training: 1171/?`` (no epoch, length or time left)
    until the next epoch; it now starts at the batches already done, its rate and time left
    counting only the batches trained since (the long recipes are resumed across sessions).
    In a log file (Lightning draws on stdout; not a terminal) a bar is redrawn at most once a
    minute and at its end, as ``bar_pacing`` paces the other commands' bars (Lightning redraws
    by an explicit refresh, which tqdm's own pacing does not hold back). The training loss
    (``train/loss``) is the mean of the last ``LOSS_WINDOW`` steps': one step's is too noisy to
    read a trend from, and an epoch's mean comes only at its end."""

    LOSS_WINDOW = 50

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pace = bar_pacing(sys.stdout).get("mininterval", 0.0)
        self._losses: collections.deque = collections.deque(maxlen=self.LOSS_WINDOW)

    def _paced(self, bar):
        """``bar`` with its redraws held to one a ``_pace``, its count kept current (a redraw
        skipped, not a count: the next one, a postfix's or the end's, shows where it stands)."""
        if not self._pace:
            return bar
        refresh, drawn = bar.refresh, [-math.inf]

        def paced_refresh(*args, **kwargs):
            now = time.monotonic()
            if now - drawn[0] >= self._pace or (bar.total is not None and bar.n >= bar.total):
                drawn[0] = now
                return refresh(*args, **kwargs)
            return None

        bar.refresh = paced_refresh
        return bar

    def init_sanity_tqdm(self):
        return self._paced(super().init_sanity_tqdm())

    def init_train_tqdm(self):
        return self._paced(super().init_train_tqdm())

    def init_validation_tqdm(self):
        return self._paced(super().init_validation_tqdm())

    def init_test_tqdm(self):
        return self._paced(super().init_test_tqdm())

    def init_predict_tqdm(self):
        return self._paced(super().init_predict_tqdm())

    def on_train_start(self, trainer, pl_module) -> None:
        super().on_train_start(trainer, pl_module)
        if trainer.fit_loop.restarted_mid_epoch:
            self.on_train_epoch_start(trainer)
            done = trainer.fit_loop.epoch_loop.batch_progress.current.processed
            if done >= trainer.num_training_batches:
                # saved at an epoch's last batch and stopped in the validation after it: the run
                # resumes at the start of the next epoch, which Lightning also calls mid-epoch
                return
            bar = self.train_progress_bar
            bar.n = bar.last_print_n = bar.initial = done
            bar.refresh()

    def on_exception(self, trainer, pl_module, exception) -> None:
        """A stopped run (Ctrl-C, a signal, an error) left its bars open, and tqdm drew their last
        frame whenever they were garbage-collected: in a process that goes on (``train()`` called
        again, as a notebook would) that came in the middle of the next run's bar. Closed where
        the run stops (Lightning's attributes: its properties raise for a bar not made)."""
        super().on_exception(trainer, pl_module, exception)
        for name in ("_train_progress_bar", "_val_progress_bar", "_test_progress_bar", "_predict_progress_bar"):
            bar = getattr(self, name, None)
            if bar is not None:
                bar.close()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = trainer.progress_bar_metrics.get("train/loss_step")  # the module's, logged with prog_bar
        if loss is not None:
            self._losses.append(float(loss))
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def get_metrics(self, trainer, pl_module) -> dict:
        items = super().get_metrics(trainer, pl_module)
        if self._losses and items.pop("train/loss_step", None) is not None:
            items["train/loss"] = sum(self._losses) / len(self._losses)
        timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
        left = None if timer is None else timer.time_remaining()
        if left is not None:
            m, s = divmod(max(0, round(left)), 60)
            items["budget"] = f"{m // 60}:{m % 60:02d}:{s:02d}"
        return items


def _validates_now(trainer) -> bool:
    """Whether Lightning validates right after this training batch. A save before that
    validation resumes past it, never done (Lightning counts it as done with its step): a run
    stopped there lost the point from its curves and its choice of the best checkpoint, and
    the shipped recipes validate every 2,000 steps, where --checkpoint-every saves. The
    save after the validation (``on_validation_end``) is the step's. Lightning's own test,
    a private one: where it is not there, saved as before."""
    fit = getattr(trainer, "fit_loop", None)
    loop = getattr(fit, "epoch_loop", None)
    should = getattr(loop, "_should_check_val_fx", None)
    fetcher = getattr(fit, "_data_fetcher", None)
    if should is None or fetcher is None or getattr(loop, "_skip_next_val", False):
        return False
    return bool(should(fetcher))


class LastCheckpoint(Checkpoint):
    """Saves the resumable state to ``path``.

    A ``Checkpoint`` subclass, so Lightning runs it after the best-by-validation
    ``ModelCheckpoint`` (it moves checkpoint callbacks last, keeping their order): the
    state saved after a validation already records the new best checkpoint.

    Under DDP every save is a collective (only rank 0 writes, all wait for it), so the ranks
    decide together after each step: rank 0's clock says whether a save is due, and ``stops``
    (``stops.stops_around_lightning``'s) holds a stop a rank noted (``.pending``, its signal's
    number); both are agreed in one all-reduce, then every rank saves, and stops, at the same
    step. An error mid-step (a rank lost) saves nothing: the ranks' states may differ there, and
    the run resumes from the last whole save."""

    def __init__(self, path: str | Path, every_n_steps: int, every_seconds: float = 300.0, stops=None):
        self.path = Path(path)
        self.every_n_steps = every_n_steps
        self.every_seconds = every_seconds
        self.stops = stops
        self.interrupted_by: BaseException | None = None
        self._saved_step: int | None = None  # None until training has started
        self._saved_at = time.monotonic()
        self._epoch_cut_short = False

    @property
    def state_key(self) -> str:
        return f"LastCheckpoint[{self.path.name}]"

    @property
    def saved_step(self) -> int | None:
        return self._saved_step

    @property
    def started(self) -> bool:
        """Whether ``path`` holds this run's progress: training started (or resumed from it), and
        a fresh run's first save is made (a Ctrl-C in its first step saves nothing)."""
        return self._saved_step is not None and self.path.exists()

    def _save(self, trainer) -> None:
        trainer.save_checkpoint(self.path, weights_only=False)  # the full resumable state
        self._saved_step = trainer.global_step
        self._saved_at = time.monotonic()

    def on_train_start(self, trainer, pl_module) -> None:
        self._saved_step = trainer.global_step  # the restored state is already on disk
        self._saved_at = time.monotonic()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        due = step % self.every_n_steps == 0 or time.monotonic() - self._saved_at >= self.every_seconds
        if getattr(trainer, "world_size", 1) > 1:
            due = self._agree(trainer, pl_module, due)
        if step == self._saved_step or _validates_now(trainer):
            return
        if due:
            self._save(trainer)

    def _agree(self, trainer, pl_module, due: bool) -> bool:
        """Rank 0's ``due``, and any rank's pending stop (the highest signal number); on a stop all
        ranks save (unless saved at this step) and raise Lightning's SIGTERMException together."""
        import torch
        import torch.distributed as dist

        pending = getattr(self.stops, "pending", None) or 0
        flags = torch.tensor([int(due and trainer.is_global_zero), int(pending)], device=pl_module.device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        due, pending = bool(flags[0]), int(flags[1])
        if pending:
            from lightning.pytorch.utilities.exceptions import SIGTERMException

            if self.stops is not None:
                self.stops.pending = pending
            if trainer.global_step != self._saved_step:
                self._save(trainer)
            raise SIGTERMException
        return due

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        self._save(trainer)

    def on_train_end(self, trainer, pl_module) -> None:
        # A time budget or max_steps stops between periodic saves, often inside an epoch.
        done, size = trainer.fit_loop.epoch_loop.batch_progress.current.completed, trainer.num_training_batches
        self._epoch_cut_short = size != float("inf") and done < size
        try:
            self._save(trainer)
        finally:
            self._epoch_cut_short = False

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        """Lightning counts an epoch that max_steps or max_time stopped as finished, so a
        rerun with a higher --max-steps under max_epochs 1 trained nothing, and under more
        epochs skipped the rest of that one. Saved as still in progress, the rerun finishes it."""
        if not self._epoch_cut_short:
            return
        checkpoint["epoch"] -= 1
        progress = checkpoint["loops"]["fit_loop"]["epoch_progress"]
        for part in ("total", "current"):
            for count in ("processed", "completed"):
                progress[part][count] -= 1

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self.interrupted_by = exception
        if self._saved_step is None or trainer.global_step == self._saved_step or getattr(trainer, "world_size", 1) > 1:
            return  # training never started, nothing new since the last save, or DDP (see the class)
        if trainer.validating and not trainer.sanity_checking:
            return  # saved mid-validation, the rerun went on past it; from the save before it, it validates
        try:
            self._save(trainer)
        except Exception as e:  # e.g. the disk is full: keep the previous last.ckpt and the original error
            print(f"warning: could not save {self.path} after the interruption: {e}", file=sys.stderr)
