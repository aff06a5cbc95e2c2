"""Training and evaluation under faults: kills, full disks, corrupt or crafted files,
two runs in one folder, bad settings. Nothing lost, nothing run, one clear line."""

import errno
import gc
import inspect
import os
import pickle
import re
import signal
import subprocess
import sys
import typing
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from othello_learn.cli import run_main
from othello_learn.files import UserError
from othello_learn.models.nets import NetConfig, build_network, load_network, read_checkpoint, save_network

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.setenv("WANDB_MODE", "offline")


def _args(dataset_dir, out, *extra):
    return ["--data", str(dataset_dir), "--out", str(out), "--logger", "none", "--no-test",
            "--set", "model.depth=1", "--set", "model.width=4", "--set", "data.train_years=2001",
            "--set", "data.val_years=2002", "--set", "data.test_years=2003", "--set", "data.batch_size=64",
            "--set", "trainer.enable_progress_bar=false", "--set", "trainer.enable_model_summary=false",
            "--set", "trainer.num_sanity_val_steps=0", *extra]


def _run(main, argv, capsys):
    """run_main's exit status and the stderr it printed."""
    capsys.readouterr()
    code = run_main(main, argv)
    return code, capsys.readouterr().err


def _interrupted(main, argv, capsys):
    """``_run`` of a run a test interrupts by Ctrl-C: Lightning ignores SIGINT during its
    shutdown, and the handler is put back."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return _run(main, argv, capsys)
    finally:
        signal.signal(signal.SIGINT, handler)


def _step(path) -> int:
    return torch.load(path, map_location="cpu", weights_only=True)["global_step"]


# ---- 1. atomic checkpoint writes, corrupt last.ckpt -------------------------------------------

def test_checkpoint_io_on_a_full_disk_keeps_the_old_file_and_names_it(tmp_path, monkeypatch, capsys):
    from othello_learn.train.checkpoints import AtomicCheckpointIO

    io = AtomicCheckpointIO()
    path = tmp_path / "last.ckpt"
    io.save_checkpoint({"global_step": 1, "w": torch.ones(3)}, path)
    before = path.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("othello_learn.models.nets.os.fsync", full)  # the data went out, the disk refused it
    code, err = _run(lambda argv: io.save_checkpoint({"global_step": 2, "w": torch.zeros(1000)}, path), [], capsys)
    assert code == 2
    assert "no space left on device" in err and str(path) in err and len(err.strip().splitlines()) == 1
    assert path.read_bytes() == before  # the previous checkpoint is whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]  # no temporary file left
    assert io.load_checkpoint(path)["global_step"] == 1


def test_a_last_ckpt_damaged_inside_stops_the_resume_with_one_line(dataset_dir, tmp_path, capsys):
    """Lightning's restore met these with a TypeError, a KeyError, or resumed "from step -5"."""
    from othello_learn.train.train import main, train

    out = tmp_path / "run"
    train(_args(dataset_dir, out, "--max-steps", "2"))
    last = out / "checkpoints" / "last.ckpt"
    good = torch.load(last, weights_only=True)
    for change, said in (({"loops": "x"}, "its loops are not Lightning's loop state"),
                         ({"optimizer_states": [{"x": 1}]}, "its optimizer_states are not an optimizer's state"),
                         ({"global_step": -5}, "its global_step is -5"),
                         ({"lr_schedulers": "x"}, "its lr_schedulers are not a scheduler's state"),
                         ({"optimizer_states": [{"param_groups": good["optimizer_states"][0]["param_groups"]}]},
                          "its optimizer_states are not an optimizer's state"),
                         ({"loops": {"x": 1}}, "its loops are not Lightning's loop state"),  # a KeyError before
                         ({"epoch": -1}, "its epoch is -1"),
                         ({"state_dict": [1]}, "its state_dict is not a network's weights")):
        torch.save({**good, **change}, last)
        before = last.read_bytes()
        code, err = _run(main, _args(dataset_dir, out, "--max-steps", "4"), capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and f"{last} is damaged ({said})" in err, err
        assert "--fresh" in err and last.read_bytes() == before
    torch.save(good, last)
    assert train(_args(dataset_dir, out, "--max-steps", "4"))["global_step"] == 4  # the run itself goes on


@pytest.mark.parametrize("damage", ["empty", "truncated", "crafted"])
def test_a_damaged_last_ckpt_stops_the_resume_with_one_line(dataset_dir, tmp_path, capsys, damage):
    from othello_learn.train.train import main

    out = tmp_path / "run"
    last = out / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    marker = tmp_path / "pwned"
    if damage == "empty":  # a kill during a copy
        last.write_bytes(b"")
    elif damage == "truncated":  # a full disk under a plain torch.save
        save_network(build_network(NetConfig(depth=1, width=4)), tmp_path / "x.pt")
        data = (tmp_path / "x.pt").read_bytes()
        last.write_bytes(data[: len(data) // 2])
    else:
        last.write_bytes(pickle.dumps({"loops": _Touch(marker)}, protocol=2))
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "2"), capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(last) in err and "--fresh" in err
    assert last.exists() and not (out / "config.yaml").exists()  # nothing deleted, nothing started
    assert not marker.exists()


def test_the_temporary_files_of_a_run_killed_mid_write_are_removed(dataset_dir, tmp_path, capsys):
    """kill -9 while a checkpoint is written leaves atomic_path's temporary file (MBs), which
    the dead process cannot remove: the rerun removes those of the run's files, nothing else."""
    from othello_learn.train.train import main

    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "last.ckpt").write_bytes(b"")  # stops the rerun once the lock is held
    temps = [out / "checkpoints" / ".last.ckpt.a1b2c3d4.tmp", out / "checkpoints" / ".best-epoch=0-step=2.ckpt.zz_0zz0z.tmp",
             out / ".model.pt.abcdefgh.tmp"]
    theirs = [out / ".notes.md.abcdefgh.tmp", out / "checkpoints" / ".last.ckpt.tmp"]
    for path in temps + theirs:
        path.write_bytes(b"half")
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "2"), capsys)
    assert code == 2 and "removed 3 temporary file(s) a killed run left half-written" in err, err
    assert not any(p.exists() for p in temps) and all(p.read_bytes() == b"half" for p in theirs)


def test_resuming_with_another_network_is_refused_before_any_work(dataset_dir, tmp_path, capsys):
    from othello_learn.train.train import main

    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    torch.save({"hyper_parameters": {"arch": "reference", "encoder": "raw", "depth": 1, "width": 4},
                "loops": {}, "state_dict": {}, "global_step": 3}, out / "checkpoints" / "last.ckpt")
    code, err = _run(main, _args(dataset_dir, out, "--set", "model.width=8"), capsys)
    assert code == 2 and "model.width=4 there, 8 now" in err and "--fresh" in err
    # another architecture: that, not the settings only one of them reads (model.depth of a resnet)
    code, err = _run(main, _args(dataset_dir, out, "--set", "model.arch=resnet", "--set", "model.depth=10",
                                 "--set", "model.blocks=2"), capsys)
    assert code == 2 and "different network (model.arch='reference' there, 'resnet' now); " in err, err


# ---- 2. one "last" mechanism, saved through the atomic I/O, interrupts ------------------------

def test_last_ckpt_is_saved_periodically_at_validation_and_at_the_end_through_the_atomic_io(
        dataset_dir, tmp_path, monkeypatch):
    import lightning.fabric.plugins.io.torch_io as torch_io

    from othello_learn.train.checkpoints import AtomicCheckpointIO
    from othello_learn.train.train import train

    def bypass(*a, **k):
        raise AssertionError("a checkpoint was written around AtomicCheckpointIO")

    monkeypatch.setattr(torch_io, "_atomic_save", bypass)
    saves = []
    original = AtomicCheckpointIO.save_checkpoint

    def spy(self, checkpoint, path, storage_options=None):
        saves.append((Path(path).name.split("-")[0], checkpoint["global_step"]))
        original(self, checkpoint, path, storage_options)

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", spy)
    out = tmp_path / "run"
    train(_args(dataset_dir, out, "--max-steps", "12", "--checkpoint-every", "5",
                "--set", "trainer.val_check_interval=10"))
    last_steps = [s for name, s in saves if name == "last.ckpt"]
    # every 5 steps, after each validation (10, once: not before it too; 12, the last) and at the end (12)
    assert last_steps == [5, 10, 12, 12]
    assert [s for name, s in saves if name == "best"] == [10]
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names == ["best-epoch=0-step=10.ckpt", "last.ckpt"]  # no last-v1.ckpt beside it
    for name in names:  # what we write loads without unpickling anything but tensors and plain values
        ckpt = torch.load(out / "checkpoints" / name, map_location="cpu", weights_only=True)
        assert type(ckpt["hyper_parameters"]) is dict
    assert _step(out / "checkpoints" / "last.ckpt") == 12
    assert load_network(out / "model.pt").config.depth == 1
    assert not (out / ".lock").exists()


@pytest.mark.parametrize("interval", [7, 5])  # a validation (at 10) between periodic saves, and at one
def test_a_stop_during_a_validation_is_resumed_with_that_validation(dataset_dir, tmp_path, monkeypatch, interval):
    """A save at the step of a validation, made before it, resumed past it: the run stopped in
    that validation never did it (a point lost from the curves and from the choice of the best)."""
    from othello_learn.train.module import MovePredictor
    from othello_learn.train.train import main

    out = tmp_path / "run"
    args = _args(dataset_dir, out, "--max-steps", "20", "--checkpoint-every", str(interval),
                 "--set", "trainer.val_check_interval=10")
    original, validated = MovePredictor.validation_step, []

    def stopped_in_the_validation_at_10(self, batch, batch_idx):
        if self.trainer.global_step == 10 and batch_idx == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, batch, batch_idx)

    monkeypatch.setattr(MovePredictor, "validation_step", stopped_in_the_validation_at_10)
    assert run_main(main, args) == 143
    monkeypatch.setattr(MovePredictor, "validation_step",
                        lambda self, batch, batch_idx: (validated.append((self.trainer.global_step, batch_idx)),
                                                        original(self, batch, batch_idx))[1])
    assert run_main(main, args) == 0
    batches = max(i for _, i in validated) + 1
    assert validated == [(10, i) for i in range(batches)] + [(20, i) for i in range(batches)]


def _best_run(dataset_dir, out):
    """A finished run with validations at steps 10 and 20, and its best file."""
    from othello_learn.train.train import train

    summary = train(_args(dataset_dir, out, "--max-steps", "20", "--set", "trainer.val_check_interval=10"))
    return summary, Path(summary["best_checkpoint"])


@pytest.mark.parametrize("harm", ["deleted", "truncated"])
def test_a_resume_whose_best_file_was_lost_forgets_it_and_exports(dataset_dir, tmp_path, capsys, harm):
    """A deleted or damaged best file is found on resume, not by the export after all the training."""
    from othello_learn.train.train import train

    out = tmp_path / "run"
    _, best = _best_run(dataset_dir, out)
    if harm == "deleted":
        best.unlink()
    else:
        best.write_bytes(best.read_bytes()[:1000])
    capsys.readouterr()
    summary = train(_args(dataset_dir, out, "--max-steps", "30", "--set", "trainer.val_check_interval=10"))
    assert ("is gone" if harm == "deleted" else "is damaged") in capsys.readouterr().err
    assert Path(summary["best_checkpoint"]).parent == out / "checkpoints"
    assert Path(summary["best_checkpoint"]).exists() and "step=30" in summary["best_checkpoint"]
    assert load_network(out / "model.pt").config.depth == 1


def test_a_moved_run_folder_keeps_its_best_file_and_score(dataset_dir, tmp_path):
    import shutil

    from othello_learn.train.train import train

    first, best = _best_run(dataset_dir, tmp_path / "run")
    moved = tmp_path / "moved"
    shutil.move(tmp_path / "run", moved)
    summary = train(_args(dataset_dir, moved, "--max-steps", "21", "--set", "trainer.val_check_interval=10"))
    # one step more and no validation: the best is the recorded one, read in the moved folder
    assert summary["best_checkpoint"] == str(moved / "checkpoints" / best.name)
    assert summary["best_val_acc"] == first["best_val_acc"]


def test_a_full_disk_at_the_last_save_resumes_with_the_runs_best(dataset_dir, tmp_path, monkeypatch, capsys):
    """Validated at the epoch's end, Lightning's best saved at the epoch's end, after the save that
    followed the validation: a full disk at the save when training ended left a last.ckpt of the
    final step recording no best, and the rerun, with nothing left to train, exported last.ckpt
    with best_val_acc null beside the best file."""
    from othello_learn.train.checkpoints import AtomicCheckpointIO, LastCheckpoint
    from othello_learn.train.train import main, train

    out = tmp_path / "run"
    args = _args(dataset_dir, out, "--train-positions", "640", "--max-epochs", "1")
    original_save, original_end, ending = AtomicCheckpointIO.save_checkpoint, LastCheckpoint.on_train_end, []

    def save(self, checkpoint, path, storage_options=None):
        if ending:
            raise OSError(errno.ENOSPC, "No space left on device")
        original_save(self, checkpoint, path, storage_options)

    def on_train_end(self, trainer, pl_module):
        ending.append(True)
        original_end(self, trainer, pl_module)

    with monkeypatch.context() as m:
        m.setattr(AtomicCheckpointIO, "save_checkpoint", save)
        m.setattr(LastCheckpoint, "on_train_end", on_train_end)
        code, err = _run(main, args, capsys)
    assert code == 2 and "no space left on device" in err, err
    best = out / "checkpoints" / "best-epoch=0-step=10.ckpt"
    score = next(v["best_model_score"] for k, v in read_checkpoint(best)["callbacks"].items()
                 if k.startswith("ModelCheckpoint"))
    summary = train(args)
    assert summary["best_checkpoint"] == str(best) and summary["best_val_acc"] == pytest.approx(float(score))
    assert summary["global_step"] == 10


def _interrupt_at(monkeypatch, step: int, action):
    from othello_learn.train.module import MovePredictor

    original = MovePredictor.training_step

    def step_then_interrupt(self, batch, batch_idx):
        if self.trainer.global_step == step:
            action()
        return original(self, batch, batch_idx)

    monkeypatch.setattr(MovePredictor, "training_step", step_then_interrupt)


def test_a_resume_with_another_gradient_accumulation_is_refused(dataset_dir, tmp_path, capsys):
    """Resumed with trainer.accumulate_grad_batches 2 after 10 steps of one batch, the run trained on,
    and curves.py, reading the last start's accumulation off config.yaml, drew its first validation
    (640 positions) at 1,280 and the next (1,280) at 2,048."""
    from othello_learn.train.train import main, train

    out = tmp_path / "run"
    train(_args(dataset_dir, out, "--max-steps", "2"))
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "4", "--set", "trainer.accumulate_grad_batches=2"),
                     capsys)
    assert code == 2 and "trainer.accumulate_grad_batches=1" in err and len(err.strip().splitlines()) == 1, err
    assert _step(out / "checkpoints" / "last.ckpt") == 2
    assert train(_args(dataset_dir, out, "--max-steps", "4", "--set", "trainer.accumulate_grad_batches=1"))[
        "global_step"] == 4  # the run's own setting, given explicitly, resumes


def test_raising_max_steps_continues_an_epoch_that_max_steps_cut_short(dataset_dir, tmp_path):
    """Lightning records an epoch stopped by max_steps as finished: under max_epochs 1 the
    rerun with more steps used to train nothing and still report success."""
    from othello_learn.train.train import train

    out = tmp_path / "run"
    small = ("--train-positions", "640")  # an epoch of 10 batches
    assert train(_args(dataset_dir, out, "--max-epochs", "1", "--max-steps", "3", *small))["global_step"] == 3
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 0  # still in epoch 0
    assert train(_args(dataset_dir, out, "--max-epochs", "1", "--max-steps", "6", *small))["global_step"] == 6
    full = train(_args(dataset_dir, out, "--max-epochs", "1", "--max-steps", "1000", *small))["global_step"]
    assert 6 < full < 1000  # the rest of epoch 0, then max_epochs stops it
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 1  # a finished epoch stays one
    assert train(_args(dataset_dir, out, "--max-epochs", "1", "--max-steps", "2000", *small))["global_step"] == full


def test_validation_on_a_time_budget_comes_first_and_a_stop_in_it_resumes_with_it(dataset_dir, tmp_path, monkeypatch):
    """--val-every-minutes validates between the step-based ones (the recipes' 2,000 steps were
    45 minutes on a CPU), on training time counted across a resume: a run stopped in such a
    validation does it again, and never saved at its step before it. A clock of one minute a step."""
    from othello_learn.train import validation
    from othello_learn.train.module import MovePredictor
    from othello_learn.train.train import main

    now = [0.0]
    monkeypatch.setattr(validation.ValidateOnTime, "_clock", staticmethod(lambda: now[0]))
    out = tmp_path / "run"
    args = _args(dataset_dir, out, "--max-steps", "12", "--checkpoint-every", "7", "--val-every-minutes", "4",
                 "--set", "trainer.val_check_interval=1.0")
    original_step, original_val, validated = MovePredictor.training_step, MovePredictor.validation_step, []

    def a_minute_a_step(self, batch, batch_idx):
        now[0] += 60
        return original_step(self, batch, batch_idx)

    def stopped_in_the_validation_at_8(self, batch, batch_idx):
        validated.append((self.trainer.global_step, batch_idx))
        if self.trainer.global_step == 8 and batch_idx == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return original_val(self, batch, batch_idx)

    monkeypatch.setattr(MovePredictor, "training_step", a_minute_a_step)
    monkeypatch.setattr(MovePredictor, "validation_step", stopped_in_the_validation_at_8)
    assert run_main(main, args) == 143
    assert sorted({s for s, _ in validated}) == [4, 8]  # every 4 minutes: steps 4 and 8
    assert _step(out / "checkpoints" / "last.ckpt") == 7  # the periodic save; none at 8 before its validation
    validated[:] = []
    monkeypatch.setattr(MovePredictor, "validation_step",
                        lambda self, batch, batch_idx: (validated.append((self.trainer.global_step, batch_idx)),
                                                        original_val(self, batch, batch_idx))[1])
    assert run_main(main, args) == 0
    batches = max(i for _, i in validated) + 1
    # 8 again (3 minutes before the stop, 1 after), 12 at the end (ValidateAtEnd)
    assert validated == [(8, i) for i in range(batches)] + [(12, i) for i in range(batches)]


def test_the_progress_bar_of_a_mid_epoch_resume_shows_its_epoch_length_and_place(dataset_dir, tmp_path, monkeypatch):
    """Lightning skips on_train_epoch_start for the epoch it resumes: the bar read
    "Training: 7/?" (no epoch, no length, no time left) until the next epoch began."""
    from othello_learn.train import checkpoints
    from othello_learn.train.train import train

    seen = []
    original = checkpoints.TrainingProgressBar.on_train_start

    def record(self, trainer, pl_module):
        original(self, trainer, pl_module)
        bar = self.train_progress_bar
        seen.append((bar.desc, bar.n, bar.initial, bar.total, trainer.num_training_batches))

    monkeypatch.setattr(checkpoints.TrainingProgressBar, "on_train_start", record)
    out = tmp_path / "run"
    bar_on = ("--set", "trainer.enable_progress_bar=true")
    train(_args(dataset_dir, out, "--max-steps", "3", "--set", "trainer.val_check_interval=1.0", *bar_on))
    train(_args(dataset_dir, out, "--max-steps", "5", "--set", "trainer.val_check_interval=1.0", *bar_on))
    (fresh_desc, fresh_n, _, _, per_epoch), resumed = seen
    assert per_epoch > 5 and (fresh_desc, fresh_n) == ("Training", 0)  # a fresh run: the epoch's hook sets it up
    assert resumed == ("Epoch 0: ", 3, 3, per_epoch, per_epoch)


def test_a_mid_epoch_resume_trains_on_exactly_the_rest_of_the_epoch(dataset_dir, tmp_path, monkeypatch, capsys):
    """The permutation is the epoch's; the batches a stopped run trained on are skipped,
    so stopping and resuming trains on the batches of one uninterrupted run, in its order.
    It used to start the epoch's permutation over: its first batches twice, its last never."""
    from othello_learn.data import datamodule
    from othello_learn.train.train import main, train

    seen = []
    original = datamodule.EpochBatchSampler.__iter__

    def record(self):
        for idx in original(self):
            if self.shuffle:  # the training batches
                seen.append(tuple(int(i) for i in idx))
            yield idx

    monkeypatch.setattr(datamodule.EpochBatchSampler, "__iter__", record)
    common = ("--checkpoint-every", "2", "--set", "trainer.val_check_interval=1.0")
    assert train(_args(dataset_dir, tmp_path / "whole", "--max-steps", "9", *common))["global_step"] == 9
    whole, seen[:] = list(seen), []
    out = tmp_path / "resumed"
    train(_args(dataset_dir, out, "--max-steps", "3", *common))  # stopped at the end: saved after step 3
    fired = []

    def ctrl_c_once():
        if not fired:
            fired.append(1)
            raise KeyboardInterrupt

    _interrupt_at(monkeypatch, 6, ctrl_c_once)  # inside step 7, just after the periodic save at step 6
    assert _interrupted(main, _args(dataset_dir, out, "--max-steps", "9", *common), capsys)[0] == 130
    assert _step(out / "checkpoints" / "last.ckpt") == 6
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert train(_args(dataset_dir, out, "--max-steps", "9", *common))["global_step"] == 9
    assert not [w for w in caught if "exists and is not empty" in str(w.message)]  # a resume's checkpoints, expected
    assert list(dict.fromkeys(seen)) == whole  # what was drawn, first draws in order: the whole run's batches
    assert len(seen) <= 9 + 2  # and nothing more than a batch drawn ahead at each stop


def _record_training_batches(monkeypatch):
    """The training batches the sampler yields, as (epoch, indices)."""
    from othello_learn.data import datamodule

    seen = []
    original = datamodule.EpochBatchSampler.__iter__

    def record(self):
        for idx in original(self):
            if self.shuffle:
                seen.append((self.epoch, tuple(int(i) for i in idx)))
            yield idx

    monkeypatch.setattr(datamodule.EpochBatchSampler, "__iter__", record)
    return seen


@pytest.mark.parametrize("workers", [0, 1])
def test_each_epoch_has_its_own_order_and_a_resume_across_epochs_keeps_it(dataset_dir, tmp_path, monkeypatch,
                                                                          capsys, workers):
    """Lightning sets the epoch through ``batch_sampler.sampler``; the sampler used to stay at
    epoch 0, so every epoch of every run repeated the first one's batches. A loader worker
    draws batches before Lightning sets the epoch: a resumed run's must be the restored one's."""
    from othello_learn.data.datamodule import EpochBatchSampler
    from othello_learn.train.train import main, train

    seen = _record_training_batches(monkeypatch)
    common = ("--train-positions", "256", "--max-epochs", "3", "--checkpoint-every", "2",  # 4 batches an epoch
              "--set", f"data.num_workers={workers}")
    assert train(_args(dataset_dir, tmp_path / "whole", *common))["global_step"] == 12
    whole, seen[:] = list(seen), []
    expected = []
    for epoch in range(3):
        sampler = EpochBatchSampler(256, 64, shuffle=True, drop_last=True)
        sampler.set_epoch(epoch)
        expected += [(epoch, tuple(b.tolist())) for b in sampler]
    assert whole == expected and len({b for _, b in whole}) == 12

    out = tmp_path / "resumed"
    fired = []

    def ctrl_c_once():
        if not fired:
            fired.append(1)
            raise KeyboardInterrupt

    _interrupt_at(monkeypatch, 6, ctrl_c_once)  # inside epoch 1, after the periodic save at step 6
    assert _interrupted(main, _args(dataset_dir, out, *common), capsys)[0] == 130
    assert _step(out / "checkpoints" / "last.ckpt") == 6
    seen[:] = []
    assert train(_args(dataset_dir, out, *common))["global_step"] == 12
    assert seen == whole[6:]  # the rest of epoch 1, then epoch 2


def test_a_resume_after_a_limited_epochs_last_batch_starts_the_next_epoch_whole(dataset_dir, tmp_path,
                                                                                monkeypatch, capsys):
    """Saved after the last batch trainer.limit_train_batches allows and stopped before the
    next epoch's first step: the rerun skipped that many batches of the next epoch too. (No
    validation: a stop in one resumes from the save before it, to do it.)"""
    from othello_learn.train.train import main, train

    seen = _record_training_batches(monkeypatch)
    common = ("--train-positions", "640", "--set", "trainer.limit_train_batches=5", "--checkpoint-every", "5",
              "--max-epochs", "2", "--set", "trainer.limit_val_batches=0")
    assert train(_args(dataset_dir, tmp_path / "whole", *common))["global_step"] == 10
    whole, seen[:] = list(seen), []
    out = tmp_path / "resumed"

    def ctrl_c():
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        _interrupt_at(m, 5, ctrl_c)
        assert _interrupted(main, _args(dataset_dir, out, *common), capsys)[0] == 130
    assert _step(out / "checkpoints" / "last.ckpt") == 5
    seen[:] = []
    assert train(_args(dataset_dir, out, *common))["global_step"] == 10
    assert seen == whole[5:]  # epoch 1, whole


def test_wandb_online_without_an_account_is_one_line_before_any_training(dataset_dir, tmp_path, monkeypatch,
                                                                          capsys):
    """W&B's "No API key configured" came from inside trainer.fit: a 40-line traceback, exit 1."""
    import wandb

    from othello_learn.train.module import MovePredictor
    from othello_learn.train.train import main

    def no_key(**kwargs):
        raise wandb.errors.UsageError("No API key configured. Use `wandb login` to log in.")

    monkeypatch.setattr(wandb, "init", no_key)
    monkeypatch.setattr(MovePredictor, "training_step", lambda *a: pytest.fail("training started"))
    argv = [a if a != "none" else "wandb" for a in _args(dataset_dir, tmp_path / "run", "--wandb-online")]
    code, err = _run(main, argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--wandb-online: W&B says: No API key configured" in err and "wandb login" in err


STOPS = [("SIGTERM", 143, "terminated"), ("SIGHUP", 129, "hung up")]  # a kill, a closed terminal


@pytest.mark.parametrize("sig, code, said", STOPS)
def test_a_stop_before_training_starts_does_not_speak_of_a_last_ckpt(dataset_dir, tmp_path, monkeypatch, capsys,
                                                                     sig, code, said):
    from othello_learn.train.module import MovePredictor
    from othello_learn.train.train import main

    out = tmp_path / "run"
    monkeypatch.setattr(MovePredictor, "validation_step", lambda *a: os.kill(os.getpid(), getattr(signal, sig)))
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
    # in the sanity check, before the first step
    got, err = _run(main, _args(dataset_dir, out, "--set", "trainer.num_sanity_val_steps=2"), capsys)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == handlers
    assert got == code and err.strip().endswith(said) and "last.ckpt" not in err, err
    assert not (out / "checkpoints" / "last.ckpt").exists()


@pytest.mark.parametrize("sig, code, said", STOPS + [("SIGINT", 130, "interrupted")])
@pytest.mark.parametrize("swallowed", [False, True])
def test_a_stop_while_the_run_is_set_up_ends_it_there(dataset_dir, tmp_path, monkeypatch, capsys, sig, code, said,
                                                      swallowed):
    """Lightning listens for SIGTERM in fit and test only: before them (imports, the dataset, the
    network) a kill ended the process outright, no message and no 143. A stop that something
    swallowed on its way out (a Cython module's import catches everything) was lost, and the run
    trained to its end: it is raised again before training. Either way the new run folder goes."""
    from othello_learn.train import train as train_module
    from othello_learn.train.module import MovePredictor

    real = train_module.check_dataset

    def stopped(*a, **k):
        try:
            os.kill(os.getpid(), getattr(signal, sig))
        except KeyboardInterrupt:
            if not swallowed:
                raise
        return real(*a, **k)

    monkeypatch.setattr(train_module, "check_dataset", stopped)
    monkeypatch.setattr(MovePredictor, "training_step", lambda *a: pytest.fail("training started"))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    out = tmp_path / "run"
    got, err = _run(train_module.main, _args(dataset_dir, out), capsys)
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    assert got == code and err.strip().endswith(said) and "last.ckpt" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("where", ["sanity check", "first step"])
def test_ctrl_c_before_a_step_is_done_does_not_speak_of_a_last_ckpt(dataset_dir, tmp_path, monkeypatch, capsys,
                                                                    where):
    """As SIGTERM: a Ctrl-C in the sanity check or in a fresh run's first step saved nothing to resume."""
    from othello_learn.train.module import MovePredictor
    from othello_learn.train.train import main

    def ctrl_c(*a):
        raise KeyboardInterrupt

    out = tmp_path / "run"
    if where == "sanity check":
        monkeypatch.setattr(MovePredictor, "validation_step", ctrl_c)
    else:
        _interrupt_at(monkeypatch, 0, ctrl_c)
    code, err = _interrupted(main, _args(dataset_dir, out, "--set", "trainer.num_sanity_val_steps=2"), capsys)
    assert code == 130 and err.strip().endswith("interrupted") and "last.ckpt" not in err, err
    assert not (out / "checkpoints" / "last.ckpt").exists()


@pytest.mark.parametrize("sig, code, said", STOPS)
def test_a_stop_saves_a_resumable_last_ckpt(dataset_dir, tmp_path, monkeypatch, capsys, sig, code, said):
    from othello_learn.train.train import main

    out = tmp_path / "run"
    args = _args(dataset_dir, out, "--checkpoint-every", "5", "--max-steps", "30")
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
    _interrupt_at(monkeypatch, 7, lambda: os.kill(os.getpid(), getattr(signal, sig)))  # the end of a session
    got, err = _run(main, args, capsys)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == handlers  # given back
    assert got == code and err.strip().endswith(f"{said}; last.ckpt holds the progress: rerun the same command "
                                                "to resume"), err
    assert _step(out / "checkpoints" / "last.ckpt") >= 7  # not the periodic save at 5: nothing lost
    assert not (out / ".lock").exists()
    monkeypatch.undo()
    code, err = _run(main, args, capsys)
    assert code == 0 and "resuming from" in err
    assert _step(out / "checkpoints" / "last.ckpt") == 30


def test_the_data_loader_workers_leave_the_runs_process_group(dataset_dir, monkeypatch):
    """A scheduler's SIGTERM to the whole job (or a closed terminal's SIGHUP, Ctrl-C) reached the
    DataLoader workers too: torch turned their deaths into a 100-line RuntimeError, exit 1, or
    the save after the interruption failed. Out of the group, they leave the stop to the main
    process, which saves and stops them. (A real group SIGTERM to train.py with one worker, by
    hand: exit 143 and the usual line; before, 'DataLoader worker ... is killed by signal'.)"""
    from othello_learn.data import datamodule

    monkeypatch.setattr(datamodule.PositionBatches, "__getitems__", lambda self, idx: {"group": os.getpgid(0)})
    dm = datamodule.WthorDataModule(dataset_dir, batch_size=64, train_years="2001", val_years="2002",
                                    test_years="2003", num_workers=1)
    dm.setup()
    loader = dm.val_dataloader()
    assert loader.worker_init_fn is datamodule.leave_the_process_group
    groups = {batch["group"] for batch in loader}
    assert groups and os.getpgid(0) not in groups
    # The loader keeps its (persistent) worker until a cycle collection frees it: here, at once; left
    # to the collection in a later test, torch's shutdown waited its whole 5 s join for the worker there.
    gc.collect()


def test_ctrl_c_saves_last_ckpt_and_exits_130(dataset_dir, tmp_path, monkeypatch, capsys):
    from othello_learn.train.train import main

    out = tmp_path / "run"

    def ctrl_c():
        raise KeyboardInterrupt

    _interrupt_at(monkeypatch, 7, ctrl_c)
    code, err = _interrupted(main, _args(dataset_dir, out, "--checkpoint-every", "5", "--max-steps", "30"), capsys)
    assert code == 130 and err.strip().endswith("interrupted; last.ckpt holds the progress: rerun the same command "
                                                "to resume")
    assert _step(out / "checkpoints" / "last.ckpt") == 7


# ---- 3. one run per folder --------------------------------------------------------------------

def test_a_second_training_into_the_same_out_is_refused(dataset_dir, tmp_path, capsys):
    import socket

    from othello_learn.train.train import main

    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / ".lock").write_text(f"{holder.pid} {socket.gethostname()}\n")
        code, err = _run(main, _args(dataset_dir, out, "--max-steps", "1"), capsys)
        assert code == 2 and f"process {holder.pid}" in err and "in use" in err
        assert (out / ".lock").read_text().split()[0] == str(holder.pid)  # not taken from a live run
        assert not (out / "checkpoints").exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_folder_that_is_not_a_training_run_is_refused_untouched(dataset_dir, tmp_path, capsys):
    """model.pt, config.yaml and metrics.json are replaced at the end of a run: in a folder
    that holds no run they could be the user's own."""
    from othello_learn.train.train import main, train

    out = tmp_path / "mine"
    out.mkdir()
    (out / "model.pt").write_text("precious")
    (out / "config.yaml").write_text("mine: 1\n")
    for extra in ([], ["--fresh"]):
        code, err = _run(main, _args(dataset_dir, out, "--max-steps", "1", *extra), capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert str(out) in err and "not empty" in err and "'config.yaml' and 1 more" in err
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "model.pt"]
    assert (out / "model.pt").read_text() == "precious" and (out / "config.yaml").read_text() == "mine: 1\n"
    # a checkpoints/ folder of someone else's (this repository's shipped nets: --out . in the checkout)
    (out / "checkpoints").mkdir()
    (out / "checkpoints" / "best_value.pt").write_text("shipped")
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "1"), capsys)
    assert code == 2 and "checkpoints/ folder is not a training run's (it holds 'best_value.pt', no last.ckpt" in err
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["best_value.pt"]
    with pytest.raises(SystemExit) as e:  # argparse's exit: the current folder
        _run(main, _args(dataset_dir, tmp_path / "x", "--max-steps", "1", "--out", ""), capsys)
    assert e.value.code == 2 and "--out: an empty path" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert train(_args(dataset_dir, empty, "--max-steps", "1"))["global_step"] == 1  # an empty folder is fine
    (empty / "metrics.json").unlink()
    (empty / "metrics.json").mkdir()  # found after the training before
    code, err = _run(main, _args(dataset_dir, empty, "--max-steps", "2"), capsys)
    assert code == 2 and "metrics.json there is a folder, where the run writes a file" in err
    (empty / "metrics.json").rmdir()
    assert train(_args(dataset_dir, empty, "--max-steps", "2"))["global_step"] == 2  # and then resumes as a run
    stray = tmp_path / "stray"  # a run killed before its first checkpoint, then a file manager's .DS_Store
    (stray / "checkpoints").mkdir(parents=True)
    (stray / "checkpoints" / ".DS_Store").write_text("")
    assert train(_args(dataset_dir, stray, "--max-steps", "1"))["global_step"] == 1


def test_an_empty_checkpoints_folder_beside_the_users_files_is_no_run(dataset_dir, tmp_path, capsys):
    """An empty checkpoints/ made the folder a run's: its model.pt and config.yaml were replaced. A run
    is told by its checkpoints or by the mark on the config.yaml it wrote (killed before its first
    checkpoint), which stays a recipe --config reads."""
    from othello_learn.train.train import main, train

    out = tmp_path / "mine"
    (out / "checkpoints").mkdir(parents=True)
    mine = {"model.pt": "precious", "config.yaml": "mine: 1\n", "notes.txt": "notes"}
    for name, text in mine.items():
        (out / name).write_text(text)
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "1"), capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "holds no training run" in err and "'config.yaml' and 2 more" in err
    assert {p.name: p.read_text() for p in out.iterdir() if p.is_file()} == mine
    assert not any((out / "checkpoints").iterdir())

    from othello_learn.train.run_checks import RUN_CONFIG_MARK

    run = tmp_path / "run"
    train(_args(dataset_dir, run, "--max-steps", "1"))
    assert (run / "config.yaml").read_text().startswith(RUN_CONFIG_MARK)
    for p in (run / "checkpoints").iterdir():  # as a run killed before its first checkpoint leaves it
        p.unlink()
    (run / "metrics.json").unlink()
    summary = train(_args(dataset_dir, run, "--max-steps", "1", "--config", str(run / "config.yaml")))
    assert summary["global_step"] == 1 and (run / "metrics.json").exists()


@pytest.mark.parametrize("setting, value, missing", [
    ("data.train_years", "2001,2030", "2030"), ("data.val_years", "1999-2002", "1999-2000"),
    ("data.test_years", "2040", "2040")])
def test_a_split_year_the_dataset_lacks_is_one_line_naming_the_setting(dataset_dir, tmp_path, capsys, setting,
                                                                       value, missing):
    """Years the dataset does not hold were dropped without a word: a run said to train on
    2001 and 2030 trained on 2001."""
    from othello_learn.train.train import main

    out = tmp_path / "run"
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "1", "--set", f"{setting}={value}"), capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{setting} {value}" in err and f"no year {missing} " in err and str(dataset_dir) in err
    assert not out.exists()


def test_all_years_of_the_dataset_is_a_split(dataset_dir):
    from othello_learn.data.datamodule import WthorDataModule

    dm = WthorDataModule(dataset_dir, train_years="all", val_years="2002", test_years="2003")
    dm.setup()
    assert len(dm.splits["train"]) == len(dm.data.positions)


def test_a_stale_lock_is_taken_over_and_released(tmp_path):
    import socket

    from othello_learn.lock import RunLock

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / ".lock").write_text(f"{gone.pid} {socket.gethostname()}\n")
    with RunLock(tmp_path) as lock:
        assert (tmp_path / ".lock").read_text().split()[0] == str(os.getpid())
        with pytest.raises(UserError, match=f"process {os.getpid()}"):
            RunLock(tmp_path).acquire()
        assert lock.held
    assert sorted(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="start times are read from Linux's /proc")
def test_a_lock_whose_pid_was_handed_out_again_is_stale(tmp_path):
    """After a reboot or a container's restart PIDs start over: a lock naming a PID that is
    now another process's (another start time) was refused for good. A lock of an earlier
    version, without the start time, is still taken at its word."""
    import socket

    from othello_learn.lock import RunLock, process_start

    me, host, start = os.getpid(), socket.gethostname(), process_start(os.getpid())
    assert start is not None and RunLock(tmp_path).token == f"{me} {host} {start}\n"
    for text, alive in ((f"{me} {host} {start}\n", True), (f"{me} {host}\n", True),
                        (f"{me} {host} {int(start) + 1}\n", False)):
        (tmp_path / ".lock").write_text(text)
        if alive:
            with pytest.raises(UserError, match=f"in use by process {me} on {host}"):
                RunLock(tmp_path).acquire()
        else:
            with RunLock(tmp_path):
                assert (tmp_path / ".lock").read_text() == f"{me} {host} {start}\n"
    assert sorted(tmp_path.iterdir()) == []


@pytest.mark.parametrize("pid", ["0", "99999999999999999999"])
def test_a_lock_naming_no_possible_process_is_stale(tmp_path, pid):
    """0 is a process group to os.kill (it read as alive forever), a huge number overflowed."""
    import socket

    from othello_learn.lock import RunLock

    (tmp_path / ".lock").write_text(f"{pid} {socket.gethostname()}\n")
    with RunLock(tmp_path):
        assert (tmp_path / ".lock").read_text().split()[0] == str(os.getpid())


def test_what_a_lock_file_says_decides_whether_its_holder_may_be_running(tmp_path):
    """An empty (or garbled) lock younger than FRESH_SECONDS is being written by its creator:
    refused; an old one is garbage: taken over (a non-numeric PID must not crash int()). A
    lock from another host cannot be checked from here: refused, naming the holder."""
    import socket
    import time

    from othello_learn.lock import FRESH_SECONDS, RunLock

    lock_file = tmp_path / ".lock"
    old = time.time() - 3 * FRESH_SECONDS
    for text in ("", "abc somehost\n", "12 34 56 78\n"):
        lock_file.write_text(text)
        with pytest.raises(UserError, match="in use by (another process|process abc on somehost)"):
            RunLock(tmp_path).acquire()
        os.utime(lock_file, (old, old))
        with RunLock(tmp_path):
            assert lock_file.read_text() == RunLock(tmp_path).token
        assert not lock_file.exists()
    elsewhere = f"{socket.gethostname()}-elsewhere"
    lock_file.write_text(f"1 {elsewhere}\n")
    os.utime(lock_file, (old, old))
    with pytest.raises(UserError, match=f"in use by process 1 on {elsewhere} "):
        RunLock(tmp_path).acquire()
    assert lock_file.read_text() == f"1 {elsewhere}\n"


@pytest.mark.parametrize("garbage", [b"\xff\xfe\x00\x13", "\u00b2 somehost\n".encode()])
def test_a_garbled_lock_is_garbage_not_a_traceback(tmp_path, garbage):
    """A lock garbled by a crash into bytes that are not UTF-8, or whose "PID" is a digit to
    str.isdigit but not to int ("²"), failed every run into the folder with a traceback
    (UnicodeDecodeError, ValueError) where other garbage is refused while fresh, taken when old."""
    import time

    from othello_learn.lock import FRESH_SECONDS, RunLock

    lock_file = tmp_path / ".lock"
    lock_file.write_bytes(garbage)
    with pytest.raises(UserError, match="in use by (another process|process \u00b2 on somehost)"):
        RunLock(tmp_path).acquire()
    old = time.time() - 3 * FRESH_SECONDS
    os.utime(lock_file, (old, old))
    with RunLock(tmp_path) as lock:
        assert lock_file.read_text() == lock.token
    assert not lock_file.exists()


def test_a_lock_taken_by_another_is_neither_released_nor_moved_aside(tmp_path, monkeypatch):
    """release() removes only its own lock; a take-over that finds a fresh lock in place of the
    stale one it read puts it back; a lock that keeps coming back is an error, not a success."""
    from othello_learn.lock import RunLock

    lock_file = tmp_path / ".lock"
    lock = RunLock(tmp_path).acquire()
    lock_file.write_text("77 other\n")
    lock.release()
    assert lock_file.read_text() == "77 other\n" and not lock.held
    RunLock(tmp_path)._take_over("5 stale\n")
    assert lock_file.read_text() == "77 other\n" and [p.name for p in tmp_path.iterdir()] == [".lock"]
    monkeypatch.setattr(RunLock, "_holder", lambda self: ("", False))
    monkeypatch.setattr(RunLock, "_take_over", lambda self, stale: None)
    taker = RunLock(tmp_path)
    with pytest.raises(UserError, match="could not take the lock"):
        taker.acquire()
    assert not taker.held and lock_file.read_text() == "77 other\n"


def test_two_runs_taking_over_an_empty_stale_lock_at_once_do_not_both_hold_it(tmp_path, monkeypatch):
    """An empty lock (its machine lost before the token was written) read as stale by two runs:
    the second's take-over found the first's new lock still empty, took it for the stale one,
    deleted it and took the folder too, so both ran into one --out."""
    import time

    from othello_learn.lock import RunLock

    lock_file = tmp_path / ".lock"
    lock_file.write_text("")
    os.utime(lock_file, (time.time() - 60, time.time() - 60))
    first, second = RunLock(tmp_path), RunLock(tmp_path)
    stale, alive = second._holder()
    assert (stale, alive) == ("", False)
    real_fdopen = os.fdopen

    def second_meanwhile(fd, *args, **kwargs):  # the first has created its lock, not yet written it
        monkeypatch.setattr(os, "fdopen", real_fdopen)
        second._take_over(stale)
        with pytest.raises(UserError, match="in use by another process"):
            second.acquire()
        return real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", second_meanwhile)
    with first:
        assert first.held and not second.held and lock_file.read_text() == first.token
    assert sorted(tmp_path.iterdir()) == []


def test_a_run_refused_by_the_lock_leaves_the_holders_new_folder_alone(dataset_dir, tmp_path, capsys, monkeypatch):
    """Two trainings started at once into one new OUT: the second, refused by the first's
    lock, took back "the folder it made" and deleted the first's .lock and config.yaml (and
    the folder, with --logger none), so a third could enter and the run lost its settings."""
    from othello_learn.lock import RunLock
    from othello_learn.train.train import main

    out = tmp_path / "run"
    holder = RunLock(out)

    def first_run_meanwhile(self):  # the first run made OUT and took it while this one read its data
        (out / "checkpoints").mkdir(parents=True)
        (out / "config.yaml").write_text("theirs")
        holder.acquire()
        return RunLock.acquire(self)

    monkeypatch.setattr(RunLock, "__enter__", first_run_meanwhile)
    try:
        code, err = _run(main, _args(dataset_dir, out, "--max-steps", "2"), capsys)
        assert code == 2 and "is in use by process" in err, err
        assert (out / ".lock").read_text() == holder.token and (out / "config.yaml").read_text() == "theirs"
        assert (out / "checkpoints").is_dir()
    finally:
        holder.release()


# ---- 5. settings --------------------------------------------------------------------------------

@pytest.mark.parametrize("extra,expected", [
    (["--set", "model.dept=9"], "model.dept: unknown setting; the model settings are: "
                                "arch, blocks, depth, encoder, value_head, width (from --set model.dept=9)"),
    (["--set", "model.width=1.5"], "model.width: expected an integer, got 1.5"),
    (["--set", "optim.lr=fast"], "optim.lr: expected a number, got 'fast'"),
    (["--set", "data.batch_size=0"], "data.batch_size: must be at least 1, got 0"),
    (["--set", "trainer.accumulate_grad_batches=99999999999999999999"],  # Lightning's OverflowError
     "trainer.accumulate_grad_batches: must be at most 10000, got 99999999999999999999"),
    (["--precision", "7"], "trainer.precision: precision '7': expected auto, 32, bf16 or one of 32-true, "),
    (["--set", "optim.lr=.nan"], "optim.lr: must be a finite number, got nan"),  # nan passes every bound
    (["--set", "optim.weight_decay=.inf"], "optim.weight_decay: must be a finite number, got inf"),
    (["--set", "optim.label_smoothing=.nan"], "optim.label_smoothing: must be a finite number"),
    (["--set", "model.arch=transformer"], "model.arch: expected one of reference, resnet, got 'transformer'"),
    (["--set", "model.encoder=fancy"], "model.encoder: expected one of handcrafted, raw, got 'fancy'"),
    (["--set", "trainer.max_epoch=3"], "trainer.max_epoch: unknown setting"),
    (["--set", "data.train_years=20x1"], "data.train_years: bad year range"),
    (["--set", "modle.depth=3"], "--set modle.depth=3: expected SECTION.KEY=VALUE"),
    (["--train-positions", "10"], "data.batch_size 64: more than the 10 training positions"),
    # settings the architecture does not read (the resnet's model.depth: _args gives depth=1)
    (["--set", "model.blocks=2"], "model.blocks: only the resnet architecture has it, and model.arch is reference"),
    (["--set", "model.value_head=true"], "model.value_head: only the resnet architecture has it"),
    (["--set", "model.arch=resnet"], "model.depth: only the reference architecture has it, and model.arch is resnet"),
    (["--set", "optim.value_weight=1"], "optim.value_weight: weighs the value head's loss, and the network has no"),
])
def test_bad_settings_are_one_line_before_any_work(dataset_dir, tmp_path, capsys, extra, expected):
    from othello_learn.train.train import main

    out = tmp_path / "run"
    code, err = _run(main, _args(dataset_dir, out, *extra), capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and expected in err, err
    assert not out.exists()


def test_an_init_of_another_architecture_names_the_architecture(dataset_dir, tmp_path, capsys):
    """A reference config with a residual --init said "model.blocks: ... remove it", a setting
    the user never gave (the init's, merged in)."""
    from othello_learn.models.nets import NetConfig, build_network, save_network
    from othello_learn.train.train import main

    save_network(build_network(NetConfig("resnet", blocks=1, width=4, value_head=True)), tmp_path / "init.pt")
    out = tmp_path / "run"
    code, err = _run(main, _args(dataset_dir, out, "--set", "model.arch=reference", "--init", str(tmp_path / "init.pt")),
                     capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"--init {tmp_path / 'init.pt'}: model.arch is 'resnet' there and 'reference' in the config" in err
    assert not out.exists()


@pytest.mark.parametrize("flag,value", [("--batch-size", "0"), ("--checkpoint-every", "0"), ("--max-minutes", "-1"),
                                        ("--max-minutes", "nan"), ("--max-minutes", "1e308"), ("--checkpoint-minutes", "inf")])
def test_bad_numbers_on_the_command_line_exit_2(dataset_dir, tmp_path, capsys, flag, value):
    from othello_learn.train.train import main

    with pytest.raises(SystemExit) as e:
        run_main(main, _args(dataset_dir, tmp_path / "run", flag, value))
    assert e.value.code == 2 and flag in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_missing_or_damaged_dataset_is_named(dataset_dir, tmp_path, capsys):
    from othello_learn.train.train import main

    missing = tmp_path / "nowhere"
    args = _args(dataset_dir, tmp_path / "run")
    args[1] = str(missing)
    code, err = _run(main, args, capsys)
    assert code == 2 and f"--data {missing}" in err and len(err.strip().splitlines()) == 1
    assert err.count("othello-dataset") == 1  # the advice once
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in dataset_dir.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    data = (broken / "positions.npy").read_bytes()
    (broken / "positions.npy").write_bytes(data[: len(data) // 3])
    args[1] = str(broken)
    code, err = _run(main, args, capsys)
    assert code == 2 and f"--data {broken}" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
    (broken / "positions.npy").write_bytes(bytes(range(256)) * 4)  # not .npy: numpy takes it for a pickle
    code, err = _run(main, args, capsys)  # and its advice was passed on: load it "unsafely" if you trust it
    assert code == 2 and "not a .npy file of position records" in err and "allow_pickle" not in err, err


def test_the_schema_matches_the_modules():
    from othello_learn.data.datamodule import WthorDataModule
    from othello_learn.train.module import MovePredictor
    from othello_learn.train.config import SCHEMA

    module_args = set(inspect.signature(MovePredictor.__init__).parameters) - {"self", "net"}
    assert set(SCHEMA["optim"]) == module_args
    assert SCHEMA["model"] == typing.get_type_hints(NetConfig)  # names and types
    assert not set(SCHEMA["model"]) & set(SCHEMA["optim"])
    assert set(SCHEMA["data"]) == set(inspect.signature(WthorDataModule.__init__).parameters) - {"self", "data_dir", "seed"}
    for section in ("model", "optim", "data"):  # the shipped configs are valid
        from othello_learn.train.config import load_config
        for config in sorted((REPO / "train" / "configs").glob("*.yaml")):
            load_config(config, [])


def test_a_config_with_aliases_is_refused_before_they_expand(tmp_path):
    """Nine levels of nested aliases are 505 bytes, and the error naming the bad value ran out
    of memory formatting it (eight: a 351 MB "one-line" error)."""
    from othello_learn.train.config import load_config

    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    config = tmp_path / "laughs.yaml"
    config.write_text("\n".join(levels) + "\nmodel:\n  depth: *a8\n")
    alias = r"laughs\.yaml: not valid YAML \(line 2, column 10: an alias \(\*a0\): configs take"
    with pytest.raises(UserError, match=alias):
        load_config(config, [])
    config.write_text("model:\n  depth: 3\nmodel:\n  arch: resnet\n")  # YAML keeps the last in silence
    with pytest.raises(UserError, match=r"laughs\.yaml: not valid YAML \(line 3, column 1: 'model' is given twice\)"):
        load_config(config, [])


@pytest.mark.parametrize("text, said", [
    ("model:\n  arch: reference\n  depth 8\n", "line 3, column 3: could not find expected ':'"),
    ("model: {arch: reference\n", "line 1, column 8: expected ',' or '}', but got '<stream end>'"),
    ("model:\n\tarch: reference\n", "line 2, column 1: found character '\\t' that cannot start any token"),
    ("model:\n  arch: 'abc\n  depth: 3\n", "line 2, column 9: found unexpected end of stream"),  # the open quote
    # a block's context is where the block began, line 1: the stray line is the place
    ("model:\n  depth: 8\ndata:\n  batch_size: 64\n- x\n", "line 5, column 1: expected <block end>, but found '-'"),
    # a value that resolves or is tagged as what it cannot be: PyYAML's bare exception, a traceback
    ("data:\n  train_years: 2014-13-45\n", "line 2, column 16: '2014-13-45' is no timestamp (month must be in 1..12)"),
    ("model:\n  depth: !!int x\n", "line 2, column 10: 'x' is no int (invalid literal for int() with base 10: 'x')"),
    ("model:\n  depth: !!set x\n", "line 2, column 10: expected a mapping node, but found scalar"),
    ("model: {[1]: 2}\n", "line 1, column 8: found unhashable key"),
])
def test_a_yaml_syntax_error_names_its_line_and_the_problem(tmp_path, text, said):
    """PyYAML's first line is its context ("while scanning a simple key"): the error said only that.
    A value that does not construct was no YAMLError at all: a traceback (a --set value: kept as text)."""
    from othello_learn.train.config import load_config

    config = tmp_path / "bad.yaml"
    config.write_text(text)
    with pytest.raises(UserError) as e:
        load_config(config, [])
    assert str(e.value) == f"{config}: not valid YAML ({said})"
    if "is no" in said or "found scalar" in said:
        value = text.split(": ", 1)[1].strip()
        with pytest.raises(UserError, match=r"^(data\.train_years: bad year range|model\.depth: expected an integer)"):
            load_config(None, [f"{'data.train_years' if 'years' in text else 'model.depth'}={value}"])


# ---- 4. evaluation --------------------------------------------------------------------------------

@pytest.fixture
def tiny_checkpoint(tmp_path):
    path = tmp_path / "tiny.pt"
    save_network(build_network(NetConfig(depth=1, width=4)), path)
    return path


def test_evaluate_creates_the_json_folder(dataset_dir, tmp_path, tiny_checkpoint, capsys):
    from othello_learn.evaluation.evaluate import main

    report = tmp_path / "new" / "deeper" / "eval.json"
    code, err = _run(main, ["--checkpoint", str(tiny_checkpoint), "--wthor-dir", str(dataset_dir.parent),
                            "--years", "2003", "--json", str(report), "--limit", "100"], capsys)
    assert code == 0, err
    assert '"positions": 100' in report.read_text()
    assert report.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in report.parent.iterdir()) == ["eval.json", "eval.png"]


@pytest.mark.parametrize("sig, code, said", [("SIGTERM", 143, "terminated"), ("SIGHUP", 129, "hung up")])
def test_a_stop_signal_ends_evaluate_with_its_status_and_nothing_written(dataset_dir, tmp_path, tiny_checkpoint,
                                                                        monkeypatch, capsys, sig, code, said):
    """A kill or a closed terminal during the evaluation is one line and its exit status, as
    every command's; the --json, its plot and the --export are not written, nor their temporary files."""
    from othello_learn.evaluation import evaluate

    def stopped(*a, **k):
        os.kill(os.getpid(), getattr(signal, sig))
        pytest.fail("not stopped")

    monkeypatch.setattr(evaluate, "predict", stopped)
    handler = signal.getsignal(getattr(signal, sig))
    report = tmp_path / "eval" / "eval.json"
    got, err = _run(evaluate.main, ["--checkpoint", str(tiny_checkpoint), "--wthor-dir", str(dataset_dir.parent),
                                    "--years", "2003", "--json", str(report), "--limit", "100", "--calibrate",
                                    "--export", str(tmp_path / "eval" / "calibrated.pt")], capsys)
    assert signal.getsignal(getattr(signal, sig)) == handler
    assert got == code and err.strip().endswith(said) and "Traceback" not in err, err
    assert not report.parent.exists() or not list(report.parent.iterdir())


def test_the_export_a_refused_ckpt_names_gives_the_players_the_same_network(dataset_dir, tmp_path, capsys):
    """A run stopped before train.py wrote model.pt has only .ckpt files: evaluate.py --export
    turns one into the .pt every player takes (the refusal says how), its evaluation kept in it."""
    from othello_learn.models.nets import save_checkpoint_file
    from othello_learn.players.specs import make_program
    from othello_learn.evaluation.evaluate import main
    from othello_learn.train.module import MovePredictor

    model = MovePredictor(NetConfig(depth=1, width=4))
    ckpt = tmp_path / "last.ckpt"
    save_checkpoint_file({"hyper_parameters": dict(model.hparams), "state_dict": model.state_dict()}, ckpt)
    with pytest.raises(UserError, match=f"export it first: othello-eval --checkpoint {ckpt} --export"):
        load_network(ckpt)
    from othello_learn.rl.records import load_net

    with pytest.raises(UserError) as refused:  # the loop's --init: that advice alone, not its own after it
        load_net(ckpt, "cpu", "ANOTHER REMEDY")
    assert "--export NET.pt" in str(refused.value) and "ANOTHER REMEDY" not in str(refused.value)
    out = tmp_path / "exported" / "net.pt"
    argv = ["--checkpoint", str(ckpt), "--data", str(dataset_dir), "--years", "2003", "--limit", "50"]
    code, _ = _run(main, argv + ["--export", str(out)], capsys)
    assert code == 0
    net = load_network(out)
    assert net.config == NetConfig(depth=1, width=4)
    assert all(torch.equal(v, model.net.state_dict()[k]) for k, v in net.state_dict().items())
    metrics = torch.load(out, weights_only=True)["metrics"]
    assert metrics["exported_from"] == str(ckpt) and metrics["evaluation"]["positions"] == 50
    assert make_program(f"policy:{out}").net.config == net.config
    code, err = _run(main, argv + ["--export", str(ckpt)], capsys)  # never over its own input
    assert code == 2 and f"--export {ckpt}: expected a .pt or .pth file name" in err  # not a Lightning checkpoint
    code, err = _run(main, ["--checkpoint", str(out), *argv[2:], "--export", str(out)], capsys)
    assert code == 2 and f"--export {out}: is also the input --checkpoint" in err
    assert "hyper_parameters" in torch.load(ckpt, weights_only=True)


@pytest.mark.parametrize("limit", ["0", "-5", "x"])
def test_evaluate_limit_must_be_positive(dataset_dir, tiny_checkpoint, capsys, limit):
    from othello_learn.evaluation.evaluate import main

    with pytest.raises(SystemExit) as e:
        run_main(main, ["--checkpoint", str(tiny_checkpoint), "--wthor-dir", str(dataset_dir.parent),
                        "--years", "2003", f"--limit={limit}"])
    assert e.value.code == 2 and "--limit" in capsys.readouterr().err


def test_evaluate_names_a_missing_checkpoint(dataset_dir, tmp_path, capsys):
    from othello_learn.evaluation.evaluate import main

    code, err = _run(main, ["--checkpoint", str(tmp_path / "none.pt"), "--wthor-dir", str(dataset_dir.parent)], capsys)
    assert code == 2 and str(tmp_path / "none.pt") in err and len(err.strip().splitlines()) == 1


# ---- 6. security ----------------------------------------------------------------------------------

class _Touch:
    """Unpickling this creates a file: what a crafted checkpoint would do with a real command."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


@pytest.mark.parametrize("legacy", [True, False])
def test_a_crafted_checkpoint_is_refused_without_running_it(dataset_dir, tmp_path, capsys, legacy):
    from othello_learn.evaluation.evaluate import main

    marker = tmp_path / "pwned"
    crafted = tmp_path / "model.pt"
    payload = {"hparams": {"arch": "reference"}, "state_dict": {}, "extra": _Touch(marker)}
    if legacy:  # a bare pickle, as torch's legacy format
        crafted.write_bytes(pickle.dumps(payload, protocol=2))
    else:  # torch.save's zip format
        torch.save(payload, crafted)
    with pytest.raises(UserError, match="refused to load"):
        load_network(crafted)
    with pytest.raises(UserError, match=str(crafted)):
        read_checkpoint(crafted)
    code, err = _run(main, ["--checkpoint", str(crafted), "--wthor-dir", str(dataset_dir.parent)], capsys)
    assert code == 2 and str(crafted) in err and "refused to load" in err
    assert "add_safe_globals" not in err and "trust" not in err  # torch's advice to allowlist it is not ours
    assert not marker.exists()
    pickle.loads(pickle.dumps(payload, protocol=2))  # the payload is live: unpickling it does create the file
    assert marker.exists()


@pytest.mark.parametrize("content", [b"# a README\n", b"hello world\n", b"e\n", b"", bytes(range(256))])
def test_a_file_that_is_no_pickle_is_named_as_not_a_checkpoint(tmp_path, content):
    """Text or random bytes are not Python objects to refuse: the error says what they are."""
    path = tmp_path / "model.pt"
    path.write_bytes(content)
    with pytest.raises(UserError, match="not a checkpoint") as e:
        read_checkpoint(path)
    assert str(path) in str(e.value) and "Python objects" not in str(e.value)


@pytest.mark.parametrize("protocol", [3, 4, 5])
def test_a_bare_pickle_is_refused_in_one_line_without_torchs_warning(tmp_path, protocol):
    """A user's own pickle (protocol 4 and 5 are Python's defaults) drew a two-line torch
    warning before the error line."""
    import warnings

    path = tmp_path / "model.pt"
    path.write_bytes(pickle.dumps({"state_dict": {"w": [1.0]}}, protocol=protocol))
    with warnings.catch_warnings(record=True) as caught:  # recorded: turned into errors, torch.load's would be caught
        warnings.simplefilter("always")
        with pytest.raises(UserError, match=str(path)):
            read_checkpoint(path)
    assert [str(w.message) for w in caught] == []


def test_export_refuses_what_weights_only_loading_would(tmp_path):
    net = build_network(NetConfig(depth=1, width=4))
    with pytest.raises(TypeError, match="metrics"):
        save_network(net, tmp_path / "m.pt", metrics={"f": object()})
    assert not (tmp_path / "m.pt").exists()


def test_shipped_checkpoints_load_weights_only():
    paths = sorted((REPO / "checkpoints").glob("*.pt"))
    assert paths
    for path in paths:
        torch.load(path, map_location="cpu", weights_only=True)
        assert load_network(path).config.arch in ("reference", "resnet")


@pytest.mark.parametrize("extra,named", [
    (["--max-steps", "0"], "trainer.max_steps: 0 trains nothing"),
    (["--precision", "foo"], "trainer.precision: precision 'foo': expected auto"),
    (["--max-steps", "3", "--set", "trainer.val_check_interval=500"], "trainer.val_check_interval: 500 batches"),
])
def test_a_refused_run_leaves_no_folder_behind(dataset_dir, tmp_path, capsys, extra, named):
    from othello_learn.train.train import main

    out = tmp_path / "run"
    code, err = _run(main, _args(dataset_dir, out, *extra), capsys)
    assert code == 2 and named in err and err.count("\n") == 1, err
    assert not out.exists(), "the folder the command made is taken back"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    code, err = _run(main, _args(dataset_dir, out, *extra), capsys)
    assert code == 2 and sorted(p.name for p in out.iterdir()) == ["mine.txt"], "a user's folder is left as it was"


def test_metrics_json_is_strict_json_when_no_validation_ran(dataset_dir, tmp_path, capsys):
    import json

    from othello_learn.train.train import main

    out = tmp_path / "run"
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "2", "--set", "trainer.limit_val_batches=0"), capsys)
    assert code == 0, err

    def refuse(name):
        raise ValueError(f"{name} in metrics.json")

    summary = json.loads((out / "metrics.json").read_text(), parse_constant=refuse)
    assert summary["best_val_acc"] is None and Path(summary["best_checkpoint"]).is_absolute()


def test_an_error_after_training_ran_keeps_the_whole_run_folder(dataset_dir, tmp_path, capsys, monkeypatch):
    import othello_learn.models.nets as nets
    from othello_learn.train.train import main

    def refuse(*args, **kwargs):
        raise UserError("model.pt: cannot be written")

    monkeypatch.setattr(nets, "save_network", refuse)
    out = tmp_path / "run"
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "2"), capsys)
    assert code == 2 and "cannot be written" in err
    assert (out / "config.yaml").exists() and (out / "checkpoints" / "last.ckpt").exists(), "the trained run stays"


def test_evaluate_names_asked_for_years_without_games(dataset_dir, tmp_path, tiny_checkpoint, capsys):
    import shutil

    from othello_learn.data import wtb
    from othello_learn.data.wthor import main as build_main
    from othello_learn.evaluation.evaluate import main

    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(dataset_dir.parent / "WTH_2003.wtb", raw)
    wtb.write_wtb(raw / "WTH_2004.wtb", wtb.make_games([]), 2004)
    assert build_main(["--wthor-dir", str(raw), "--out", str(tmp_path / "ds"), "--quiet"]) == 0
    for source in (["--wthor-dir", str(raw)], ["--data", str(tmp_path / "ds")]):
        code, err = _run(main, ["--checkpoint", str(tiny_checkpoint), *source, "--years", "2003-2004"], capsys)
        assert code == 2 and "no positions for 2004" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("devices", ["0", "-1", "[0,0]", "[]", "gpu"])
def test_devices_not_a_count_or_indices_are_refused_before_any_work(dataset_dir, tmp_path, capsys, devices):
    from othello_learn.train.train import main

    out = tmp_path / "run"
    with pytest.raises(SystemExit) as e:
        run_main(main, _args(dataset_dir, out, "--devices", devices, "--max-steps", "1"))
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--devices" in err and "count of devices" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("stop, code, word", [(KeyboardInterrupt, 130, "interrupted"), ("sigterm", 143, "terminated")])
def test_a_stop_in_the_test_phase_exits_as_in_training(dataset_dir, tmp_path, monkeypatch, capsys, stop, code, word):
    from othello_learn.train.module import MovePredictor
    from othello_learn.train.train import main

    def test_step(self, batch, batch_idx):
        if stop == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        else:
            raise stop

    monkeypatch.setattr(MovePredictor, "test_step", test_step)
    argv = [a for a in _args(dataset_dir, tmp_path / "run", "--max-steps", "2") if a != "--no-test"]
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        got, err = _run(main, argv, capsys)
    finally:
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
    assert got == code and word in err, err
    assert not (tmp_path / "run" / "model.pt").exists() and not (tmp_path / "run" / ".lock").exists()


@pytest.mark.parametrize("limit", [["--max-steps", "5"], ["--max-epochs", "1", "--train-positions", "576"]])  # 9 batches
def test_the_last_step_is_validated_when_the_interval_misses_it(dataset_dir, tmp_path, monkeypatch, limit):
    """An interval in batches that does not divide the run left its last steps (the end of the
    schedule) unvalidated: the best checkpoint and model.pt could predate them."""
    from othello_learn.train.module import MovePredictor
    from othello_learn.train.train import train

    validated = []
    monkeypatch.setattr(MovePredictor, "on_validation_epoch_start",
                        lambda self: validated.append(self.trainer.global_step), raising=False)
    summary = train(_args(dataset_dir, tmp_path / "run", *limit, "--set", "trainer.val_check_interval=2"))
    end = summary["global_step"]
    assert validated[-1] == end and validated.count(end) == 1 and end % 2 == 1
    assert validated[:2] == [2, 4]


@pytest.mark.parametrize("change, named", [
    (["--seed", "3"], "--seed=0 there, 3 now"),
    (["--train-positions", "500"], "data.train_positions=None there, 500 now"),
    (["--set", "data.val_years=2003"], "data.val_years=2002 there, 2003 now"),
    (["--batch-size", "4"], "data.batch_size=64 there, 4 now"),
    (["--set", "data.symmetries=none"], "data.symmetries='all' there, 'none' now"),
])
def test_a_resume_on_other_data_is_refused_naming_the_settings(dataset_dir, tmp_path, capsys, change, named):
    from othello_learn.train.train import main, train

    out = tmp_path / "run"
    train(_args(dataset_dir, out, "--max-steps", "2"))
    config = (out / "config.yaml").read_text()
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "4", *change), capsys)
    assert code == 2 and "other data" in err and named in err and "another --out" in err, err
    assert len(err.strip().splitlines()) == 1
    assert (out / "config.yaml").read_text() == config and _step(out / "checkpoints" / "last.ckpt") == 2
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "4", "--set", "data.val_years=2002"), capsys)
    assert code == 0, err  # the same years, spelt as a number


@pytest.mark.parametrize("first, change, named", [
    ([], ["--set", "optim.lr=0.1"], "optim.lr=0.001 there, 0.1 now"),
    ([], ["--set", "optim.weight_decay=0.5"], "optim.weight_decay=0.0001 there, 0.5 now"),
    ([], ["--set", "optim.scheduler=none"], "optim.scheduler='onecycle' there, 'none' now"),
    (["--set", "optim.ema=0.5"], [], "optim.ema=0.5 there, 0.0 now"),
])
def test_a_resume_with_optimizer_settings_it_would_not_take_is_refused(dataset_dir, tmp_path, capsys, first, change,
                                                                       named):
    """The restored optimizer state kept the run's learning rate and weight decay (a rerun with
    --set optim.lr=0.1 trained at 0.001, config.yaml saying 0.1), a switch to scheduler none kept
    the annealed rate for good, and ema turned off went on from the averaged weights."""
    from othello_learn.train.train import main, train

    out = tmp_path / "run"
    train(_args(dataset_dir, out, "--max-steps", "2", *first))
    config = (out / "config.yaml").read_text()
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "4", *change), capsys)
    assert code == 2 and "other optimizer settings" in err and named in err and "another --out" in err, err
    assert len(err.strip().splitlines()) == 1
    assert (out / "config.yaml").read_text() == config and _step(out / "checkpoints" / "last.ckpt") == 2
    # what the resume does take: the same settings, a loss weight
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "3", *first, "--set", "optim.label_smoothing=0.1"),
                     capsys)
    assert code == 0, err


def test_a_resume_on_its_dataset_folder_rebuilt_from_other_files_is_refused(dataset_dir, tmp_path, capsys):
    """The folder is the run's own, so comparing it with itself found nothing: a rebuild in place
    from other files resumed in silence. A rebuild from the same files (the same bytes) resumes."""
    import random
    import shutil

    import reference_engine as ref
    from othello_learn.data import wtb
    from othello_learn.data.wthor import main as build_main
    from othello_learn.train.train import main, train

    data, out = tmp_path / "ds", tmp_path / "run"
    shutil.copytree(dataset_dir, data)
    train(["--data", str(data)] + _args(dataset_dir, out, "--max-steps", "2")[2:])
    again = ["--data", str(data)] + _args(dataset_dir, out, "--max-steps", "4")[2:]
    assert build_main(["--wthor-dir", str(dataset_dir.parent), "--out", str(data), "--quiet"]) == 0  # the same files
    code, err = _run(main, again, capsys)
    assert code == 0, err
    other = tmp_path / "other_files"
    other.mkdir()
    rng = random.Random(5)
    for year in (2001, 2002, 2003):
        games = [ref.random_game(rng) for _ in range(12)]
        wtb.write_wtb(other / f"WTH_{year}.wtb", wtb.make_games([[m for _, _, m in rec if m != 64] for rec, _, _ in games],
                                                               [(64 + ref.final_score(b)) // 2 for _, b, _ in games]), year)
    assert build_main(["--wthor-dir", str(other), "--out", str(data), "--quiet"]) == 0
    again[again.index("--max-steps") + 1] = "6"
    code, err = _run(main, again, capsys)
    assert code == 2 and f"--data {data}: rebuilt since the run began" in err and "other data" in err, err
    assert _step(out / "checkpoints" / "last.ckpt") == 4


def test_a_resume_from_another_dataset_folder_is_refused_unless_it_holds_the_same_data(dataset_dir, tmp_path,
                                                                                       capsys):
    """Another folder of other data is refused; a copy of the run's data (a second checkout's own
    build, whose summary names another source folder) resumes: it was refused as spelt."""
    import json
    import shutil

    from othello_learn.train.train import main, train

    out = tmp_path / "run"
    train(_args(dataset_dir, out, "--max-steps", "2"))
    other, copy = tmp_path / "other", tmp_path / "copy"
    shutil.copytree(dataset_dir, other)
    positions = np.load(other / "positions.npy")
    positions["ply"][-1] = (positions["ply"][-1] + 1) % 60  # one record changed: other data
    np.save(other / "positions.npy", positions)
    code, err = _run(main, ["--data", str(other)] + _args(dataset_dir, out, "--max-steps", "4")[2:], capsys)
    assert code == 2 and f"--data {dataset_dir} there, {other} now" in err, err
    shutil.copytree(dataset_dir, copy)
    summary = json.loads((copy / "summary.json").read_text())
    (copy / "summary.json").write_text(json.dumps({**summary, "source": "/elsewhere/wthor"}))
    code, err = _run(main, ["--data", str(copy)] + _args(dataset_dir, out, "--max-steps", "4")[2:], capsys)
    assert code == 0 and _step(out / "checkpoints" / "last.ckpt") == 4, err


def test_overlapping_splits_are_warned_of(dataset_dir, tmp_path, capsys):
    from othello_learn.train.train import main

    code, err = _run(main, _args(dataset_dir, tmp_path / "run", "--max-steps", "1",
                                 "--set", "data.train_years=2001-2002"), capsys)
    assert code == 0
    lines = [line for line in err.splitlines() if "share" in line]
    assert lines == ["warning: data.train_years and data.val_years share 2002: the held-out figures will read "
                     "too high (continuing)"]


@pytest.mark.parametrize("damage, named", [("move", "positions.npy: position 5: move 100 is not 0..63"),
                                           ("range", "summary.json: year 2002: no valid position_range"),
                                           ("cut records", "positions.npy: cannot be read"),
                                           ("cut summary", "summary.json: not valid JSON"),
                                           ("summary list", "summary.json: not a dataset summary"),
                                           ("deep summary", "summary.json: not valid JSON (lists or mappings nested")])
def test_damaged_dataset_contents_are_one_line_in_training_and_evaluation(dataset_dir, tmp_path, tiny_checkpoint,
                                                                         capsys, damage, named):
    import json
    import shutil

    import numpy as np

    from othello_learn.evaluation.evaluate import main as evaluate_main
    from othello_learn.train.train import main as train_main

    data = tmp_path / "ds"
    shutil.copytree(dataset_dir, data)
    if damage == "move":
        positions = np.load(data / "positions.npy")
        positions["move"][5] = 100
        np.save(data / "positions.npy", positions)
    elif damage == "range":
        summary = json.loads((data / "summary.json").read_text())
        del summary["years"]["2002"]["position_range"]
        (data / "summary.json").write_text(json.dumps(summary))
    elif damage == "summary list":
        (data / "summary.json").write_text("[1, 2]")
    elif damage == "deep summary":  # a RecursionError before
        (data / "summary.json").write_text("[" * 1000 + "]" * 1000)
    else:  # a copy cut short
        name = "positions.npy" if damage == "cut records" else "summary.json"
        whole = (data / name).read_bytes()
        (data / name).write_bytes(whole[: len(whole) // 2])
    code, err = _run(train_main, ["--data", str(data)] + _args(dataset_dir, tmp_path / "run", "--max-steps", "1")[2:],
                     capsys)
    assert code == 2 and named in err and len(err.strip().splitlines()) == 1, err
    code, err = _run(evaluate_main, ["--checkpoint", str(tiny_checkpoint), "--data", str(data), "--years", "2002"],
                     capsys)
    assert code == 2 and named in err and len(err.strip().splitlines()) == 1, err


def test_a_config_files_settings_for_the_architecture_set_away_from_are_let_through(tmp_path):
    from othello_learn.train.config import load_config

    config = tmp_path / "c.yaml"
    config.write_text("model: {arch: resnet, blocks: 4, value_head: true}\noptim: {value_weight: 1.0}\n")
    load_config(config, ["model.arch=reference"])  # a recipe's variant on the other net
    with pytest.raises(UserError, match="model.depth: only the reference architecture"):
        load_config(config, ["model.depth=3"])
    config.write_text("model: {arch: reference, blocks: 4}\n")
    with pytest.raises(UserError, match=r"model.blocks: only the resnet .* \(in "):
        load_config(config, [])


def test_evaluate_writes_its_files_before_printing(dataset_dir, tiny_checkpoint, tmp_path, monkeypatch):
    """``evaluate.py ... --json r.json | head -1``: a reader gone at the first print must not
    cost the result (run_main ends the command at the print, exit 141)."""
    import builtins
    import json

    from othello_learn.evaluation import evaluate

    def gone(*args, **kwargs):
        if kwargs.get("file") is None:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(builtins, "print", gone)
    with pytest.raises(BrokenPipeError):
        evaluate.main(["--checkpoint", str(tiny_checkpoint), "--data", str(dataset_dir), "--years", "2002",
                       "--json", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png")])
    assert json.loads((tmp_path / "r.json").read_text())["positions"] > 0 and (tmp_path / "r.png").exists()


def test_lightnings_notes_a_user_cannot_act_on_are_not_shown(dataset_dir, tmp_path, capsys, caplog):
    """Its cloud-logger tip, its internal use of a deprecated torch API, the model summary's
    size estimate under bf16: noise around the lines that matter (ours are tested elsewhere)."""
    import logging
    import warnings

    from othello_learn.train.train import main

    argv = _args(dataset_dir, tmp_path / "run", "--max-steps", "2", "--precision", "bf16-mixed",
                 "--set", "trainer.enable_model_summary=true", "--set", "trainer.num_sanity_val_steps=1")
    argv.remove("--no-test")
    with warnings.catch_warnings(record=True) as seen, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        code, err = _run(main, argv, capsys)
    assert code == 0, err
    shown = err + caplog.text + "\n".join(str(w.message) for w in seen)
    assert "Tip:" not in shown and "LeafSpec" not in shown and "not supported by the model summary" not in shown


def _fake_trainer(**kw):
    from types import SimpleNamespace

    from lightning.pytorch.trainer.states import TrainerFn

    saved = []
    trainer = SimpleNamespace(**{"global_step": 0, "sanity_checking": False, "validating": False,
                                 "state": SimpleNamespace(fn=TrainerFn.FITTING), **kw})
    trainer.save_checkpoint = lambda path, weights_only: saved.append(trainer.global_step)
    return trainer, saved


def test_last_checkpoint_saves_by_steps_by_time_and_only_with_something_new(tmp_path, monkeypatch):
    """Every N steps or every few minutes, whichever first; never twice for one step (the state
    a resume started from is on disk already); a validation outside fitting saves nothing; an
    interruption saves only progress not yet saved."""
    from lightning.pytorch.trainer.states import TrainerFn

    from othello_learn.train import checkpoints

    clock = [1000.0]
    monkeypatch.setattr(checkpoints.time, "monotonic", lambda: clock[0])
    last = checkpoints.LastCheckpoint(tmp_path / "last.ckpt", every_n_steps=5, every_seconds=300.0)
    trainer, saved = _fake_trainer(global_step=10)
    last.on_train_start(trainer, None)
    last.on_train_batch_end(trainer, None, None, None, 0)  # step 10 of a resume: already saved
    assert saved == []
    clock[0] += 100.0  # the save at step 15 restarts the clock
    for step in (11, 12, 13, 14, 15):
        trainer.global_step = step
        last.on_train_batch_end(trainer, None, None, None, 0)
    assert saved == [15]
    trainer.global_step, clock[0] = 16, clock[0] + 299.0
    last.on_train_batch_end(trainer, None, None, None, 0)
    assert saved == [15]
    trainer.global_step, clock[0] = 17, clock[0] + 1.0  # 300 s after the save at step 15
    last.on_train_batch_end(trainer, None, None, None, 0)
    assert saved == [15, 17]
    last.on_exception(trainer, None, KeyboardInterrupt())  # nothing new since step 17
    assert saved == [15, 17] and isinstance(last.interrupted_by, KeyboardInterrupt)
    trainer.global_step = 18
    last.on_exception(trainer, None, KeyboardInterrupt())
    assert saved == [15, 17, 18]
    trainer.state.fn = TrainerFn.VALIDATING
    last.on_validation_end(trainer, None)
    trainer.state.fn, trainer.sanity_checking = TrainerFn.FITTING, True
    last.on_validation_end(trainer, None)
    assert saved == [15, 17, 18]
    trainer.sanity_checking = False
    last.on_validation_end(trainer, None)
    assert saved == [15, 17, 18, 18]


def test_validate_at_end_stops_after_the_last_batch_of_the_last_epoch_or_max_steps():
    from othello_learn.train.validation import ValidateAtEnd

    callback = ValidateAtEnd()
    trainer, _ = _fake_trainer(max_steps=-1, max_epochs=2, current_epoch=1, num_training_batches=5,
                               should_stop=False)
    callback.on_train_batch_end(trainer, None, None, None, 3)
    assert not trainer.should_stop
    callback.on_train_batch_end(trainer, None, None, None, 4)  # the 5th of 5 batches
    assert trainer.should_stop
    trainer.current_epoch, trainer.should_stop = 0, False  # not the last epoch
    callback.on_train_batch_end(trainer, None, None, None, 4)
    assert not trainer.should_stop
    trainer.max_steps, trainer.global_step = 7, 6
    callback.on_train_batch_end(trainer, None, None, None, 1)
    assert not trainer.should_stop
    trainer.global_step = 7
    callback.on_train_batch_end(trainer, None, None, None, 2)
    assert trainer.should_stop


def test_a_lost_best_file_forgets_its_score_too(tmp_path, capsys):
    """Else the next validation is compared with the score of a file that is gone, and a run
    whose later validations were worse would export nothing."""
    from othello_learn.train.checkpoints import BestCheckpoint

    best = BestCheckpoint(dirpath=str(tmp_path), monitor="val/acc", mode="max")
    gone = str(tmp_path / "best.ckpt")
    best.load_state_dict({"dirpath": str(tmp_path), "best_model_path": gone, "best_model_score": torch.tensor(0.9),
                          "kth_best_model_path": gone, "kth_value": torch.tensor(0.9),
                          "best_k_models": {gone: torch.tensor(0.9)}, "last_model_path": "",
                          "monitor": "val/acc"})
    assert best.best_model_path == "" and best.best_model_score is None and best.best_k_models == {}
    assert "is gone" in capsys.readouterr().err


def test_a_recorded_best_outside_the_runs_folder_is_never_taken_as_ours(tmp_path, capsys):
    """Lightning deletes the best file it replaces: a last.ckpt that records ``../../victim.pt``
    (tampered, or another run's) had a resumed run delete a file outside its folder."""
    from othello_learn.train.checkpoints import BestCheckpoint

    run = tmp_path / "run" / "checkpoints"
    run.mkdir(parents=True)
    victim = tmp_path / "victim.pt"
    victim.write_bytes(b"not ours")
    outside = str(run / ".." / ".." / "victim.pt")
    for key in ("best_model_path", "kth_best_model_path", "best_k_models"):
        best = BestCheckpoint(dirpath=str(run), monitor="val/acc", mode="max")
        inside = str(run / "best.ckpt")
        state = {"dirpath": str(run), "best_model_path": inside, "best_model_score": torch.tensor(0.9),
                 "kth_best_model_path": inside, "kth_value": torch.tensor(0.9), "best_k_models": {inside: 0.9},
                 "last_model_path": outside, "monitor": "val/acc"}
        state[key] = {outside: torch.tensor(0.9)} if key == "best_k_models" else outside
        best.load_state_dict(state)
        assert best.best_model_path == "" and best.best_k_models == {} and best.kth_best_model_path == ""
        assert best.last_model_path == "" and "is not in this run's checkpoints folder" in capsys.readouterr().err
    assert victim.read_bytes() == b"not ours"


@pytest.mark.parametrize("overrides, expected", [
    (["optim.lr=0"], "optim.lr: must be above 0, got 0"),
    (["optim.ema=1"], "optim.ema: must be below 1, got 1"), (["optim.ema=-0.1"], "optim.ema: must be at least 0"),
    (["optim.label_smoothing=1"], "optim.label_smoothing: must be below 1, got 1"),
    (["data.num_workers=-1"], "data.num_workers: must be at least 0, got -1"),
    (["data.num_workers=129"], "data.num_workers: must be at most 128, got 129"),  # 100000 processes hung
    (["trainer.max_steps=-2"], "trainer.max_steps: must be at least -1, got -2"),
    (["trainer.gradient_clip_val=-1.0"], "trainer.gradient_clip_val: must be at least 0, got -1.0"),  # taken as given
    (["trainer.max_epochs=0"], "trainer.max_epochs: 0 trains nothing"),
    (["model.width=true"], "model.width: expected an integer, got True"),
    (["optim.scheduler=a: b: c"], "optim.scheduler: expected one of onecycle, cosine, none, got 'a: b: c'"),
    (["trainer.max_epochs=-1"], "trainer.max_epochs: an open-ended run (max_epochs=-1) needs a time budget"),
    (["model.width=4097"], "model.width: must be at most 4096, got 4097"),  # the typo's allocation, a traceback
    (["model.arch=resnet", "model.blocks=1001"], "model.blocks: must be at most 1000, got 1001"),
    (["model.depth=1001"], "model.depth: must be at most 1000, got 1001"),
    (["model.depth=1000", "model.width=4096"], "model.depth: depth 1000 with width 4096: about 150,994,944,000"),
    (["trainer.max_time={minutes: 1e400}"], "trainer.max_time: not a time budget such as {hours: 2}"),
    (["trainer.max_time={fortnights: 1}"], "trainer.max_time: not a time budget such as {hours: 2}"),
    # Lightning's: a modulo by zero a step in, leaving a run folder behind; "has to be ... an int" for -1
    (["trainer.val_check_interval=0"], "trainer.val_check_interval: must be a whole number of batches (at least 1) "
                                       "or a fraction of an epoch (above 0 to 1.0), got 0"),
    (["trainer.val_check_interval=0.0"], "trainer.val_check_interval: must be a whole number"),
    (["trainer.val_check_interval=1.5"], "trainer.val_check_interval: must be a whole number"),
    (["trainer.limit_train_batches=0"], "trainer.limit_train_batches: must be a whole number of batches (at least 1)"),
    (["trainer.limit_val_batches=-1"], "trainer.limit_val_batches: must be a whole number of batches (at least 0) "
                                       "or a fraction of an epoch (0.0 to 1.0), got -1"),
    (["trainer.limit_val_batches=1.01"], "trainer.limit_val_batches: must be a whole number"),
    (["trainer.accumulate_grad_batches=0"], "trainer.accumulate_grad_batches: must be at least 1, got 0"),
    (["trainer.num_sanity_val_steps=-2"], "trainer.num_sanity_val_steps: must be at least -1, got -2"),
    (["trainer.log_every_n_steps=0"], "trainer.log_every_n_steps: must be at least 1, got 0"),
    (["trainer.check_val_every_n_epoch=0"], "trainer.check_val_every_n_epoch: must be at least 1, got 0"),
    # Lightning's OverflowError after the set-up
    (["trainer.accumulate_grad_batches=99999999999999999999"], "trainer.accumulate_grad_batches: must be at most 10000"),
    (["trainer.min_steps=2147483648"], "trainer.min_steps: must be at most 2147483647"),  # one we do not type
])
def test_each_bound_of_the_config_check_at_its_edge(overrides, expected):
    """Each limit refuses the first value past it and lets the last one inside through
    (a --set value that is not YAML is kept as the text it is, and checked as that)."""
    from othello_learn.train.config import load_config

    with pytest.raises(UserError) as refused:
        load_config(None, overrides)
    assert str(refused.value).startswith(expected), str(refused.value)


@pytest.mark.parametrize("precision", ["64-true", "bf16-true"])
def test_a_network_cast_whole_trains(dataset_dir, tmp_path, precision):
    """Lightning casts the weights, not our fp32 input planes: a dtype mismatch traceback after
    the run folder was made. The net casts its planes to its weights' type."""
    from othello_learn.train.train import train

    metrics = train(_args(dataset_dir, tmp_path / "run", "--max-steps", "2", "--precision", precision))
    assert metrics["global_step"] == 2 and (tmp_path / "run" / "model.pt").exists()


def test_the_combined_size_error_blames_the_layers_and_says_where_width_came_from():
    from othello_learn.train.config import load_config

    with pytest.raises(UserError) as refused:
        load_config(None, ["model.arch=resnet", "model.blocks=1000", "model.width=4096"])
    said = str(refused.value)
    assert said.startswith("model.blocks: blocks 1000 with width 4096") and "(width from --set model.width=4096)" in said


def test_every_integer_setting_has_a_ceiling_and_takes_it():
    """Each integer setting of the tables, typed or passed on to Lightning, is refused one past its
    maximum and takes the maximum itself."""
    from othello_learn.train.config import SETTINGS, load_config

    maxima = {(section, key): setting.ceiling() for section, table in SETTINGS.items()
              for key, setting in table.items() if int in (setting.kind if isinstance(setting.kind, tuple) else
                                                           (setting.kind,))}
    assert None not in maxima.values(), "every integer setting has a ceiling"
    for (section, key), high in maxima.items():
        arch = ["model.arch=resnet", "model.width=1"] if key == "blocks" else ["model.width=1"]
        with pytest.raises(UserError) as refused:
            load_config(None, arch + [f"{section}.{key}={high + 1}"])
        assert str(refused.value).startswith(f"{section}.{key}: must be at most {high}, got {high + 1}")
        if key != "precision":  # precision's range is its names
            try:
                load_config(None, arch + [f"{section}.{key}={high}"])
            except UserError as e:  # another check's refusal (a net too big, a batch count of an epoch)
                assert "must be at most" not in str(e), e


def test_the_config_check_lets_the_edges_inside_through():
    from othello_learn.train.config import load_config

    cfg = load_config(None, ["optim.lr=1e-9", "optim.ema=0", "optim.label_smoothing=0.99", "data.num_workers=0",
                             "trainer.max_steps=-1", "trainer.max_epochs=1", "model.width=1"])
    assert cfg["optim"]["ema"] == 0 and cfg["data"]["num_workers"] == 0 and cfg["trainer"]["max_steps"] == -1
    load_config(None, ["trainer.val_check_interval=1", "trainer.limit_train_batches=1.0", "trainer.limit_val_batches=0",
                       "trainer.accumulate_grad_batches=1", "trainer.num_sanity_val_steps=-1"])
    load_config(None, ["trainer.val_check_interval=1.0", "trainer.limit_val_batches=0.0"])
    load_config(None, ["trainer.max_epochs=-1", "trainer.max_steps=10"])  # max_steps ends the schedule
    load_config(None, ["trainer.max_epochs=-1", "optim.scheduler=none"])
    load_config(None, ["model.width=4096", "model.depth=7", "trainer.max_time={hours: 2}"])  # under 2**30 weights
    load_config(None, ["model.width=8", "model.depth=1000", "data.num_workers=128"])
    load_config(None, ["model.arch=resnet", "model.blocks=1000"])


def test_numbers_read_as_yaml_1_2_writes_them():
    """YAML 1.1's octal and sexagesimal integers are gone: model.width=010 trained a width-8 net,
    and trainer.max_time=1:12:00:00 (Lightning's DD:HH:MM:SS) was refused as "got 259200". A float
    with two signs or no digit was a float to the resolver and a traceback from float()."""
    from othello_learn.train.config import load_config, read_config

    cfg, _ = read_config(None, ["model.width=010", "trainer.max_time=1:12:00:00", "data.batch_size=1:30",
                                "optim.lr=1e-3", "optim.ema=-.5", "data.num_workers=0x10", "trainer.max_steps=1_000"])
    assert cfg["model"]["width"] == 10 and cfg["trainer"]["max_time"] == "1:12:00:00"
    assert cfg["data"]["batch_size"] == "1:30" and cfg["optim"]["lr"] == 1e-3 and cfg["optim"]["ema"] == -0.5
    assert cfg["data"]["num_workers"] == 16 and cfg["trainer"]["max_steps"] == 1000
    assert load_config(None, ["trainer.max_time=1:12:00:00"])["trainer"]["max_time"] == "1:12:00:00"
    for value in ("--.inf", "._", "+-.inf"):
        with pytest.raises(UserError, match=rf"^optim\.lr: expected a number, got '{re.escape(value)}' \(from --set"):
            load_config(None, [f"optim.lr={value}"])


def test_fresh_ignores_a_last_ckpt_of_another_network_and_the_save_interval_is_in_minutes(
        dataset_dir, tmp_path, capsys, monkeypatch):
    from othello_learn.train import checkpoints
    from othello_learn.train.train import main

    intervals = []

    class Recorded(checkpoints.LastCheckpoint):
        def __init__(self, path, every_n_steps, every_seconds=300.0, **kwargs):
            intervals.append((every_n_steps, every_seconds))
            super().__init__(path, every_n_steps, every_seconds, **kwargs)

    monkeypatch.setattr(checkpoints, "LastCheckpoint", Recorded)
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    torch.save({"hyper_parameters": {"arch": "reference", "encoder": "raw", "depth": 1, "width": 4},
                "loops": {}, "state_dict": {}, "global_step": 3}, out / "checkpoints" / "last.ckpt")
    code, err = _run(main, _args(dataset_dir, out, "--set", "model.width=8", "--fresh", "--max-steps", "1",
                                 "--checkpoint-every", "7", "--checkpoint-minutes", "2"), capsys)
    assert code == 0, err
    assert "resuming" not in err and _step(out / "checkpoints" / "last.ckpt") == 1
    assert intervals == [(7, 120.0)]
    config = (out / "config.yaml").read_text()
    assert "max_epochs: 10" in config  # the built-in default, kept in the run's config


def test_data_differences_compare_years_as_years_and_folders_as_folders(tmp_path):
    from othello_learn.train.run_checks import data_differences

    folder = tmp_path / "ds"
    folder.mkdir()
    there = {"train_years": "2001-2003", "seed": 0, "data_dir": str(folder)}
    assert data_differences(there, {"train_years": "2001,2002,2003", "seed": 0, "data_dir": str(folder / ".")}) == []
    assert data_differences({**there, "data_dir": str(tmp_path / "gone")},  # a run moved from another machine
                            {"train_years": "2001-2003", "seed": 0, "data_dir": str(folder)}) == []
    other = tmp_path / "other"
    other.mkdir()
    assert data_differences(there, {"train_years": "2001-2002", "seed": 1, "data_dir": str(other)}) == [
        f"--data {folder} there, {other} now", "--seed=0 there, 1 now",
        "data.train_years='2001-2003' there, '2001-2002' now"]


def test_the_seed_and_the_validation_interval_at_their_edges():
    import argparse
    from types import SimpleNamespace

    from othello_learn.settings import seed_arg, seed_below
    from othello_learn.train.run_checks import check_dataset

    train_seed = seed_below(2**32)  # train's: Lightning's seed_everything
    assert train_seed("4294967295") == 2**32 - 1 and seed_arg("18446744073709551615") == 2**64 - 1
    with pytest.raises(argparse.ArgumentTypeError, match="below 2\\*\\*32"):
        train_seed("4294967296")
    with pytest.raises(argparse.ArgumentTypeError, match="below 2\\*\\*64"):
        seed_arg("18446744073709551616")
    dm = SimpleNamespace(setup=lambda: None, train_dataloader=lambda: [0] * 5)
    check_dataset(dm, Path("d"), {"val_check_interval": 5})  # an epoch's 5 batches
    check_dataset(dm, Path("d"), {"val_check_interval": 0.5})  # a fraction of an epoch
    with pytest.raises(UserError, match="6 batches, more than an epoch's 5"):
        check_dataset(dm, Path("d"), {"val_check_interval": 6})
    # as Lightning counts: an epoch cut by limit_train_batches (its ValueError, a traceback, before) ...
    with pytest.raises(UserError, match="4 batches, more than an epoch's 3 .*limit_train_batches"):
        check_dataset(dm, Path("d"), {"val_check_interval": 4, "limit_train_batches": 3})
    with pytest.raises(UserError, match="trainer.limit_train_batches: 0.1 of an epoch's 5 batches is none"):
        check_dataset(dm, Path("d"), {"limit_train_batches": 0.1})  # its MisconfigurationException
    check_dataset(dm, Path("d"), {"val_check_interval": 2, "limit_train_batches": 0.4})
    # ... and an interval across epochs (check_val_every_n_epoch null), or no validation, is Lightning's to take
    check_dataset(dm, Path("d"), {"val_check_interval": 6, "check_val_every_n_epoch": None})
    check_dataset(dm, Path("d"), {"val_check_interval": 6, "limit_val_batches": 0})


@pytest.mark.parametrize("flags, named", [
    (["--accelerator", "gpu"], "--accelerator gpu: torch "),
    (["--accelerator", "cpu", "--devices", "[1]"], "trainer settings: --accelerator cpu --devices [1]: "),
])
def test_a_device_this_machine_lacks_is_one_line_naming_the_flags(dataset_dir, tmp_path, capsys, monkeypatch, flags,
                                                                   named):
    """Lightning's own words ("No supported gpu backend found!") named neither the flag nor the
    machine; nothing is written before the refusal."""
    from othello_learn.train.train import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    out = tmp_path / "run"
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "1", *flags), capsys)
    errors = [line for line in err.splitlines() if "error:" in line]  # (an automatic precision is noted first)
    assert code == 2 and len(errors) == 1 and named in errors[0], err
    assert not (out / "checkpoints").exists()


@pytest.mark.parametrize("accelerator", ["cuda", "GPU"])
def test_the_gpu_check_reads_cuda_and_the_flag_in_any_case(dataset_dir, tmp_path, capsys, monkeypatch, accelerator):
    """Lightning takes "cuda" for "gpu" and reads the name in any case: without a GPU either is
    the same one line naming the flag ("GPU" reached the precision's torch.device, a traceback)."""
    from othello_learn.train.train import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    out = tmp_path / "run"
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "1", "--accelerator", accelerator), capsys)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1 and f"--accelerator {accelerator}: torch " in errors[0], err
    assert not (out / "checkpoints").exists()


def test_the_gpu_check_lets_an_apple_gpu_through(dataset_dir, tmp_path, capsys, monkeypatch):
    """Lightning's "gpu" is CUDA or Apple's MPS: a machine with MPS alone is not refused as one
    without a GPU (whatever Lightning then makes of it on this machine is its own)."""
    from othello_learn.train.train import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    code, err = _run(main, _args(dataset_dir, tmp_path / "run", "--max-steps", "1", "--accelerator", "gpu"), capsys)
    assert "sees no GPU" not in err, err


def test_a_trainer_setting_lightning_refuses_is_named_without_the_device_flags(dataset_dir, tmp_path, capsys):
    """Only Lightning's errors about devices name --accelerator and --devices: another refused
    trainer setting would send the user to flags they never gave or got right."""
    from othello_learn.train.train import main

    code, err = _run(main, _args(dataset_dir, tmp_path / "run", "--max-steps", "1",
                                 "--set", "trainer.gradient_clip_algorithm=bogus"), capsys)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1 and "trainer settings: " in errors[0], err
    assert "gradient_clip_algorithm" in errors[0] and "--accelerator" not in errors[0] and "--devices" not in errors[0]


@pytest.mark.parametrize("flags", [["--set", "trainer.gradient_clip_algorithm=bogus"], ["--accelerator", "tpu"],
                                   ["--set", "trainer.precision=16-true"]])
def test_a_setting_lightning_refuses_leaves_no_run_folder_or_wandb_run(dataset_dir, tmp_path, capsys, monkeypatch,
                                                                      flags):
    """Checked once the folder, its lock and the W&B run were made, a refused setting left a
    run folder holding checkpoints/, wandb/ and wandb_id, and W&B's banner around the error;
    "tpu" without torch_xla was an ImportError's traceback."""
    import wandb

    from othello_learn.train.train import main

    monkeypatch.setattr(wandb, "init", lambda *a, **k: pytest.fail("a W&B run was started"))
    out = tmp_path / "run"
    argv = [a if a != "none" else "wandb" for a in _args(dataset_dir, out, "--max-steps", "1", *flags)]
    code, err = _run(main, argv, capsys)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err and "wandb" not in err, err
    assert not out.exists()


def test_the_progress_bar_shows_the_running_training_loss(dataset_dir, tmp_path, monkeypatch):
    """The bar showed no training loss (only the held-out one, after the first validation, 2,000
    steps in): it shows the mean of the last steps' losses, as the module logs them."""
    from othello_learn.train import checkpoints
    from othello_learn.train.train import train

    monkeypatch.setattr(checkpoints.TrainingProgressBar, "LOSS_WINDOW", 3)
    shown, losses = [], {}  # the bar asks more than once a step
    original = checkpoints.TrainingProgressBar.get_metrics

    def record(self, trainer, pl_module):
        items = original(self, trainer, pl_module)
        if trainer.training and "train/loss_step" in trainer.progress_bar_metrics:
            losses[trainer.global_step] = float(trainer.progress_bar_metrics["train/loss_step"])
            shown.append(dict(items))
        return items

    monkeypatch.setattr(checkpoints.TrainingProgressBar, "get_metrics", record)
    train(_args(dataset_dir, tmp_path / "run", "--max-steps", "5", "--set", "trainer.enable_progress_bar=true"))
    assert len(shown) >= 5 and all("train/loss_step" not in items for items in shown)
    assert sorted(losses) == [1, 2, 3, 4, 5]
    assert shown[-1]["train/loss"] == pytest.approx((losses[3] + losses[4] + losses[5]) / 3)


def test_the_resumed_progress_bar_is_drawn_at_its_place_before_the_next_batch(dataset_dir, tmp_path, capsys,
                                                                                monkeypatch):
    """A resumed bar is redrawn at the batches already done at once: the person watching sees
    "3/N" where it stands, not the epoch start's "0/N" until the next batch ends."""
    import re

    from othello_learn.train.train import train

    from othello_learn.train import checkpoints

    monkeypatch.delenv("TQDM_DISABLE", raising=False)  # (other tests set it)
    monkeypatch.setattr(checkpoints, "bar_pacing", lambda stream: {})  # drawn as on a terminal
    out = tmp_path / "run"
    bar_on = ("--set", "trainer.enable_progress_bar=true", "--set", "trainer.val_check_interval=1.0")
    train(_args(dataset_dir, out, "--max-steps", "3", *bar_on))
    capsys.readouterr()
    train(_args(dataset_dir, out, "--max-steps", "5", *bar_on))
    frames = re.split(r"[\r\n]", capsys.readouterr().out)
    places = [int(m.group(1)) for f in frames if (m := re.match(r"Epoch 0: .*\| (\d+)/\d+ \[", f))]
    assert [p for p in places if p][:1] == [3] and places[-1] == 5, places  # then batches 4 and 5
    assert "budget=" not in "".join(frames)  # no time budget, none shown


def test_a_run_resumed_after_its_epochs_last_batch_draws_the_next_epoch_from_its_start(dataset_dir, tmp_path, capsys,
                                                                                       monkeypatch):
    """Saved at an epoch's last batch and stopped before the next one's first step, the run
    resumes into the next epoch, which Lightning still calls a mid-epoch restart: the bar started
    that epoch at the last one's length, and its rate and time left read negative. And the stopped
    run's bar, left open, drew its last frame ('Epoch 1: 0/10') when the garbage collector took it,
    here in the middle of the resumed run's bar (a flaky failure, made certain by the gc calls)."""
    import gc
    import re

    from othello_learn.train import checkpoints
    from othello_learn.train.train import main, train

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    out = tmp_path / "run"
    args = _args(dataset_dir, out, "--train-positions", "640", "--checkpoint-every", "10", "--max-epochs", "2",
                 "--set", "trainer.enable_progress_bar=true", "--set", "trainer.limit_val_batches=0")

    def ctrl_c():
        raise KeyboardInterrupt

    gc.disable()  # the stopped run's objects live on into the resumed run ...
    try:
        with monkeypatch.context() as m:
            _interrupt_at(m, 10, ctrl_c)
            assert _interrupted(main, args, capsys)[0] == 130
        assert _step(out / "checkpoints" / "last.ckpt") == 10  # 640 positions: 10 batches an epoch
        epoch_end = checkpoints.TrainingProgressBar.on_train_epoch_end

        def collected_first(*a):  # ... and are collected there, between its bar's frames
            gc.collect()
            return epoch_end(*a)

        with monkeypatch.context() as m:
            m.setattr(checkpoints.TrainingProgressBar, "on_train_epoch_end", collected_first)
            train(args)
    finally:
        gc.enable()
    frames = re.split(r"[\r\n]", capsys.readouterr().out)
    places = [int(m.group(1)) for f in frames if (m := re.match(r"Epoch 1: .*\| (\d+)/10 \[", f))]
    assert places and places[-1] == 10 and places == sorted(places), places
    assert not [f for f in frames if re.search(r"<-|-[\d.]+(it|s)/", f)]  # no negative time left or rate


def test_the_progress_bar_shows_what_is_left_of_the_time_budget(dataset_dir, tmp_path, capsys, monkeypatch):
    """The bar's time left is the epoch's: with --max-minutes 1 it promised an hour. The budget's
    own time left is shown beside it, counted down from the budget."""
    import re

    from othello_learn.train.train import train

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    capsys.readouterr()
    train(_args(dataset_dir, tmp_path / "run", "--max-steps", "3", "--max-minutes", "2",
                "--set", "trainer.enable_progress_bar=true"))
    printed = capsys.readouterr()
    left = [int(h) * 3600 + int(m) * 60 + int(s)
            for h, m, s in re.findall(r"budget=(\d+):(\d\d):(\d\d)", printed.out)]
    assert left and all(60 < t <= 120 for t in left) and left == sorted(left, reverse=True), left
    assert "training stopped at step 3: max_steps=3 reached" in printed.err


def test_the_run_says_which_limit_stopped_it(dataset_dir, tmp_path, capsys):
    """Lightning reads "`max_epochs=1` reached" when the time budget ends the epoch midway: the
    run names the budget instead (the steps: above; the epochs: ``stop_reason`` below)."""
    from othello_learn.train.train import main, train

    capsys.readouterr()
    # 0.06 s: Lightning's whole seconds would make it 0, spent before the first step
    summary = train(_args(dataset_dir, tmp_path / "budget", "--max-epochs", "-1", "--max-minutes", "0.001"))
    err = capsys.readouterr().err
    assert "the time budget (--max-minutes, trainer.max_time) is spent" in err and "max_epochs" not in err, err
    assert summary["global_step"] >= 1
    code, err = _run(main, _args(dataset_dir, tmp_path / "none", "--set", "trainer.max_time=00:00:00:00"), capsys)
    assert code == 2 and "training stopped before its first step, the time budget" in err and "no network" in err


def test_lightnings_max_epochs_line_is_dropped_and_its_other_info_kept():
    import logging

    from othello_learn.train.logs import _NoTips

    def record(msg):
        return logging.LogRecord("lightning.pytorch", logging.INFO, __file__, 1, msg, None, None)

    assert not _NoTips().filter(record("`Trainer.fit` stopped: `max_epochs=1` reached."))
    assert not _NoTips().filter(record("\N{ELECTRIC LIGHT BULB} Tip: use the cloud"))
    assert _NoTips().filter(record("GPU available: False, used: False"))


def test_train_fresh_records_the_first_csv_version_of_the_new_run(dataset_dir, tmp_path, monkeypatch):
    import json

    from othello_learn.train.train import parse_args, train

    monkeypatch.setenv("TQDM_DISABLE", "1")
    out = tmp_path / "run"
    common = ["--logger", "csv", "--max-steps", "2", "--set", "trainer.val_check_interval=1"]
    train(_args(dataset_dir, out, *common))
    assert not (out / "fresh_start.json").exists()
    train(_args(dataset_dir, out, *common, "--fresh"))
    assert json.loads((out / "fresh_start.json").read_text()) == {"csv_version": 1}
    assert parse_args(["--out", "o", "--seed", str(2**32 - 1)]).seed == 2**32 - 1  # train's own seed limit
    with pytest.raises(SystemExit):
        parse_args(["--out", "o", "--seed", str(2**32)])


def test_stop_reason_names_the_limit_that_ended_fit():
    """In Lightning's order: steps, then the time budget, then the epochs (counted as done
    whenever fit stops, so they cannot tell which ended it)."""
    from types import SimpleNamespace

    from lightning.pytorch.callbacks import Timer

    from othello_learn.train.logs import stop_reason

    class Spent(Timer):
        def time_remaining(self, stage=None):
            return self.left

    def trainer(step, max_steps=-1, left=None):
        timer = Spent(duration={"seconds": 60})
        timer.left = left
        return SimpleNamespace(global_step=step, max_steps=max_steps, max_epochs=3, callbacks=[timer])

    assert stop_reason(trainer(10, max_steps=10, left=-1.0)) == "max_steps=10 reached"
    assert stop_reason(trainer(9, max_steps=10, left=0.0)) == "the time budget (--max-minutes, trainer.max_time) is spent"
    assert stop_reason(trainer(9, max_steps=10, left=5.0)) == "max_epochs=3 reached"
    assert stop_reason(trainer(9, left=None)) == "max_epochs=3 reached"


def test_same_dataset_holds_a_copy_the_same_and_any_other_byte_or_year_table_not(dataset_dir, tmp_path):
    """A copy (copytree: the same sizes and modification times) is the same data, whatever its
    summary says of the source folder; one differing byte of either data file, even one with the
    same size and time, or another year table is not; a folder that is not a readable dataset
    (no summary, one that is not JSON or not a table) is not the same data either, not a crash."""
    import json
    import shutil

    from othello_learn.data.dataset import same_dataset

    def copy(name, edit=None):
        d = tmp_path / name
        shutil.copytree(dataset_dir, d)
        if edit is not None:
            summary = json.loads((d / "summary.json").read_text())
            (d / "summary.json").write_text(edit(summary) if callable(edit) else edit)
        return d

    assert same_dataset(dataset_dir, dataset_dir) and same_dataset(dataset_dir, copy("copy"))
    assert same_dataset(copy("moved", lambda s: json.dumps({**s, "source": "/elsewhere/wthor"})), dataset_dir)

    games = copy("games")
    text = (games / "games.csv").read_text()
    (games / "games.csv").write_text(text.replace(",WTH_2001.wtb,", ",WTH_2001.wtx,", 1))
    assert not same_dataset(dataset_dir, games)

    flipped = copy("flipped")
    data = bytearray((flipped / "positions.npy").read_bytes())
    data[-1] ^= 1  # the last record's last byte, its result
    (flipped / "positions.npy").write_bytes(bytes(data))
    st = os.stat(dataset_dir / "positions.npy")
    os.utime(flipped / "positions.npy", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(flipped / "positions.npy").st_size == st.st_size
    assert not same_dataset(dataset_dir, flipped)

    def shift(s):  # 2001's last 60 positions counted as 2002's: a split by years reads other data
        years = s["years"]
        years["2001"]["position_range"][1] -= 60
        years["2002"]["position_range"][0] -= 60
        return json.dumps(s)

    assert not same_dataset(dataset_dir, copy("years", shift))
    for name, summary in (("cut", '{"format_version": 1, "years": {'), ("text", '"a dataset"'), ("list", "[1, 2]")):
        assert not same_dataset(dataset_dir, copy(name, summary)) and not same_dataset(tmp_path / name, dataset_dir)
    (tmp_path / "empty").mkdir()
    assert not same_dataset(dataset_dir, tmp_path / "empty")


@pytest.mark.parametrize("accelerator, mps, named", [
    ("bogus", False, "trainer settings: --accelerator bogus --devices 1: "),
    ("cuda", True, "--accelerator cuda: torch "),  # Apple's GPU is "gpu" or "mps" to Lightning, not "cuda"
])
def test_an_accelerator_torch_does_not_know_or_lacks_is_one_line_naming_it(dataset_dir, tmp_path, capsys, monkeypatch,
                                                                           accelerator, mps, named):
    """"bogus" (or "tpu") reached torch.device in the automatic precision: a traceback."""
    from othello_learn.train.train import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    out = tmp_path / "run"
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "1", "--accelerator", accelerator), capsys)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1 and named in errors[0], err
    assert not (out / "checkpoints").exists()


def test_a_rerun_with_no_test_keeps_the_test_results_of_the_same_best_checkpoint(dataset_dir, tmp_path, capsys):
    """Rerunning a finished command with --no-test rewrote metrics.json without its "test" section."""
    import json

    from othello_learn.train.run_checks import earlier_test
    from othello_learn.train.train import main

    argv = _args(dataset_dir, tmp_path / "run", "--max-steps", "2")
    argv.remove("--no-test")
    assert _run(main, argv, capsys)[0] == 0
    metrics = tmp_path / "run" / "metrics.json"
    first = json.loads(metrics.read_text())
    code, err = _run(main, argv + ["--no-test"], capsys)
    assert code == 0 and "--no-test: kept the test results" in err, err
    again = json.loads(metrics.read_text())
    assert again["best_checkpoint"] == first["best_checkpoint"] and again["test"] == first["test"]
    # not kept: another checkpoint, other data, or a best checkpoint written after them (a --fresh run's name)
    best, cfg = first["best_checkpoint"], first["config"]
    assert earlier_test(metrics, best, cfg) == first["test"]
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"  # another checkpoint, older than the results
    os.utime(last, (metrics.stat().st_mtime - 5,) * 2)
    assert earlier_test(metrics, str(last), cfg) is None
    assert earlier_test(metrics, best, {**cfg, "data": {**cfg["data"], "test_years": "2002"}}) is None
    os.utime(best, (metrics.stat().st_mtime + 5,) * 2)
    assert earlier_test(metrics, best, cfg) is None
    assert earlier_test(tmp_path / "none.json", best, cfg) is None


def test_progress_bars_in_a_log_file_are_redrawn_once_a_minute(monkeypatch):
    """A 25-second training logged to a file was 14 KB of redraws (the test alone 471): off a terminal
    every bar, tqdm's and Lightning's, is redrawn at most once a minute, and at its end, its count
    kept current in between."""
    import io

    from othello_learn.cli import LOG_REDRAW_SECONDS, bar_pacing
    from othello_learn.train import checkpoints

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    class Bar:  # what the pacing sees of a tqdm bar
        def __init__(self, total):
            self.n, self.total, self.drawn = 0, total, []

        def refresh(self):
            self.drawn.append(self.n)

    monkeypatch.setattr(sys, "stderr", Terminal())
    monkeypatch.setattr(sys, "stdout", Terminal())  # where Lightning draws its bars
    assert bar_pacing() == {} and checkpoints.TrainingProgressBar()._pace == 0
    bar = checkpoints.TrainingProgressBar()._paced(Bar(3))
    for bar.n in (1, 2, 3):
        bar.refresh()
    assert bar.drawn == [1, 2, 3]
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert bar_pacing() == {"mininterval": LOG_REDRAW_SECONDS, "maxinterval": LOG_REDRAW_SECONDS}
    assert checkpoints.TrainingProgressBar()._pace == 0  # stdout is still the terminal
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    progress = checkpoints.TrainingProgressBar()
    for kind in ("sanity", "train", "validation", "test", "predict"):  # every bar Lightning makes is paced
        monkeypatch.setattr(checkpoints.TQDMProgressBar, f"init_{kind}_tqdm", lambda self: Bar(1))
        assert getattr(progress, f"init_{kind}_tqdm")().refresh.__name__ == "paced_refresh", kind
    clock = [1000.0]
    monkeypatch.setattr(checkpoints.time, "monotonic", lambda: clock[0])
    bar = checkpoints.TrainingProgressBar()._paced(Bar(300))
    for bar.n in range(1, 301):  # a batch a second
        clock[0] += 1
        bar.refresh()
    assert bar.drawn == [1, 61, 121, 181, 241, 300]


# ---- proposed by mutation testing -------------------------------------------------------------

@pytest.mark.parametrize("sig", ["SIGHUP", "SIGINT"])
def test_a_stop_signal_ignored_as_the_run_begins_stays_ignored(dataset_dir, tmp_path, monkeypatch, capsys, sig):
    """nohup ignores SIGHUP, a shell a background job's SIGINT: a run started so trains on when
    the terminal closes; stops_around_lightning must not take them."""
    from othello_learn.train import train as train_module

    real = train_module.check_dataset

    def signalled(*a, **k):
        os.kill(os.getpid(), getattr(signal, sig))
        return real(*a, **k)

    monkeypatch.setattr(train_module, "check_dataset", signalled)
    s = getattr(signal, sig)
    previous = signal.signal(s, signal.SIG_IGN)
    try:
        got, err = _run(train_module.main, _args(dataset_dir, tmp_path / "run", "--max-steps", "1"), capsys)
        assert signal.getsignal(s) is signal.SIG_IGN
    finally:
        signal.signal(s, previous)
    assert got == 0, err
    assert (tmp_path / "run" / "model.pt").exists()


def test_a_stop_swallowed_after_the_last_fit_still_ends_the_run_with_its_status(dataset_dir, tmp_path, monkeypatch,
                                                                                capsys):
    """The block's last check: a SIGTERM something swallowed after training (no later fit or
    test to check it) was lost, exit 0; the run's files are kept and it exits 143."""
    from othello_learn.cli import Terminated
    from othello_learn.models import nets
    from othello_learn.train.train import main

    real = nets.save_network

    def swallowed(*a, **k):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except Terminated:
            pass
        return real(*a, **k)

    monkeypatch.setattr(nets, "save_network", swallowed)
    out = tmp_path / "run"
    got, err = _run(main, _args(dataset_dir, out, "--max-steps", "1"), capsys)
    assert got == 143 and err.strip().endswith("terminated") and "last.ckpt" not in err, err
    assert (out / "model.pt").exists() and (out / "checkpoints" / "last.ckpt").exists()


def test_a_csv_run_logs_the_learning_rate(dataset_dir, tmp_path, monkeypatch):
    """LearningRateMonitor is added for any logger but none: the CSV's lr column."""
    from othello_learn.train.train import train

    monkeypatch.setenv("TQDM_DISABLE", "1")
    out = tmp_path / "run"
    train(_args(dataset_dir, out, "--logger", "csv", "--max-steps", "2", "--set", "trainer.log_every_n_steps=1"))
    header = next((out / "csv").rglob("metrics.csv")).read_text().splitlines()[0]
    assert any(col.startswith("lr-") for col in header.split(",")), header


def test_tpu_without_torch_xla_names_the_device_flags(dataset_dir, tmp_path, capsys):
    import importlib.util

    from othello_learn.train.train import main

    if importlib.util.find_spec("torch_xla") is not None:
        pytest.skip("torch_xla is installed")
    out = tmp_path / "run"
    code, err = _run(main, _args(dataset_dir, out, "--max-steps", "1", "--accelerator", "tpu"), capsys)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1 and "trainer settings: --accelerator tpu --devices 1: " in errors[0], err


def test_data_differences_speak_of_a_rebuild_only_for_the_runs_own_folder(tmp_path):
    from othello_learn.train.run_checks import data_differences

    folder, other = tmp_path / "ds", tmp_path / "other"
    folder.mkdir()
    other.mkdir()
    there = {"seed": 0, "data_dir": str(folder), "data_digest": "aaaa"}
    assert data_differences(there, {**there, "data_dir": str(other), "data_digest": "bbbb"}) == [
        f"--data {folder} there, {other} now"]  # another folder: not "rebuilt since the run began"
    assert data_differences(there, {**there, "seed": 1, "data_digest": "bbbb"}) == [
        f"--data {folder}: rebuilt since the run began (its summary.json differs)", "--seed=0 there, 1 now"]
    assert data_differences({"seed": 0, "data_dir": str(folder)}, there) == []  # a run from before the digest


def test_content_digest_ignores_only_the_source():
    from othello_learn.data.dataset import content_digest

    summary = {"format": "f", "source": "/a", "years": {"2001": {"games": 1}}, "total": {"games": 1},
               "skipped": []}
    digest = content_digest(summary)
    assert content_digest({**summary, "source": "/elsewhere"}) == digest
    assert content_digest(dict(reversed(list(summary.items())))) == digest  # key order is no content
    for key, value in [("years", {"2002": {"games": 1}}), ("total", {"games": 2}),
                       ("skipped", [{"file": "WTH_2001.wtb", "game": 0}]), ("format", "g")]:
        assert content_digest({**summary, key: value}) != digest, key


def test_eval_average_evaluates_and_exports_the_mean_of_the_nets(dataset_dir, tmp_path, capsys):
    """othello-eval --average (weight averaging, promoted from the research scripts): the exported
    net is average_networks' mean of --checkpoint and the others, says what it averaged, and
    carries no one net's own record; another architecture or an --export over an input is refused."""
    from othello_learn.models.nets import average_networks
    from othello_learn.evaluation.evaluate import main

    torch.manual_seed(0)
    nets = [build_network(NetConfig(depth=1, width=4)) for _ in range(3)]
    paths = [tmp_path / f"gen_{i}.pt" for i in range(3)]
    for net, path in zip(nets, paths):
        save_network(net, path, generation=7)
    out = tmp_path / "avg.pt"
    argv = ["--checkpoint", str(paths[0]), "--data", str(dataset_dir), "--years", "2003", "--limit", "50"]
    code, _ = _run(main, argv + ["--average", str(paths[1]), str(paths[2]), "--export", str(out)], capsys)
    assert code == 0
    mean = load_network(out)
    want = average_networks(nets).state_dict()
    assert all(torch.allclose(v, want[k], atol=1e-6) for k, v in mean.state_dict().items())
    saved = torch.load(out, weights_only=True)
    assert saved["metrics"]["averaged"] == [str(p) for p in paths] and "generation" not in saved
    other = tmp_path / "wide.pt"
    save_network(build_network(NetConfig(depth=1, width=8)), other)
    code, err = _run(main, argv + ["--average", str(other)], capsys)
    assert code == 2 and err.count("\n") == 1 and "--average" in err and "network 2" in err, err
    code, err = _run(main, argv + ["--average", str(paths[1]), "--export", str(paths[1])], capsys)
    assert code == 2 and "is also the input --average" in err, err
