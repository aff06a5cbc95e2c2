"""Learning curves: a resumed run's CSV versions are joined; losses are not shown as percents."""

from pathlib import Path

import pandas as pd

from othello_learn.train.curves import is_fraction, load_curve, main as curves_main


def _version(run: Path, v: int, rows: list[dict]) -> None:
    folder = run / "csv" / f"version_{v}"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "metrics.csv", index=False)


def test_resumed_run_joins_all_versions(tmp_path):
    run = tmp_path / "run"
    (run).mkdir()
    (run / "config.yaml").write_text("data: {batch_size: 100}\n")
    _version(run, 0, [{"step": 9, "val/acc": 0.30, "time/hours": 0.1},
                      {"step": 19, "val/acc": 0.35, "time/hours": 0.2},
                      {"step": 20, "train/loss": 2.0}])
    # The resume repeats step 19 (the checkpoint was older than the last validation), then goes on.
    _version(run, 1, [{"step": 19, "val/acc": 0.36, "time/hours": 0.21},
                      {"step": 29, "val/acc": 0.40, "time/hours": 0.3}])
    curve = load_curve(run)
    assert curve["positions"].tolist() == [1000, 2000, 3000]
    assert curve["val/acc"].tolist() == [0.30, 0.36, 0.40]  # the later version wins a repeated step
    assert curve["hours"].tolist() == [0.1, 0.21, 0.3]
    assert curves_main([str(run), "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_untimed_runs_and_metric_units(tmp_path):
    run = tmp_path / "old"
    run.mkdir()
    _version(run, 0, [{"step": 9, "val/acc": 0.3, "val/value_loss": 0.8}])
    assert load_curve(run)["hours"].isna().all()  # runs from before time/hours was logged
    assert is_fraction("val/acc") and is_fraction("val/top3") and is_fraction("test/acc_moves_1-12")
    assert not is_fraction("val/value_loss") and not is_fraction("train/loss")
    assert curves_main([str(run), "--metric", "val/value_loss", "--out", str(tmp_path / "v.png")]) == 0
    assert curves_main([str(run), "--metric", "val/nope", "--out", str(tmp_path / "n.png")]) == 2
