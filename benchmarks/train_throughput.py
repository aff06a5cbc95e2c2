"""Benchmark: training throughput of a config (positions/s) and the projected
time of an epoch of 1977-2014 (6.9 M positions), data loading and on-device
augmentation included. The GPU target: ref_raw_d10 under 60 s an epoch on one H100.

    python benchmarks/train_throughput.py --config train/configs/ref_raw_d10.yaml [--steps 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from data_tools.datamodule import SYMMETRY_GROUPS, WthorDataModule, augment  # noqa: E402
from models.nets import build_network  # noqa: E402
from train.train import load_config  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", type=Path, default=REPO / "train/configs/ref_raw_d10.yaml")
    ap.add_argument("--data", type=Path, default=REPO / "data" / "wthor")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--compile", action="store_true", help="torch.compile the network")
    args = ap.parse_args()
    cfg = load_config(args.config, [])
    bs = args.batch_size or cfg["data"].get("batch_size", 1024)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16 = device == "cuda" and "bf16" in str(cfg["trainer"].get("precision", ""))
    dm = WthorDataModule(args.data, batch_size=bs)
    dm.setup()
    net = build_network(**cfg["model"]).to(device).train()
    model = torch.compile(net) if args.compile else net
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    group = SYMMETRY_GROUPS[cfg["data"].get("symmetries", "all")]
    loader = iter(dm.train_dataloader())
    rates = []
    for rep in range(4):  # the first is warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(args.steps // 4):
            batch = {k: v.to(device, non_blocking=True) for k, v in next(loader).items()}
            batch = augment(batch, group)
            with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(model(batch)["policy"].float(), batch["move"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        if rep:
            rates.append(bs * (args.steps // 4) / (time.perf_counter() - t))
    rate = statistics.median(rates)
    name = torch.cuda.get_device_name() if device == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"{args.config.name} on {name}, batch {bs}{', bf16' if bf16 else ''}: median {rate:,.0f} positions/s "
          f"({[round(r) for r in rates]}); epoch of 6,912,964 positions: {6_912_964 / rate:,.0f} s")


if __name__ == "__main__":
    main()
