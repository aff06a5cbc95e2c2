"""Benchmark: training throughput (positions/s) through the real training step:
batches from the DataModule, on-device D4 augmentation, encoding, forward,
the module's loss, backward and AdamW, with the numeric path a run would use.

    python benchmarks/train_throughput.py --config train/configs/ref_raw_d10.yaml [--steps 200]
    python benchmarks/train_throughput.py --compare --json OUT.json          # CPU: fp32 baseline vs recipe
    python benchmarks/train_throughput.py --profile --config train/configs/cpu_value_fast.yaml
    python benchmarks/train_throughput.py --devices 2 --strategy ddp --json OUT.json  # 1 process vs DDP
    python benchmarks/train_throughput.py --synthetic 200000 --compare --precision bf16   # no WTHOR files

``--compare`` alternates rounds of the fp32 eager NCHW baseline and the
project's CPU recipe (``precision: auto``: bf16 autocast + channels_last where
the CPU has bf16, see models/fastpath.py) for the same net and batches, and
reports the medians side by side, so machine noise hits both alike.
``--profile`` splits a step into its stages (loading, augmentation, encoding,
forward + loss, backward, optimizer) to show where the time goes.
``--devices N --strategy ddp`` alternates rounds of the recipe in one process
and in N DDP processes (gloo on CPU, NCCL on GPUs; each its share of the same
global batch, as train.py's DDP trains), and reports both medians and their ratio.
``--synthetic N`` times on a temporary dataset of about N positions of random games
(benchmarks/synthetic_dataset.py) instead of ``--data``: the speed does not depend on the games.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.settings import Setting, at_least  # noqa: E402
from othello_learn.files import UserError, check_output, write_json  # noqa: E402
from othello_learn.data.datamodule import WthorDataModule  # noqa: E402
from othello_learn.models.batch import SYMMETRY_GROUPS, augment  # noqa: E402
from othello_learn.models.fastpath import FP32, autocast, default_device, prepare, resolve  # noqa: E402
from othello_learn.models.losses import move_losses  # noqa: E402
from othello_learn.models.nets import NetConfig, build_network  # noqa: E402
from othello_learn.train.config import config_argument, load_config  # noqa: E402

EPOCH = 6_912_964  # positions of 1977-2014


def loss_of(out: dict, batch: dict, value_weight: float = 0.5) -> torch.Tensor:
    """The training module's loss: cross-entropy over legal moves (+ value MSE)."""
    return move_losses(out, batch["move"], torch.sign(batch["result"]), value_weight=value_weight)["loss"]


class Setup:
    """One numeric path: a fresh net, its optimizer, its precision."""

    def __init__(self, model_cfg: dict, device: str, precision: str, compile_net: bool = False):
        self.device, self.precision = device, precision
        self.net = prepare(build_network(NetConfig.from_dict(model_cfg)).to(device).train(), device, precision)
        if compile_net:  # the convolutions: the legal-move mask's uint64 bit tricks are beyond Dynamo
            self.net.trunk = torch.compile(self.net.trunk)
        self.model = self.net
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=1e-3)

    def step(self, batch: dict) -> None:
        with autocast(self.device, self.precision):
            loss = loss_of(self.model(batch), batch)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def endless(loader):
    """The training batches epoch after epoch: the timed steps (480 of them with the defaults and
    --compare) are more batches than one epoch holds at a large --batch-size (16,384 on a GPU), and
    a single pass ended in a StopIteration traceback after minutes of timing."""
    for epoch in itertools.count():
        loader.batch_sampler.set_epoch(epoch)
        yield from loader


def ddp_rank(rank: int, world: int, port: int, args, cfg: dict, bs: int, precision: str, gate, out) -> None:
    """One DDP process of ``--strategy ddp``: rank 0 times the rounds, DDP ones with every rank and
    single-process ones alone, alternating; ``out`` gets the rates. Between rounds the ranks meet at
    ``gate``, a multiprocessing barrier, which sleeps: gloo's barrier polls, and the waiting ranks
    took cores from the single process's rounds."""
    import os

    import torch.distributed as dist

    from othello_learn.data.datamodule import EpochBatchSampler, PositionBatches

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = default_device()
    if device == "cuda":
        torch.cuda.set_device(rank)
        device = f"cuda:{rank}"
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", rank=rank, world_size=world)
    threads = args.threads or torch.get_num_threads()
    share = max(1, threads // world)  # the cores shared among the ranks, all of them for one process alone
    dm = WthorDataModule(args.data, batch_size=bs)
    dm.setup()
    positions = dm.splits["train"]

    def batches(part: int, parts: int):
        loader = torch.utils.data.DataLoader(PositionBatches(positions), collate_fn=lambda b: b,
                                             batch_sampler=EpochBatchSampler(len(positions), bs, True, drop_last=True,
                                                                             rank=part, world=parts))
        return endless(loader)

    group = SYMMETRY_GROUPS[cfg["data"].get("symmetries", "all")]
    ddp = Setup(cfg["model"], device, precision)
    ddp.model = torch.nn.parallel.DistributedDataParallel(ddp.net)
    setups = {f"ddp:{world}": (ddp, batches(rank, world), share)}
    if rank == 0:
        setups = {"processes:1": (Setup(cfg["model"], device, precision), batches(0, 1), threads), **setups}
    rates: dict[str, list[float]] = {k: [] for k in setups}
    for rnd in range(args.rounds + 1):  # round 0 warms up
        for name in sorted(("processes:1", f"ddp:{world}"), reverse=bool(rnd % 2)):
            gate.wait()
            if name not in setups:
                continue  # another rank's single-process round: wait for it at the next barrier
            setup, loader, n_threads = setups[name]
            torch.set_num_threads(n_threads)
            sync(device.split(":")[0])
            t = time.perf_counter()
            for _ in range(args.steps):
                setup.step(augment({k: v.to(device, non_blocking=True) for k, v in next(loader).items()}, group,
                                   shard=(rank, world) if name.startswith("ddp") else (0, 1)))
            sync(device.split(":")[0])
            if rnd:
                rates[name].append(bs * args.steps / (time.perf_counter() - t))
    gate.wait()
    dist.destroy_process_group()
    if rank == 0:
        out.put(rates)


def compare_ddp(args, cfg: dict, bs: int, precision: str) -> dict:
    """``--devices N --strategy ddp``: the medians of one process and of N DDP processes."""
    import socket

    import torch.multiprocessing as mp

    if bs % args.devices:
        raise UserError(f"--batch-size {bs}: the global batch must divide among the {args.devices} processes")
    if default_device() == "cuda" and torch.cuda.device_count() < args.devices:
        raise UserError(f"--devices {args.devices}: this machine has {torch.cuda.device_count()} GPU(s)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = mp.get_context("spawn")
    gate, out = ctx.Barrier(args.devices), ctx.SimpleQueue()
    mp.start_processes(ddp_rank, args=(args.devices, port, args, cfg, bs, precision, gate, out), nprocs=args.devices,
                       start_method="spawn")
    rates = out.get()
    result = {}
    for name, r in rates.items():
        result[name] = statistics.median(r)
        print(f"{name:12s} median {result[name]:,.0f} positions/s over {len(r)} rounds {[round(x) for x in r]}")
    ratio = result[f"ddp:{args.devices}"] / result["processes:1"]
    print(f"ddp:{args.devices} / processes:1: {ratio:.2f}x")
    return {"samples_per_s": result, "ratio": ratio}


def cpu_name() -> str:
    try:
        return next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        return "CPU"


def profile(setup: Setup, loader, group, steps: int, bs: int) -> dict:
    """Seconds per step in each stage (medians over ``steps`` steps)."""
    from othello_learn.models.encoders import ENCODERS
    from othello_learn.models.nets import legal_mask, masked

    encode = ENCODERS[setup.net.encoder][0]
    stages = {k: [] for k in ("load", "augment", "encode+mask", "forward+loss", "backward", "optimizer")}
    for i in range(steps + 3):
        t0 = time.perf_counter()
        batch = {k: v.to(setup.device) for k, v in next(loader).items()}
        t1 = time.perf_counter()
        batch = augment(batch, group)
        t2 = time.perf_counter()
        x = encode(batch)
        legal = legal_mask(batch["player"], batch["opponent"])
        t3 = time.perf_counter()
        with autocast(setup.device, setup.precision):
            logits, value = setup.net.trunk(x)
            out = {"policy": masked(logits, legal)}
            if value is not None:
                out["value"] = value
            loss = loss_of(out, batch)
        sync(setup.device)
        t4 = time.perf_counter()
        setup.opt.zero_grad(set_to_none=True)
        loss.backward()
        sync(setup.device)
        t5 = time.perf_counter()
        setup.opt.step()
        sync(setup.device)
        t6 = time.perf_counter()
        if i >= 3:
            for k, a, b in zip(stages, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6)):
                stages[k].append(b - a)
    med = {k: statistics.median(v) for k, v in stages.items()}
    total = sum(med.values())
    print(f"profile ({setup.precision}, batch {bs}): {bs / total:,.0f} positions/s")
    for k, v in med.items():
        print(f"  {k:13s} {v * 1e3:7.2f} ms  {100 * v / total:5.1f} %")
    return {k: v * 1e3 for k, v in med.items()}


def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--config", type=config_argument, default=REPO / "train/configs/cpu_raw_fast.yaml",
                    help="training config whose model, batch size and symmetries are measured")
    ap.add_argument("--data", type=Path, default=REPO / "data" / "wthor", help="built dataset folder")
    ap.add_argument("--synthetic", type=at_least(1), metavar="N",
                    help="instead of --data, a temporary dataset of about N positions of random games")
    ap.add_argument("--steps", type=at_least(1), default=40, help="timed steps per round")
    ap.add_argument("--rounds", type=at_least(1), default=5, help="timed rounds per setting (after one warm-up round)")
    ap.add_argument("--batch-size", type=at_least(1), help="overrides the config's data.batch_size")
    ap.add_argument("--threads", type=at_least(1), help="torch threads, None for torch's choice")
    ap.add_argument("--precision", default="auto", help="the recipe's precision (auto: detected fast path)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the recipe's network")
    ap.add_argument("--compare", action="store_true", help="alternate fp32 eager NCHW baseline and the recipe")
    ap.add_argument("--profile", action="store_true", help="time each stage of the recipe's training step")
    ap.add_argument("--devices", type=at_least(1), default=1, help="with --strategy ddp: DDP processes to time")
    ap.add_argument("--strategy", **Setting(str, "auto", choices=["auto", "ddp"]).argument(),
                    help="ddp: alternate rounds of one process and of --devices DDP processes")
    ap.add_argument("--json", type=Path, help="write the medians here")
    args = ap.parse_args(argv)
    if args.profile and args.compare:  # the profile times the recipe alone: a --compare was silently dropped
        raise UserError("--profile times the recipe's stages alone; give it without --compare")
    if args.strategy == "ddp" or args.devices > 1:  # before the data and the minutes of timing
        if args.strategy != "ddp" or args.devices < 2:
            raise UserError("--devices N (2 or more) goes with --strategy ddp: one process against N")
        if args.profile or args.compare or args.compile:
            raise UserError("--strategy ddp times the recipe in one process and in DDP alone; give it without "
                            "--profile, --compare or --compile")
    if args.json:  # before the minutes of timing
        check_output(args.json, "--json", suffixes=(".json",))
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.synthetic:
        from benchmarks.synthetic_dataset import build as build_synthetic

        with tempfile.TemporaryDirectory() as tmp:
            args.data = build_synthetic(Path(tmp) / "synthetic", args.synthetic)
            return measure(args)
    return measure(args)


def measure(args) -> None:
    cfg = load_config(args.config, [])
    bs = args.batch_size or cfg["data"].get("batch_size", 256)
    device = default_device()
    try:
        precision = resolve(args.precision, device)  # "bf17" ran, as fp32, labelled "recipe (bf17)"
    except ValueError as e:
        raise UserError(f"--{e}") from None
    dm = WthorDataModule(args.data, batch_size=bs)
    dm.setup()
    if len(dm.splits["train"]) < bs:  # no whole batch in an epoch (the last is dropped): endless would never yield
        raise UserError(f"--batch-size {bs}: the training split has {len(dm.splits['train']):,} positions")
    loader = endless(dm.train_dataloader())
    group = SYMMETRY_GROUPS[cfg["data"].get("symmetries", "all")]
    where = torch.cuda.get_device_name() if device == "cuda" else f"{cpu_name()}, {torch.get_num_threads()} threads"
    print(f"{args.config.name}: {cfg['model']}, batch {bs}, on {where}, torch {torch.__version__}")

    result: dict = {"config": args.config.name, "batch_size": bs, "device": where, "recipe_precision": precision}
    if args.strategy == "ddp" or args.devices > 1:
        result.update(compare_ddp(args, cfg, bs, precision))
    elif args.profile:
        # --compile too: the profile calls the recipe's trunk, which was profiled uncompiled under --compile
        result["profile_ms"] = profile(Setup(cfg["model"], device, precision, args.compile), loader, group,
                                       args.steps, bs)
    else:
        setups = {"recipe": Setup(cfg["model"], device, precision, args.compile)}
        if args.compare:
            setups = {"baseline": Setup(cfg["model"], device, FP32), **setups}
        rates: dict[str, list[float]] = {k: [] for k in setups}
        for rnd in range(args.rounds + 1):  # round 0 warms up (oneDNN primitive caches, compile)
            for name, s in (list(setups.items()) if rnd % 2 else list(setups.items())[::-1]):  # none always first
                sync(device)
                t = time.perf_counter()
                for _ in range(args.steps):  # loading and augmentation included: the whole loop
                    s.step(augment({k: v.to(device, non_blocking=True) for k, v in next(loader).items()}, group))
                sync(device)
                if rnd:
                    rates[name].append(bs * args.steps / (time.perf_counter() - t))
        for name, r in rates.items():
            med = statistics.median(r)
            result[f"{name}_samples_per_s"] = med
            print(f"{name:8s} ({setups[name].precision}{', channels_last' if name == 'recipe' and 'bf16' in precision and device == 'cpu' else ''}): "
                  f"median {med:,.0f} positions/s over {len(r)} rounds {[round(x) for x in r]}; "
                  f"epoch of 1977-2014: {EPOCH / med / 60:,.0f} min")
        if args.compare:
            result["ratio"] = result["recipe_samples_per_s"] / result["baseline_samples_per_s"]
            print(f"recipe / baseline: {result['ratio']:.2f}x")
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    sys.exit(run_main(main))
