"""benchmarks/gpu_check.sh, the one call a lent GPU answers: its plumbing on the CPU (every step at
tiny sizes), a failing step recorded while the rest run on, and its refusal without a GPU."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_check.sh"
STEPS = ["device", "install", "dataset", "train", "ddp", "selfplay_plain"]


def _run(*args, python=sys.executable, **env):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GPU_CHECK_")}
    environ.update(CUDA_VISIBLE_DEVICES="", PYTHON=str(python), **env)  # the CPU, on a machine with a GPU too
    # One thread a step, as under the suite's workers (conftest), also when this file runs alone: two
    # threads on busy cores spin in OpenMP's barriers, the tiny self-play step 13 s instead of 2.5 s.
    environ.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=environ,
                          timeout=600)


def test_without_a_gpu_it_refuses_in_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "gpu.json"
    said = []
    for args in ([out], [out, "--cpu-plumbing", "--no-such-flag"], [tmp_path / "gpu.txt"], []):
        r = _run(*args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert list(tmp_path.iterdir()) == []
        said.append(r.stderr)
    assert "no CUDA GPU" in said[0]  # the one run that gets past the arguments (and imports torch)


def test_cpu_plumbing_runs_every_step_and_writes_every_figure(tmp_path):
    out = tmp_path / "gpu.json"
    r = _run(out, "--cpu-plumbing")
    assert r.returncode == 0, r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["gpu.json"]  # no temporary file left beside it
    got = json.loads(out.read_text())
    assert got["mode"] == "cpu-plumbing" and got["complete"] and got["failed_steps"] == got["skipped_steps"] == []
    assert list(got["steps"]) == STEPS
    assert all(s["rc"] == 0 for s in got["steps"].values()), got["steps"]
    assert all(s["wall_s"] > 0 and s["timeout_s"] > 0 for n, s in got["steps"].items() if n != "install")
    device = got["steps"]["device"]["result"]
    assert {"name", "memory_bytes", "torch", "cuda", "gpus", "python"} <= set(device)
    ddp = got["steps"]["ddp"]
    assert ddp["ran"] and ddp["result"]["ddp_initialized"] and ddp["result"]["global_step"] == 3
    figures = got["figures"]
    assert figures["train_fp32_samples_per_s"] > 0 and figures["train_bf16_samples_per_s"] > 0
    assert figures["ddp_steps_per_s"] > 0
    assert set(figures["selfplay"]) == {"fp32 plain puct", "fp32 plain gumbel"}
    assert all(v["games_per_hour"] > 0 and v["evaluations_per_s"] > 0 for v in figures["selfplay"].values())


def test_a_failing_step_is_recorded_and_the_others_run_on(tmp_path):
    """A Python whose benchmarks and training fail at once: each step records its exit status and
    its last words, every step has its turn, and the JSON is complete, with exit status 1. (Its
    answer to the script's first look for a GPU is "none" at once: the plumbing test runs that.)"""
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\ncase "$*" in *benchmarks/*|*train/train.py*) echo "boom in $1" >&2; exit 3;;\n'
                    f'  "-c import torch; print(torch.cuda.device_count() "*) echo 0; exit 0;; esac\n'
                    f'exec {sys.executable} "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "gpu.json"
    r = _run(out, "--cpu-plumbing", python=fake)
    assert r.returncode == 1, r.stderr
    got = json.loads(out.read_text())
    assert got["complete"] and list(got["steps"]) == STEPS
    assert got["failed_steps"] == STEPS[2:] and got["steps"]["device"]["rc"] == 0
    for name in STEPS[2:]:
        assert got["steps"][name]["rc"] == 3 and "boom in " in got["steps"][name]["error"], got["steps"][name]
    assert got["figures"] == {}


def _benchmark(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_synthetic_dataset_is_finished_legal_games_in_the_default_split(tmp_path, capsys):
    """What gpu_check trains on without WTHOR files: games the builder replays without an error, to
    their end, in the years the default split reads; train_throughput.py --synthetic times on one."""
    import pandas as pd

    from othello_learn.cli import run_main
    from othello_learn.data.datamodule import WthorDataModule

    out = _benchmark("synthetic_dataset").build(tmp_path / "ds", 2000, seed=1)
    games = pd.read_csv(out / "games.csv")
    assert len(games) >= 34 and games["error"].isna().all() and games["finished"].all()
    dm = WthorDataModule(out, batch_size=16)
    dm.setup()
    assert all(len(dm.splits[s]) for s in ("train", "val", "test")) and len(dm.splits["train"]) > 1500
    config, result = tmp_path / "tiny.yaml", tmp_path / "train.json"
    config.write_text("model: {arch: reference, encoder: raw, depth: 1, width: 8}\ndata: {batch_size: 64}\n")
    argv = ["--synthetic", "500", "--config", str(config), "--steps", "1", "--rounds", "1", "--json", str(result)]
    assert run_main(_benchmark("train_throughput").main, argv) == 0, capsys.readouterr().err
    assert json.loads(result.read_text())["recipe_samples_per_s"] > 0


def test_the_selfplay_benchmark_refuses_a_missing_checkpoint_in_one_line(tmp_path, capsys):
    from othello_learn.cli import run_main

    argv = ["--checkpoint", str(tmp_path / "no.pt"), "--json", str(tmp_path / "sp.json")]
    assert run_main(_benchmark("selfplay").main, argv) == 2
    err = capsys.readouterr().err
    assert "no.pt" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "sp.json").exists()
