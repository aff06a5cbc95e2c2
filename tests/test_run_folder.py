"""A run folder's life cycle (othello_learn.run_folder), one home for the training run and the RL
loop: a new folder taken back, and what a run killed outright left half-written removed."""

import ast
from pathlib import Path

from othello_learn.run_folder import remove_killed_writes, take_back_new_run

REPO = Path(__file__).resolve().parents[1]
LOOP_SET_UP = ("config.json", "state.json", "best.pt", "nets/gen_0000.pt")


def _make(out: Path, *names: str) -> None:
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith("/"):
            (out / name).mkdir(exist_ok=True)
        else:
            (out / name).write_text("x")


def test_a_new_folder_holding_only_what_set_up_wrote_is_taken_back(tmp_path):
    out = tmp_path / "run"
    _make(out, "config.json", "state.json", "nets/gen_0000.pt")  # best.pt not written yet: missing is fine
    assert take_back_new_run(out, LOOP_SET_UP, ("stats", "games"))
    _make(out, "config.yaml", "checkpoints/")
    assert take_back_new_run(out, ("config.yaml", "wandb_id"), ("checkpoints",))
    out.mkdir()  # refused before any file: an empty folder, with nothing named
    assert take_back_new_run(out)
    assert list(tmp_path.iterdir()) == []
    assert not take_back_new_run(out)  # (none there)


def test_anything_more_in_the_folder_keeps_all_of_it(tmp_path):
    """A file set-up does not write is not ours, nor a lock (another run's, started into the
    same new folder at once), nor a checkpoint (training ran): all of it stays, ours too."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "theirs").write_text("x")
    for extra in (".lock", "mine.txt", "checkpoints/last.ckpt", "nets/gen_0001.pt"):
        out = tmp_path / extra.replace("/", "_")
        _make(out, "config.yaml", "nets/gen_0000.pt", "checkpoints/", extra)
        before = sorted(p.relative_to(out) for p in out.rglob("*"))
        assert not take_back_new_run(out, ("config.yaml", "nets/gen_0000.pt"), ("checkpoints",))
        assert sorted(p.relative_to(out) for p in out.rglob("*")) == before, extra
    out = tmp_path / "linked"
    _make(out, "config.yaml")
    (out / "checkpoints").symlink_to(other)  # a link where set-up makes a folder: not ours
    assert not take_back_new_run(out, ("config.yaml",), ("checkpoints",))
    assert (out / "config.yaml").exists() and (other / "theirs").exists()


def test_a_killed_runs_temporary_files_are_removed_and_named_and_no_others(tmp_path, capsys):
    out = tmp_path / "run"
    ours = [".model.pt.p123-0abc1234.k2j_x9aq.tmp", "checkpoints/.last.ckpt.p123-0abc1234.aaaaaaaa.tmp"]
    theirs = [".notes.txt.p123-0abc1234.k2j_x9aq.tmp", "checkpoints/.model.pt.p123-0abc1234.bbbbbbbb.tmp", "model.pt"]
    _make(out, *ours, *theirs)
    removed = remove_killed_writes(out, [(out, {"model.pt"}.__contains__),
                                         (out / "checkpoints", lambda name: name == "last.ckpt")])
    assert sorted(removed) == sorted(out / name for name in ours)
    assert all((out / name).exists() for name in theirs)
    err = capsys.readouterr().err
    assert err == (f"{out}: removed 2 temporary file(s) a killed run left half-written "
                   f"({', '.join(str(p.relative_to(out)) for p in removed)})\n")
    assert remove_killed_writes(out, [(out, {"model.pt"}.__contains__)]) == []
    assert capsys.readouterr().err == ""  # nothing removed, nothing said


def test_the_training_and_the_loop_share_the_one_life_cycle():
    """Taking back a new folder and removing a killed run's writes were written twice, once in
    train.py and once in the loop: only the shared module removes stale temporary files now."""
    callers = set()
    for path in (REPO / "othello_learn").rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        if "remove_stale_temps" in names:
            callers.add(path.relative_to(REPO).as_posix())
        if path.name in ("train.py", "records.py", "loop.py") and path.parent.name in ("train", "rl"):
            assert not [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "rmdir"], path
    assert callers == {"othello_learn/run_folder.py"}
