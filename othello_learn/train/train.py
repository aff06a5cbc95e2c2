"""Train a move predictor on the WTHOR dataset with Lightning.

    python train/train.py --config train/configs/ref_raw_d10.yaml --out runs/ref_raw_d10
    OMP_NUM_THREADS=1 python train/train.py --config train/configs/cpu_raw_fast.yaml --out runs/cpu_raw_fast

Rerunning the same command resumes from ``OUT/checkpoints/last.ckpt`` (saved
every ``--checkpoint-every`` steps, after each validation, at the end, and when
interrupted by Ctrl-C, SIGTERM or a closed terminal, SIGHUP); ``--fresh`` starts
over. At the end the best checkpoint (by validation accuracy) is tested on the
test years and exported to ``OUT/model.pt`` (weights and hyperparameters only).
W&B logging is offline by default (no account needed; ``wandb sync`` later),
``--wandb-online`` to stream to your account.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import sys
import time
import warnings
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import SimpleNamespace

import yaml  # (a Lightning dependency)

from othello_learn.cli import (STOP_SIGNALS, ArgumentParser, HangUp, Terminated, run_main, say_stopped, stop_signals_raise,
                         stop_status)
from othello_learn.files import (UserError, atomic_write, check_input, check_output, one_line, parse_nested, remove_stale_temps,
                           write_json)
from othello_learn import HOME, HOME_HELP
from othello_learn.settings import Setting, seed_below
from othello_learn.tracking import start_wandb
from othello_learn.train.config import Origin, check_config, config_argument, gpu_recipe_warning, read_config
from othello_learn.train.run_folder import (CHECKPOINT_NAME, RUN_FILES, batches_per_step, check_run_folder,
                                           mark_fresh_start, run_config_text)


def gpu_in_use(accelerator) -> bool:
    """Whether Lightning will train on a GPU with ``--accelerator``: CUDA's, or an Apple
    GPU's (MPS), which ``auto`` and ``gpu`` pick too."""
    import torch

    name = str(accelerator).lower()
    return ((torch.cuda.is_available() and name in ("auto", "gpu", "cuda"))
            or (torch.backends.mps.is_available() and name in ("auto", "gpu", "mps")))


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
        logger = WandbLogger(project=project, name=name, save_dir=str(out), offline=not online,
                             id=wandb_run_id(out, fresh), resume="allow", log_model=online,
                             **({} if online else {"mode": "offline"}))
        # Lightning hands wandb.init anonymous=None, which wandb >= 0.19 warns of on every run ("has no
        # effect"); unset, it says nothing. A private dict: where it is not there, the warning stays.
        init_args = getattr(logger, "_wandb_init", None)
        if isinstance(init_args, dict) and init_args.get("anonymous", False) is None:
            del init_args["anonymous"]
        return logger
    raise UserError(f"--logger must be wandb, csv or none, got {kind!r}")


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


# 19 years at most: 1e308 minutes passed as finite, then overflowed in the timer
BUDGET_MINUTES = Setting(float, low=0, low_open=True, high=10**7, note="19 years")


def _devices(text: str):
    """``--devices``: a count N (auto is 1 here), or the devices' indices as ``[0,2]`` / ``0,2`` /
    ``N,`` (one device N). Lightning's own forms, less its -1 (all of them), whose count the
    batch-size check could not know."""
    text = text.strip()
    if text == "auto":
        return 1
    if re.fullmatch(r"\d+", text) and int(text) > 0:
        return int(text)
    if "," in text or text.startswith("["):
        parts = [x.strip() for x in (text[1:-1] if text[:1] + text[-1:] == "[]" else text).split(",")]
        if parts[-1] == "":  # "N," as Lightning reads it: device N
            parts.pop()
        if parts and all(x.isdigit() for x in parts) and len(set(map(int, parts))) == len(parts):
            return [int(x) for x in parts]
    raise argparse.ArgumentTypeError(f"{text!r}: give a count of devices (1, 2, ...) or their indices ([N], [0,1])")


def world_size(args) -> int:
    """How many training processes the run has: the devices of a node times the nodes."""
    return (args.devices if isinstance(args.devices, int) else len(args.devices)) * args.num_nodes


def launch_rank(args) -> int:
    """This process's global rank, as its launcher says (torchrun's RANK, SLURM's SLURM_PROCID for
    the tasks it starts, the LOCAL_RANK and NODE_RANK of Lightning's own launcher, which starts the
    command again for each further device once training begins); 0 for the command a user starts.
    Known before the Trainer exists: only rank 0 takes the run lock and writes the run folder."""
    if world_size(args) == 1:
        return 0
    env = os.environ
    if "RANK" in env:
        return int(env["RANK"])
    if "SLURM_PROCID" in env and int(env.get("SLURM_NTASKS", "1")) > 1:
        return int(env["SLURM_PROCID"])
    per_node = args.devices if isinstance(args.devices, int) else len(args.devices)
    return int(env.get("NODE_RANK", 0)) * per_node + int(env.get("LOCAL_RANK", 0))


BUILT_IN = ("the built-in defaults, the reference net (10 layers of 64) on raw planes for 10 epochs of every "
            "training year (days on a CPU; train/configs/cpu_raw.yaml is the 5-minute CPU recipe)")


def parse_args(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--config", type=config_argument,
                   help="YAML with sections model, optim, data, trainer, or a shipped recipe's name (cpu_raw, "
                        "cpu_value_fast, ...: train/configs/ in a checkout, othello_learn/train/recipes/ installed); "
                        f"without one: {BUILT_IN}")
    p.add_argument("--data", type=Path, default=HOME / "data" / "wthor",
                   help="dataset folder from data_tools/wthor.py (default: data/wthor in " + HOME_HELP + ")")
    p.add_argument("--out", type=Path, required=True, help="run folder: checkpoints, logs, model.pt, metrics.json")
    p.add_argument("--logger", **Setting(str, "wandb", "wandb (offline unless --wandb-online), csv or none (default: "
                                         "wandb)", choices=["wandb", "csv", "none"]).argument())
    p.add_argument("--wandb-online", action="store_true", help="log to your W&B account instead of offline files")
    p.add_argument("--wandb-project", default="othello-learn", help="W&B project (default: othello-learn)")
    p.add_argument("--max-epochs", **Setting(low=-1, help="overrides trainer.max_epochs (-1: no limit)").argument())
    p.add_argument("--max-steps", **Setting(low=-1, help="overrides trainer.max_steps").argument())
    p.add_argument("--max-minutes", **BUDGET_MINUTES.argument(
        help="time budget of the training (validation included); the LR schedule ends with it"))
    p.add_argument("--batch-size", **Setting(low=1, help="overrides data.batch_size").argument())
    p.add_argument("--train-positions", **Setting(low=1, help="train on a random subset of this many positions")
                   .argument())
    p.add_argument("--accelerator", default="auto", help="as in Lightning: cpu, gpu, ... (default: auto)")
    p.add_argument("--devices", type=_devices, default=1, metavar="N|[I,...]",
                   help="devices of each node: a count (default 1), or their indices, [N] for device N alone "
                        "(e.g. the GPU with index N); more than one trains data-parallel (--strategy ddp)")
    p.add_argument("--strategy", **Setting(str, "auto", choices=["auto", "ddp"]).argument(),
                   help="ddp: one process per device, each on its share of every batch (data.batch_size is the "
                        "global batch); auto: ddp for several devices or nodes (default: auto)")
    p.add_argument("--num-nodes", **Setting(int, 1, low=1).argument(),
                   help="machines of a DDP run, each started by torchrun or SLURM with these same flags (default: 1)")
    p.add_argument("--ddp-timeout", **Setting(float, 10.0, low=0, low_open=True).argument(), metavar="MINUTES",
                   help="how long a DDP process waits for the others before it stops with an error: one that "
                        "died or hangs (default: 10)")
    p.add_argument("--precision", help="32-true, bf16-mixed, ... or auto (overrides trainer.precision; default auto: "
                   "bf16 autocast + channels_last where the CPU or GPU has fast bf16, else fp32)")
    p.add_argument("--seed", type=seed_below(2**32), default=0,
                   help="seed of the data order, subsets and initial weights (default: 0)")
    p.add_argument("--checkpoint-every", **Setting(int, 2000, "steps between saves of OUT/checkpoints/last.ckpt "
                                                   "(default: 2000)", low=1).argument())
    p.add_argument("--checkpoint-minutes", **Setting(float, 5.0, "also save last.ckpt when this long has passed since "
                                                     "the last save (default 5)", low=0, low_open=True).argument())
    p.add_argument("--init", type=Path, metavar="NET.pt",
                   help="start from this exported network's weights (a shipped checkpoint or a run's model.pt) "
                        "instead of random ones; its settings fill the model section, which may add residual "
                        "blocks or layers (they start as identities, so training starts as strong as NET); "
                        "a resumed run continues from last.ckpt")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override any config value")
    p.add_argument("--fresh", action="store_true", help="ignore OUT/checkpoints/last.ckpt and start over")
    p.add_argument("--no-test", action="store_true", help="skip testing the best checkpoint at the end")
    return p.parse_args(argv)


def check_dataset(dm, data_dir: Path, trainer_cfg: dict | None = None, origin: dict | None = None) -> None:
    """Open the dataset and its splits now, so a missing or damaged folder is one line, not a traceback
    mid-run; and check a validation interval in batches against an epoch's (Lightning's check comes
    only once training starts)."""
    try:
        dm.setup()
    except (OSError, ValueError, KeyError, TypeError) as e:
        why = one_line(e)
        hint = "" if "rebuild" in why else "; build it with python data_tools/wthor.py --out DIR"
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


def split_overlap(dm) -> str | None:
    """Where the training years are also validation or test years, in words (None: apart)."""
    from othello_learn.data.dataset import format_years, parse_years

    def years(split):
        return parse_years(str(dm.hparams[f"{split}_years"])) or set(dm.data.years)

    train = years("train")
    shared = [f"data.train_years and data.{split}_years share {format_years(train & years(split))}"
              for split in ("val", "test") if train & years(split)]
    return "; ".join(shared) or None


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


class SavedInterrupt(KeyboardInterrupt):
    """A stop once training had started: last.ckpt holds the progress, which ``main`` says.
    ``stop``: the stop it was (a KeyboardInterrupt for Ctrl-C, a ``Terminated`` for SIGTERM)."""

    def __init__(self, stop: KeyboardInterrupt):
        super().__init__()
        self.stop = stop


@contextmanager
def interrupts_reraised(saver, stops, distributed: bool = False):
    """Lightning turns Ctrl-C inside ``fit`` or ``test`` into sys.exit(1) after the callbacks'
    on_exception (LastCheckpoint saved), and SIGTERM into its SIGTERMException (a SystemExit)
    at the next step: give ``main`` the stop back, as it was raised (a ``Terminated`` as such,
    a ``HangUp`` where ``stops`` says SIGHUP was passed on as it), a ``SavedInterrupt`` where
    last.ckpt holds progress to resume from. A stop something swallowed is raised first.

    ``distributed`` (DDP): stops are deferred to the ranks' agreement (``stops_around_lightning``),
    one noted after the last agreement is raised as the block ends, and a lost process (another
    rank died, or the process group timed out) is one line naming the step to resume from."""
    stops.stop.check()
    stops.defer = distributed
    try:
        yield
    except RuntimeError as e:
        if not (distributed and _lost_process(e)):
            raise
        saved = f"last.ckpt holds step {saver.saved_step}" if saver.started else "no last.ckpt was saved yet"
        raise UserError(f"a training process was lost ({one_line(e)}); {saved}: rerun the same command to "
                        "resume") from None
    except SystemExit as e:
        from lightning.pytorch.utilities.exceptions import SIGTERMException  # loaded: this is inside fit or test

        interrupt = saver.interrupted_by
        if type(interrupt) is KeyboardInterrupt:  # Ctrl-C
            raise (SavedInterrupt(KeyboardInterrupt()) if saver.started else interrupt.with_traceback(None)) from None
        if isinstance(interrupt, KeyboardInterrupt):
            raise interrupt.with_traceback(None) from None
        if isinstance(e, SIGTERMException):
            stop = (KeyboardInterrupt() if stops.pending == signal.SIGINT else
                    HangUp() if stops.hung_up or stops.pending == getattr(signal, "SIGHUP", None) else Terminated())
            raise (SavedInterrupt(stop) if saver.started else stop) from None
        raise
    finally:
        stops.defer = False
    if stops.pending is not None:  # noted after the last step (in a validation or the test): raised now
        signum, stops.pending = stops.pending, None
        stop = {signal.SIGINT: KeyboardInterrupt, getattr(signal, "SIGHUP", None): HangUp}.get(signum, Terminated)()
        raise SavedInterrupt(stop) if saver.started else stop


def _lost_process(e: RuntimeError) -> bool:
    """Whether ``e`` is torch.distributed's: a peer gone (gloo's closed connection) or a collective
    timed out (the process group's timeout, NCCL's watchdog)."""
    import torch.distributed as dist

    return isinstance(e, getattr(dist, "DistError", ())) or bool(
        re.search(r"gloo|nccl|connection (closed|reset)|timed? ?out|peer", str(e), re.IGNORECASE))


def train(argv=None) -> dict:
    """The whole command; returns the run's summary (``metrics.json``)."""
    args = parse_args(argv)
    check_input(args.config, "--config")
    check_input(args.init, "--init")
    check_output(args.out, "--out", folder=True)
    check_run_folder(args.out)
    new_out = not args.out.exists() and launch_rank(args) == 0  # DDP: the folder is rank 0's to take back
    try:
        with stops_around_lightning() as stops:
            return _train(args, stops)
    except (UserError, KeyboardInterrupt):
        # Refused or stopped before training: take back the folder this command made. Only if it holds
        # nothing but what the set-up writes; a checkpoint means training ran, and it all stays.
        # A .lock there is another run's (ours is released by now): one started into the same new
        # OUT at once, which made the folder too and holds it; its files and lock are not ours.
        setup = {"config.yaml", "wandb_id"}
        ckpt_dir = args.out / "checkpoints"
        if new_out and args.out.is_dir() and {p.name for p in args.out.iterdir()} <= setup | {"checkpoints"} \
                and not (ckpt_dir.is_dir() and any(ckpt_dir.iterdir())):
            for name in setup:
                (args.out / name).unlink(missing_ok=True)
            if ckpt_dir.is_dir():
                ckpt_dir.rmdir()
            args.out.rmdir()
        raise


# Lightning's own notes that a user of this command can do nothing about: its internal use of a
# deprecated torch API, the model summary's size estimate under bf16 (the parameter count stands), and
# under DDP its advice to sync the per-step training losses, rank 0's by choice (MovePredictor._step).
_LIGHTNING_NOISE = (r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                    r"Precision bf16-mixed is not supported by the model summary",
                    r"It is recommended to use `self.log\('train/")


def _ignore_lightning_noise() -> None:
    """Within a ``warnings.catch_warnings()``."""
    for noise in _LIGHTNING_NOISE:
        warnings.filterwarnings("ignore", message=noise)


class _NoTips:
    """A logging filter on Lightning's info lines: the advertisement for its cloud logger, printed
    at every Trainer, and its line on why ``fit`` stopped, which reads "`max_epochs=1` reached"
    when the time budget stopped the epoch midway (``stop_reason`` says what did)."""

    def filter(self, record) -> bool:
        return not str(record.msg).startswith(("\N{ELECTRIC LIGHT BULB} Tip:", "`Trainer.fit` stopped: `max_"))


class _HeldInfo:
    """A logging filter that holds Lightning's info lines back (the precision, the devices) while
    the Trainer is built before the W&B run is started: ``replay`` shows them once that worked, so
    an account problem stays the one line; a refused setting drops them with the run."""

    def __init__(self):
        import logging

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


def _drop_lightning_tips() -> None:
    import logging

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


def settings(args):
    """The run's config (the recipe, ``--set``, then the flags that override it; an ``--init``
    net's architecture under them), where each setting came from, and the ``--init`` network:
    all checked, and the warnings said, before the dataset or a network is touched."""
    from othello_learn.models.nets import check_carried, load_network

    cfg, origin = read_config(args.config, args.set)
    for key, section, name in (("max_epochs", "trainer", "max_epochs"), ("max_steps", "trainer", "max_steps"),
                               ("batch_size", "data", "batch_size"), ("train_positions", "data", "train_positions"),
                               ("precision", "trainer", "precision")):
        if getattr(args, key) is not None:
            cfg[section][name] = getattr(args, key)
            origin[(section, name)] = Origin(f"from --{key.replace('_', '-')}")
    if args.max_minutes is not None:
        # Lightning's Timer counts whole seconds: under half a second would round to a budget spent
        # before the first step, and a run with no step has no checkpoint to export
        cfg["trainer"]["max_time"] = {"seconds": max(1, round(args.max_minutes * 60))}
        origin[("trainer", "max_time")] = Origin("from --max-minutes")
    cfg["trainer"].setdefault("max_epochs", 10)
    init = None
    if args.init is not None:
        init = load_network(args.init)
        check_carried(init.config, cfg["model"], where=f"--init {args.init}")  # before the merge: its settings are not the user's
        cfg["model"] = {**init.config.to_dict(), **cfg["model"]}
    check_config(cfg, origin)
    if args.config is None and not cfg["model"] and all(getattr(args, k) is None for k in
                                                         ("max_epochs", "max_steps", "max_minutes")):
        print(f"no --config: {BUILT_IN}", file=sys.stderr)  # a user who forgot it should know at once
    warning = gpu_recipe_warning(args.config, gpu_in_use(args.accelerator))
    if warning:
        print(warning, file=sys.stderr)
    return cfg, origin, init


def _train(args, stops) -> dict:
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import LearningRateMonitor
    from lightning.pytorch.utilities.exceptions import MisconfigurationException

    from othello_learn.data.datamodule import WthorDataModule
    from othello_learn.lock import RunLock
    from othello_learn.models.fastpath import resolve
    from othello_learn.models.nets import NetConfig, grow_network, save_network
    from othello_learn.train.checkpoints import (AtomicCheckpointIO, BestCheckpoint, LastCheckpoint,
                                                 TrainingProgressBar, ValidateAtEnd)
    from othello_learn.train.module import MovePredictor, network_from_checkpoint

    cfg, origin, init = settings(args)
    world, rank = world_size(args), launch_rank(args)
    if cfg["data"]["batch_size"] % world:
        where = origin.get(("data", "batch_size"))
        raise UserError(f"data.batch_size {cfg['data']['batch_size']}: the global batch, shared by {world} processes "
                        f"(--devices times --num-nodes), must divide by {world}{f' ({where})' if where else ''}")
    dm = WthorDataModule(data_dir=args.data, seed=args.seed, **cfg["data"])
    check_dataset(dm, args.data, cfg["trainer"], origin)
    for split in ("val", "test"):  # a rank with no share would wait for the others' metrics forever
        if 0 < len(dm.splits[split]) < world:
            subset = dm.hparams.get(f"{split}_positions")
            what = f"data.{split}_years {dm.hparams[f'{split}_years']}" + (
                f" (data.{split}_positions {subset})" if subset is not None else "")
            raise UserError(f"{what}: {len(dm.splits[split])} position(s), fewer than the {world} processes "
                            "that share them")
    overlap = split_overlap(dm)
    if overlap:
        print(f"warning: {overlap}: the held-out figures will read too high (continuing)", file=sys.stderr)
    L.seed_everything(args.seed, workers=True, verbose=False)  # before the network: --seed fixes its initial weights
    net_config = NetConfig.from_dict(cfg["model"])
    net = grow_network(init, net_config, where=f"--init {args.init}") if init is not None else net_config
    if init is not None:  # growing is deliberate with --set; from a config file's model section, easy to miss
        grown = [f"model.{k} {getattr(init.config, k)} -> {getattr(net_config, k)} ({origin.get(('model', k), '?')})"
                 for k in ("depth", "blocks", "width", "value_head")
                 if getattr(init.config, k) != getattr(net_config, k)]  # another arch's are at their defaults
        if grown:
            print(f"--init {args.init}: the net is grown: {'; '.join(grown)}", file=sys.stderr)
    model = MovePredictor(net, **cfg["optim"])
    ckpt_dir = args.out / "checkpoints"
    last = ckpt_dir / "last.ckpt"

    # DDP: rank 0 holds the folder; the other ranks, started once it trains, read it and write nothing
    with RunLock(args.out) if rank == 0 else nullcontext():
        if rank == 0:
            ckpt_dir.mkdir(exist_ok=True)  # first: it marks the folder as a training run's (check_run_folder)
        # What a run killed outright (kill -9) left mid-write: a checkpoint runs to MBs, and it is ours.
        removed = [] if rank else (remove_stale_temps(args.out, lambda name: name in RUN_FILES)
                                   + remove_stale_temps(ckpt_dir, CHECKPOINT_NAME.fullmatch))
        if removed:
            print(f"removed {len(removed)} temporary file(s) a killed run left half-written in {args.out}",
                  file=sys.stderr)
        resume = last if last.exists() and not args.fresh else None
        if resume:
            step = check_resumable(resume, model.net.config, dict(dm.hparams), dict(model.hparams))
            check_same_accumulation(args.out / "config.yaml", cfg)
            print(f"resuming from {resume} (step {step})", file=sys.stderr)

        # The settings Lightning checks, checked before a W&B run is made (refused after it, they
        # left its files, which kept a new OUT from being taken back, and its banner around the error
        # line); the logger is handed over once it exists. The best-by-validation checkpoint keeps the
        # settings (hence the state key) of the runs before LastCheckpoint, so resuming them keeps
        # their best score. It saves at every validation's end, before LastCheckpoint: by default a
        # validation at the epoch's end had its best saved at the epoch's end, after last.ckpt, which
        # then recorded no best (a full disk at the final save left it so, and the rerun exported it).
        best = BestCheckpoint(dirpath=ckpt_dir, filename="best-{epoch}-{step}", monitor="val/acc", mode="max",
                              save_top_k=1, save_on_train_epoch_end=False)
        saver = LastCheckpoint(last, args.checkpoint_every, args.checkpoint_minutes * 60, stops=stops)
        trainer_cfg = {"log_every_n_steps": 50, **cfg["trainer"]}
        callbacks = ([ValidateAtEnd(), best, saver]
                     + ([LearningRateMonitor("step")] if args.logger != "none" and rank == 0 else [])
                     + ([TrainingProgressBar()] if trainer_cfg.get("enable_progress_bar", True) else []))
        accelerator = str(args.accelerator).lower()  # Lightning reads it in any case; "gpu": CUDA or Apple's MPS
        if ((accelerator == "cuda" and not torch.cuda.is_available())
                or (accelerator == "gpu" and not (torch.cuda.is_available() or torch.backends.mps.is_available()))):
            raise UserError(f"--accelerator {args.accelerator}: torch {torch.__version__} sees no GPU on this machine; "
                            "use --accelerator cpu (or auto)")
        requested = trainer_cfg.get("precision", "auto")
        try:
            trainer_cfg["precision"] = resolve(requested, args.accelerator)
        except ValueError as e:
            raise UserError(f"trainer.precision: {e}") from None
        _drop_lightning_tips()
        strategy = "auto"
        if world > 1 or args.strategy == "ddp":
            from datetime import timedelta

            from lightning.pytorch.strategies import DDPStrategy

            strategy = DDPStrategy(timeout=timedelta(minutes=args.ddp_timeout))
        try:
            with _HeldInfo() as held:
                trainer = L.Trainer(default_root_dir=args.out, accelerator=args.accelerator, devices=args.devices,
                                    num_nodes=args.num_nodes, strategy=strategy, logger=False, callbacks=callbacks,
                                    use_distributed_sampler=False, plugins=[AtomicCheckpointIO()], **trainer_cfg)
        except (MisconfigurationException, ValueError, TypeError, ImportError) as e:  # Import: tpu, no torch_xla
            device_error = isinstance(e, ImportError) or "devices" in str(e) or "accelerator" in str(e)
            flags = f"--accelerator {args.accelerator} --devices {args.devices}" if device_error else ""
            raise UserError(f"trainer settings{': ' + flags if flags else ''}: {one_line(e)}") from e
        if trainer.global_rank != rank:  # launch_rank read another launcher's variables than Lightning did
            raise UserError(f"this process is rank {trainer.global_rank} to Lightning but {rank} to train.py "
                            "(RANK, SLURM_PROCID, NODE_RANK, LOCAL_RANK); start it with torchrun or srun")
        if world > 1:
            _ranks_stop_together(trainer)

        torch.set_float32_matmul_precision("high")
        if args.fresh and rank == 0:
            mark_fresh_start(args.out)
        logger = make_logger(args.logger if rank == 0 else "none", args.out, args.out.name, args.wandb_online,
                             args.wandb_project, args.fresh)
        if logger and args.logger == "wandb":  # started now, so an account problem is found before any training
            start_wandb(lambda: logger.experiment, args.wandb_online)
        if logger:
            trainer.logger = logger
        held.replay()
        if str(requested) == "auto":
            print(f"precision: {trainer_cfg['precision']} (auto)", file=sys.stderr)
        if rank == 0:
            atomic_write(args.out / "config.yaml", run_config_text(cfg))  # settings Lightning accepted
        # Lightning warns of any mid-epoch resume whose loader has no state_dict; ours skips the
        # batches the run trained on (WthorDataModule.train_dataloader), so the resume is exact.
        with interrupts_reraised(saver, stops, world > 1), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch")
            if resume or args.fresh:  # the checkpoints it warns of: the ones the run resumes from, or the
                # discarded run's, which --fresh keeps (README)
                warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
            _ignore_lightning_noise()
            trainer.fit(model, datamodule=dm, ckpt_path=resume)
        reason = stop_reason(trainer)
        print(f"training stopped at step {trainer.global_step}: {reason}", file=sys.stderr)
        if not best.best_model_path and not last.exists():  # e.g. trainer.max_time: 0 in a config
            raise UserError(f"{args.out}: training stopped before its first step, {reason}: no network to export")
        best_path = best.best_model_path or str(last.resolve())  # absolute, as Lightning's is
        score = best.best_model_score  # None when no validation ran (JSON null, not NaN, which strict parsers refuse)
        summary = {"best_checkpoint": best_path, "best_val_acc": None if score is None else float(score),
                   "config": cfg, "global_step": trainer.global_step}
        if args.init is not None:
            summary["init"] = str(args.init)
        if args.no_test:
            earlier = earlier_test(args.out / "metrics.json", best_path, cfg)
            if earlier is not None:
                summary["test"] = earlier
                print(f"--no-test: kept the test results {args.out / 'metrics.json'} had for this same best "
                      "checkpoint", file=sys.stderr)
        else:
            with interrupts_reraised(saver, stops, world > 1), warnings.catch_warnings():
                _ignore_lightning_noise()
                result = trainer.test(model, datamodule=dm, ckpt_path=best_path, verbose=False)[0]
            summary["test"] = {k: float(v) for k, v in result.items()}
            log_test_results(logger, summary["test"])
        if rank:
            return summary
        save_network(network_from_checkpoint(best_path), args.out / "model.pt", metrics=summary)
        write_json(args.out / "metrics.json", summary)
        if isinstance(logger, L.pytorch.loggers.WandbLogger):
            logger.experiment.finish()  # else a second train() in this process logs into this W&B run
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2))
    return summary


def _ranks_stop_together(trainer) -> None:
    """DDP: stops go through ``stops_around_lightning``'s deferral and ``LastCheckpoint``'s
    agreement, not Lightning's own SIGTERM handler, which broadcasts from inside the signal handler
    (a collective at whatever point each rank was, unmatched when a signal reaches one rank or two
    reach another). And the watch Lightning's launcher keeps on the ranks it starts, which SIGKILLs
    the launching process (rank 0) five seconds after another rank exits with an error, is left
    off: rank 0 learns of a lost rank from the process group (gloo at once, NCCL at --ddp-timeout)
    and ends with its own error line, and a stop's exit status is its own, not a kill's. Both are
    Lightning's private parts: where they are not there, its own behaviour stays."""
    from lightning.fabric.strategies.launchers import subprocess_script

    connector = getattr(trainer, "_signal_connector", None)
    if connector is not None and hasattr(connector, "register_signal_handlers"):
        connector.register_signal_handlers = lambda: None
    if hasattr(subprocess_script, "_launch_process_observer"):
        subprocess_script._launch_process_observer = lambda procs: None


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


@contextmanager
def stops_around_lightning():
    """Lightning takes SIGTERM in ``fit`` and ``test`` only (it saves last.ckpt and stops at the
    next step); before and between them SIGTERM killed the process outright (no message, no
    exit 143) and a Ctrl-C that an import swallowed was lost (the run trained to its end). In the
    block SIGTERM and Ctrl-C raise (``StopOnce``) where Lightning is not listening; where it is,
    its handler calls this one, the handler it found, which leaves the stop to it. SIGHUP (a
    closed terminal, a dropped ssh session) is SIGTERM: Lightning's where it listens (else up to
    --checkpoint-minutes were lost), else raised as ``HangUp``; ``.hung_up`` remembers it.
    ``.stop.check()`` raises a swallowed stop (``interrupts_reraised`` calls it before fit and
    test). Signals ignored as the block begins (nohup's SIGHUP) stay ignored.

    While ``.defer`` is set (a DDP run's fit and test, ``interrupts_reraised``) a first stop is only
    noted in ``.pending`` (its signal's number): ``LastCheckpoint`` agrees on it with the other ranks
    after the step, and all save and stop there together; a stop raised at once would leave the
    others waiting in a collective the stopped rank never reaches. A second one stops at once."""
    said = SimpleNamespace(stop=None, hung_up=False, defer=False, pending=None)

    def noted(signum) -> bool:
        if said.defer and said.pending is None:
            said.pending = signum
            return True
        return False

    def handlers(stop):
        said.stop = stop

        def interrupt(signum, frame):
            if not noted(signum):
                stop(signum, frame)

        def term(signum, frame):
            if not noted(signum) and signal.getsignal(signal.SIGTERM) is term:  # else Lightning's called this one
                stop(signum, frame)

        def hang_up(signum, frame):
            said.hung_up = True
            if noted(signum):
                return
            sigterm = signal.getsignal(signal.SIGTERM)
            if sigterm is term or not callable(sigterm):
                stop(signum, frame)
            else:
                sigterm(signal.SIGTERM, frame)

        return {signal.SIGINT: interrupt, signal.SIGTERM: term, getattr(signal, "SIGHUP", None): hang_up}

    with stop_signals_raise({signal.SIGINT, *STOP_SIGNALS}, handlers):
        yield said


def main(argv=None) -> int:
    try:
        train(argv)
        return 0
    except SavedInterrupt as e:
        stop = e.stop
    what, code = stop_status(stop)
    say_stopped(f"{Path(sys.argv[0]).name}: {what}; last.ckpt holds the progress: rerun the same command to resume")
    return code


def cli() -> None:
    """The ``othello-train`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
