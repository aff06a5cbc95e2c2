"""DataModule, networks, Lightning training (W&B offline), resume, evaluation."""

import json
import random
import subprocess
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import reference_engine as ref
from othello import bitboard as bb
from othello.symmetry import START_PRESERVING
from othello_learn.data import wtb
from othello_learn.data.datamodule import WthorDataModule
from othello_learn.data.wthor import main as build_main
from othello_learn.models.batch import SYMMETRY_GROUPS, augment, from_records
from othello_learn.models.nets import NetConfig, build_network, legal_mask, load_network


def _dm(dataset_dir, **kw):
    dm = WthorDataModule(dataset_dir, batch_size=64, train_years="2001", val_years="2002", test_years="2003", **kw)
    dm.setup()
    return dm


def test_loader_covers_each_position_once_in_order(dataset_dir):
    dm = _dm(dataset_dir)
    batches = list(dm.val_dataloader())
    moves = torch.cat([b["move"] for b in batches]).numpy()
    assert np.array_equal(moves, dm.splits["val"]["move"])
    train = torch.cat([b["move"] for b in dm.train_dataloader()])
    assert len(train) == len(dm.splits["train"]) // 64 * 64  # shuffled, last partial batch dropped


def test_loaders_before_setup_say_what_to_do(dataset_dir):
    dm = WthorDataModule(dataset_dir, train_years="2001", val_years="2002", test_years="2003")
    with pytest.raises(RuntimeError, match=r"call setup\(\) before train_dataloader"):
        dm.train_dataloader()
    dm.setup()
    assert len(dm.train_dataloader()) > 0


@pytest.mark.parametrize("group", ["all", "start"])
def test_augmentation_keeps_moves_legal_and_uses_the_group(dataset_dir, group):
    dm = _dm(dataset_dir, symmetries=group)
    batch = from_records(np.asarray(dm.splits["train"][:512]))
    g = torch.Generator().manual_seed(0)
    aug = augment(batch, SYMMETRY_GROUPS[group], generator=g)
    legal = legal_mask(aug["player"], aug["opponent"])
    assert legal[torch.arange(len(legal)), aug["move"]].all()
    changed = (aug["player"] != batch["player"]) | (aug["opponent"] != batch["opponent"])
    assert changed.any()
    # only group members were used: the start position stays the start position iff group == "start"
    start = batch["ply"] == 0
    start_kept = (aug["player"][start] == bb.BLACK_START).all() and (aug["opponent"][start] == bb.WHITE_START).all()
    assert bool(start_kept) == (group == "start")
    # a sample the symmetry leaves unchanged keeps its recorded move (WTHOR's f5 convention) ...
    kept = start & (aug["player"] == bb.BLACK_START) & (aug["opponent"] == bb.WHITE_START)
    assert kept.any() and torch.equal(aug["move"][kept], batch["move"][kept])
    # ... and only those: a transformed move lands elsewhere for some samples
    assert (aug["move"][~start] != batch["move"][~start]).any()
    assert set(START_PRESERVING) < set(SYMMETRY_GROUPS["all"])
    # disc counts and history "none"/pass markers are preserved
    assert torch.equal(bb.popcount(aug["player"]), bb.popcount(batch["player"]))
    assert torch.equal(aug["history"] < 0, batch["history"] < 0)
    assert torch.equal(aug["history"] == 64, batch["history"] == 64)


@pytest.mark.parametrize("arch,encoder", [("reference", "raw"), ("reference", "handcrafted"), ("resnet", "raw")])
def test_networks_mask_illegal_moves(dataset_dir, arch, encoder):
    dm = _dm(dataset_dir)
    batch = from_records(np.asarray(dm.splits["val"][:32]))
    net = build_network(NetConfig(arch, encoder=encoder, depth=2, blocks=1, width=8, value_head=True)).eval()
    out = net(batch)
    probs = torch.softmax(out["policy"], -1)
    legal = legal_mask(batch["player"], batch["opponent"])
    assert out["policy"].shape == (32, 64)
    assert torch.allclose(probs.sum(-1), torch.ones(32))
    assert (probs[~legal] == 0).all()
    if arch == "resnet":
        assert out["value"].shape == (32,) and (out["value"].abs() <= 1).all()


def test_train_resume_export_and_evaluate(dataset_dir, tmp_path, monkeypatch):
    from othello_learn.models.fastpath import auto_precision
    from othello_learn.evaluation.evaluate import evaluate_command as evaluate_main
    from othello_learn.train.train import train as train_main

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    out = tmp_path / "run"
    common = ["--data", str(dataset_dir), "--out", str(out), "--logger", "wandb", "--checkpoint-every", "5",
              "--train-positions", "640", "--set", "model.arch=resnet", "--set", "model.blocks=1", "--set", "model.width=8",
              "--set", "model.value_head=true", "--set", "data.train_years=2001", "--set", "data.val_years=2002",
              "--set", "data.test_years=2003", "--set", "data.batch_size=64", "--set", "trainer.enable_progress_bar=false",
              "--set", "trainer.enable_model_summary=false"]
    first = train_main(common + ["--max-epochs", "1"])
    assert (out / "checkpoints" / "last.ckpt").exists()
    assert list((out / "wandb").glob("offline-run-*")), "W&B wrote an offline run"
    assert 0 <= first["test"]["test/acc"] <= 1 and "test/acc_moves_1-12" in first["test"]
    steps_per_epoch = first["global_step"]
    second = train_main(common + ["--max-epochs", "2"])  # the same command, one more epoch: resumes
    assert second["global_step"] == 2 * steps_per_epoch
    # One W&B run across the resume (its id kept in OUT/wandb_id), the test accuracy by phase as a table.
    run_id = (out / "wandb_id").read_text().strip()
    runs = sorted((out / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(runs) == 2 == len(list((out / "wandb").glob("offline-run-*")))
    table = json.loads(next(runs[-1].glob("files/media/table/test/phases_*.table.json")).read_text())
    assert table["columns"] == ["moves", "accuracy"] and table["data"][0][0] == "1-12"
    # the learning curve reads W&B's own run files: one validation per epoch, across the resume
    from othello_learn.evaluation.curves import load_curve, wandb_history

    # (W&B's service process writes these files; a prefix is all a reader may count on right after finish)
    curve = load_curve(out)
    expected = [steps_per_epoch * 64, 2 * steps_per_epoch * 64]
    assert 1 <= len(curve) and curve["positions"].tolist() == expected[: len(curve)]
    assert curve["val/acc"].between(0, 1).all()
    # W&B's own step is the global step: it numbered each process's rows from 0, so the resumed
    # run's folder restarted at 0, over the first's steps when synced with --append (docs/training.md)
    for _ in range(300):  # their rows, once W&B's service has written them (it lagged on busy cores)
        steps = [[row["_step"] for row in wandb_history(next(run.glob("run-*.wandb")))] for run in runs]
        if all(steps):
            break
        time.sleep(0.1)
    assert steps[0] and steps[1] and max(steps[0]) < min(steps[1]), steps
    rows = [row for run in runs for row in wandb_history(next(run.glob("run-*.wandb")))]
    assert all(row["_step"] == row["trainer/global_step"] for row in rows if "trainer/global_step" in row)

    net = load_network(out / "model.pt")
    assert net.config == NetConfig("resnet", blocks=1, width=8, value_head=True)
    report = tmp_path / "eval.json"
    result = evaluate_main(["--checkpoint", str(out / "model.pt"), "--wthor-dir", str(dataset_dir.parent),
                            "--years", "2003", "--json", str(report), "--tta", "8"])
    saved = json.loads(report.read_text())
    assert saved["positions"] == result["positions"] > 0
    assert sum(p["positions"] for p in saved["phases"]) == saved["positions"]
    assert saved["symmetric_accuracy"] >= saved["accuracy"]
    assert report.with_suffix(".png").stat().st_size > 1000
    # --precision auto runs the net as training's test did: the same figure on the test year
    same = evaluate_main(["--checkpoint", str(out / "model.pt"), "--data", str(dataset_dir), "--years", "2003",
                          "--precision", "auto"])
    assert same["precision"] == auto_precision("cpu")
    assert same["accuracy"] == pytest.approx(second["test"]["test/acc"], abs=1.5 / same["positions"])


def test_the_wandb_logger_does_not_hand_wandb_an_anonymous_setting(tmp_path, monkeypatch):
    """Lightning passes anonymous=None, and wandb warns "has no effect" on every run."""
    from othello_learn.train.logs import make_logger

    monkeypatch.setenv("WANDB_MODE", "offline")
    logger = make_logger("wandb", tmp_path, "run", online=False, project="p")
    assert "anonymous" not in logger._wandb_init and logger._wandb_init["id"] == (tmp_path / "wandb_id").read_text().strip()
    assert logger._wandb_init["mode"] == "offline"  # said to wandb.init: WANDB_MODE is read once a process


def test_the_wandb_run_id_is_kept_across_resumes_and_new_with_fresh(tmp_path):
    from othello_learn.train.logs import wandb_run_id

    first = wandb_run_id(tmp_path)
    assert wandb_run_id(tmp_path) == first == (tmp_path / "wandb_id").read_text().strip()
    fresh = wandb_run_id(tmp_path, fresh=True)
    assert fresh != first and wandb_run_id(tmp_path) == fresh


def test_learning_rate_schedule_ends_with_the_time_budget():
    from othello_learn.train.module import MovePredictor

    class Timer:  # stands in for Lightning's
        def __init__(self, elapsed, remaining):
            self.elapsed, self.remaining = elapsed, remaining

        def time_elapsed(self):
            return self.elapsed

        def time_remaining(self):
            return self.remaining

    model = MovePredictor(NetConfig(depth=1, width=4))
    factor = model.configure_optimizers()["lr_scheduler"]["scheduler"].lr_lambdas[0]
    model._total_steps = 1000
    assert factor(1000) == pytest.approx(0.01) and factor(525) == pytest.approx(0.505)
    by_steps = factor(900)
    model._timer = Timer(52.5, 47.5)
    assert factor(10) == pytest.approx(0.505)  # 52.5 % of the time outweighs 1 % of the steps
    model._timer = Timer(10.0, 90.0)
    assert factor(900) == pytest.approx(by_steps)  # steps further along than time: steps rule
    model._timer = Timer(120.0, -20.0)
    assert factor(10) == pytest.approx(0.01)


def test_training_stops_at_the_time_budget_with_the_schedule_done(dataset_dir, tmp_path, monkeypatch):
    from othello_learn.files import UserError
    from othello_learn.train.train import train as train_main

    monkeypatch.setenv("TQDM_DISABLE", "1")
    out = tmp_path / "timed"
    args = ["--data", str(dataset_dir), "--out", str(out), "--logger", "csv", "--max-epochs", "-1", "--no-test",
            "--set", "model.depth=2", "--set", "model.width=8", "--set", "data.train_years=2001",
            "--set", "data.val_years=2002", "--set", "data.test_years=2003", "--set", "data.batch_size=64",
            "--set", "trainer.enable_progress_bar=false", "--set", "trainer.enable_model_summary=false"]
    with pytest.raises(UserError, match="time budget"):  # open-ended and no budget: the schedule has no end
        train_main(args + ["--fresh"])
    # With a budget the same run starts, so the schedule found Lightning's Timer, and the budget ends it.
    summary = train_main(args + ["--fresh", "--max-minutes", "0.02"])
    assert summary["global_step"] > 0
    state = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    timer = next(v for k, v in state["callbacks"].items() if k.startswith("Timer"))
    assert timer["time_elapsed"]["train"] >= 0.9  # round(0.02 * 60) = 1 s, less clock slack
    # (how far the LR got depends on how much of the budget validation took: the schedule's
    # arithmetic is tested above with a stand-in timer)
    assert state["lr_schedulers"][0]["_last_lr"][0] < summary["config"]["optim"].get("lr", 1e-3)

    from othello_learn.cli import run_main
    from othello_learn.evaluation.curves import load_curve, main

    def curves_main(argv):  # as the command runs it: errors are one line, exit 2
        return run_main(main, argv)

    curve = load_curve(out)
    assert len(curve) >= 1 and curve["positions"].is_monotonic_increasing
    assert curves_main([str(out), "--out", str(tmp_path / "curves.png")]) == 0
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert curves_main([str(tmp_path), "--out", str(tmp_path / "none.png")]) == 2  # no CSV log: a clear error


def test_symmetric_accuracy_counts_equivalent_first_moves():
    from othello_learn.evaluation.evaluate import symmetric_hits

    p = np.array([bb.BLACK_START] * 4, dtype=np.uint64)
    o = np.array([bb.WHITE_START] * 4, dtype=np.uint64)
    f5, d3, c4, e6, a1 = 37, 19, 26, 44, 0
    move = np.array([f5, f5, f5, f5])
    pred = np.array([f5, d3, e6, a1])
    assert symmetric_hits(p, o, move, pred).tolist() == [True, True, True, False]
    assert c4 != f5


@pytest.mark.parametrize("true_t", [0.7, 1.7])
def test_the_fitted_temperature_is_the_one_the_moves_were_drawn_at(true_t):
    """Moves drawn from softmax(logits / T) over 20 k positions: the fit finds T (a few % off,
    the sampling's noise) and no other temperature gives a lower cross-entropy."""
    from othello_learn.evaluation.evaluate import fit_temperature

    g = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(20_000, 64, generator=g)
    logp = torch.log_softmax(logits, -1)
    moves = torch.multinomial(torch.softmax(logits / true_t, -1), 1, generator=g).squeeze(1)
    t = fit_temperature(logp, moves)
    assert abs(t - true_t) < 0.05 * true_t

    def ce(x):
        return float(torch.nn.functional.cross_entropy(logp.double() / x, moves))

    assert ce(t) <= min(ce(t * 0.95), ce(t * 1.05))


def test_a_tempered_network_divides_its_logits_and_keeps_its_moves():
    from othello_learn.models.nets import temper_policy

    rng = np.random.default_rng(3)
    player = rng.integers(0, 2**63, 32, dtype=np.uint64) & np.uint64(0x00FFFF0000FFFF00)
    opponent = rng.integers(0, 2**63, 32, dtype=np.uint64) & ~player & np.uint64(0x0000FFFFFFFF0000)
    from othello_learn.models.batch import from_arrays

    batch = from_arrays(player, opponent, rng.integers(0, 2, 32).astype(bool), np.full((32, 4), -1), "cpu")
    for cfg in (NetConfig("resnet", blocks=1, width=8), NetConfig(depth=1, width=4)):
        net = build_network(cfg).eval()
        with torch.no_grad():
            before = net(batch)
            after = temper_policy(net, 2.5)(batch)
        legal = legal_mask(batch["player"], batch["opponent"])
        assert torch.allclose(after["policy"][legal], before["policy"][legal] / 2.5, atol=1e-5)
        assert torch.equal(after["policy"].argmax(-1), before["policy"].argmax(-1))
        if "value" in before:
            assert torch.equal(after["value"], before["value"])
    with pytest.raises(ValueError, match="^the policy temperature: must be above 0, got 0.0$"):
        temper_policy(net, 0.0)


def test_evaluate_calibrates_and_exports_the_tempered_network(dataset_dir, tmp_path, capsys):
    """--calibrate reports the temperature and the cross-entropy at it (never above the untempered
    one on the same positions); with --export the net's logits are divided by it and its moves kept."""
    from othello_learn.cli import run_main
    from othello_learn.models.nets import save_network
    from othello_learn.evaluation.evaluate import main

    src = tmp_path / "net.pt"
    torch.manual_seed(0)
    save_network(build_network(NetConfig("resnet", encoder="handcrafted", blocks=1, width=8)), src, generation=7,
                 metrics={"best_val_acc": 0.5})
    out, report = tmp_path / "cal.pt", tmp_path / "cal.json"
    argv = ["--checkpoint", str(src), "--data", str(dataset_dir), "--years", "2003", "--precision", "32"]
    assert run_main(main, argv + ["--calibrate", "--export", str(out), "--json", str(report)]) == 0
    result = json.loads(report.read_text())
    t = result["policy_temperature"]
    assert t > 0 and result["cross_entropy_at_temperature"] <= result["cross_entropy"] + 1e-9
    assert f"policy temperature {t:.3f}" in capsys.readouterr().out
    exported = torch.load(out, weights_only=True)  # what the source said of itself is kept
    assert exported["metrics"]["policy_temperature"] == t and exported["generation"] == 7
    assert exported["metrics"]["source_metrics"] == {"best_val_acc": 0.5}
    again = tmp_path / "again.json"
    assert run_main(main, ["--checkpoint", str(out), "--data", str(dataset_dir), "--years", "2003", "--precision",
                           "32", "--json", str(again)]) == 0
    tempered = json.loads(again.read_text())
    assert tempered["accuracy"] == result["accuracy"]
    assert abs(tempered["cross_entropy"] - result["cross_entropy_at_temperature"]) < 1e-4
    capsys.readouterr()
    assert run_main(main, argv + ["--calibrate", "--tta", "8"]) == 2
    assert "--calibrate fits the network's own logits: use it with --tta 1" in capsys.readouterr().err


def _flatten_to_old_hparams(path):
    """Rewrite a checkpoint of train.py as the code before ``MovePredictor(net, ...)`` wrote
    it: flat hyper_parameters (arch ... value_head, lr ... label_smoothing; no ``ema``, which
    came later), same weights."""
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    hp = dict(ckpt["hyper_parameters"])
    hp.pop("ema")
    ckpt["hyper_parameters"] = {**hp.pop("net"), **hp}
    torch.save(ckpt, path)
    return ckpt


def test_runs_started_by_the_old_module_resume_and_export(dataset_dir, tmp_path, monkeypatch):
    from othello_learn.files import UserError
    from othello_learn.train.module import MovePredictor, network_from_checkpoint
    from othello_learn.train.run_checks import check_resumable
    from othello_learn.train.train import train as train_main

    monkeypatch.setenv("TQDM_DISABLE", "1")
    out = tmp_path / "old"
    args = ["--data", str(dataset_dir), "--out", str(out), "--logger", "csv", "--no-test", "--train-positions", "640",
            "--set", "model.depth=1", "--set", "model.width=4", "--set", "data.train_years=2001",
            "--set", "data.val_years=2002", "--set", "data.test_years=2003", "--set", "data.batch_size=64",
            "--set", "trainer.enable_progress_bar=false", "--set", "trainer.enable_model_summary=false"]
    first = train_main(args + ["--max-epochs", "1"])
    best = first["best_checkpoint"]
    old = _flatten_to_old_hparams(out / "checkpoints" / "last.ckpt")
    _flatten_to_old_hparams(best)
    assert set(old["hyper_parameters"]) == {"arch", "encoder", "depth", "width", "blocks", "value_head", "lr",
                                            "weight_decay", "scheduler", "value_weight", "label_smoothing"}
    # the old best checkpoint's network, with the weights it holds
    net = network_from_checkpoint(best)
    assert net.config == NetConfig(depth=1, width=4)
    ref = torch.load(best, map_location="cpu", weights_only=True)["state_dict"]
    assert all(torch.equal(v, ref["net." + k]) for k, v in net.state_dict().items())
    # a different network is still told apart from the old flat hyperparameters
    with pytest.raises(UserError, match="different network.*model.depth=1 there, 2 now"):
        check_resumable(out / "checkpoints" / "last.ckpt", NetConfig(depth=2, width=4))
    # the same command resumes from it, and exports
    second = train_main(args + ["--max-epochs", "2"])
    assert second["global_step"] == 2 * first["global_step"]
    assert load_network(out / "model.pt").config == NetConfig(depth=1, width=4)
    # the new layout stores the net config as a plain dict (weights-only loadable)
    new = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert new["hyper_parameters"]["net"] == NetConfig(depth=1, width=4).to_dict()
    assert isinstance(MovePredictor.load_from_checkpoint(out / "checkpoints" / "last.ckpt").net.config, NetConfig)


def test_weight_averaging_is_what_validation_tests_and_export_see(dataset_dir, tmp_path, monkeypatch):
    """optim.ema: the checkpoints' state_dict, model.pt and the end-of-run test all hold the
    averaged weights; the current ones are kept for resuming, and resuming works."""
    from othello_learn.train.module import MovePredictor
    from othello_learn.train.train import train as train_main

    monkeypatch.setenv("TQDM_DISABLE", "1")
    tested = []
    original = MovePredictor.test_step

    def record_then_test(self, batch, batch_idx):
        if batch_idx == 0:
            tested.append({k: v.detach().cpu().clone() for k, v in self.net.state_dict().items()})  # on a GPU it trains there
        return original(self, batch, batch_idx)

    monkeypatch.setattr(MovePredictor, "test_step", record_then_test)
    out = tmp_path / "run"
    common = ["--data", str(dataset_dir), "--out", str(out), "--logger", "none", "--precision", "32",
              "--train-positions", "640",
              "--set", "model.depth=2", "--set", "model.width=8", "--set", "optim.ema=0.9", "--set", "optim.lr=0.01",
              "--set", "data.train_years=2001", "--set", "data.val_years=2002", "--set", "data.test_years=2003",
              "--set", "data.batch_size=64", "--set", "trainer.enable_progress_bar=false",
              "--set", "trainer.enable_model_summary=false"]
    first = train_main(common + ["--max-epochs", "1"])
    second = train_main(common + ["--max-epochs", "2"])
    assert second["global_step"] == 2 * first["global_step"]
    best = torch.load(second["best_checkpoint"], map_location="cpu", weights_only=True)
    averaged = {k.removeprefix("net."): v for k, v in best["state_dict"].items() if k.startswith("net.")}
    current = {k.removeprefix("net."): v for k, v in best["current_model_state"].items() if k.startswith("net.")}
    weights = [k for k in averaged if k.endswith("weight")]
    assert any(not torch.equal(averaged[k], current[k]) for k in weights)
    for k, v in load_network(out / "model.pt").state_dict().items():
        assert torch.equal(v, averaged[k]), k
    assert len(tested) == 2 and all(torch.equal(tested[-1][k], averaged[k]) for k in averaged)


def test_a_run_with_weight_averaging_continued_after_its_end_trains_on_from_its_own_weights(dataset_dir, tmp_path,
                                                                                            monkeypatch):
    """Lightning copies the average into the module as training ends, before last.ckpt's save:
    the run continued with a higher --max-steps trained on from the average. Without a schedule
    or augmentation, 3 steps then 3 more are 6 steps at once."""
    from othello_learn.train.train import train as train_main

    monkeypatch.setenv("TQDM_DISABLE", "1")
    common = ["--data", str(dataset_dir), "--logger", "none", "--no-test", "--precision", "32",
              "--set", "model.depth=1", "--set", "model.width=4", "--set", "optim.ema=0.5",
              "--set", "optim.scheduler=none", "--set", "data.symmetries=none",
              "--set", "data.train_years=2001", "--set", "data.val_years=2002", "--set", "data.test_years=2003",
              "--set", "data.batch_size=64", "--set", "trainer.enable_progress_bar=false",
              "--set", "trainer.enable_model_summary=false", "--set", "trainer.num_sanity_val_steps=0"]
    train_main(common + ["--out", str(tmp_path / "once"), "--max-steps", "6"])
    train_main(common + ["--out", str(tmp_path / "twice"), "--max-steps", "3"])
    train_main(common + ["--out", str(tmp_path / "twice"), "--max-steps", "6"])
    once, twice = (torch.load(tmp_path / name / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
                   for name in ("once", "twice"))
    for key in ("current_model_state", "state_dict"):
        assert all(torch.equal(once[key][k], twice[key][k]) for k in once[key]), key
    assert any(not torch.equal(once["state_dict"][k], once["current_model_state"][k]) for k in once["state_dict"])


def test_weight_averaging_setting_is_checked(tmp_path):
    from othello_learn.files import UserError
    from othello_learn.train.train import train as train_main

    with pytest.raises(UserError, match="optim.ema: must be below 1"):
        train_main(["--out", str(tmp_path / "r"), "--set", "optim.ema=1.5"])


def test_every_recipe_variant_is_a_valid_config():
    """benchmarks/recipe_compare.py: each variant's overrides name real settings of the base config."""
    import importlib.util
    from pathlib import Path

    from othello_learn.train.config import load_config

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "recipe_compare.py"
    spec = importlib.util.spec_from_file_location("recipe_compare", path)
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    base = load_config(compare.REPO / "train" / "configs" / "cpu_raw_resnet_fast.yaml", [])
    for name, overrides in compare.VARIANTS.items():
        cfg = load_config(compare.REPO / "train" / "configs" / "cpu_raw_resnet_fast.yaml", overrides)
        assert (cfg != base) == bool(overrides), name
    rows = [{"variant": "base", "final_val_acc": 0.50, "positions_per_s": 100.0},
            {"variant": "cosine", "final_val_acc": 0.52, "positions_per_s": 90.0},
            {"variant": "cosine", "final_val_acc": 0.51, "positions_per_s": 110.0}]
    table = {t["variant"]: t for t in compare.summarize(rows)}
    assert table["cosine"]["seeds"] == 2 and table["cosine"]["vs_base_points"] == 1.5
    assert table["base"]["vs_base_points"] == 0.0


def test_a_recipe_comparison_runs_end_to_end_and_resumes(dataset_dir, tmp_path):
    """The command itself, not only its table: its variants are real train.py runs (a log
    inside a run folder once made train.py refuse every one of them)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "recipe_compare.py"
    spec = importlib.util.spec_from_file_location("recipe_compare", path)
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    from othello_learn.cli import run_main
    from othello_learn.train.train import main as train_main

    def in_process(cmd, env, stdout, stderr):  # the train.py command line, without a second interpreter's start
        assert cmd[1].endswith("train.py")
        return subprocess.CompletedProcess(cmd, run_main(train_main, cmd[2:]))

    compare.subprocess = SimpleNamespace(run=in_process, STDOUT=subprocess.STDOUT)
    out = tmp_path / "cmp"
    argv = ["--data", str(dataset_dir), "--out", str(out), "--variants", "base", "--positions", "2000",
            "--val-positions", "500", "--jobs", "1", "--json", str(tmp_path / "cmp.json"),
            "--set", "model.blocks=1", "--set", "model.width=8", "--set", "data.batch_size=500",
            "--set", "data.train_years=2001", "--set", "data.val_years=2002", "--set", "data.test_years=2003"]
    assert compare.main(argv) == 0
    report = json.loads((tmp_path / "cmp.json").read_text())
    assert [r["variant"] for r in report["runs"]] == ["base"] and report["runs"][0]["positions"] == 2000
    assert (out / "base_seed0" / "metrics.json").exists() and (out / "base_seed0.log").exists()
    before = (out / "base_seed0" / "metrics.json").stat().st_mtime_ns
    assert compare.main(argv) == 0  # a finished variant is read, not trained again
    assert (out / "base_seed0" / "metrics.json").stat().st_mtime_ns == before


@pytest.mark.parametrize("tta", [4, 8])
def test_symmetry_averaging_keeps_the_recorded_opening_move(tta):
    """--tta averages over symmetries, which ties equivalent moves in a symmetric position;
    the untransformed view breaks the tie, so the start position still predicts f5."""
    from othello.notation import parse_square
    from othello.symmetry import SQUARE_MAP
    from othello_learn.evaluation.evaluate import predict

    f5 = parse_square("f5")

    class Biased(torch.nn.Module):
        """Prefers f5 over the equivalent d3, c4, e6 in the view it is shown (an illegal-free toy)."""

        def forward(self, b):
            logits = torch.full((len(b["player"]), 64), -30.0)
            legal = legal_mask(b["player"], b["opponent"])
            logits[legal] = 0.0
            logits[:, f5] += 0.5
            return {"policy": logits}

    batch = {"player": torch.tensor([bb.BLACK_START]), "opponent": torch.tensor([bb.WHITE_START]),
             "history": torch.full((1, 8), -1, dtype=torch.long)}
    probs = predict(Biased(), batch, tta)[0]
    openings = [parse_square(s) for s in ("f5", "d3", "c4", "e6")]
    assert probs.argmax().item() == f5
    assert probs[openings].max() - probs[openings].min() < 1e-3  # the average itself treats them alike
    assert sorted(SQUARE_MAP[k][f5] for k in (0, 2, 6, 7)) == sorted(openings)


@pytest.mark.parametrize("have,grown", [
    (NetConfig("resnet", "handcrafted", blocks=1, width=8, value_head=True),
     NetConfig("resnet", "handcrafted", blocks=3, width=8, value_head=True)),
    (NetConfig("resnet", blocks=2, width=8, value_head=False), NetConfig("resnet", blocks=2, width=8, value_head=True)),
    (NetConfig("reference", depth=2, width=8), NetConfig("reference", depth=4, width=8)),
    (NetConfig("resnet", "handcrafted", blocks=1, width=8, value_head=True),
     NetConfig("resnet", "handcrafted", blocks=2, width=16, value_head=True)),
    (NetConfig("reference", depth=2, width=8), NetConfig("reference", depth=3, width=12)),
])
def test_a_grown_network_starts_as_its_source(dataset_dir, have, grown):
    from othello_learn.models.nets import grow_network

    torch.manual_seed(0)
    source = build_network(have)
    for m in source.modules():  # batch norm statistics and scales that are not the defaults
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5), m.running_var.uniform_(0.5, 2), m.weight.data.uniform_(0.5, 1.5)
    source.eval()
    net = grow_network(source, grown).eval()
    assert net.config == grown
    batch = from_records(np.asarray(_dm(dataset_dir).splits["val"][:256]))
    with torch.no_grad():
        a, b = source(batch), net(batch)
    # Deeper: bit for bit. Wider: the old channels' sums gain terms of weight 0, which a
    # convolution kernel may add in another order, so equal to rounding.
    same = torch.equal if have.width == grown.width else lambda x, y: torch.allclose(x, y, rtol=1e-5, atol=1e-5)
    assert same(a["policy"], b["policy"])
    if have.value_head and grown.value_head:
        assert same(a["value"], b["value"])
    assert "value" in b if grown.value_head else "value" not in b
    if grown.width > have.width:  # the added channels are live, so training can use them
        new = net.stem[0].weight[have.width:] if grown.arch == "resnet" else net.body[0].weight[have.width:]
        assert new.abs().sum() > 0


@pytest.mark.parametrize("grown,message", [
    (NetConfig("resnet", blocks=2, width=4, value_head=True), "has model.width=8, more than the config's 4; "
                                                              "a warm start can add to model.width, not take from it$"),
    (NetConfig("resnet", "handcrafted", blocks=2, width=8), "model.encoder is 'raw' there"),
    (NetConfig("reference", depth=2, width=8), "model.arch is 'resnet' there"),
    (NetConfig("resnet", blocks=1, width=8, value_head=True), "has model.blocks=2, more than the config's 1"),
])
def test_what_a_warm_start_cannot_carry_over_is_named(grown, message):
    from othello_learn.files import UserError
    from othello_learn.models.nets import grow_network

    with pytest.raises(UserError, match="^--init x.pt: " + message):
        grow_network(build_network(NetConfig("resnet", blocks=2, width=8, value_head=True)), grown, "--init x.pt")


def test_training_from_init_starts_from_its_weights_and_the_seed_fixes_a_fresh_start(dataset_dir, tmp_path, monkeypatch,
                                                                                       capsys):
    from othello_learn.models.nets import save_network
    from othello_learn.train.train import train as train_main

    monkeypatch.setenv("TQDM_DISABLE", "1")
    source = build_network(NetConfig("resnet", blocks=1, width=8, value_head=True))
    save_network(source, tmp_path / "init.pt")
    common = ["--data", str(dataset_dir), "--logger", "none", "--no-test", "--max-steps", "2",
              "--set", "data.train_years=2001", "--set", "data.val_years=2002", "--set", "data.test_years=2003",
              "--set", "data.batch_size=64", "--set", "trainer.enable_progress_bar=false",
              "--set", "trainer.enable_model_summary=false", "--set", "trainer.num_sanity_val_steps=0"]
    # the init's settings fill the model section; --set adds a block on top of it
    capsys.readouterr()
    summary = train_main(common + ["--out", str(tmp_path / "grown"), "--init", str(tmp_path / "init.pt"),
                                   "--set", "model.blocks=2", "--set", "optim.lr=1e-7"])
    # said, with where the size came from: a config file's model section grew a net without a word
    assert "the net is grown: model.blocks 1 -> 2 (from --set model.blocks=2)" in capsys.readouterr().err
    assert summary["init"] == str(tmp_path / "init.pt")
    grown = load_network(tmp_path / "grown" / "model.pt")
    assert grown.config == NetConfig("resnet", blocks=2, width=8, value_head=True)
    theirs = source.state_dict()
    for key, value in grown.state_dict().items():
        if key in theirs and value.is_floating_point() and "running" not in key:
            assert torch.allclose(value, theirs[key], atol=1e-5), key
    assert grown.blocks[1].bn2.weight.abs().max() < 1e-5  # the added block is still (nearly) an identity
    # without --init, --seed decides the initial weights: two fresh runs with one seed end equal
    fresh = ["--set", "model.arch=resnet", "--set", "model.blocks=1", "--set", "model.width=8"]
    for name in ("a", "b"):
        train_main(common + fresh + ["--out", str(tmp_path / name), "--seed", "3"])
    a, b = (load_network(tmp_path / n / "model.pt").state_dict() for n in "ab")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_the_epoch_sampler_reshuffles_per_epoch_and_skips_only_once():
    from othello_learn.data.datamodule import EpochBatchSampler

    s = EpochBatchSampler(10, 3, shuffle=True, seed=0, drop_last=True)
    epoch0 = [b.tolist() for b in s]
    assert len(epoch0) == len(s) == 3 and len({i for b in epoch0 for i in b}) == 9
    assert [b.tolist() for b in s] == epoch0  # the order is the epoch's, not the call's
    s.set_epoch(1)
    assert [b.tolist() for b in s] != epoch0
    resumed = EpochBatchSampler(10, 3, shuffle=True, seed=0, drop_last=True, skip=2)
    assert [b.tolist() for b in resumed] == epoch0[2:]  # the rest of the interrupted epoch ...
    assert [b.tolist() for b in resumed] == epoch0      # ... then whole epochs again
    plain = EpochBatchSampler(10, 3, shuffle=False)
    assert [b.tolist() for b in plain] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]


def _year(ds, year: int) -> np.ndarray:
    """A year's positions as its summary.json says, the reference for positions_of."""
    return ds.positions[slice(*ds.summary["years"][str(year)]["position_range"])]


def test_a_split_of_years_with_a_gap_leaves_the_gap_out(dataset_dir):
    """train 2001 and 2003: the positions of those two years, not the run 2001..2003 (2002's
    positions, the validation year here, would leak into training)."""
    dm = WthorDataModule(dataset_dir, train_years="2001,2003", val_years="2002", test_years="2003")
    dm.setup()
    ds = dm.data
    want = np.concatenate([_year(ds, 2001), _year(ds, 2003)])
    assert np.array_equal(dm.splits["train"], want)
    assert np.array_equal(ds.positions_of({2001, 2003}), want)  # what evaluate.py --years reads
    both = ds.positions_of({2001, 2002})  # adjacent years: one view of the file, not a copy
    assert np.shares_memory(both, ds.positions) and len(both) == len(_year(ds, 2001)) + len(_year(ds, 2002))
    assert ds.positions_of(None) is ds.positions and len(ds.positions_of(set())) == 0
    with pytest.raises(ValueError, match=r"no year 2004-2005 \(it has 2001-2003\)"):
        ds.positions_of({2003, 2004, 2005})  # (train.py and evaluate.py name their setting: test_train_faults)



def test_the_positions_of_years_come_in_year_order_whatever_the_sets_order(tmp_path):
    """{2001, 2008} iterates 2008 first (a set of ints goes by hash, not size): the positions of
    two years apart are still the earlier year's, then the later's, as stored and as a replay of
    the raw files gives them, for the training split and for evaluate.py --years alike."""
    from othello_learn.data.dataset import WthorDataset

    rng = random.Random(5)
    for year in (2001, 2008):
        games = [ref.random_game(rng) for _ in range(3)]
        moves = [[m for _, _, m in rec if m != 64] for rec, _, _ in games]
        wtb.write_wtb(tmp_path / f"WTH_{year}.wtb", wtb.make_games(moves), year)
    assert build_main(["--wthor-dir", str(tmp_path), "--out", str(tmp_path / "ds"), "--quiet"]) == 0
    years = {2001, 2008}
    assert list(years) != sorted(years), "the set must iterate out of order for the test to mean anything"
    ds = WthorDataset(tmp_path / "ds")
    want = np.concatenate([_year(ds, 2001), _year(ds, 2008)])
    assert np.array_equal(ds.positions_of(years), want)
    dm = WthorDataModule(tmp_path / "ds", train_years="2001,2008", val_years="2008", test_years="2008")
    dm.setup()
    assert np.array_equal(dm.splits["train"], want)

def test_a_subset_of_training_positions_has_no_repeats(dataset_dir):
    full = _dm(dataset_dir).splits["train"]
    sub = _dm(dataset_dir, train_positions=300).splits["train"]
    keys = set(zip(sub["game"].tolist(), sub["ply"].tolist()))
    assert len(sub) == 300 == len(keys) and keys <= set(zip(full["game"].tolist(), full["ply"].tolist()))


def test_evaluate_scores_a_hand_made_case():
    """Four start positions, the move played f5 each time, a net whose ranking is read from the
    position's ply: f5 first; d3 (f5's image under a symmetry of the start) first and f5 second;
    f5 third; f5 fourth. Plies 0, 1, 20 and 59 put them in phases 1-12, 1-12, 21-24, 57-60."""
    import math

    from othello_learn.data.replay import POSITION_DTYPE
    from othello_learn.evaluation.evaluate import evaluate

    f5, d3, a1, b1, c1 = 37, 19, 0, 1, 2
    rankings = {0: [f5], 1: [d3, f5], 20: [a1, b1, f5], 59: [a1, b1, c1, f5]}
    table = torch.full((60, 64), -10.0)
    for ply, order in rankings.items():
        for rank, sq in enumerate(order):
            table[ply, sq] = 4.0 - rank

    class ByPly(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", table)

        def forward(self, b):
            return {"policy": self.table[b["ply"]]}

    rec = np.zeros(4, dtype=POSITION_DTYPE)
    rec["player"], rec["opponent"], rec["black_to_move"], rec["history"] = bb.BLACK_START, bb.WHITE_START, True, -1
    rec["move"], rec["ply"] = f5, list(rankings)
    r = evaluate(ByPly(), rec, batch_size=2, progress=False, precision="32")
    assert (r["accuracy"], r["symmetric_accuracy"], r["top3_accuracy"]) == (0.25, 0.5, 0.75)
    nll = [math.log(sum(math.exp(x) for x in table[p].tolist())) - table[p, f5].item() for p in rankings]
    assert r["cross_entropy"] == pytest.approx(sum(nll) / 4, rel=1e-5)
    phases = {p["moves"]: p for p in r["phases"] if p["positions"]}
    assert {k: (p["positions"], p["accuracy"], p["symmetric_accuracy"], p["branching_factor"])
            for k, p in phases.items()} == {"1-12": (2, 0.5, 1.0, 4.0), "21-24": (1, 0.0, 0.0, 4.0),
                                            "57-60": (1, 0.0, 0.0, 4.0)}


@pytest.mark.parametrize("tta", [4, 8])
def test_symmetry_averaging_of_an_equivariant_net_is_the_net(dataset_dir, tta):
    """A net whose logit on a square reads only the handcrafted planes there (each plane turns
    with the board, as test_encoders shows) is D4-equivariant: averaging its views, each mapped
    back to the board's squares, changes nothing. Mapping a view back by the wrong one of a
    symmetry and its inverse (rot90 / rot270) does."""
    from othello_learn.models.encoders import encode
    from othello_learn.evaluation.evaluate import predict

    w = torch.linspace(-1, 1, 42)

    class PerSquare(torch.nn.Module):
        def forward(self, b):
            logits = (encode("handcrafted", b) * w[None, :, None, None]).sum(1).flatten(1)
            return {"policy": logits.masked_fill(~legal_mask(b["player"], b["opponent"]), -1e9)}

    batch = from_records(np.asarray(_dm(dataset_dir).splits["val"][:64]))
    one = predict(PerSquare(), batch, 1)
    assert torch.allclose(predict(PerSquare(), batch, tta), one, atol=1e-6)
    assert (one.max(-1).values < 0.99).any()  # not one-hot everywhere: the average has something to get wrong


@pytest.mark.parametrize("true_t", [4.0, 0.25])
def test_the_fitted_temperature_matches_the_closed_form(true_t):
    """Two moves with log-probability gap d, played 3 times in 4 the first: the cross-entropy
    of softmax(logp / T) is least where sigmoid(d / T) = 3/4, T = d / ln 3."""
    import math

    from othello_learn.evaluation.evaluate import fit_temperature

    d = true_t * math.log(3)
    logp = torch.log_softmax(torch.tensor([[0.0, -d]] * 4, dtype=torch.float64), -1)
    t = fit_temperature(logp, torch.tensor([0, 0, 0, 1]))
    assert t == pytest.approx(true_t, rel=1e-5)


def test_a_symmetric_hit_needs_both_colours_unchanged():
    """Own disc a1, opponent b1: the transpose fixes a1 but not b1, so c1 and its image a3 are
    not equivalent moves; with an opponent disc on a2 as well the position is fixed and they are."""
    from othello_learn.evaluation.evaluate import symmetric_hits

    a1, b1, c1, a2, a3 = 0, 1, 2, 8, 16
    p = np.array([1 << a1, 1 << a1], dtype=np.uint64)
    o = np.array([1 << b1, (1 << b1) | (1 << a2)], dtype=np.uint64)
    assert symmetric_hits(p, o, np.array([c1, c1]), np.array([a3, a3])).tolist() == [False, True]


def _logged(model, monkeypatch):
    logs = {}
    monkeypatch.setattr(model, "log", lambda name, value, **kw: logs.__setitem__(
        name, value.compute() if hasattr(value, "compute") else value))
    return logs


def test_a_step_scores_the_sign_of_the_result_and_phase_accuracy_by_ply(monkeypatch):
    """The value target is the outcome's sign (+1/0/-1), not the disc difference; label
    smoothing reaches the loss; a position's phase is its ply (moves played before)."""
    from othello.states import States
    from othello_learn.models.batch import from_states
    from othello_learn.models.losses import move_losses
    from othello_learn.train.module import MovePredictor

    torch.manual_seed(0)
    model = MovePredictor(NetConfig("resnet", blocks=1, width=4, value_head=True), value_weight=0.5,
                          label_smoothing=0.1).eval()
    logs = _logged(model, monkeypatch)
    batch = from_states(States.initial(4))
    with torch.no_grad():
        logits = model(batch)["policy"]
    best = logits.argmax(-1)
    other = torch.tensor([next(m for m in (19, 26, 37, 44) if m != int(b)) for b in best])  # the start's legal moves
    batch["move"] = torch.stack([other[0], best[1], best[2], other[3]])
    batch["ply"] = torch.tensor([11, 12, 0, 15])  # phases 1-12, 13-16, 1-12, 13-16
    batch["result"] = torch.tensor([10.0, -4.0, 0.0, 2.0])
    with torch.no_grad():
        model.validation_step(batch, 0)
        out = model(batch)
    loss = logs["val/loss"]
    want = move_losses(out, batch["move"], torch.tensor([1.0, -1.0, 0.0, 1.0]), value_weight=0.5, label_smoothing=0.1)
    assert float(loss) == pytest.approx(float(want["loss"]), rel=1e-6)
    assert float(logs["val/value_loss"]) == pytest.approx(float(want["value_loss"]), rel=1e-6)
    assert float(logs["val/policy_loss"]) == pytest.approx(float(want["policy_loss"]), rel=1e-6)
    assert float(logs["val/acc"]) == pytest.approx(0.5)
    model._log_phases("val")
    assert logs["val/acc_moves_1-12"] == pytest.approx(0.5) and logs["val/acc_moves_13-16"] == pytest.approx(0.5)


@pytest.mark.filterwarnings("ignore:The ``compute`` method of metric PhaseAccuracy")  # no validation batch here
def test_warmup_cosine_weight_decay_groups_and_the_open_ended_run(monkeypatch):
    """onecycle warms up from 4 % over the first 5 % of the run, cosine starts at the full rate;
    weight decay falls on matrices and kernels only; an open-ended run with a schedule and no
    budget is refused; time/hours is the Timer's training time in hours."""
    from othello_learn.train.module import MovePredictor

    model = MovePredictor(NetConfig(depth=1, width=4), weight_decay=0.25)
    opt = model.configure_optimizers()
    factor = opt["lr_scheduler"]["scheduler"].lr_lambdas[0]
    model._total_steps = 1000
    assert factor(0) == pytest.approx(0.04) and factor(25) == pytest.approx(0.52) and factor(50) == pytest.approx(1.0)
    decay, no_decay = opt["optimizer"].param_groups
    assert decay["weight_decay"] == 0.25 and no_decay["weight_decay"] == 0.0
    assert no_decay["params"] and all(p.ndim <= 1 for p in no_decay["params"])
    assert decay["params"] and all(p.ndim > 1 for p in decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))
    cosine = MovePredictor(NetConfig(depth=1, width=4), scheduler="cosine")
    cos_factor = cosine.configure_optimizers()["lr_scheduler"]["scheduler"].lr_lambdas[0]
    cosine._total_steps = 1000
    assert cos_factor(0) == pytest.approx(1.0) and cos_factor(500) == pytest.approx(0.505)

    model._trainer = SimpleNamespace(estimated_stepping_batches=float("inf"), callbacks=[], sanity_checking=False)
    with pytest.raises(ValueError, match="open-ended run"):
        model.on_train_start()
    fixed = MovePredictor(NetConfig(depth=1, width=4), scheduler="none")
    fixed._trainer = model._trainer
    fixed.on_train_start()  # no schedule: nothing to end
    assert fixed._total_steps is None

    class Timer:
        def time_elapsed(self, stage=None):
            return 5400.0 if stage == "train" else 1.0

    logs = _logged(model, monkeypatch)
    model._timer = Timer()
    model.on_validation_epoch_end()
    assert logs["time/hours"] == pytest.approx(1.5)


def test_calibration_fits_on_an_evenly_spread_subsample_aligned_with_its_moves(dataset_dir, monkeypatch):
    """Past CALIBRATION_POSITIONS the fit keeps every stride-th position; with batches that are
    no multiple of the stride, each kept log-probability row must still be its own move's."""
    from othello_learn.evaluation import evaluate as ev

    positions = _dm(dataset_dir).splits["test"]
    monkeypatch.setattr(ev, "CALIBRATION_POSITIONS", 50)
    stride = -(-len(positions) // 50)
    assert stride > 1 and 100 % stride
    torch.manual_seed(0)
    net = build_network(NetConfig("resnet", blocks=1, width=8)).eval()
    got = ev.evaluate(net, positions, batch_size=100, progress=False, calibrate=True)
    with torch.no_grad():
        logp = ev.predict(net, from_records(positions)).clamp_min(1e-30).log()
    moves = torch.from_numpy(positions["move"].astype(np.int64))
    assert got["calibration_positions"] == len(moves[::stride])
    assert got["policy_temperature"] == pytest.approx(ev.fit_temperature(logp[::stride], moves[::stride]), rel=1e-5)
    shifted = ev.fit_temperature(logp[1::stride], moves[::stride][:len(logp[1::stride])])
    assert shifted != pytest.approx(got["policy_temperature"], rel=1e-5)  # the check can tell misaligned rows


def test_wandb_errors_are_one_line_online_and_tracebacks_offline():
    """Online, W&B's own failure (no key, no network) is the user's to fix: one line naming
    --wandb-online. Offline needs no account, so a failure there is a bug and keeps its traceback."""
    import wandb

    from othello_learn.files import UserError
    from othello_learn.tracking import start_wandb

    def no_key():
        raise wandb.errors.UsageError("\nNo API key configured.\nUse `wandb login` to log in.")

    with pytest.raises(wandb.errors.UsageError):
        start_wandb(no_key, online=False)
    with pytest.raises(UserError, match=r"^--wandb-online: W&B says: No API key configured\. \(run `wandb login`"):
        start_wandb(no_key, online=True)
    assert start_wandb(lambda: "the run", online=True) == "the run"
