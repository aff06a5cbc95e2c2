"""Train a move predictor on the WTHOR dataset with Lightning.

    othello-train --config ref_raw_d10 --out runs/ref_raw_d10
    OMP_NUM_THREADS=1 othello-train --config cpu_raw_fast --out runs/cpu_raw_fast

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
import sys
import warnings
from contextlib import nullcontext
from pathlib import Path

from othello_learn.cli import run_main, say_stopped, stop_status
from othello_learn.files import UserError, atomic_write, check_input, check_output, one_line, write_json
from othello_learn.run_folder import remove_killed_writes, take_back_new_run
from othello_learn.tracking import start_wandb
from othello_learn.train import arguments
from othello_learn.train.arguments import launch_rank, settings, world_size
from othello_learn.train.logs import (HeldInfo, drop_lightning_tips, ignore_lightning_noise, log_test_results,
                                      make_logger, mark_fresh_start, stop_reason)
from othello_learn.train.run_checks import (CHECKPOINT_NAME, RUN_FILES, check_dataset, check_global_batch,
                                            check_resumable, check_run_folder, check_same_accumulation, check_shares,
                                            earlier_test, run_config_text, split_overlap)
from othello_learn.train.stops import SavedInterrupt, interrupts_reraised, ranks_stop_together, stops_around_lightning


def build_parser() -> argparse.ArgumentParser:
    """The command's parser; its help text is this module's docstring (the command reference in
    docs/ is generated from it)."""
    return arguments.build_parser(__doc__)


def parse_args(argv=None):
    return build_parser().parse_args(argv)


def train(argv=None) -> dict:
    """The whole command; returns the run's summary (``metrics.json``)."""
    args = parse_args(argv)
    check_input(args.config, "--config")
    check_input(args.init, "--init")
    check_output(args.out, "--out", folder=True)
    # DDP: the folder is rank 0's to check and take back; a rank started beside it (torchrun, SLURM)
    # would see its half-written files, and one that refused would leave rank 0 waiting for it
    owner = launch_rank(args) == 0
    if owner:
        check_run_folder(args.out)
    new_out = not args.out.exists() and owner
    try:
        with stops_around_lightning() as stops:
            return fit(args, stops)
    except (UserError, KeyboardInterrupt):
        # Refused or stopped before training: take back the folder this command made, if it holds
        # nothing but what the set-up writes (a checkpoint means training ran, and it all stays).
        if new_out:
            take_back_new_run(args.out, ("config.yaml", "wandb_id"), ("checkpoints",))
        raise


def fit(args, stops) -> dict:
    """The run, once its flags are read: data module, model, callbacks, trainer, fit, test and
    export. Returns the run's summary (``metrics.json``)."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import LearningRateMonitor

    from othello_learn.lock import RunLock
    from othello_learn.models.nets import save_network
    from othello_learn.train.checkpoints import BestCheckpoint, LastCheckpoint, TrainingProgressBar
    from othello_learn.train.validation import ValidateAtEnd, ValidateOnTime
    from othello_learn.train.module import MovePredictor, network_from_checkpoint

    cfg, origin, init = settings(args)
    world, rank = world_size(args), launch_rank(args)
    dm = data_module(args, cfg, origin, world)
    L.seed_everything(args.seed, workers=True, verbose=False)  # before the network: --seed fixes its initial weights
    model = MovePredictor(network(args, cfg, origin, init), **cfg["optim"])
    ckpt_dir = args.out / "checkpoints"
    last = ckpt_dir / "last.ckpt"

    # DDP: rank 0 holds the folder; the other ranks, started once it trains, read it and write nothing
    with RunLock(args.out) if rank == 0 else nullcontext():
        if rank == 0:
            ckpt_dir.mkdir(exist_ok=True)  # first: it marks the folder as a training run's (check_run_folder)
            # What a run killed outright (kill -9) left mid-write: a checkpoint runs to MBs, and it is ours.
            remove_killed_writes(args.out, [(args.out, RUN_FILES.__contains__), (ckpt_dir, CHECKPOINT_NAME.fullmatch)])
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
                     + ([ValidateOnTime(args.val_every_minutes * 60)] if args.val_every_minutes > 0 else [])
                     + ([LearningRateMonitor("step")] if args.logger != "none" and rank == 0 else [])
                     + ([TrainingProgressBar()] if trainer_cfg.get("enable_progress_bar", True) else []))
        auto_precision = str(trainer_cfg.get("precision", "auto")) == "auto"
        trainer, held = build_trainer(args, trainer_cfg, callbacks, world, rank)

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
        if auto_precision:
            print(f"precision: {trainer_cfg['precision']} (auto)", file=sys.stderr)
        if rank == 0:
            atomic_write(args.out / "config.yaml", run_config_text(cfg))  # settings Lightning accepted
        # Lightning warns of any mid-epoch resume whose loader has no state_dict; ours skips the
        # batches the run trained on (WthorDataModule.train_dataloader), so the resume is exact.
        with interrupts_reraised(saver, stops, world > 1), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch")
            if resume or args.fresh:  # the checkpoints it warns of: the ones the run resumes from, or the
                # discarded run's, which --fresh keeps (docs/training.md)
                warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
            ignore_lightning_noise()
            trainer.fit(model, datamodule=dm, ckpt_path=resume)
        reason = stop_reason(trainer)
        print(f"training stopped at step {trainer.global_step}: {reason}", file=sys.stderr)
        summary = run_summary(args, cfg, trainer, best, last, reason)
        best_path = summary["best_checkpoint"]
        if args.no_test:
            earlier = earlier_test(args.out / "metrics.json", best_path, cfg)
            if earlier is not None:
                summary["test"] = earlier
                print(f"--no-test: kept the test results {args.out / 'metrics.json'} had for this same best "
                      "checkpoint", file=sys.stderr)
        else:
            with interrupts_reraised(saver, stops, world > 1), warnings.catch_warnings():
                ignore_lightning_noise()
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


def run_summary(args, cfg: dict, trainer, best, last: Path, reason: str) -> dict:
    """What the fit left: the checkpoint to test and export (the best by validation, else
    last.ckpt), its score, the config and the step; an error where no step was trained."""
    if not best.best_model_path and not last.exists():  # e.g. trainer.max_time: 0 in a config
        raise UserError(f"{args.out}: training stopped before its first step, {reason}: no network to export")
    best_path = best.best_model_path or str(last.resolve())  # absolute, as Lightning's is
    score = best.best_model_score  # None when no validation ran (JSON null, not NaN, which strict parsers refuse)
    summary = {"best_checkpoint": best_path, "best_val_acc": None if score is None else float(score),
               "config": cfg, "global_step": trainer.global_step}
    if args.init is not None:
        summary["init"] = str(args.init)
    return summary


def data_module(args, cfg: dict, origin: dict, world: int):
    """The data module, its dataset opened and checked against the settings and the processes."""
    from othello_learn.data.datamodule import WthorDataModule

    check_global_batch(cfg, origin, world)
    dm = WthorDataModule(data_dir=args.data, seed=args.seed, **cfg["data"])
    check_dataset(dm, args.data, cfg["trainer"], origin)
    check_shares(dm, world)
    overlap = split_overlap(dm)
    if overlap:
        print(f"warning: {overlap}: the held-out figures will read too high (continuing)", file=sys.stderr)
    return dm


def network(args, cfg: dict, origin: dict, init):
    """The network to train: the model section's config, or the ``--init`` network grown to it."""
    from othello_learn.models.nets import NetConfig, grow_network

    net_config = NetConfig.from_dict(cfg["model"])
    if init is None:
        return net_config
    net = grow_network(init, net_config, where=f"--init {args.init}")
    # growing is deliberate with --set; from a config file's model section, easy to miss
    grown = [f"model.{k} {getattr(init.config, k)} -> {getattr(net_config, k)} ({origin.get(('model', k), '?')})"
             for k in ("depth", "blocks", "width", "value_head")
             if getattr(init.config, k) != getattr(net_config, k)]  # another arch's are at their defaults
    if grown:
        print(f"--init {args.init}: the net is grown: {'; '.join(grown)}", file=sys.stderr)
    return net


def build_trainer(args, trainer_cfg: dict, callbacks: list, world: int, rank: int):
    """Lightning's Trainer for the run, with no logger yet, and the info lines it printed held back
    (``HeldInfo``); ``trainer_cfg``'s precision is resolved in place. A device or setting Lightning
    refuses is one line naming it."""
    import lightning as L
    import torch
    from lightning.pytorch.utilities.exceptions import MisconfigurationException

    from othello_learn.models.fastpath import resolve
    from othello_learn.train.checkpoints import AtomicCheckpointIO

    accelerator = str(args.accelerator).lower()  # Lightning reads it in any case; "gpu": CUDA or Apple's MPS
    if ((accelerator == "cuda" and not torch.cuda.is_available())
            or (accelerator == "gpu" and not (torch.cuda.is_available() or torch.backends.mps.is_available()))):
        raise UserError(f"--accelerator {args.accelerator}: torch {torch.__version__} sees no GPU on this machine; "
                        "use --accelerator cpu (or auto)")
    try:
        trainer_cfg["precision"] = resolve(trainer_cfg.get("precision", "auto"), args.accelerator)
    except ValueError as e:
        raise UserError(f"trainer.precision: {e}") from None
    drop_lightning_tips()
    strategy = "auto"
    if world > 1 or args.strategy == "ddp":
        from datetime import timedelta

        from lightning.pytorch.strategies import DDPStrategy

        strategy = DDPStrategy(timeout=timedelta(minutes=args.ddp_timeout))
    try:
        with HeldInfo() as held:
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
        ranks_stop_together(trainer)
    return trainer, held


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
