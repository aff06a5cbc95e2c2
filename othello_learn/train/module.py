"""The LightningModule: a move-prediction network, its losses and metrics."""

from __future__ import annotations

import math

import lightning as L
import torch
from lightning.pytorch.callbacks import EMAWeightAveraging, Timer
from torchmetrics.classification import MulticlassAccuracy

from othello_learn.files import UserError
from othello_learn.settings import Setting
from othello_learn.models.fastpath import prepare
from othello_learn.models.losses import move_losses
from othello_learn.models.nets import (MoveNet, NetConfig, build_network, is_training_checkpoint, network_from_export,
                                       network_from_state, read_checkpoint)

from .metrics import PHASE_NAMES, PhaseAccuracy


# The learning-rate schedules, the default first: a one-cycle warm-up and cosine decay, the
# cosine decay alone, or a constant rate.
SCHEDULERS = ("onecycle", "cosine", "none")


class MovePredictor(L.LightningModule):
    """Cross-entropy on the expert's move over legal moves only, plus (with a
    value head) MSE between the value and the game's outcome for the side to
    move (+1 win, 0 draw, -1 loss), weighted by ``value_weight``.

    ``ema`` > 0 keeps an exponential moving average of the weights (decay per
    step, e.g. 0.999): validation, the best checkpoint and the exported net use
    the average, training goes on with the current weights.

    ``net``: the network, or its ``NetConfig`` (or that as a dict, as checkpoints
    store it under ``hyper_parameters["net"]``, plain so they load weights-only)."""

    def __init__(
        self,
        net: MoveNet | NetConfig | dict,
        lr: float = 1e-3,
        weight_decay: float = 1e-4,
        scheduler: str = SCHEDULERS[0],
        value_weight: float = 0.5,
        label_smoothing: float = 0.0,
        ema: float = 0.0,
    ):
        super().__init__()
        if isinstance(net, dict):
            net = NetConfig.from_dict(net)
        if isinstance(net, NetConfig):
            net = build_network(net)
        self.save_hyperparameters({"net": net.config.to_dict(), "lr": lr, "weight_decay": weight_decay,
                                   "scheduler": scheduler, "value_weight": value_weight,
                                   "label_smoothing": label_smoothing, "ema": ema})
        self._total_steps = 1
        self._timer = None
        self.net = net
        self.metrics = torch.nn.ModuleDict({
            split: torch.nn.ModuleDict({
                "acc": MulticlassAccuracy(num_classes=64, top_k=1, average="micro"),
                "top3": MulticlassAccuracy(num_classes=64, top_k=3, average="micro"),
            })
            for split in ("train_", "val_", "test_")  # ModuleDict keys may not be "train"
        })
        self.phases = torch.nn.ModuleDict({"val_": PhaseAccuracy(), "test_": PhaseAccuracy()})

    def configure_callbacks(self):
        # A fresh callback at every fit/test (Lightning replaces one of the same type), so
        # testing a checkpoint reads its averaged weights, never a fit's current ones.
        return [_EMA(decay=self.hparams.ema)] if self.hparams.get("ema", 0.0) > 0 else []

    def setup(self, stage: str) -> None:
        # channels_last under bf16 on CPU: oneDNN's fast bf16 convolutions want it.
        prepare(self.net, self.trainer.strategy.root_device, self.trainer.precision)

    def forward(self, batch: dict) -> dict:
        return self.net(batch)

    def _step(self, batch: dict, split: str) -> torch.Tensor:
        out = self.net(batch)
        logits = out["policy"]
        # The value target is the outcome for the side to move: the sign of the disc difference.
        parts = move_losses(out, batch["move"], torch.sign(batch["result"]), value_weight=self.hparams.value_weight,
                            label_smoothing=self.hparams.label_smoothing)
        loss, n = parts["loss"], logits.shape[0]
        # DDP: the held-out losses are summed over the ranks' shards with their sizes (exact); the
        # training ones, logged each step, are rank 0's share of the batch (a collective a step spared)
        sync = split != "train"
        if "value_loss" in parts:
            self.log(f"{split}/value_loss", parts["value_loss"], batch_size=n, on_step=split == "train", on_epoch=True,
                     sync_dist=sync)
        self.log(f"{split}/policy_loss", parts["policy_loss"], batch_size=n, on_step=split == "train", on_epoch=True,
                 sync_dist=sync)
        self.log(f"{split}/loss", loss, batch_size=n, prog_bar=True, on_step=split == "train",
                 on_epoch=True, sync_dist=sync)
        m = self.metrics[split + "_"]
        for name, metric in m.items():
            metric(logits, batch["move"])
            self.log(f"{split}/{name}", metric, batch_size=n, prog_bar=name == "acc", on_step=False, on_epoch=True)
        if split != "train":
            legal = logits > torch.finfo(logits.dtype).min
            correct = logits.argmax(-1) == batch["move"]
            self.phases[split + "_"].update(correct, batch["ply"], legal.sum(-1))
        return loss

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._step(batch, "test")

    def _log_phases(self, split: str) -> None:
        metric = self.phases[split + "_"]
        for phase in metric.compute():
            self.log(f"{split}/acc_moves_{phase['moves']}", phase["accuracy"], sync_dist=True)  # alike on every rank
        metric.reset()

    def on_validation_epoch_end(self):
        self._log_phases("val")
        if self._timer is not None and not self.trainer.sanity_checking:
            # Training time so far (resumes included: the Timer's state is in the checkpoint),
            # for learning curves against wall-clock hours (train/curves.py).
            self.log("time/hours", self._timer.time_elapsed("train") / 3600, sync_dist=True)

    def on_test_epoch_end(self):
        self._log_phases("test")

    def on_train_start(self):
        steps = self.trainer.estimated_stepping_batches
        self._total_steps = max(int(steps), 1) if math.isfinite(steps) else None
        self._timer = next((c for c in self.trainer.callbacks if isinstance(c, Timer)), None)
        budget = self._timer.time_remaining() if self._timer is not None else None
        if self._total_steps is None and budget is None and self.hparams.scheduler != "none":
            raise ValueError("an open-ended run (max_epochs=-1) needs a time budget (--max-minutes) "
                             "or optim.scheduler=none: the learning-rate schedule has no end")

    def _progress(self, step: int) -> float:
        """Share of the run done: steps over planned steps or, under a time
        budget (``trainer.max_time``), time used over the budget, whichever is
        further, so the schedule ends where the run does."""
        t = step / self._total_steps if self._total_steps else 0.0
        remaining = self._timer.time_remaining() if self._timer is not None else None
        if remaining is not None:
            elapsed = self._timer.time_elapsed()
            t = max(t, elapsed / max(elapsed + remaining, 1e-9))
            trainer = self._trainer  # (None outside a Trainer, where .trainer raises)
            if trainer is not None and trainer.world_size > 1:  # rank 0's clock: each rank's would part the replicas
                t = trainer.strategy.broadcast(t, 0)
        return min(t, 1.0)

    def configure_optimizers(self):
        hp = self.hparams
        decay, no_decay = [], []
        for name, p in self.named_parameters():
            (no_decay if p.ndim <= 1 else decay).append(p)  # no weight decay on biases and norms
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=hp.lr)
        if hp.scheduler == "none":
            return opt
        Setting(str, choices=SCHEDULERS).check(hp.scheduler, "scheduler")  # a ValueError
        warmup = 0.05 if hp.scheduler == "onecycle" else 0.0

        def factor(step: int) -> float:
            # The run length is read at fit start (on_train_start), not baked into
            # the scheduler's state, so resuming with more epochs stretches the schedule.
            t = self._progress(step)
            if t < warmup:
                return 0.04 + 0.96 * t / warmup
            return 0.5 * (1 + math.cos(math.pi * (t - warmup) / (1 - warmup))) * 0.99 + 0.01

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class _EMA(EMAWeightAveraging):
    """Lightning's EMA callback, quiet when a checkpoint is loaded to test it: its
    ``state_dict`` holds the averaged weights already (the current ones, kept for
    resuming, are under ``current_model_state``).

    At the end of training Lightning copies the average into the module, and the save that
    ends the run (``LastCheckpoint``, a checkpoint callback, runs after this one) then kept
    the average as the weights to train on: a run continued with a higher --max-steps,
    --max-epochs or --max-minutes trained on from the average, not from where it stopped.
    The weights trained until then are kept for that save."""

    _trained: dict | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        self._trained = None
        super().setup(trainer, pl_module, stage)

    def on_train_end(self, trainer, pl_module) -> None:
        self._trained = {k: v.detach().clone() for k, v in pl_module.state_dict().items()}
        super().on_train_end(trainer, pl_module)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        super().on_save_checkpoint(trainer, pl_module, checkpoint)
        if self._trained is not None and "current_model_state" in checkpoint:
            checkpoint["current_model_state"] = self._trained

    def on_load_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        if self._average_model is not None:
            super().on_load_checkpoint(trainer, pl_module, checkpoint)


def checkpoint_net_config(hparams: dict) -> NetConfig:
    """The network of a training checkpoint's ``hyper_parameters``: ``{"net": {...}, lr...}``
    now, the flat ``{arch, encoder, ..., lr, ...}`` of the runs started before."""
    if "net" in hparams:
        return NetConfig.from_dict(hparams["net"])
    return NetConfig.from_hparams(hparams)


def network_from_checkpoint(path, map_location="cpu") -> MoveNet:
    """The network of a Lightning ``.ckpt`` written by train.py (either layout of its
    hyperparameters), in eval mode: what ``train.py`` exports and ``evaluate.py`` reads."""
    return _network_from_lightning(read_checkpoint(path, map_location), path)


def load_any_network(path, map_location="cpu") -> MoveNet:
    """An exported network (``.pt``) or the network of a training checkpoint (``.ckpt``),
    told apart by what the file holds; the file is read once."""
    return network_from_any(read_checkpoint(path, map_location), path)


def network_from_any(ckpt: dict, path) -> MoveNet:
    """``load_any_network`` for a checkpoint already read (a caller that also wants its metadata)."""
    if is_training_checkpoint(ckpt):
        return _network_from_lightning(ckpt, path)
    return network_from_export(ckpt, path)


def _network_from_lightning(ckpt: dict, path) -> MoveNet:
    hparams, state = ckpt.get("hyper_parameters"), ckpt.get("state_dict")
    if not isinstance(hparams, dict) or not isinstance(state, dict):
        raise UserError(f"{path}: not a training checkpoint of train.py (no hyper_parameters / state_dict)")
    try:
        cfg = checkpoint_net_config(hparams)
    except (TypeError, ValueError) as e:
        raise UserError(f"{path}: {e}") from e
    net_state = {k.removeprefix("net."): v for k, v in state.items() if k.startswith("net.")}
    return network_from_state(cfg, net_state, path)


__all__ = ["MovePredictor", "PHASE_NAMES", "checkpoint_net_config", "load_any_network", "network_from_any",
           "network_from_checkpoint"]
