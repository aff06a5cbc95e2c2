"""The dataset checked against the run's settings before any training: a folder that is not a
usable dataset, a batch or validation interval no epoch holds, a batch or split the DDP processes
cannot share, and training years that are also held-out ones, each said in one line."""

from __future__ import annotations

from pathlib import Path

from othello_learn.files import UserError, one_line


def check_global_batch(cfg: dict, origin: dict, world: int) -> None:
    """``data.batch_size`` is the global batch: each of the ``world`` processes takes an equal share."""
    if cfg["data"]["batch_size"] % world:
        where = origin.get(("data", "batch_size"))
        raise UserError(f"data.batch_size {cfg['data']['batch_size']}: the global batch, shared by {world} processes "
                        f"(--devices times --num-nodes), must divide by {world}{f' ({where})' if where else ''}")


def check_dataset(dm, data_dir: Path, trainer_cfg: dict | None = None, origin: dict | None = None) -> None:
    """Open the dataset and its splits now, so a missing or damaged folder is one line, not a traceback
    mid-run; and check a validation interval in batches against an epoch's (Lightning's check comes
    only once training starts)."""
    try:
        dm.setup()
    except (OSError, ValueError, KeyError, TypeError) as e:
        why = one_line(e)
        hint = "" if "rebuild" in why else "; build it with othello-dataset --out DIR"
        raise UserError(f"--data {data_dir}: not a usable dataset ({why}){hint}") from e
    batches = len(dm.train_dataloader())
    if batches == 0:  # an epoch drops its last partial batch: this one would train on nothing
        raise UserError(f"data.batch_size {dm.hparams.batch_size}: more than the {len(dm.splits['train'])} "
                        "training positions (data.train_positions, data.train_years); lower it or train on more")
    trainer_cfg, origin = trainer_cfg or {}, origin or {}

    def where(key):
        return f" ({origin[('trainer', key)]})" if ("trainer", key) in origin else ""

    # an epoch as Lightning cuts it (its _parse_num_batches): a fraction of none of them was its traceback
    limit = trainer_cfg.get("limit_train_batches", 1.0)
    if isinstance(limit, (int, float)) and not isinstance(limit, bool):
        batches = min(batches, limit) if isinstance(limit, int) else int(batches * limit)
        if batches == 0:
            raise UserError(f"trainer.limit_train_batches: {limit} of an epoch's {len(dm.train_dataloader())} "
                            f"batches is none of them; raise it, or train on more positions{where('limit_train_batches')}")
    every = trainer_cfg.get("val_check_interval")
    # Lightning's own condition: with check_val_every_n_epoch null the interval counts steps across
    # epochs and may be longer than one (refused here before); with no validation it is never used
    counts_in_epochs = trainer_cfg.get("check_val_every_n_epoch", 1) is not None
    validates = trainer_cfg.get("limit_val_batches", 1.0) > 0
    if isinstance(every, int) and not isinstance(every, bool) and counts_in_epochs and validates:
        if every > batches:
            raise UserError(f"trainer.val_check_interval: {every} batches, more than an epoch's {batches} "
                            f"(data.train_positions / data.batch_size"
                            f"{', trainer.limit_train_batches' if limit != 1.0 else ''}); lower it, train on more "
                            f"positions, or set trainer.check_val_every_n_epoch=null to count it across epochs"
                            + where("val_check_interval"))


def check_shares(dm, world: int) -> None:
    """Every process has a share of the held-out splits: a rank with none would wait for the
    others' metrics forever."""
    for split in ("val", "test"):
        if 0 < len(dm.splits[split]) < world:
            subset = dm.hparams.get(f"{split}_positions")
            what = f"data.{split}_years {dm.hparams[f'{split}_years']}" + (
                f" (data.{split}_positions {subset})" if subset is not None else "")
            raise UserError(f"{what}: {len(dm.splits[split])} position(s), fewer than the {world} processes "
                            "that share them")


def split_overlap(dm) -> str | None:
    """Where the training years are also validation or test years, in words (None: apart)."""
    from othello_learn.data.dataset import format_years, parse_years

    def years(split):
        return parse_years(str(dm.hparams[f"{split}_years"])) or set(dm.data.years)

    train = years("train")
    shared = [f"data.train_years and data.{split}_years share {format_years(train & years(split))}"
              for split in ("val", "test") if train & years(split)]
    return "; ".join(shared) or None
