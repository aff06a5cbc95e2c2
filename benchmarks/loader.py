"""Benchmark: how many positions a second the training DataLoader delivers
(gather from the memory-mapped dataset + tensors), and what the on-device
D4 augmentation costs, to check that data loading cannot starve a GPU.

    python benchmarks/loader.py [--data data/wthor] [--batch-size 1024] [--batches 100]

A warm-up run (the epoch's permutation, the iterator) goes before the three timed
ones; a run past the end of the training split goes on into the next epoch.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.settings import at_least  # noqa: E402
from othello_learn.files import UserError  # noqa: E402
from othello_learn.data.datamodule import WthorDataModule  # noqa: E402
from othello_learn.models.batch import augment  # noqa: E402
from othello_learn.models.fastpath import default_device  # noqa: E402


def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "wthor",
                    help="a dataset data_tools/wthor.py built")
    ap.add_argument("--batch-size", type=at_least(1), default=1024, help="positions a batch")
    ap.add_argument("--batches", type=at_least(1), default=100, help="batches in each of the 3 timed runs")
    ap.add_argument("--workers", type=at_least(0), default=0, help="DataLoader worker processes")
    ap.add_argument("--train-years", default="1977-2014", help="the years the loader reads, as train.py's data.train_years")
    args = ap.parse_args(argv)
    dm = WthorDataModule(args.data, batch_size=args.batch_size, num_workers=args.workers, train_years=args.train_years,
                         val_years=args.train_years.split("-")[0], test_years=args.train_years.split("-")[0])
    dm.setup()
    if len(dm.splits["train"]) < args.batch_size:
        raise UserError(f"--batch-size {args.batch_size}: the training split has {len(dm.splits['train']):,} positions")
    device = default_device()
    rates, aug_ms = [], []
    loader = dm.train_dataloader()

    def batches():
        for epoch in itertools.count():
            loader.batch_sampler.set_epoch(epoch)
            yield from loader

    it = batches()
    for run in range(4):  # run 0 warms up
        t = time.perf_counter()
        for _ in range(args.batches):
            batch = next(it)
        if run:
            rates.append(args.batch_size * args.batches / (time.perf_counter() - t))
    batch = {k: v.to(device) for k, v in batch.items()}
    for _ in range(20):
        t = time.perf_counter()
        augment(batch)
        if device == "cuda":
            torch.cuda.synchronize()
        aug_ms.append((time.perf_counter() - t) * 1e3)
    print(f"train split: {len(dm.splits['train']):,} positions; batch {args.batch_size}, {args.workers} workers, device {device}")
    print(f"loader: median {statistics.median(rates):,.0f} positions/s over 3 runs of {args.batches} batches "
          f"({[round(r) for r in rates]}); an epoch of the training years at this rate: "
          f"{len(dm.splits['train']) / statistics.median(rates):.0f} s")
    print(f"D4 augmentation of one batch on {device}: median {statistics.median(aug_ms):.2f} ms")


if __name__ == "__main__":
    sys.exit(run_main(main))
