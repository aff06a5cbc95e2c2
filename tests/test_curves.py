"""Learning curves: a resumed run's CSV versions are joined; losses are not shown as percents."""

import os
import signal
from pathlib import Path

import pandas as pd
import pytest

from othello_learn.cli import run_main
from othello_learn.evaluation.curves import is_fraction, load_curve, main


def curves_main(argv):
    """The command as its console script runs it: errors are one line and status 2."""
    return run_main(main, argv)


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


@pytest.mark.parametrize("sig, code, said", [("SIGTERM", 143, "terminated"), ("SIGHUP", 129, "hung up")])
def test_a_stop_signal_is_one_line_and_leaves_no_plot(tmp_path, monkeypatch, capsys, sig, code, said):
    from othello_learn.evaluation import curves

    run = tmp_path / "run"
    _version(run, 0, [{"step": 9, "val/acc": 0.30}])

    def stopped(*a, **k):
        os.kill(os.getpid(), getattr(signal, sig))
        pytest.fail("not stopped")

    monkeypatch.setattr(curves, "save_figure", stopped)
    handler = signal.getsignal(getattr(signal, sig))
    assert curves_main([str(run), "--out", str(tmp_path / "plots" / "c.png")]) == code
    assert signal.getsignal(getattr(signal, sig)) == handler
    err = capsys.readouterr().err
    assert err.strip().endswith(said) and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "plots").exists() or not list((tmp_path / "plots").iterdir())


def test_after_a_fresh_start_only_the_new_runs_logs_are_joined(tmp_path, capsys):
    """--fresh keeps the discarded run's CSV versions and W&B files; joined in, they drew one line
    through the new run's first validation and the old run's later ones."""
    from othello_learn.train.logs import mark_fresh_start

    run = tmp_path / "run"
    _version(run, 0, [{"step": 9, "val/acc": 0.30}, {"step": 19, "val/acc": 0.35}, {"step": 29, "val/acc": 0.4}])
    _version(run, 1, [{"step": 39, "val/acc": 0.45}])  # its resume
    mark_fresh_start(run)
    _version(run, 2, [{"step": 9, "val/acc": 0.20}])  # the fresh run, then its own resume
    _version(run, 3, [{"step": 19, "val/acc": 0.25}])
    assert load_curve(run)["val/acc"].tolist() == [0.20, 0.25]
    # W&B: the run files of the id in OUT/wandb_id (--fresh renews it) only
    wb = tmp_path / "wb"
    for stamp, run_id, acc in (("20260101_000000", "old", 0.5), ("20260102_000000", "new", 0.2)):
        _wandb_file(wb / "wandb" / f"offline-run-{stamp}-{run_id}" / f"run-{run_id}.wandb",
                    [{"trainer/global_step": 9, "val/acc": acc}] +
                    ([{"trainer/global_step": 19, "val/acc": acc + 0.1}] if run_id == "old" else []))
    (wb / "wandb_id").write_text("new\n")
    assert load_curve(wb)["val/acc"].tolist() == [0.2]
    (run / "fresh_start.json").write_text("{}")
    assert curves_main([str(run), "--out", str(tmp_path / "c.png")]) == 2
    assert "fresh_start.json: not the record of a --fresh start" in capsys.readouterr().err


def test_untimed_runs_and_metric_units(tmp_path):
    run = tmp_path / "old"
    run.mkdir()
    _version(run, 0, [{"step": 9, "val/acc": 0.3, "val/value_loss": 0.8}])
    assert load_curve(run)["hours"].isna().all()  # runs from before time/hours was logged
    assert is_fraction("val/acc") and is_fraction("val/top3") and is_fraction("test/acc_moves_1-12")
    assert not is_fraction("val/value_loss") and not is_fraction("train/loss")
    assert curves_main([str(run), "--metric", "val/value_loss", "--out", str(tmp_path / "v.png")]) == 0
    assert curves_main([str(run), "--metric", "val/nope", "--out", str(tmp_path / "n.png")]) == 2


def _wandb_file(path: Path, rows: list[dict], pad: int = 0) -> bytes:
    """A W&B run file written the plain way: records chunked into 32 KiB blocks
    (LevelDB's log format) after the 7-byte header; ``pad`` bytes of console output
    before the history, so a record straddles a block boundary."""
    import json
    import struct
    from zlib import crc32

    from wandb.proto import wandb_internal_pb2 as pb

    records = []
    if pad:
        out = pb.Record()
        out.output_raw.line = "x" * pad
        records.append(out.SerializeToString())
    for row in rows:
        rec = pb.Record()
        for key, value in row.items():
            item = rec.history.item.add()
            item.key, item.value_json = key, json.dumps(value)
        records.append(rec.SerializeToString())
    data = bytearray(b":W&B\xe1\xbe\x00")
    for payload in records:
        first = True
        while True:
            room = 32768 - len(data) % 32768
            if room < 7:
                data += b"\0" * room
                continue
            chunk, payload = payload[: room - 7], payload[room - 7 :]
            kind = (1 if first else 4) if not payload else (2 if first else 3)
            data += struct.pack("<IHB", crc32(chunk), len(chunk), kind) + chunk
            first = False
            if not payload:
                break
    path.parent.mkdir(parents=True)
    path.write_bytes(bytes(data))
    return bytes(data)


def test_a_run_logged_to_wandb_is_read_from_its_run_files(tmp_path):
    run = tmp_path / "run"
    (run / "config.yaml").parent.mkdir()
    (run / "config.yaml").write_text("data: {batch_size: 10}\n")
    # two resumes (two run folders, ordered by their timestamp), the later winning step 19;
    # the first has 70 KB of console output first, so its history spans blocks
    _wandb_file(run / "wandb" / "offline-run-20260101_000000-abc" / "run-abc.wandb",
                [{"trainer/global_step": 9, "val/acc": 0.3, "time/hours": 0.1}, {"train/loss": 2.0},
                 {"trainer/global_step": 19, "val/acc": 0.35, "time/hours": 0.2}], pad=70_000)
    data = _wandb_file(run / "wandb" / "offline-run-20260102_000000-abc" / "run-abc.wandb",
                       [{"trainer/global_step": 19, "val/acc": 0.36, "time/hours": 0.21},
                        {"trainer/global_step": 29, "val/acc": 0.4, "time/hours": 0.3, "val/top3": 0.7}])
    curve = load_curve(run)
    assert curve["positions"].tolist() == [100, 200, 300]
    assert curve["val/acc"].tolist() == [0.3, 0.36, 0.4] and curve["hours"].tolist() == [0.1, 0.21, 0.3]
    # a run killed while writing: the truncated record is dropped, the rest read
    (run / "wandb" / "offline-run-20260102_000000-abc" / "run-abc.wandb").write_bytes(data[:-5])
    assert load_curve(run)["val/acc"].tolist() == [0.3, 0.36]
    assert curves_main([str(run), "--out", str(tmp_path / "c.png")]) == 0
    assert curves_main([str(run), "--metric", "val/nope", "--out", str(tmp_path / "n.png")]) == 2


def test_a_step_of_accumulated_batches_counts_all_their_positions(tmp_path):
    """Lightning's step is an optimizer step: with trainer.accumulate_grad_batches k, k batches."""
    run = tmp_path / "run"
    _version(run, 0, [{"step": 9, "val/acc": 0.30}])
    (run / "config.yaml").write_text("data: {batch_size: 100}\ntrainer: {accumulate_grad_batches: 4}\n")
    assert load_curve(run)["positions"].tolist() == [4000]
    (run / "config.yaml").write_text("trainer: {accumulate_grad_batches: 2}\n")  # the DataModule's default batch
    assert load_curve(run)["positions"].tolist() == [5120]


def test_a_malformed_config_is_one_line_naming_it(tmp_path, capsys):
    run = tmp_path / "run"
    _version(run, 0, [{"step": 9, "val/acc": 0.30}])
    for text in ("data: [1\n", "data: 5\n", "data: {batch_size: many}\n", "trainer: {accumulate_grad_batches: x}\n"):
        (run / "config.yaml").write_text(text)
        assert curves_main([str(run), "--out", str(tmp_path / "c.png")]) == 2
        err = capsys.readouterr().err
        assert "config.yaml" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.png").exists()


def test_an_unreadable_metrics_csv_is_named(tmp_path, capsys):
    run = tmp_path / "run"
    _version(run, 0, [{"step": 9, "val/acc": 0.30}])
    log = run / "csv" / "version_0" / "metrics.csv"
    for damage in (b'step,val/acc\n9,"0.3\n', b"\xff\xfe\x00garbage"):
        log.write_bytes(damage)
        assert curves_main([str(run), "--out", str(tmp_path / "c.png")]) == 2
        err = capsys.readouterr().err
        assert str(log) in err and len(err.strip().splitlines()) == 1


def test_an_empty_metrics_csv_a_full_disk_left_is_skipped_with_a_warning(tmp_path, capsys):
    """A 0-byte metrics.csv (a full disk) made the whole run refused: the others draw its curve."""
    run = tmp_path / "run"
    _version(run, 0, [{"step": 9, "val/acc": 0.30}])
    (run / "csv" / "version_1").mkdir()
    empty = run / "csv" / "version_1" / "metrics.csv"
    empty.write_bytes(b"")
    _version(run, 2, [{"step": 19, "val/acc": 0.35}])
    assert curves_main([str(run), "--out", str(tmp_path / "c.png")]) == 0
    err = capsys.readouterr().err
    assert f"warning: {empty}: an empty training log" in err and len(err.strip().splitlines()) == 1, err
    assert load_curve(run)["val/acc"].tolist() == [0.30, 0.35]
    for n in (0, 2):  # no log left: no training log, as without any
        (run / "csv" / f"version_{n}" / "metrics.csv").write_bytes(b"")
    assert curves_main([str(run), "--out", str(tmp_path / "d.png")]) == 2
    assert "no training log" in capsys.readouterr().err and not (tmp_path / "d.png").exists()


def test_a_run_folder_that_is_not_there_is_said_to_be_missing(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    for name, said in (("nowhere", "no such folder"), ("file", "not a folder")):
        assert curves_main([str(tmp_path / name), "--out", str(tmp_path / "c.png")]) == 2
        err = capsys.readouterr().err
        assert f"{tmp_path / name}: {said} (give an othello-train run folder)" in err
        assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.png").exists()


def test_resumes_are_ordered_by_number_and_timestamp_and_the_batch_defaults_to_256(tmp_path):
    """version_10 comes after version_2 (not as text); an online run-... folder and an
    offline-run-... one are ordered by their timestamp, not their prefix; no config.yaml:
    the default batch of 256 positions a step."""
    run = tmp_path / "run"
    _version(run, 2, [{"step": 9, "val/acc": 0.3}, {"step": 19, "val/acc": 0.35}])
    _version(run, 10, [{"step": 19, "val/acc": 0.36}])
    curve = load_curve(run)
    assert curve["val/acc"].tolist() == [0.3, 0.36] and curve["positions"].tolist() == [2560, 5120]
    wb = tmp_path / "wb"
    wb.mkdir()
    _wandb_file(wb / "wandb" / "run-20260101_000000-abc" / "run-abc.wandb",
                [{"trainer/global_step": 19, "val/acc": 0.35}])
    _wandb_file(wb / "wandb" / "offline-run-20260102_000000-abc" / "run-abc.wandb",
                [{"trainer/global_step": 19, "val/acc": 0.36}])
    assert load_curve(wb)["val/acc"].tolist() == [0.36]


def test_a_history_row_over_three_blocks_and_a_block_tail_of_padding_are_read(tmp_path):
    """A record longer than a block is split first/middle/last and joined back; a block
    whose tail is too short for a chunk header (under 7 bytes) is padding, skipped."""
    from wandb.proto import wandb_internal_pb2 as pb

    from othello_learn.evaluation.curves import wandb_history

    long = "y" * 70_000
    data = _wandb_file(tmp_path / "a" / "run-a.wandb", [{"trainer/global_step": 9, "val/acc": 0.3, "note": long}])
    assert data[7 + 6] == 2 and data[32768 + 6] == 3  # first, then middle chunk: the record spans three blocks
    assert wandb_history(tmp_path / "a" / "run-a.wandb") == [{"trainer/global_step": 9, "val/acc": 0.3, "note": long}]
    # console output sized so that its chunk leaves 1 or 6 bytes of the first block: padding
    def size(pad):
        record = pb.Record()
        record.output_raw.line = "x" * pad
        return record.ByteSize()

    for tail in (1, 6):
        pad = next(p for p in range(32700, 32767) if size(p) == 32768 - 7 - 7 - tail)
        path = tmp_path / f"tail{tail}" / "run-b.wandb"
        data = _wandb_file(path, [{"trainer/global_step": 9, "val/acc": 0.3}], pad=pad)
        assert data[32768 - tail:32768] == b"\0" * tail
        assert wandb_history(path) == [{"trainer/global_step": 9, "val/acc": 0.3}]


def test_a_tampered_log_or_record_is_one_line_naming_the_run(tmp_path, capsys):
    """Tracebacks before: no step column (KeyError), a step that is text (TypeError), an infinite
    batch size or first version (OverflowError); a folder csv/version_x was one line naming nothing."""
    def refused(run, said):
        assert curves_main([str(run), "--out", str(tmp_path / "c.png")]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.splitlines()) == 1 and "Traceback" not in err, err

    for name, rows in (("nostep", [{"val/acc": 0.3}]), ("textstep", [{"step": "abc", "val/acc": 0.3}])):
        run = tmp_path / name
        _version(run, 0, rows)
        refused(run, "no numeric 'step' column")
    run = tmp_path / "run"
    _version(run, 0, [{"step": 9, "val/acc": 0.3}])
    (run / "csv" / "version_x").mkdir()  # not Lightning's: passed over
    assert load_curve(run)["val/acc"].tolist() == [0.3]
    (run / "config.yaml").write_text("data: {batch_size: .inf}\n")
    refused(run, "config.yaml: not a training config with data.batch_size")
    (run / "config.yaml").unlink()
    for text in ('{"csv_version": 1e400}', '{"csv_version": null}', "[1]"):
        (run / "fresh_start.json").write_text(text)
        refused(run, "fresh_start.json: not the record of a --fresh start")


def test_mark_fresh_start_skips_folders_lightning_did_not_number(tmp_path):
    import json

    from othello_learn.train.logs import mark_fresh_start

    for name in ("version_0", "version_3", "version_old"):
        (tmp_path / "csv" / name).mkdir(parents=True)
    mark_fresh_start(tmp_path)
    assert json.loads((tmp_path / "fresh_start.json").read_text()) == {"csv_version": 4}



def test_a_metric_with_no_number_in_it_is_refused_not_plotted_empty(tmp_path, capsys):
    """A column of NaN or of words drew an empty or broken plot, exit 0."""
    for values, said in (([float("nan"), float("nan")], "have no value of val/acc"),
                         (["abc", "def"], "hold val/acc values that are not numbers")):
        run = tmp_path / said.split()[0]
        _version(run, 0, [{"step": 9, "val/acc": values[0]}, {"step": 19, "val/acc": values[1]}])
        assert curves_main([str(run), "--out", str(tmp_path / "c.png")]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.png").exists()


def test_a_run_has_one_colour_in_both_panels(tmp_path, monkeypatch):
    """An untimed run is left out of the time panel; the colours drawn after it there no longer
    matched the runs' colours in the positions panel."""
    from othello_learn.evaluation import curves

    runs = []
    for name, timed in (("a", True), ("untimed", False), ("c", True)):
        run = tmp_path / name
        run.mkdir()
        rows = [{"step": s, "val/acc": 0.3 + s / 100, **({"time/hours": s / 10} if timed else {})} for s in (9, 19)]
        _version(run, 0, rows)
        runs.append(run)
    drawn = {}
    monkeypatch.setattr(curves, "save_figure", lambda fig, out: drawn.setdefault("fig", fig) and out)
    curves.plot(runs, tmp_path / "c.png")
    positions, hours = drawn["fig"].axes
    colour = {line.get_label(): line.get_color() for line in positions.get_lines()}
    assert len(set(colour.values())) == 3 and [line.get_label() for line in hours.get_lines()] == ["a", "c"]
    assert all(line.get_color() == colour[line.get_label()] for line in hours.get_lines())


def test_runs_of_the_same_name_in_other_folders_are_told_apart(tmp_path, monkeypatch):
    """Keyed by the folder's name, a/x and b/x were drawn as one curve (the second's)."""
    from othello_learn.evaluation import curves

    runs = []
    for parent, acc in (("a", 0.3), ("b", 0.5), ("c", 0.4)):
        run = tmp_path / parent / ("x" if parent != "c" else "y")
        run.mkdir(parents=True)
        _version(run, 0, [{"step": s, "val/acc": acc} for s in (9, 19)])
        runs.append(run)
    assert curves.run_labels(runs) == ["a/x", "b/x", "y"]
    assert curves.run_labels([runs[0], runs[0]]) == ["x", "x"]
    drawn = {}
    monkeypatch.setattr(curves, "save_figure", lambda fig, out: drawn.setdefault("fig", fig) and out)
    curves.plot(runs + [runs[0]], tmp_path / "c.png")  # a run given twice: one curve
    lines = drawn["fig"].axes[0].get_lines()
    assert {line.get_label(): line.get_ydata()[0] for line in lines} == {"a/x": 30.0, "b/x": 50.0, "y": 40.0}
