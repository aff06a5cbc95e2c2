"""Train a move predictor on the WTHOR dataset with Lightning.

    python train/train.py --config train/configs/ref_raw_d10.yaml --out runs/ref_raw_d10
    python train/train.py --config train/configs/cpu_small.yaml --out runs/cpu_small --logger csv

Rerunning the same command resumes from ``OUT/checkpoints/last.ckpt`` (saved
every ``--checkpoint-every`` steps and at each epoch end); ``--fresh`` starts
over. At the end the best checkpoint (by validation accuracy) is tested on the
test years and exported to ``OUT/model.pt`` (weights and hyperparameters only).
W&B logging is offline by default (no account needed; ``wandb sync`` later),
``--wandb-online`` to stream to your account.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402  (a Lightning dependency)

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("model", "optim", "data", "trainer")


def load_config(path: Path | None, overrides: list[str]) -> dict:
    cfg = {s: {} for s in SECTIONS}
    if path is not None:
        loaded = yaml.safe_load(Path(path).read_text()) or {}
        unknown = set(loaded) - set(SECTIONS)
        if unknown:
            raise ValueError(f"{path}: unknown sections {sorted(unknown)}; expected {list(SECTIONS)}")
        for s in SECTIONS:
            cfg[s].update(loaded.get(s) or {})
    for item in overrides:
        key, sep, value = item.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or section not in SECTIONS:
            raise ValueError(f"--set {item!r}: expected SECTION.KEY=VALUE with SECTION in {list(SECTIONS)}")
        cfg[section][name] = yaml.safe_load(value)
    return cfg


def make_logger(kind: str, out: Path, name: str, online: bool, project: str):
    from lightning.pytorch.loggers import CSVLogger, WandbLogger

    if kind == "none":
        return False
    if kind == "csv":
        return CSVLogger(save_dir=out, name="csv")
    if kind == "wandb":
        if not online:
            os.environ.setdefault("WANDB_MODE", "offline")
        return WandbLogger(project=project, name=name, save_dir=str(out), offline=not online)
    raise ValueError(f"--logger must be wandb, csv or none, got {kind!r}")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--config", type=Path, help="YAML with sections model, optim, data, trainer (train/configs/)")
    p.add_argument("--data", type=Path, default=REPO / "data" / "wthor", help="dataset folder from data_tools/wthor.py")
    p.add_argument("--out", type=Path, required=True, help="run folder: checkpoints, logs, model.pt, metrics.json")
    p.add_argument("--logger", default="wandb", choices=["wandb", "csv", "none"])
    p.add_argument("--wandb-online", action="store_true", help="log to your W&B account instead of offline files")
    p.add_argument("--wandb-project", default="othello-learn")
    p.add_argument("--max-epochs", type=int, help="overrides trainer.max_epochs")
    p.add_argument("--max-steps", type=int, help="overrides trainer.max_steps")
    p.add_argument("--max-minutes", type=float,
                   help="time budget of the training (validation included); the LR schedule ends with it")
    p.add_argument("--batch-size", type=int, help="overrides data.batch_size")
    p.add_argument("--train-positions", type=int, help="train on a random subset of this many positions")
    p.add_argument("--accelerator", default="auto")
    p.add_argument("--devices", default="auto")
    p.add_argument("--precision", help="32-true, bf16-mixed, ... or auto (overrides trainer.precision; default auto: "
                   "bf16 autocast + channels_last where the CPU or GPU has fast bf16, else fp32)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=2000, help="steps between resumable checkpoints")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override any config value")
    p.add_argument("--fresh", action="store_true", help="ignore OUT/checkpoints/last.ckpt and start over")
    p.add_argument("--no-test", action="store_true", help="skip testing the best checkpoint at the end")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint

    from data_tools.datamodule import WthorDataModule
    from models.fastpath import auto_precision
    from models.nets import export
    from train.module import MovePredictor

    cfg = load_config(args.config, args.set)
    for key, section, name in (("max_epochs", "trainer", "max_epochs"), ("max_steps", "trainer", "max_steps"),
                               ("batch_size", "data", "batch_size"), ("train_positions", "data", "train_positions"),
                               ("precision", "trainer", "precision")):
        if getattr(args, key) is not None:
            cfg[section][name] = getattr(args, key)
    if args.max_minutes is not None:
        cfg["trainer"]["max_time"] = {"seconds": round(args.max_minutes * 60)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))

    L.seed_everything(args.seed, workers=True)
    torch.set_float32_matmul_precision("high")
    dm = WthorDataModule(data_dir=args.data, seed=args.seed, **cfg["data"])
    model = MovePredictor(**cfg["model"], **cfg["optim"])
    ckpt_dir = args.out / "checkpoints"
    best = ModelCheckpoint(dirpath=ckpt_dir, filename="best-{epoch}-{step}", monitor="val/acc", mode="max",
                           save_top_k=1, save_last=True)
    periodic = ModelCheckpoint(dirpath=ckpt_dir, filename="last", every_n_train_steps=args.checkpoint_every,
                               save_top_k=1, enable_version_counter=False)
    logger = make_logger(args.logger, args.out, args.out.name, args.wandb_online, args.wandb_project)
    callbacks = [best, periodic] + ([LearningRateMonitor("step")] if logger else [])
    trainer_cfg = {"max_epochs": 10, "log_every_n_steps": 50, **cfg["trainer"]}
    if str(trainer_cfg.get("precision", "auto")) == "auto":
        trainer_cfg["precision"] = auto_precision(args.accelerator)
        print(f"precision: {trainer_cfg['precision']} (auto)", file=sys.stderr)
    trainer = L.Trainer(default_root_dir=args.out, accelerator=args.accelerator, devices=args.devices,
                        logger=logger, callbacks=callbacks, use_distributed_sampler=False, **trainer_cfg)
    last = ckpt_dir / "last.ckpt"
    resume = last if last.exists() and not args.fresh else None
    if resume:
        print(f"resuming from {resume}", file=sys.stderr)
    trainer.fit(model, datamodule=dm, ckpt_path=resume)
    # The periodic checkpoint can lag the end (a time budget stops between its saves):
    # leave the final state there, so rerunning with a larger budget continues from it.
    trainer.save_checkpoint(last)

    best_path = best.best_model_path or str(last)
    summary = {"best_checkpoint": best_path, "best_val_acc": float(best.best_model_score or float("nan")),
               "config": cfg, "global_step": trainer.global_step}
    if not args.no_test:
        result = trainer.test(model, datamodule=dm, ckpt_path=best_path, verbose=False)[0]
        summary["test"] = {k: float(v) for k, v in result.items()}
    best_model = MovePredictor.load_from_checkpoint(best_path, map_location="cpu")
    export(best_model.net, best_model.hparams, args.out / "model.pt", metrics=summary)
    (args.out / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2))
    return summary


if __name__ == "__main__":
    main()
