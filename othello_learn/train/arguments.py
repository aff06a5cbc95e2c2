"""The training command's flags, and the settings they make: the parser, the processes a run has
(``--devices`` times ``--num-nodes``) and this one's rank, and the run's config read from the
recipe, ``--set`` and the flags, all checked before the dataset or a network is touched."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from othello_learn import HOME, HOME_HELP
from othello_learn.cli import ArgumentParser
from othello_learn.settings import Setting, seed_below
from othello_learn.train.config import Origin, check_config, config_argument, gpu_recipe_warning, read_config


def gpu_in_use(accelerator) -> bool:
    """Whether Lightning will train on a GPU with ``--accelerator``: CUDA's, or an Apple
    GPU's (MPS), which ``auto`` and ``gpu`` pick too."""
    import torch

    name = str(accelerator).lower()
    return ((torch.cuda.is_available() and name in ("auto", "gpu", "cuda"))
            or (torch.backends.mps.is_available() and name in ("auto", "gpu", "mps")))


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


def build_parser(doc: str) -> ArgumentParser:
    """The command's parser; ``doc``, the command module's docstring, is its description (the
    first paragraph) and its epilog (the rest)."""
    p = ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=doc.split("\n\n", 1)[1])
    p.add_argument("--config", type=config_argument,
                   help="YAML with sections model, optim, data, trainer, or a shipped recipe's name (cpu_raw, "
                        "cpu_value_fast, ...: train/configs/ in a checkout, othello_learn/train/recipes/ installed); "
                        f"without one: {BUILT_IN}")
    p.add_argument("--data", type=Path, default=HOME / "data" / "wthor",
                   help="dataset folder from othello-dataset (default: data/wthor in " + HOME_HELP + ")")
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
    p.add_argument("--val-every-minutes", **Setting(float, 10.0, "also validate when this long has passed since the "
                                                    "last validation, whichever comes first with "
                                                    "trainer.val_check_interval; 0: by steps only (default 10)",
                                                    low=0, high=10**7).argument())
    p.add_argument("--init", type=Path, metavar="NET.pt",
                   help="start from this exported network's weights (a shipped checkpoint or a run's model.pt) "
                        "instead of random ones; its settings fill the model section, which may add residual "
                        "blocks or layers (they start as identities, so training starts as strong as NET); "
                        "a resumed run continues from last.ckpt")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override any config value")
    p.add_argument("--fresh", action="store_true", help="ignore OUT/checkpoints/last.ckpt and start over")
    p.add_argument("--no-test", action="store_true", help="skip testing the best checkpoint at the end")
    return p


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
