"""Data-parallel training (DDP, gloo on CPU, 2 processes) of train.py.

Most tests start the ranks as torchrun does (RANK, WORLD_SIZE, ... in the environment), forked from
this process so that none imports torch again (seconds each on two busy cores); one starts the
command itself, whose Lightning starts the second rank. They share one xdist worker (the module's
mark): two of them at once would want four processes on two cores.

The comparison for the weights is one process with trainer.accumulate_grad_batches=2 over the same
micro-batches (rank r's share of global batch k is micro-batch 2k+r), with the tiny residual net's
batch norms kept: in training mode a batch norm normalizes by its own batch's statistics, a rank's
share under DDP and a micro-batch under accumulation alike, so the gradients, hence the parameters,
agree. Its running statistics (buffers, read only in evaluation) do not, by design: DDP broadcasts
rank 0's each step while accumulation updates them twice; the comparison is of the parameters.
Less the policy head's last bias: it adds one constant to every logit, which the softmax ignores,
so its gradient is zero but for rounding (the two sum the halves in another order), and AdamW's
normalized step turns that rounding into a step of the learning rate's size either way.
"""

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch

from othello_learn.cli import run_main
from othello_learn.data.datamodule import EpochBatchSampler

pytestmark = pytest.mark.xdist_group("ddp")

SHIFT_ONLY = "net.policy_head.3.bias"  # see above
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _args(dataset_dir, out, *extra, batch=16):
    return ["--data", str(dataset_dir), "--out", str(out), "--logger", "none", "--no-test",
            "--accelerator", "cpu", "--precision", "32-true", "--checkpoint-every", "1",
            "--set", "model.arch=resnet", "--set", "model.blocks=1", "--set", "model.width=4",
            "--set", "data.train_years=2001",
            "--set", "data.val_years=2002", "--set", "data.test_years=2003", "--set", f"data.batch_size={batch}",
            "--set", "data.train_positions=96", "--set", "data.val_positions=40", "--set", "data.symmetries=none",
            "--set", "trainer.enable_progress_bar=false", "--set", "trainer.enable_model_summary=false",
            "--set", "trainer.num_sanity_val_steps=0", "--set", "trainer.val_check_interval=4", *extra]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, world, port, argv, log, at_step):
    """One rank, as torchrun starts it: its output to ``log``; ``at_step``: {step: signal} it sends
    itself at the start of that training step (a stop, or a kill, at a known point)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank), GROUP_RANK="0", LOCAL_WORLD_SIZE=str(world), TORCHELASTIC_RUN_ID="test")
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)  # noqa: SIM115 (until _exit)
    torch.set_num_threads(1)
    if at_step:
        from othello_learn.train.module import MovePredictor

        step = MovePredictor.training_step

        def training_step(self, batch, batch_idx):
            if self.trainer.global_step in at_step:
                os.kill(os.getpid(), at_step[self.trainer.global_step])
            return step(self, batch, batch_idx)

        MovePredictor.training_step = training_step
    from othello_learn.train.train import main

    code = 1
    try:
        code = run_main(main, argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _ddp(tmp_path, argv, at_step=None, world=2, timeout=120):
    """Exit status and output of each rank (``at_step``: {rank: {step: signal}})."""
    ctx = multiprocessing.get_context("fork")
    port = _free_port()
    logs = [tmp_path / f"rank{r}.log" for r in range(world)]
    procs = [ctx.Process(target=_rank, args=(r, world, port, argv, str(logs[r]), (at_step or {}).get(r)))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.kill()
    assert not alive, [log.read_text() for log in logs]
    return [p.exitcode for p in procs], [log.read_text() for log in logs]


def _single(dataset_dir, out, *extra, batch=16):
    from othello_learn.train.train import main

    return run_main(main, _args(dataset_dir, out, *extra, batch=batch))


def _params(ckpt) -> dict:
    """The parameters of a checkpoint, not the batch norms' running statistics (see above)."""
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    return {k: v for k, v in state.items()
            if not k.endswith(("running_mean", "running_var", "num_batches_tracked")) and k != SHIFT_ONLY}


def _assert_close(a: dict, b: dict, tol=1e-6):
    assert a.keys() == b.keys() and a
    for k, v in a.items():
        assert torch.allclose(v, b[k], atol=tol, rtol=0), (k, (v - b[k]).abs().max())


def test_rank_shards_are_disjoint_and_together_one_epoch():
    n, batch, world = 103, 12, 3
    trained = None
    for shuffle in (True, False):
        whole = list(EpochBatchSampler(n, batch, shuffle, seed=5, drop_last=shuffle))
        shards = [EpochBatchSampler(n, batch, shuffle, seed=5, drop_last=shuffle, rank=r, world=world)
                  for r in range(world)]
        for s in shards:
            s.set_epoch(0)
        parts = [list(s) for s in shards]
        # as many steps as one process; each global batch is the ranks' shares, in rank order
        assert [len(s) for s in shards] == [len(p) for p in parts]
        assert len(parts[0]) == len(whole)
        for b, full in enumerate(whole):
            assert np.array_equal(np.concatenate([p[b] for p in parts if b < len(p)]), full)
        seen = np.concatenate([i for p in parts for i in p])
        assert len(seen) == len(set(seen.tolist()))  # disjoint
        assert len(seen) == (n // batch * batch if shuffle else n)  # together one epoch
        trained = trained or parts
    # a resume skips the same global batches on every rank
    skipped = [list(EpochBatchSampler(n, batch, True, seed=5, drop_last=True, skip=3, rank=r, world=world))
               for r in range(world)]
    assert all(np.array_equal(a, b) for r in range(world) for a, b in zip(skipped[r], trained[r][3:], strict=True))
    # the last partial batch of evaluation: a rank with no share of it has one batch fewer
    tail = [EpochBatchSampler(25, 12, False, rank=r, world=3) for r in range(3)]
    assert [len(s) for s in tail] == [3, 2, 2] and [len(list(s)) for s in tail] == [3, 2, 2]
    with pytest.raises(ValueError, match="does not divide among 3"):
        EpochBatchSampler(n, 16, True, world=3)


def test_a_global_batch_that_does_not_divide_among_the_ranks_is_refused(dataset_dir, tmp_path, capsys):
    from othello_learn.train.train import main

    out = tmp_path / "run"
    code = run_main(main, _args(dataset_dir, out, "--devices", "2", "--strategy", "ddp", batch=15))
    err = capsys.readouterr().err
    assert code == 2 and "data.batch_size 15" in err and "divide by 2" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_held_out_split_smaller_than_the_ranks_is_refused(dataset_dir, tmp_path, capsys):
    from othello_learn.train.train import main

    out = tmp_path / "run"
    code = run_main(main, _args(dataset_dir, out, "--devices", "2", "--strategy", "ddp", "--set",
                                "data.val_positions=1"))
    err = capsys.readouterr().err
    assert code == 2 and "data.val_years 2002 (data.val_positions 1): 1 position(s), fewer than the 2" in err, err
    assert not out.exists()


def test_only_rank_0_checks_the_run_folder(dataset_dir, tmp_path, monkeypatch):
    """Ranks started side by side (torchrun, SLURM): rank 1 saw rank 0's config.yaml mid-write
    (its temporary name) beside an empty checkpoints/, refused the folder as not a run's, and left
    rank 0 waiting for it. The folder is rank 0's to check; the others go on to the rendezvous."""
    from othello_learn.train import train as train_module

    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / ".config.yaml.p1-0123abcd.tmp").write_text("half")
    monkeypatch.setattr(train_module, "fit", lambda args, stops: {"reached": "fit"})
    argv = _args(dataset_dir, out, "--devices", "2", "--strategy", "ddp")
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("WORLD_SIZE", "2")
        if rank == "0":
            with pytest.raises(train_module.UserError, match="holds no training run"):
                train_module.train(argv)
        else:
            assert train_module.train(argv) == {"reached": "fit"}
    assert sorted(p.name for p in out.iterdir()) == [".config.yaml.p1-0123abcd.tmp", "checkpoints"]


def test_ddp_equals_accumulation_and_resumes_as_never_stopped(dataset_dir, tmp_path):
    """6 steps over epochs of 6 global batches of 16 (the validation every 4): two ranks of 8 each
    against one process accumulating two micro-batches of 8; then a DDP run stopped by SIGTERM to
    rank 0 in step 3 (mid-epoch) and resumed."""
    steps = ["--max-steps", "6", "--devices", "2", "--strategy", "ddp"]
    codes, logs = _ddp(tmp_path, _args(dataset_dir, tmp_path / "ddp", *steps))
    assert codes == [0, 0], logs
    assert _single(dataset_dir, tmp_path / "acc", "--max-steps", "6", "--set", "trainer.accumulate_grad_batches=2",
                   "--set", "trainer.val_check_interval=8", batch=8) == 0  # validated at the same steps: 8 batches
    ddp = _params(tmp_path / "ddp" / "checkpoints" / "last.ckpt")
    _assert_close(ddp, _params(tmp_path / "acc" / "checkpoints" / "last.ckpt"))
    # only rank 0 wrote the run folder: the same files as the single process's
    names = sorted(p.name for p in (tmp_path / "ddp").rglob("*"))
    assert names == sorted(p.name for p in (tmp_path / "acc").rglob("*")), names

    stopped = tmp_path / "stopped"
    codes, logs = _ddp(tmp_path, _args(dataset_dir, stopped, *steps), at_step={0: {2: signal.SIGTERM}})
    assert codes == [143, 143], logs
    assert "terminated; last.ckpt holds the progress" in logs[0]
    step = torch.load(stopped / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert step == 3  # agreed after the step the signal came in, saved there by both
    codes, logs = _ddp(tmp_path, _args(dataset_dir, stopped, *steps))
    assert codes == [0, 0] and "resuming from" in logs[0], logs
    _assert_close(_params(stopped / "checkpoints" / "last.ckpt"), ddp, tol=0)


def test_ctrl_c_at_the_terminal_stops_every_rank_at_one_step(dataset_dir, tmp_path):
    """The terminal's SIGINT reaches every rank, each at its own point of the step: all save the
    same step and exit as interrupted."""
    out = tmp_path / "run"
    argv = _args(dataset_dir, out, "--max-steps", "6", "--devices", "2", "--strategy", "ddp")
    codes, logs = _ddp(tmp_path, argv, at_step={0: {2: signal.SIGINT}, 1: {2: signal.SIGINT}})
    assert codes == [130, 130], logs
    assert "interrupted; last.ckpt holds the progress" in logs[0]
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 3


def test_a_killed_rank_is_one_error_and_the_run_resumes(dataset_dir, tmp_path):
    out = tmp_path / "run"
    argv = _args(dataset_dir, out, "--max-steps", "6", "--devices", "2", "--strategy", "ddp", "--ddp-timeout", "1")
    codes, logs = _ddp(tmp_path, argv, at_step={1: {4: signal.SIGKILL}})
    assert codes[1] == -signal.SIGKILL and codes[0] == 2, logs
    errors = [line for line in logs[0].splitlines() if "error:" in line]
    assert len(errors) == 1 and "a training process was lost" in errors[0], logs[0]
    assert "last.ckpt holds step 4" in errors[0] and "rerun the same command to resume" in errors[0]
    codes, logs = _ddp(tmp_path, [a for a in argv if a != "--no-test"])
    assert codes == [0, 0] and "resuming from" in logs[0], logs
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 6
    assert (out / "model.pt").exists()
    # the test metrics, sums over the two ranks' disjoint shards (12 games' positions, not a
    # multiple of the batch: the last one is split unevenly), are one process's test of the checkpoint
    metrics = json.loads((out / "metrics.json").read_text())
    alone = _test_alone(dataset_dir, metrics["best_checkpoint"])
    for key in ("test/acc", "test/top3", "test/acc_moves_1-12", "test/acc_moves_57-60"):
        assert metrics["test"][key] == pytest.approx(alone[key], abs=1e-7), key
    assert metrics["test"]["test/loss"] == pytest.approx(alone["test/loss"], rel=1e-5)


def test_the_command_starts_its_other_rank_itself(dataset_dir, tmp_path):
    """On one machine Lightning starts rank 1 (the command again, LOCAL_RANK=1) once training
    begins: it takes no lock (rank 0 holds it), writes nothing and prints no summary."""
    out = tmp_path / "run"
    argv = _args(dataset_dir, out, "--max-steps", "1", "--devices", "2", "--strategy", "ddp")
    done = subprocess.run([sys.executable, "-m", "othello_learn.train.train", *argv], cwd=REPO,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, check=False, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["global_step"] == 1  # one summary, rank 0's
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints", "config.yaml", "metrics.json", "model.pt"]


def _test_alone(dataset_dir, checkpoint) -> dict:
    """One process's test of ``checkpoint`` on the run's test split."""
    import lightning as L

    from othello_learn.data.datamodule import WthorDataModule
    from othello_learn.train.module import MovePredictor

    model = MovePredictor.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True)
    dm = WthorDataModule(dataset_dir, batch_size=16, train_years="2001", val_years="2002", test_years="2003",
                         train_positions=96, val_positions=40, symmetries="none")
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, use_distributed_sampler=False)
    return trainer.test(model, datamodule=dm, verbose=False)[0]
