"""What a start of the training command checks before it trains, each refusal in one line, and
what a rerun keeps. The run folder, OUT: a folder that is not empty must be a run's (which files
there are the run's own, so a rerun replaces those and nothing else). Its ``last.ckpt``, read
before any training: a damaged or foreign file, another network, other data or optimizer settings,
or another gradient accumulation are refused; the test results ``--no-test`` keeps from the run
before. The dataset, against the run's settings: a folder that is not a usable dataset, a batch or
validation interval no epoch holds, a batch or split the DDP processes cannot share, and training
years that are also held-out ones."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml  # (a Lightning dependency)

from othello_learn.files import UserError, one_line, parse_nested, temp_target
from othello_learn.train.logs import batches_per_step


# The run folder: which files in OUT are the run's own.
RUN_FILES = ("config.yaml", "model.pt", "metrics.json", "wandb_id")  # what a run writes in OUT itself


# What a run writes in OUT/checkpoints: Lightning's last and best checkpoints.
CHECKPOINT_NAME = re.compile(r"last\.ckpt|best-.*\.ckpt")

# The first line of the config.yaml a run writes, a YAML comment (the file stays a recipe that
# --config reads): the proof that the folder is a run's, as a dataset's summary.json carries its
# format, where a killed run left no checkpoint yet.
RUN_CONFIG_MARK = "# othello-learn training run:"


def run_config_text(cfg: dict) -> str:
    """OUT/config.yaml: the run's settings under the line that marks the folder as a run's."""
    return (f"{RUN_CONFIG_MARK} the settings of its last start (a recipe for --config)\n"
            + yaml.safe_dump(cfg, sort_keys=False))


def _written_by_a_run(config_yaml: Path) -> bool:
    try:
        with open(config_yaml, "rb") as f:
            return f.readline().startswith(RUN_CONFIG_MARK.encode())
    except OSError:
        return False


def check_run_folder(out: Path) -> None:
    """A folder that is not empty must be a run of this command: one whose checkpoints/ holds a
    run's checkpoints, or whose config.yaml a run wrote (a run killed before its first
    checkpoint); model.pt, config.yaml and metrics.json there are then ours to replace. In any
    other folder they could be the user's, and so could a checkpoints/ folder holding files but
    none of our checkpoints (this repository's own, say), or an empty one beside the user's files.
    Only OUT's lock and an empty checkpoints/ (what a run makes first) are let through alone."""
    for name in RUN_FILES:  # found now: a folder in a file's place stopped the run after its training
        if (out / name).is_dir():
            raise UserError(f"--out {out}: {name} there is a folder, where the run writes a file; "
                            "move it, or choose another --out")
    if not out.is_dir():
        return
    ckpts = out / "checkpoints"
    if ckpts.is_dir():
        names = sorted(temp_target(p.name) or p.name for p in ckpts.iterdir()
                       if temp_target(p.name) or not p.name.startswith("."))  # a .DS_Store is no one's run
        if any(CHECKPOINT_NAME.fullmatch(name) for name in names):
            return
        if names:
            raise UserError(f"--out {out}: its checkpoints/ folder is not a training run's (it holds {names[0]!r}"
                            f"{f' and {len(names) - 1} more' if len(names) > 1 else ''}, no last.ckpt or "
                            "best-*.ckpt): choose a new or an empty folder")
    if _written_by_a_run(out / "config.yaml"):
        return
    theirs = sorted(p.name for p in out.iterdir() if p.name not in (".lock", "checkpoints"))
    if theirs:
        more = f" and {len(theirs) - 1} more" if len(theirs) > 1 else ""
        raise UserError(f"--out {out}: the folder is not empty and holds no training run (no checkpoints, no "
                        f"config.yaml a run wrote; it holds {theirs[0]!r}{more}): choose a new or an empty folder")


# Its last.ckpt: whether a rerun may resume from it, and what it keeps.


def _damaged_state(ckpt: dict) -> str | None:
    """What in a Lightning checkpoint its restore would trip over with a traceback (a TypeError in
    the loops, a KeyError in the optimizer), or resume from wrongly (a negative step)."""
    loops = ckpt["loops"]
    if not isinstance(loops, dict) or not isinstance(loops.get("fit_loop"), dict):
        return "its loops are not Lightning's loop state"
    for key in ("global_step", "epoch"):
        value = ckpt.get(key, 0)
        if type(value) is not int or value < 0:
            return f"its {key} is {value!r}"
    optimizers = ckpt.get("optimizer_states", [])
    if not isinstance(optimizers, list) or not all(
            isinstance(o, dict) and isinstance(o.get("state"), dict) and isinstance(o.get("param_groups"), list)
            for o in optimizers):
        return "its optimizer_states are not an optimizer's state"
    schedulers = ckpt.get("lr_schedulers", [])
    if not isinstance(schedulers, list) or not all(isinstance(x, dict) for x in schedulers):
        return "its lr_schedulers are not a scheduler's state"
    if not isinstance(ckpt["state_dict"], dict):
        return "its state_dict is not a network's weights"
    return None


def check_resumable(path: Path, net_config, data: dict | None = None, optim: dict | None = None) -> int:
    """Read ``last.ckpt`` before training: a truncated or foreign file, or one of another
    network than the config's, is a one-line error suggesting ``--fresh``; so is one of other
    data settings than ``data`` (the data module's), or of other optimizer settings than
    ``optim`` (the module's hyperparameters) that the resume would not take. Returns its step."""
    from othello_learn.models.nets import read_checkpoint
    from othello_learn.train.module import checkpoint_net_config

    try:
        ckpt = read_checkpoint(path)
    except UserError as e:
        raise UserError(f"cannot resume: {e}; rerun with --fresh to start over "
                        f"(the best checkpoints in {path.parent} are kept)") from None
    hp = ckpt.get("hyper_parameters")
    if not isinstance(hp, dict) or "loops" not in ckpt or "state_dict" not in ckpt:
        raise UserError(f"cannot resume: {path} is not a training checkpoint of train.py; "
                        "rerun with --fresh to start over")
    try:  # the flat hyperparameters of runs started before the module took a net config, or {"net": {...}}
        there = checkpoint_net_config(hp).to_dict()
    except (TypeError, ValueError) as e:
        raise UserError(f"cannot resume from {path}: {e}; rerun with --fresh to start over") from None
    now = net_config.to_dict()
    # another architecture: the settings only one of them reads would be noise beside it
    keys = now if there["arch"] == now["arch"] else ("arch", "encoder")
    differ = [f"model.{k}={there[k]!r} there, {now[k]!r} now" for k in keys if there[k] != now[k]]
    if differ:
        raise UserError(f"cannot resume from {path}: it is a different network ({'; '.join(differ)}); "
                        "use the run's own config, another --out, or --fresh")
    if data is not None:
        differ = data_differences(ckpt.get("datamodule_hyper_parameters") or {}, data)
        if differ:
            raise UserError(f"cannot resume from {path}: the run trained on other data or batches "
                            f"({'; '.join(differ)}); use the run's own settings, or another --out for a new run")
    if optim is not None:
        differ = optim_differences(hp, optim)
        if differ:
            raise UserError(f"cannot resume from {path}: the run trained with other optimizer settings "
                            f"({'; '.join(differ)}), which its restored state would override or lose; use the "
                            "run's own settings, or another --out for a new run")
    damaged = _damaged_state(ckpt)  # after the settings: a run of another network is named as that first
    if damaged:
        raise UserError(f"cannot resume: {path} is damaged ({damaged}); rerun with --fresh to start over "
                        f"(the best checkpoints in {path.parent} are kept)")
    return int(ckpt.get("global_step", 0))


def check_same_accumulation(config_yaml: Path, cfg: dict) -> None:
    """A resume with another ``trainer.accumulate_grad_batches`` is refused, as another batch size
    is: a step is that many batches, and curves.py reads the positions of every logged step off
    config.yaml, which records the last start's, so the points trained before the change were
    drawn at positions scaled by the new accumulation. The run's own is in its config.yaml
    (written at every start); a folder without a readable one is not checked."""
    try:
        there = batches_per_step((parse_nested(yaml.safe_load, config_yaml.read_text()) or {}).get("trainer"))
    except (OSError, yaml.YAMLError, AttributeError, TypeError, ValueError, OverflowError):
        return
    now = batches_per_step(cfg.get("trainer"))
    if there != now:
        raise UserError(f"cannot resume: the run trained with trainer.accumulate_grad_batches={there} "
                        f"({config_yaml}), not {now}: a step would count other batches; use the run's own "
                        "settings, or another --out for a new run")


# batch_size and symmetries too: a mid-epoch resume skips the batches trained on by count, and
# config.yaml would record one batch size or augmentation for a run trained on two.
DATA_KEYS = ("seed", "train_years", "val_years", "test_years", "train_positions", "val_positions", "batch_size",
             "symmetries")


def optim_differences(there: dict, now: dict) -> list[str]:
    """The optimizer settings of a run's checkpoint (its module's hyperparameters) that ``now``
    changes and a resume would not honour, while config.yaml recorded them: the restored optimizer
    state keeps the run's learning rate and weight decay (``--set optim.lr`` on a rerun trained at
    the old one), the scheduler's state holds its step count (a switch to or from ``none`` kept the
    annealed rate for good, or restarted the schedule), and with ``ema`` turned off the run went on
    from the averaged weights, its own ones dropped. A setting the checkpoint lacks (older runs)
    is not compared."""
    differ = [f"optim.{k}={there[k]!r} there, {now[k]!r} now" for k in ("lr", "weight_decay", "scheduler")
              if k in there and k in now and there[k] != now[k]]
    if there.get("ema", 0.0) > 0 and now.get("ema", 0.0) == 0:
        differ.append(f"optim.ema={there['ema']!r} there, {now['ema']!r} now")
    return differ


def data_differences(there: dict, now: dict) -> list[str]:
    """The data settings of a run's checkpoint (the data module's) that ``now`` changes: a resume
    on other data would leave config.yaml and the run claiming what it did not train on. The
    folder counts only where the run's still exists (a run moved to another machine names a path
    there), compared as data, not as spelt: another folder of the same bytes is the same data."""
    from othello_learn.data.dataset import parse_years, same_dataset

    def same(key, a, b):
        if key.endswith("_years"):
            return parse_years(str(a)) == parse_years(str(b))
        return a == b

    name = {"seed": "--seed"}
    differ = [f"{name.get(k, 'data.' + k)}={there[k]!r} there, {now[k]!r} now"
              for k in DATA_KEYS if k in there and k in now and not same(k, there[k], now[k])]
    old, new = there.get("data_dir"), now.get("data_dir")
    if old and new and Path(old).is_dir() and Path(new).is_dir() and not same_dataset(old, new):
        differ.insert(0, f"--data {old} there, {new} now")
    elif there.get("data_digest") and now.get("data_digest") and there["data_digest"] != now["data_digest"]:
        differ.insert(0, f"--data {new}: rebuilt since the run began (its summary.json differs)")
    return differ


def earlier_test(metrics: Path, best_path: str, cfg: dict) -> dict | None:
    """The test results ``metrics`` holds for ``best_path`` itself, to keep through a rerun with
    --no-test (rewriting metrics.json without them would lose them): only when that checkpoint
    was not rewritten since they were (a --fresh run can reuse its name) and the data settings
    are the same; else None."""
    try:
        earlier = parse_nested(json.loads, metrics.read_text())
        tested_after = metrics.stat().st_mtime >= Path(best_path).stat().st_mtime
    except (OSError, ValueError):
        return None
    if not (isinstance(earlier, dict) and isinstance(earlier.get("test"), dict) and tested_after
            and earlier.get("best_checkpoint") == best_path
            and isinstance(earlier.get("config"), dict) and earlier["config"].get("data") == cfg["data"]):
        return None
    return earlier["test"]


# The dataset against the run's settings.


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
