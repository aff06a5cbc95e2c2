"""Whether a training run's folder may be resumed, and what a rerun keeps: ``last.ckpt`` read
before any training (a damaged or foreign file, another network, other data or optimizer settings,
or another gradient accumulation are refused in one line), and the test results ``--no-test``
keeps from the run before."""

from __future__ import annotations

import json
from pathlib import Path

import yaml  # (a Lightning dependency)

from othello_learn.files import UserError, parse_nested
from othello_learn.train.run_files import batches_per_step


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
