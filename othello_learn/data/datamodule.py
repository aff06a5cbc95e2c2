"""The Lightning DataModule over a built WTHOR dataset.

Batches are gathered from the memory-mapped records by one fancy index per
batch (a sampler yields index arrays, not per-sample Python ints), turned into
a model batch (``othello_learn.models.batch``), and moved to the device; the random D4 transform of each
training sample is applied there, on the device, by whole-batch bit tricks.
"""

from __future__ import annotations

import os
from pathlib import Path

import lightning as L
import numpy as np
import torch

from othello_learn.files import UserError
from othello_learn.settings import Setting
from othello_learn.models.batch import SYMMETRY_GROUPS, augment, from_records

from .dataset import REFERENCE_SPLIT, WthorDataset, content_digest, parse_years


def leave_the_process_group(worker_id: int) -> None:
    """A DataLoader worker's start: out of the run's process group, so a stop meant for the run
    (Ctrl-C at the terminal, a scheduler's or ``timeout``'s SIGTERM to the group, a closed
    terminal's SIGHUP) reaches the main process only, which saves last.ckpt and shuts its
    workers down. A worker the stop killed first became torch's 100-line RuntimeError, exit 1,
    and could abort the save. A worker whose main process is gone still ends (torch's watchdog)."""
    if hasattr(os, "setpgid"):
        os.setpgid(0, 0)


class PositionBatches(torch.utils.data.Dataset):
    """Records addressed a batch at a time (``__getitems__``), for the DataLoader."""

    def __init__(self, positions: np.ndarray):
        self.positions = positions

    def __len__(self) -> int:
        return len(self.positions)

    def __getitems__(self, indices) -> dict[str, torch.Tensor]:
        idx = np.sort(np.asarray(indices))  # sorted reads are kinder to the page cache
        return from_records(self.positions[idx])

    def __getitem__(self, i):
        return self.__getitems__([i])


def _keep(batch):
    return batch


class EpochBatchSampler(torch.utils.data.Sampler):
    """Index arrays of ``batch_size``: a fresh seeded permutation each epoch
    (Lightning calls ``set_epoch``), or the natural order.

    ``skip``: batches of the first epoch iterated to leave out, those a resumed run
    trained on before it stopped. The permutation depends on the epoch alone, so the
    rest of an interrupted epoch is exactly what it would have been.

    ``rank`` of ``world`` processes (DDP): ``batch_size`` is the global batch, and each rank
    yields its contiguous share of every global batch, so the ranks together see the one
    permutation a single process would, in as many steps, and ``skip`` leaves out the same
    batches on every rank. A last partial batch (evaluation) is split as evenly as it goes;
    a rank whose share of it is empty has one batch fewer."""

    def __init__(self, n: int, batch_size: int, shuffle: bool, seed: int = 0, drop_last: bool = False,
                 skip: int = 0, rank: int = 0, world: int = 1):
        if batch_size % world:
            raise ValueError(f"batch size {batch_size} does not divide among {world} processes")
        self.n, self.batch_size, self.shuffle, self.seed, self.drop_last = n, batch_size, shuffle, seed, drop_last
        self.epoch, self.skip, self.rank, self.world = 0, skip, rank, world

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @property
    def sampler(self) -> "EpochBatchSampler":
        """Lightning calls ``set_epoch`` on ``loader.sampler`` and ``loader.batch_sampler.sampler``
        only: without this, a batch sampler's epoch stayed 0 and every epoch repeated the first
        one's order."""
        return self

    def __len__(self) -> int:
        full, rest = divmod(self.n, self.batch_size)
        return full + (0 if self.drop_last else rest > self.rank)  # rank r's share of `rest` is empty if r >= rest

    def __iter__(self):
        order = (np.random.default_rng((self.seed, self.epoch)).permutation(self.n) if self.shuffle
                 else np.arange(self.n))
        start, self.skip = self.skip, 0
        for b in range(start, len(self)):
            batch = order[b * self.batch_size : (b + 1) * self.batch_size]
            yield np.array_split(batch, self.world)[self.rank] if self.world > 1 else batch


class WthorDataModule(L.LightningDataModule):
    """Year splits of a dataset folder; train batches shuffled and D4-augmented. The
    augmentation is ``on_after_batch_transfer``'s, while a Trainer trains: batches drawn from
    ``train_dataloader()`` by hand come unaugmented (``othello_learn.models.batch.augment``
    augments them), and the loaders need ``setup()`` first, as a Trainer calls it.

    ``symmetries``: ``"all"`` (the 8 of D4), ``"start"`` (the 4 that keep the
    start position: no colour-swapped openings) or ``"none"``.
    ``train_positions``: a seeded random subset of the training years, for
    quick CPU-scale runs (None: all).
    """

    def __init__(
        self,
        data_dir: str | Path = "data/wthor",
        batch_size: int = 256,
        symmetries: str = "all",
        train_years: str = "{}-{}".format(*REFERENCE_SPLIT["train"]),
        val_years: str = str(REFERENCE_SPLIT["val"][0]),
        test_years: str = str(REFERENCE_SPLIT["test"][0]),
        train_positions: int | None = None,
        val_positions: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
    ):
        super().__init__()
        data_dir = str(data_dir)  # checkpoints store hyperparameters; keep them plain (weights_only loading)
        Setting(str, choices=sorted(SYMMETRY_GROUPS)).check(symmetries, "symmetries")  # a ValueError
        self.save_hyperparameters()
        self.group = SYMMETRY_GROUPS[symmetries]
        self.data: WthorDataset | None = None
        self.splits: dict[str, np.ndarray] = {}

    def _years(self, split: str) -> np.ndarray:
        """The split's positions; a year the setting names that the dataset lacks is an error."""
        text = self.hparams[f"{split}_years"]
        if not self.data.years:
            raise UserError(f"data.{split}_years {text}: no positions in {self.data.path}")
        try:
            return self.data.positions_of(parse_years(text))
        except ValueError as e:
            raise UserError(f"data.{split}_years {text}: {e}") from None

    def _subset(self, positions: np.ndarray, limit: int | None, salt: int) -> np.ndarray:
        if limit is None or limit >= len(positions):
            return positions
        pick = np.random.default_rng((self.hparams.seed, salt)).choice(len(positions), limit, replace=False)
        return positions[np.sort(pick)]

    def setup(self, stage: str | None = None) -> None:
        if self.data is not None:
            return
        self.data = WthorDataset(self.hparams.data_dir)
        hp = self.hparams
        hp["data_digest"] = content_digest(self.data.summary)  # saved in the checkpoints: a rebuild is told
        self.splits = {
            "train": self._subset(self._years("train"), hp.train_positions, 1),
            "val": self._subset(self._years("val"), hp.val_positions, 2),
            "test": self._years("test"),
        }

    def _loader(self, split: str, shuffle: bool, skip: int = 0) -> torch.utils.data.DataLoader:
        if split not in self.splits:  # used by hand, outside a Trainer: a bare KeyError said nothing
            raise RuntimeError(f"WthorDataModule: call setup() before {split}_dataloader() (a Trainer calls it)")
        positions = self.splits[split]
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        sampler = EpochBatchSampler(len(positions), self.hparams.batch_size, shuffle, self.hparams.seed,
                                    drop_last=shuffle, skip=skip, rank=rank, world=world)
        return torch.utils.data.DataLoader(
            PositionBatches(positions),
            batch_sampler=sampler,
            collate_fn=_keep,
            num_workers=self.hparams.num_workers,
            persistent_workers=self.hparams.num_workers > 0,
            worker_init_fn=leave_the_process_group,
            pin_memory=torch.cuda.is_available(),
        )

    def train_dataloader(self):
        loader = self._loader("train", shuffle=True)
        sampler = loader.batch_sampler
        sampler.skip = self._batches_trained_this_epoch(len(loader))
        if self.trainer is not None:
            # Lightning sets the epoch as each epoch starts, but a resumed run's loader workers
            # draw their first batches before that: start them on the restored epoch.
            sampler.set_epoch(self.trainer.current_epoch)
        return loader

    def _batches_trained_this_epoch(self, per_epoch: int) -> int:
        """How far into its epoch a resumed run is: Lightning restores its progress before
        it asks for the loaders. Without skipping them, a mid-epoch resume trained the
        epoch's first batches twice and never reached its last ones."""
        trainer = self.trainer
        if trainer is None:
            return 0
        progress = trainer.fit_loop.epoch_loop.batch_progress
        if progress.is_last_batch:  # the epoch, as trainer.limit_train_batches cuts it, was done: the
            return 0                # rerun starts the next one (the skip used to carry into it)
        done = progress.current.processed  # completed lags by one after a save at a batch's end
        return done if 0 < done < per_epoch else 0

    def val_dataloader(self):
        return self._loader("val", shuffle=False)

    def test_dataloader(self):
        return self._loader("test", shuffle=False)

    def on_after_batch_transfer(self, batch, dataloader_idx):
        if self.trainer is not None and self.trainer.training:
            return augment(batch, self.group, shard=(self.trainer.global_rank, self.trainer.world_size))
        return batch
