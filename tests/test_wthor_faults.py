"""The dataset builder under bad input and interruptions: nothing lost, nothing
half-written, one clear line. Synthetic WTHOR files only."""

import errno
import json
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import reference_engine as ref
from othello import PASS
from othello_learn.cli import run_main
from othello_learn.files import UserError
from othello.notation import format_transcript
from othello_learn.data import dataset, wtb
from othello_learn.data import wthor as cli

REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


def build_cli(argv):
    return run_main(cli.main, argv)


def _games(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        record, board, _ = ref.random_game(rng, stop_after=rng.choice([None, 20]))
        out.append(([m for _, _, m in record if m != PASS], board))
    return out


def _black_score(board):
    return (64 + ref.final_score(board)) // 2 if ref.game_over(board) else sum(v == 1 for row in board for v in row)


@pytest.fixture(scope="module")
def games():
    return _games(24, seed=11)


@pytest.fixture
def wthor_dir(tmp_path, games):
    d = tmp_path / "wthor"
    d.mkdir()
    for year, part in ((2001, games[:12]), (2002, games[12:])):
        recs = wtb.make_games([m for m, _ in part], [_black_score(b) for _, b in part])
        wtb.write_wtb(d / f"WTH_{year}.wtb", recs, year)
    return d


def _listing(folder):
    return sorted(p.name for p in folder.iterdir())


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _one_line_error(capsys, *needles):
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1 and "error:" in lines[0] and "Traceback" not in err, err
    for needle in needles:
        assert str(needle) in lines[0], (needle, lines[0])
    return lines[0]


# --- 1. never replace what is not ours ---------------------------------------------------------


def test_refuses_a_folder_that_is_not_a_dataset(wthor_dir, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 2
    _one_line_error(capsys, out, "notes.txt")
    assert _listing(out) == ["notes.txt"] and (out / "notes.txt").read_text() == "keep me"
    assert _listing(tmp_path) == ["mine", "wthor"], "nothing renamed aside or left behind"


def test_refuses_the_input_folder_and_the_working_folder(wthor_dir, tmp_path, monkeypatch, capsys):
    before = {p.name: p.read_bytes() for p in wthor_dir.iterdir()}
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(wthor_dir), "--quiet"]) == 2
    _one_line_error(capsys, "WTH_2001.wtb")
    assert {p.name: p.read_bytes() for p in wthor_dir.iterdir()} == before
    work = tmp_path / "work"
    work.mkdir()
    (work / "script.py").write_text("print()")
    monkeypatch.chdir(work)
    for out in (str(work), "."):
        assert build_cli(["--wthor-dir", str(wthor_dir), "--out", out, "--quiet"]) == 2
        _one_line_error(capsys, "script.py")
        assert _listing(work) == ["script.py"] and _listing(tmp_path) == ["work", "wthor"]


def test_refuses_a_regular_file_and_a_symlink(wthor_dir, tmp_path, capsys):
    target = tmp_path / "ds"
    target.write_text("precious")
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(target), "--quiet"]) == 2
    _one_line_error(capsys, target, "is a file")
    assert target.read_text() == "precious" and _listing(tmp_path) == ["ds", "wthor"]
    built = tmp_path / "real"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(built), "--quiet"]) == 0
    link = tmp_path / "link"
    link.symlink_to(built)
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(link), "--quiet"]) == 2
    _one_line_error(capsys, link, "symbolic link")
    assert link.is_symlink() and _listing(built) == sorted(dataset.DATASET_FILES)


def test_replaces_an_empty_folder_our_dataset_and_a_legacy_one(wthor_dir, tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["format"] == dataset.FORMAT_MARKER
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet", "--years", "2002"]) == 0
    assert list(json.loads((out / "summary.json").read_text())["years"]) == ["2002"]
    # A dataset written before the marker existed: exactly the three files.
    legacy = dict(summary)
    del legacy["format"]
    (out / "summary.json").write_text(json.dumps(legacy))
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "summary.json").read_text())["format"] == dataset.FORMAT_MARKER
    assert _listing(tmp_path) == ["ds", "wthor"]


@pytest.mark.parametrize("marker", [True, False])
def test_a_dataset_holding_a_user_file_is_not_replaced(wthor_dir, tmp_path, marker, capsys):
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0
    if not marker:
        s = json.loads((out / "summary.json").read_text())
        del s["format"]
        (out / "summary.json").write_text(json.dumps(s))
    (out / "my_analysis.ipynb").write_text("{}")
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 2
    _one_line_error(capsys, "my_analysis.ipynb")
    assert _listing(out) == sorted(dataset.DATASET_FILES | {"my_analysis.ipynb"})


# --- 2. a killed build is recovered on the next run --------------------------------------------


def _dataset_bytes(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.parametrize("kill_at", ["saving", "between_renames", "before_cleanup"])
def test_a_killed_write_is_recovered(wthor_dir, tmp_path, kill_at, capsys):
    """A real kill (os._exit, no cleanup runs) at each step of the write, then the next run."""
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet", "--years", "2001"]) == 0
    old = _dataset_bytes(out)
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPO)!r})
        import numpy as np
        from othello_learn.data import dataset
        result = dataset.build({str(wthor_dir)!r}, progress=False)
        kill_at = {kill_at!r}
        if kill_at == "saving":
            def save(path, arr):
                open(path, "wb").write(b"half a file")
                os._exit(9)
            dataset.np.save = save
        else:
            real, calls = os.replace, []
            def replace(a, b):
                calls.append(a)
                if len(calls) == (1 if kill_at == "between_renames" else 2):
                    real(a, b)
                    os._exit(9)
                real(a, b)
            dataset.os.replace = replace
        dataset.write(result, {str(out)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    hidden = [n for n in _listing(tmp_path) if n.startswith(".ds.")]
    assert hidden, "the kill left the swap's folders behind"
    if kill_at == "between_renames":
        assert not out.exists(), "the kill fell between the two renames"
    # The next run puts things right first, even when its own build fails.
    (wthor_dir / "WTH_2002.wtb").write_bytes(b"\0" * 20)
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "WTH_2002.wtb" in err
    assert _listing(tmp_path) == ["ds", "wthor"], "stale temporary folders are removed"
    expected = old
    if kill_at == "before_cleanup":  # the swap was done: the new dataset (all years) stays
        expected = None
        assert list(json.loads((out / "summary.json").read_text())["years"]) == ["2001", "2002"]
    if expected is not None:
        assert _dataset_bytes(out) == expected


def test_recovery_touches_only_our_dead_writers_folders(tmp_path, capsys):
    out = tmp_path / "ds"
    dead, live = _dead_pid(), os.getppid()
    (tmp_path / f".ds.build.{dead}").mkdir()
    (tmp_path / f".ds.build.{dead}" / "positions.npy").write_bytes(b"partial")
    (tmp_path / f".ds.old.{live}").mkdir()  # a build in progress elsewhere
    (tmp_path / f".ds.old.{live}" / "summary.json").write_text("{}")
    for name in (f".ds.build.{dead}.keep", ".ds.backup", f".other.old.{dead}", f".ds.old.{dead}x"):
        (tmp_path / name).mkdir()
    theirs = tmp_path / f".ds.old.{_dead_pid()}"  # our naming, but a file we never write
    theirs.mkdir()
    (theirs / "thesis.tex").write_text("")
    dataset.recover(out, log=lambda m: print(m, file=sys.stderr))
    assert not (tmp_path / f".ds.build.{dead}").exists()
    assert (tmp_path / f".ds.old.{live}" / "summary.json").exists(), "a live writer's folder is left alone"
    for name in (f".ds.build.{dead}.keep", ".ds.backup", f".other.old.{dead}", f".ds.old.{dead}x"):
        assert (tmp_path / name).is_dir()
    assert (theirs / "thesis.tex").exists() and not out.exists(), "a folder holding other files is never moved"
    err = capsys.readouterr().err
    assert f"{theirs.name}: left alone" in err
    (tmp_path / f".ds.old.{dead}").mkdir()  # now a real leftover of the swap: it is put back
    (tmp_path / f".ds.old.{dead}" / "summary.json").write_text("{}")
    dataset.recover(out)
    assert _listing(out) == ["summary.json"] and not (tmp_path / f".ds.old.{dead}").exists()


def test_a_dataset_name_the_file_system_takes_is_built_and_rebuilt(wthor_dir, tmp_path, capsys):
    """A 250-character --out was refused as too long: the build folder beside it added ``.build.PID``
    past the file system's 255 bytes. The build's folders are named after the name cut short, which
    a killed build's leftovers are found by."""
    out = tmp_path / ("d" * 250)
    for _ in range(2):  # built, then rebuilt through the swap (.old.PID)
        assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
        assert _listing(tmp_path) == ["d" * 250, "wthor"] and _listing(out) == sorted(dataset.DATASET_FILES)
    tmp = dataset._side_stem(out.name)
    assert tmp != out.name and len(os.fsencode(f".{tmp}.build.{2**32}")) <= 255
    assert dataset._side_stem("d" * 249 + "e") != tmp  # another long name with the same start: other folders
    leftover = tmp_path / f".{tmp}.build.{_dead_pid()}"
    leftover.mkdir()
    (leftover / "positions.npy").write_bytes(b"partial")
    dataset.recover(out)
    assert _listing(tmp_path) == ["d" * 250, "wthor"]


# --- 3. file names -----------------------------------------------------------------------------


def test_only_exact_wthor_names_are_read(wthor_dir, tmp_path, capsys):
    data = (wthor_dir / "WTH_2001.wtb").read_bytes()
    (wthor_dir / "copy of WTH_2001.wtb").write_bytes(data)
    (wthor_dir / "OLD_WTH_2001.wtb").write_bytes(data)
    (wthor_dir / "WTH_2001.wtb.bak").write_bytes(data)
    (wthor_dir / "WTH_2002.wtb").rename(wthor_dir / "wth_2002.WTB")  # case does not matter
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert {y: v["games"] for y, v in s["years"].items()} == {"2001": 12, "2002": 12}
    err = capsys.readouterr().err
    assert "copy of WTH_2001.wtb: ignored" in err and "OLD_WTH_2001.wtb: ignored" in err


def test_the_files_folder_can_be_set_once_in_the_environment(wthor_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OTHELLO_WTHOR_DIR", str(wthor_dir))
    out = tmp_path / "ds"
    assert build_cli(["--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "summary.json").read_text())["total"]["games"] == 24
    missing = tmp_path / "nowhere"
    monkeypatch.setenv("OTHELLO_WTHOR_DIR", str(missing))
    assert build_cli(["--out", str(tmp_path / "ds2"), "--quiet"]) == 2
    _one_line_error(capsys, f"$OTHELLO_WTHOR_DIR {missing}: not a folder")
    assert not (tmp_path / "ds2").exists()
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(tmp_path / "ds2"), "--quiet"]) == 0  # the flag wins


def test_two_files_for_one_year_is_an_error_naming_both(wthor_dir, tmp_path, capsys):
    (wthor_dir / "wth_2001.WTB").write_bytes((wthor_dir / "WTH_2001.wtb").read_bytes())
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 2
    _one_line_error(capsys, "WTH_2001.wtb", "wth_2001.WTB", "2001")
    assert not out.exists()
    # Not an error when that year is not asked for.
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet", "--years", "2002"]) == 0


def test_a_year_asked_for_without_its_file_is_an_error(wthor_dir, tmp_path, games, capsys):
    """Named years, and years inside a named range, must all be there; nothing is written."""
    recs = wtb.make_games([m for m, _ in games[:3]], [_black_score(b) for _, b in games[:3]])
    wtb.write_wtb(wthor_dir / "WTH_2004.wtb", recs, 2004)  # the folder: 2001, 2002, 2004
    out = tmp_path / "ds"
    for years, missing in (("2001,2030", "2030"), ("2001-2004", "2003"), ("1999-2002,2030", "1999-2000, 2030")):
        assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet", "--years", years]) == 2
        line = _one_line_error(capsys, str(wthor_dir), f"no WTH_YYYY.wtb file for {missing} ")
        assert "2001-2002, 2004" in line
        assert _listing(tmp_path) == ["wthor"]
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet", "--years", "2001-2002"]) == 0


@pytest.mark.parametrize("years", ["", "  "])
def test_an_empty_years_is_an_error_not_every_year(wthor_dir, tmp_path, years, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_cli(["--wthor-dir", str(wthor_dir), "--out", str(tmp_path / "ds"), "--quiet", "--years", years])
    assert exit_.value.code == 2
    _one_line_error(capsys, "--years", "no years given")
    assert _listing(tmp_path) == ["wthor"]


# --- 4. damaged records ------------------------------------------------------------------------


def test_bad_score_and_move_gap_are_skipped_and_reported(wthor_dir, tmp_path, games, capsys):
    path = wthor_dir / "WTH_2001.wtb"
    w = wtb.read_wtb(path)
    w.games["black_score"][2] = 100  # would wrap to -120 in int8
    w.games["moves"][4, 6] = 0  # a lost move: the game goes on after it
    assert w.games["moves"][4, 7] != 0
    wtb.write_wtb(path, w.games, 2001)
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "WTH_2001.wtb: game 2" in err and "black score 100 is not 0..64" in err
    assert "WTH_2001.wtb: game 4" in err and "as move 7" in err
    s = json.loads((out / "summary.json").read_text())
    assert s["years"]["2001"]["skipped_games"] == 2 and s["total"]["skipped_games"] == 2
    assert {(k["game"], k["ply"]) for k in s["skipped"]} == {(2, None), (4, 7)}
    ds = dataset.WthorDataset(out)
    assert not np.isin(ds.positions["game"], [2, 4]).any()
    kept = sum(len(m) for i, (m, _) in enumerate(games) if i not in (2, 4))
    assert len(ds) == kept
    g = ds.games
    assert g.loc[2, "black_score"] == 100 and g.loc[2, "moves"] == 0
    assert (g["result"].abs() <= 64).all()


def test_header_depth_over_60_is_a_clear_error(wthor_dir, tmp_path, capsys):
    path = wthor_dir / "WTH_2002.wtb"
    data = bytearray(path.read_bytes())
    data[14] = 200  # depth byte
    path.write_bytes(bytes(data))
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 2
    _one_line_error(capsys, "WTH_2002.wtb", "depth 200")
    assert not out.exists()


def test_a_file_named_for_another_year_than_its_header_is_an_error(wthor_dir, tmp_path, capsys):
    """2001's games copied to WTH_2003.wtb must not be labelled 2003 (another split)."""
    (wthor_dir / "WTH_2003.wtb").write_bytes((wthor_dir / "WTH_2001.wtb").read_bytes())
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 2
    _one_line_error(capsys, "WTH_2003.wtb", "header says its games are from 2001", "file name says 2003")
    assert _listing(tmp_path) == ["wthor"]


def test_a_header_without_a_year_is_labelled_by_the_name(wthor_dir, tmp_path):
    w = wtb.read_wtb(wthor_dir / "WTH_2002.wtb")
    wtb.write_wtb(wthor_dir / "WTH_2002.wtb", w.games, 0)
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "summary.json").read_text())["years"]["2002"]["games"] == 12


# --- 5. file system faults ---------------------------------------------------------------------


def test_a_wtb_that_is_a_folder(wthor_dir, tmp_path, capsys):
    (wthor_dir / "WTH_2003.wtb").mkdir()
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(tmp_path / "ds"), "--quiet"]) == 2
    _one_line_error(capsys, "WTH_2003.wtb", "folder")
    assert _listing(tmp_path) == ["wthor"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_wtb(wthor_dir, tmp_path, capsys):
    path = wthor_dir / "WTH_2002.wtb"
    path.chmod(0)
    try:
        assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(tmp_path / "ds"), "--quiet"]) == 2
    finally:
        path.chmod(0o644)
    _one_line_error(capsys, "WTH_2002.wtb", "permission denied")
    assert _listing(tmp_path) == ["wthor"]


@pytest.mark.parametrize("stage", ["positions", "games"])
def test_a_full_disk_loses_nothing(wthor_dir, tmp_path, monkeypatch, stage, capsys):
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet", "--years", "2001"]) == 0
    before = _dataset_bytes(out)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    if stage == "positions":
        monkeypatch.setattr(dataset.np, "save", full)
    else:
        monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 2
    _one_line_error(capsys, "no space left on device", out)
    assert _dataset_bytes(out) == before and _listing(tmp_path) == ["ds", "wthor"]


def test_a_build_folder_that_cannot_be_made_is_named_as_the_out_folder(wthor_dir, tmp_path, monkeypatch, capsys):
    """Where the checks pass and mkdir still fails (root in /proc), the error named the hidden
    ".ds.build.PID" folder beside --out, a path the user never gave."""
    real_mkdir = type(tmp_path).mkdir

    def refused(self, *args, **kwargs):
        if ".build." in self.name:
            raise OSError(errno.EACCES, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(type(tmp_path), "mkdir", refused)
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet", "--years", "2001"]) == 2
    err = _one_line_error(capsys, "permission denied", out)
    assert ".build." not in err and _listing(tmp_path) == ["wthor"]


def test_the_new_files_reach_the_disk_before_the_old_dataset_goes(wthor_dir, tmp_path, monkeypatch):
    """The swap renames the new folder in and deletes the old one: after a power loss the
    renames may stand with the data still in the page cache, so each file is synced first."""
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet", "--years", "2001"]) == 0
    events = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(("sync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
                        or fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append(("replace", None)) or replace(a, b))
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0
    first_replace = events.index(("replace", None))
    assert {name for kind, name in events[:first_replace] if kind == "sync"} == dataset.DATASET_FILES


def test_download_is_atomic(tmp_path, monkeypatch, games, capsys):
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("WTH_2001.wtb", b"x" * 1000)
    monkeypatch.setattr(cli.urllib.request, "urlopen", lambda url, timeout: io.BytesIO(buf.getvalue()))
    real_write = type(tmp_path).write_bytes

    def half_then_full(self, data):
        real_write(self, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(type(tmp_path), "write_bytes", half_then_full)
    target = tmp_path / "dl"
    argv = ["--download", "--wthor-dir", str(target), "--years", "2001", "--out", str(tmp_path / "ds"), "--quiet"]
    assert build_cli(argv) == 2
    _one_line_error(capsys, "no space left on device")
    assert not target.exists(), "no partial WTH_2001.wtb to be read as a damaged file later, nor the folder made for it"
    target.mkdir()  # the user's own (empty) folder stays
    assert build_cli(argv) == 2
    assert _listing(target) == []


def test_debug_shows_the_traceback(wthor_dir, tmp_path):
    (wthor_dir / "WTH_2002.wtb").write_bytes(b"\0" * 20)
    with pytest.raises(wtb.WthorFormatError, match="WTH_2002.wtb"):
        build_cli(["--wthor-dir", str(wthor_dir), "--out", str(tmp_path / "ds"), "--quiet", "--debug"])


def test_the_script_exits_2_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "data_tools" / "wthor.py"), "--wthor-dir", str(tmp_path / "nope"),
                           "--out", str(tmp_path / "ds"), "--quiet"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip() == f"wthor.py: error: WTHOR folder not found: {tmp_path / 'nope'}"


# --- 6. transcripts ----------------------------------------------------------------------------


def test_games_csv_has_the_recorded_transcripts(wthor_dir, tmp_path, games):
    path = wthor_dir / "WTH_2001.wtb"
    w = wtb.read_wtb(path)
    w.games["moves"][1, 5] = 11  # an illegal a1: the game is skipped, its record still shown
    wtb.write_wtb(path, w.games, 2001)
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0
    g = dataset.WthorDataset(out).games
    expected = [format_transcript(m) for m, _ in games]
    expected[1] = expected[1][:10] + "a1" + expected[1][12:]
    assert g["transcript"].tolist() == expected
    assert g.loc[1, "error"].startswith("illegal move a1")
    assert (g["transcript"].str.len()[g["error"] == ""] == 2 * g["moves"][g["error"] == ""]).all()
    # A byte that is no square ends the transcript there.
    moves = np.zeros((2, 60), np.uint8)
    moves[0, :3] = [56, 64, 99]
    assert dataset.transcripts(moves).tolist() == ["f5d6", ""]


def test_a_year_with_no_games_is_listed_with_0_and_no_games_at_all_is_one_line(wthor_dir, tmp_path, capsys):
    wtb.write_wtb(wthor_dir / "WTH_2000.wtb", wtb.make_games([]), 2000)
    out = tmp_path / "out"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out)]) == 0
    assert any(line.split()[:3] == ["2000", "0", "0"] for line in capsys.readouterr().out.splitlines())
    years = json.loads((out / "summary.json").read_text())["years"]
    assert list(years) == ["2000", "2001", "2002"]
    assert years["2000"] == {"games": 0, "positions": 0, "skipped_games": 0, "warned_games": 0,
                             "position_range": [0, 0]}
    assert years["2001"]["position_range"][0] == 0
    assert years["2002"]["position_range"][0] == years["2001"]["position_range"][1]
    empty_only = tmp_path / "empty_out"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(empty_only), "--years", "2000"]) == 2
    err = capsys.readouterr().err
    assert "no games in WTH_2000.wtb" in err and len(err.splitlines()) == 1
    assert not empty_only.exists()


@pytest.mark.parametrize("sig, code, said", [("SIGTERM", 143, "terminated"), ("SIGHUP", 129, "hung up")])
def test_a_stop_signal_removes_the_build_folder_and_exits_with_its_status(wthor_dir, tmp_path, monkeypatch, capsys,
                                                                          sig, code, said):
    import signal

    def stopped(*a, **k):
        os.kill(os.getpid(), getattr(signal, sig))

    monkeypatch.setattr(pd.DataFrame, "to_csv", stopped)  # inside write, the build folder made
    handler = signal.getsignal(getattr(signal, sig))
    out = tmp_path / "out"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == code
    assert signal.getsignal(getattr(signal, sig)) == handler
    assert capsys.readouterr().err.strip().endswith(said)
    assert _listing(tmp_path) == ["wthor"]


def test_a_leftover_left_alone_is_said_once(wthor_dir, tmp_path, capsys):
    theirs = tmp_path / f".out.build.{_dead_pid()}"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("")
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert capsys.readouterr().err.count("left alone") == 1 and (theirs / "notes.txt").exists()


def test_a_black_score_of_65_is_skipped_and_64_is_kept(wthor_dir, games):
    """0..64 discs: 65 is the first impossible score (an int8 result would not wrap yet). 64 on a
    game that has not ended on the board (a finished one's board would contradict it)."""
    g = next(i for i in range(2, 12) if not ref.game_over(games[i][1]))
    path = wthor_dir / "WTH_2001.wtb"
    w = wtb.read_wtb(path)
    w.games["black_score"][1], w.games["black_score"][g] = 65, 64
    wtb.write_wtb(path, w.games, 2001)
    said = []
    r = dataset.build(wthor_dir, progress=False, warn=said.append)
    assert [s["game"] for s in r.summary["skipped"]] == [1] and "black score 65 is not 0..64" in said[0]
    assert r.games.loc[g, "error"] == "" and (r.positions["game"] == g).any()


def test_a_transcript_ends_at_the_first_byte_that_is_no_move():
    """What follows a lost move (a 0, or a byte that is no square) is not part of the record."""
    moves = np.zeros((3, 60), np.uint8)
    moves[0, :3] = [56, 0, 64]   # f5, end, d6
    moves[1, :3] = [56, 99, 64]  # f5, no square, d6
    moves[2, :2] = [56, 64]
    assert dataset.transcripts(moves).tolist() == ["f5", "f5", "f5d6"]


def test_a_transcript_reads_every_byte_as_wthor_to_square_does():
    """The byte table of uint8 records (kept small for all WTHOR years) against the
    arithmetic it replaces: every byte value, first in a game of two moves."""
    moves = np.zeros((256, 60), np.uint8)
    moves[:, 0], moves[:, 1] = np.arange(256), 56
    wide = dataset.transcripts(moves.astype(np.int64)).tolist()
    assert dataset.transcripts(moves).tolist() == wide
    assert sum(t != "" for t in wide) == 64 and wide[11] == "a1f5" and wide[88] == "h8f5"


def test_games_replayed_in_many_chunks_give_the_positions_of_one(wthor_dir, monkeypatch):
    """Each chunk's positions are copied into one array after the chunks before it: chunks
    of 5 games (skipped games among them, so chunks give unequal counts) build the same
    positions and games table as all 24 games in one chunk."""
    path = wthor_dir / "WTH_2001.wtb"
    w = wtb.read_wtb(path)
    w.games["moves"][1, 5] = 11  # illegal: skipped, in the first chunk
    w.games["black_score"][7] = 100  # damaged: skipped, in the second
    wtb.write_wtb(path, w.games, 2001)
    whole = dataset.build(wthor_dir, progress=False, warn=lambda s: None)
    monkeypatch.setattr(dataset, "CHUNK_GAMES", 5)
    chunked = dataset.build(wthor_dir, progress=False, warn=lambda s: None)
    assert len(whole.positions) > 0 and chunked.positions.tobytes() == whole.positions.tobytes()
    pd.testing.assert_frame_equal(chunked.games, whole.games)
    assert chunked.summary == whole.summary


def test_transcripts_of_byte_records_need_no_int64_copies():
    """The point of the byte table: all WTHOR years' 7.5 M move bytes went through five int64
    copies at once (about 41 bytes per move byte at the peak); through the table the peak
    is the result's 8 bytes per move byte (two UTF-32 characters) and a few more."""
    import tracemalloc

    moves = np.random.default_rng(0).integers(11, 89, (4000, 60)).astype(np.uint8)
    tracemalloc.start()
    try:
        dataset.transcripts(moves)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * moves.size, peak / moves.size


def test_parse_years_reads_all_in_any_case():
    assert dataset.parse_years("ALL") is None and dataset.parse_years(" All ") is None


def _tiny_dataset(folder, records, position_range):
    from othello_learn.data.replay import POSITION_DTYPE

    folder.mkdir()
    rec = np.zeros(len(records), dtype=POSITION_DTYPE)
    for i, fields in enumerate(records):
        for k, v in fields.items():
            rec[i][k] = v
    np.save(folder / "positions.npy", rec)
    summary = {"format": dataset.FORMAT_MARKER, "format_version": dataset.FORMAT_VERSION,
               "years": {"2001": {"games": 1, "positions": len(rec), "skipped_games": 0,
                                  "position_range": position_range}}}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_a_dataset_with_an_impossible_ply_or_range_is_refused_on_opening(tmp_path):
    """Plies are 0..59 (60 moves at most) and a year's positions lie within the records."""
    good = [{"move": 37, "ply": 0}, {"move": 43, "ply": 59}]
    assert len(dataset.WthorDataset(_tiny_dataset(tmp_path / "ok", good, [0, 2]))) == 2
    with pytest.raises(ValueError, match="position 1: ply 60 is not 0..59"):
        dataset.WthorDataset(_tiny_dataset(tmp_path / "ply", [good[0], {"move": 43, "ply": 60}], [0, 2]))
    with pytest.raises(ValueError, match=r"year 2001: no valid position_range \(found \[0, 3\]; 2 positions\)"):
        dataset.WthorDataset(_tiny_dataset(tmp_path / "range", good, [0, 3]))
    # a result past +-64, a square held by both sides, the move on a disc: a net would train on nonsense
    for name, bad, said in (("result", {"result": 120}, "position 1: result 120 is not -64..64"),
                            ("both", {"player": 1 << 5, "opponent": 1 << 5}, "position 1: a square held by both"),
                            ("occupied", {"opponent": 1 << 43}, "position 1: a square held by both sides, or the move "
                                                                "on an occupied square")):
        with pytest.raises(dataset.DatasetError, match=said) as e:
            dataset.WthorDataset(_tiny_dataset(tmp_path / name, [good[0], {**good[1], **bad}], [0, 2]))
        assert isinstance(e.value, UserError)  # one line from every command, benchmarks too
    with pytest.raises(dataset.DatasetError, match=r"position 1: history \[65, -1, -1, -1\] is not -1..64"):
        dataset.WthorDataset(_tiny_dataset(tmp_path / "hist", [good[0], {**good[1], "history": [65, -1, -1, -1]}],
                                           [0, 2]))


def test_a_damaged_record_past_the_first_chunk_is_named_by_its_own_index(tmp_path, monkeypatch):
    monkeypatch.setattr(dataset.WthorDataset._check, "__defaults__", (1,))  # one record a chunk
    good = [{"move": 37, "ply": 0}, {"move": 43, "ply": 59}]
    with pytest.raises(dataset.DatasetError, match="position 1: a square held by both"):
        dataset.WthorDataset(_tiny_dataset(tmp_path / "d", [good[0], {**good[1], "opponent": 1 << 43}], [0, 2]))


def test_years_whose_position_ranges_overlap_are_refused_on_opening(tmp_path):
    """A hand-edited summary whose 2016 reaches into 2015's positions would put the same games in the
    validation and the test split; ranges that touch, and a year with none, are what a build writes."""
    good = [{"move": 37, "ply": 0}, {"move": 43, "ply": 1}, {"move": 19, "ply": 0}]
    folder = _tiny_dataset(tmp_path / "d", good, [0, 2])
    summary = json.loads((folder / "summary.json").read_text())
    year = summary["years"]["2001"]
    summary["years"] = {"2002": {**year, "position_range": [2, 2]}, "2001": year,
                        "2003": {**year, "position_range": [2, 3]}}
    (folder / "summary.json").write_text(json.dumps(summary))
    assert dataset.WthorDataset(folder).split("x", {"x": (2003, 2003)})["move"].tolist() == [19]
    summary["years"]["2003"]["position_range"] = [1, 3]
    (folder / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match=r"d/summary.json: year 2003's position_range \[1, 3\] overlaps year 2001's"):
        dataset.WthorDataset(folder)


def test_a_summary_that_does_not_cover_every_record_is_refused_on_opening(tmp_path):
    """positions.npy copied in from a build of more years (1977-1981 under a summary of 1980-1981)
    opened without a word: 1980's range then read 1977's positions, a split of other years."""
    good = [{"move": 37, "ply": 0}, {"move": 43, "ply": 1}, {"move": 19, "ply": 0}]
    with pytest.raises(dataset.DatasetError, match=r"d/positions.npy: 3 positions, but summary.json's years cover 2"):
        dataset.WthorDataset(_tiny_dataset(tmp_path / "d", good, [0, 2]))
    with pytest.raises(dataset.DatasetError, match=r"g/summary.json: year 2001's position_range \[1, 3\] leaves "
                                                   r"positions 0..0 to no year"):
        dataset.WthorDataset(_tiny_dataset(tmp_path / "g", good, [1, 3]))
    assert len(dataset.WthorDataset(_tiny_dataset(tmp_path / "ok", good, [0, 3]))) == 3


def test_download_skips_a_year_present_under_another_case(wthor_dir, tmp_path, monkeypatch):
    """WTH_2001.WTB (a DOS-era name) is read as 2001; --download fetched WTH_2001.wtb beside it and
    the build then stopped on "two files for 2001", a folder the user had to clean by hand."""
    import io
    import zipfile

    (wthor_dir / "WTH_2001.wtb").rename(wthor_dir / "WTH_2001.WTB")
    source = tmp_path / "WTH_2002.wtb"  # what the site serves for 2002, kept outside the folder
    (wthor_dir / "WTH_2002.wtb").rename(source)
    served = []

    def fake_urlopen(url, timeout):
        served.append(url)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.write(source, "WTH_2002.wtb")
        return io.BytesIO(buf.getvalue())

    monkeypatch.setattr(cli.urllib.request, "urlopen", fake_urlopen)
    argv = ["--download", "--wthor-dir", str(wthor_dir), "--years", "2001-2002", "--out", str(tmp_path / "ds"),
            "--quiet"]
    assert build_cli(argv) == 0
    assert served == [cli.DOWNLOAD_URL.format(year=2002)]
    assert _listing(wthor_dir) == ["WTH_2001.WTB", "WTH_2002.wtb"]


def test_a_download_cut_short_or_damaged_is_one_line(tmp_path, monkeypatch, capsys):
    """A connection dropped mid-body (http.client.IncompleteRead, no OSError) and a zip whose member
    fails to inflate (zlib.error) were tracebacks; the folder made for them is still removed."""
    import http.client
    import io
    import zipfile

    class Cut:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            raise http.client.IncompleteRead(b"PK", 5000)

    target = tmp_path / "dl"
    argv = ["--download", "--wthor-dir", str(target), "--years", "2001", "--out", str(tmp_path / "ds"), "--quiet"]
    monkeypatch.setattr(cli.urllib.request, "urlopen", lambda url, timeout: Cut())
    assert build_cli(argv) == 2
    _one_line_error(capsys, "WTH_2001.ZIP: download failed", "more expected")
    assert not target.exists()

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("WTH_2001.wtb", bytes(range(256)) * 40)
    data = bytearray(buf.getvalue())
    data[60] ^= 0xFF  # inside the compressed stream
    monkeypatch.setattr(cli.urllib.request, "urlopen", lambda url, timeout: io.BytesIO(bytes(data)))
    assert build_cli(argv) == 2
    _one_line_error(capsys, "WTH_2001.ZIP: WTH_2001.wtb in the archive is damaged")
    assert not target.exists()


def test_repeated_games_contradicted_scores_and_bad_theoretical_scores_are_counted(wthor_dir, tmp_path, games,
                                                                                  capsys):
    """Kept silently before: the same game twice in a file, a copy of a year's file under another name with
    its header year zeroed (a 0 is not checked against the name), a finished game whose recorded score
    its final board contradicts, a theoretical score over 64. The repeat and the contradicted game are
    skipped (the first copy kept, the one in a real year's file); the theoretical score, a field no
    position uses, is warned about and the game kept. Each is counted in the table; the same game in
    two real years' files is a replay and kept twice."""
    finished = [i for i, (_, board) in enumerate(games[:12]) if ref.game_over(board)]
    assert len(finished) >= 2
    path = wthor_dir / "WTH_2001.wtb"
    w = wtb.read_wtb(path)
    w.games[5] = w.games[0]  # the same game again in its file
    w.games["black_score"][finished[1]] ^= 2  # a finished game's score its board contradicts
    w.games["theoretical_score"][finished[0]] = 200
    wtb.write_wtb(path, w.games, 2001)
    w2 = wtb.read_wtb(wthor_dir / "WTH_2002.wtb")
    wtb.write_wtb(wthor_dir / "WTH_2000.wtb", w2.games[:3], 0)  # a copy, header year 0, read before 2002's
    extra = w2.games[3:4].copy()  # in two real years' files: kept in both
    wtb.write_wtb(wthor_dir / "WTH_2003.wtb", extra, 2003)
    out = tmp_path / "ds"
    assert build_cli(["--wthor-dir", str(wthor_dir), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    err = captured.err
    assert ("WTH_2001.wtb: game 5 (counted from 0): the same game (moves, players, tournament) as game 0 of "
            "WTH_2001.wtb; game skipped") in err
    for i in range(3):
        assert f"WTH_2000.wtb: game {i} (counted from 0): the same game (moves, players, tournament) as game {i} " \
               "of WTH_2002.wtb; game skipped" in err
    score = int(w.games["black_score"][finished[1]])
    assert (f"WTH_2001.wtb: game {finished[1]} (counted from 0): black score {score} contradicts the final board "
            f"(black {score ^ 2}, empties to the winner); game skipped") in err
    assert (f"WTH_2001.wtb: game {finished[0]} (counted from 0): theoretical score 200 is not 0..64; game kept "
            "(the field is not used)") in err
    assert "warning: WTH_2002.wtb" not in err and "warning: WTH_2003.wtb" not in err
    s = json.loads((out / "summary.json").read_text())
    assert {y: (v["skipped_games"], v["warned_games"]) for y, v in s["years"].items()} == {
        "2000": (3, 0), "2001": (2, 1), "2002": (0, 0), "2003": (0, 0)}
    assert (s["total"]["skipped_games"], s["total"]["warned_games"]) == (5, 1)
    assert s["warned"] == [{"file": "WTH_2001.wtb", "game": finished[0], "reason": "theoretical score 200 is not 0..64"}]
    table = captured.out.splitlines()
    assert table[0].split()[-2:] == ["warned,", "kept"]
    assert [line.split()[-2:] for line in table if line.startswith(("2001", "total"))] == [["2", "1"], ["5", "1"]]
    ds = dataset.WthorDataset(out)
    g = ds.games
    skipped = set(g.index[g["error"] != ""].tolist())
    assert skipped == {0, 1, 2, 3 + 5, 3 + finished[1]}  # the 2000 copy's three rows come first
    assert not np.isin(ds.positions["game"], sorted(skipped)).any()
    assert len(ds) == sum(int(m) for m in g["moves"]) == sum(len(m) for m, _ in games) + len(games[15][0]) - sum(
        len(games[i][0]) for i in (5, finished[1]))
