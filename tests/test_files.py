"""Atomic writes and one-line command errors (othello_learn.files)."""

import errno
import signal
import time
import os
from pathlib import Path
import stat

import pytest

from othello_learn.cli import STOP_SIGNALS, HangUp, StopOnce, Terminated, run_main, stop_signals_raise
from othello_learn.files import UserError, atomic_path, atomic_write


def test_atomic_write_replaces_whole_files_with_a_plain_mode(tmp_path):
    target = tmp_path / "sub" / "out.json"
    atomic_write(target, "one")
    atomic_write(target, b"two")
    assert target.read_text() == "two"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(OSError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp))
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_stop_as_the_temporary_file_is_set_up_leaves_no_temp(tmp_path, monkeypatch):
    """A SIGTERM or Ctrl-C landing between mkstemp and the block (its chmod) left the temporary
    file behind: it was outside the try that removes it."""
    def stopped(*args):
        raise Terminated

    monkeypatch.setattr(os, "chmod", stopped)
    with pytest.raises(Terminated):
        atomic_write(tmp_path / "out.json", "{}")
    assert list(tmp_path.iterdir()) == []


def test_run_main_turns_errors_into_one_line(capsys):
    def bad_input(argv):
        raise UserError("games.wtb: game 3, ply 7: illegal move")

    def full_disk(argv):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/out.npy")

    def interrupted(argv):
        raise KeyboardInterrupt

    assert run_main(bad_input, []) == 2
    assert capsys.readouterr().err.strip().endswith("error: games.wtb: game 3, ply 7: illegal move")
    assert run_main(full_disk, []) == 2
    err = capsys.readouterr().err
    assert "no space left on device (/data/out.npy)" in err and err.count("\n") == 1
    assert run_main(interrupted, []) == 130
    assert run_main(lambda argv: argv.count("x"), ["x", "--debug"]) == 1  # --debug is taken out of argv
    with pytest.raises(UserError):
        run_main(bad_input, ["--debug"])


def test_a_stop_message_starts_its_own_line_after_a_progress_bar(capsys):
    import sys

    from tqdm.auto import trange

    def stopped_in_a_loop(argv):
        for i in trange(10, file=sys.stderr, leave=False, mininterval=0):
            if i == 3:
                raise KeyboardInterrupt

    assert run_main(stopped_in_a_loop, []) == 130
    err = capsys.readouterr().err
    last = err.split("\n")[-2]
    assert "it/s]" in err and last.endswith(": interrupted") and "\r" not in last and "it/s]" not in last


def test_check_output_refuses_what_cannot_be_written_and_accepts_new_folders(tmp_path):
    from othello_learn.files import check_output

    (tmp_path / "a_file").write_text("x")
    check_output(tmp_path / "new" / "deeper" / "out.json", "--json")  # missing folders: writing makes them
    check_output(tmp_path / "new_run", "--out", folder=True)
    with pytest.raises(UserError, match=r"^--json .*: is a folder; give a file name$"):
        check_output(tmp_path, "--json")
    with pytest.raises(UserError, match=r"^--out .*a_file: is a file; give a folder$"):
        check_output(tmp_path / "a_file", "--out", folder=True)
    with pytest.raises(UserError, match=r"^--json .*a_file/x/y\.json: .*a_file is a file, not a folder$"):
        check_output(tmp_path / "a_file" / "x" / "y.json", "--json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"], "a check writes nothing"


@pytest.mark.parametrize("low,kind,above,good,bad", [
    (1, int, False, ["1", "7"], ["0", "-3", "1.5", "x"]),
    (-1, int, False, ["-1", "0"], ["-2"]),
    (0, float, True, ["0.5", "1e-3"], ["0", "-1", "nan", "x"]),
])
def test_at_least_bounds_and_refuses_nan(low, kind, above, good, bad):
    import argparse

    from othello_learn.settings import at_least

    parse = at_least(low, kind, above=above)
    for text in good:
        assert parse(text) == kind(text)
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


def test_a_full_disk_names_the_target_file(tmp_path, capsys):
    """write() gives ENOSPC without a file name, and numpy's np.save a short write without an
    errno: either way the one line names the file that was not written and says why."""
    import numpy as np

    from othello_learn.files import describe_os_error

    target = tmp_path / "games.npz"
    with pytest.raises(OSError) as raised:
        with atomic_path(target):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert raised.value.filename == str(target) and raised.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError) as raised:  # an input's error keeps its own file name
        with atomic_path(target):
            np.load(tmp_path / "missing.npy")
    assert raised.value.filename == str(tmp_path / "missing.npy")
    short = OSError("120466 requested and 10962 written")
    assert "disk is probably full" in describe_os_error(short)
    assert describe_os_error(OSError(None, str(short), "/d/positions.npy")).startswith(
        "could not write the whole file (/d/positions.npy)")
    with pytest.raises(FileNotFoundError) as raised:  # `--a policy:`: a path left empty is said to be
        open("")
    assert describe_os_error(raised.value) == "no such file or folder (an empty name)"
    said = "/d is not a dataset folder (no summary.json)"  # a message of ours, raised as FileNotFoundError
    assert describe_os_error(FileNotFoundError(said)) == said


@pytest.mark.skipif(os.name != "posix", reason="the dead-writer probe is os.kill(pid, 0)")
def test_a_dead_writers_temporary_copy_is_removed_when_its_target_is_written_again(tmp_path):
    """kill -9 mid-write leaves atomic_path's temporary file, and the commands that write one
    file (--json, a download) hold no lock to sweep their folder under: the next write of the
    same target removes its copies whose writer is gone, and nothing else."""
    import subprocess
    import sys
    import time

    from othello_learn.files import _TEMP_NAME, _host

    target = tmp_path / "r.json"
    with atomic_path(target) as tmp:  # today's temporary names carry the writer's pid and host
        m = _TEMP_NAME.fullmatch(tmp.name)
        assert m and (m["name"], int(m["pid"]), m["host"]) == ("r.json", os.getpid(), _host())
        tmp.write_text("{}")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    other_host = "00000000" if _host() != "00000000" else "11111111"
    old = time.time() - 3600
    stale = tmp_path / f".r.json.p{dead}-{_host()}.abcdefgh.tmp"
    kept = [tmp_path / f".r.json.p{os.getppid()}-{_host()}.abcdefgh.tmp",  # its writer lives
            tmp_path / f".r.json.p{dead}-{other_host}.abcdefgh.tmp",     # another machine's (a shared disk)
            tmp_path / f".other.json.p{dead}-{_host()}.abcdefgh.tmp",    # another target's
            tmp_path / ".r.json.abcdefgh.tmp",                            # no writer named
            tmp_path / f".r.json.p{dead}-{_host()}.ijklmnop.tmp"]         # changed within the minute
    for p in [stale] + kept:
        p.write_text("half")
        os.utime(p, (old, old) if p != kept[-1] else None)
    atomic_write(target, "{1}")
    assert target.read_text() == "{1}" and not stale.exists() and all(p.exists() for p in kept)


def test_a_long_name_or_a_stray_temp_name_does_not_stop_a_write(tmp_path):
    """A name the file system takes is written: its temporary name, which adds a tag and a
    suffix, is cut to 255 bytes (a 250-character one was refused as too long). Cut, it is
    still that target's alone, and a dead writer's is swept as a short name's is. A stray
    file whose pid does not fit an int is not ours and is left, and the write goes on."""
    import subprocess
    import sys

    from othello_learn.files import _TEMP_NAME, _host, temp_target

    stray = tmp_path / f".out.json.p99999999999-{_host()}.abcdefgh.tmp"
    stray.write_text("x")
    os.utime(stray, (0, 0))
    atomic_write(tmp_path / "out.json", "{}")
    assert (tmp_path / "out.json").read_text() == "{}" and stray.exists()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stems = set()
    for name in ("x" * 235, "y" * 250, "é" * 127, "y" * 249 + "z"):  # the last two: one start, two targets
        long = tmp_path / name
        with atomic_path(long) as tmp:
            assert len(os.fsencode(tmp.name)) <= 255 and _TEMP_NAME.fullmatch(tmp.name)["pid"] == str(os.getpid())
            stem = temp_target(tmp.name)
            stems.add(stem)
            tmp.write_text("1")
        assert long.read_text() == "1"
        stale = tmp_path / f".{stem}.p{dead}-{_host()}.abcdefgh.tmp"
        stale.write_text("half")
        os.utime(stale, (0, 0))
        atomic_write(long, "2")
        assert long.read_text() == "2" and not stale.exists()
    assert len(stems) == 4 and sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [stray.name]


@pytest.mark.skipif(os.name != "posix" or os.fsencode("\udce9") != b"\xe9",
                    reason="names of bytes that are not UTF-8, as Python decodes them on POSIX")
def test_a_file_name_that_is_not_utf8_is_written(tmp_path):
    """A name the OS takes but that is not UTF-8 (``--json $'r\\xe9s.json'``, a Latin-1 name)
    failed the write, after the work, with a traceback: its length was measured by str.encode;
    such a name in the text written (a player spec in arena's games CSV) failed the same way."""
    target = tmp_path / os.fsdecode(b"r\xe9s.json")
    atomic_write(target, "{}")
    assert os.listdir(os.fsencode(tmp_path)) == [b"r\xe9s.json"] and target.read_text() == "{}"
    atomic_write(target, "policy:" + os.fsdecode(b"n\xe9t.pt") + "\n")  # such a name in the text (arena's CSV)
    assert target.read_bytes() == b"policy:n\xe9t.pt\n"


def test_run_main_exit_codes_and_os_error_lines(capsys, monkeypatch):
    """Each stop has its own status (SIGTERM 143, SIGHUP 129, a reader gone 141) and each
    OS error its own words: a folder given for a file, a permission refused."""
    import othello_learn.cli as cli
    import othello_learn.files as files

    def raising(exc):
        def main(argv):
            raise exc
        return main

    assert run_main(raising(cli.Terminated()), []) == 143
    assert capsys.readouterr().err.strip().endswith(": terminated")
    assert run_main(raising(cli.HangUp()), []) == 129
    assert capsys.readouterr().err.strip().endswith(": hung up")
    monkeypatch.setattr(cli, "_stdout_gone", lambda: True)
    assert run_main(raising(BrokenPipeError(errno.EPIPE, "Broken pipe")), []) == 141
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(cli, "_stdout_gone", lambda: False)  # a pipe of ours other than stdout: an error
    assert run_main(raising(BrokenPipeError(errno.EPIPE, "Broken pipe")), []) == 2
    assert files.describe_os_error(IsADirectoryError(errno.EISDIR, "Is a directory", "/d")) == \
        "expected a file, found a folder (/d)"
    assert files.describe_os_error(PermissionError(errno.EACCES, "Permission denied", "/p")) == \
        "permission denied (/p)"


def test_a_write_error_naming_the_temporary_file_names_the_target(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(OSError) as raised:
        with atomic_path(target) as tmp:
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp))
    assert raised.value.filename == str(target) and raised.value.errno == errno.ENOSPC


def test_process_exists_refuses_numbers_that_are_no_process():
    from othello_learn.files import process_exists

    assert process_exists(os.getpid())
    assert not process_exists(0)  # os.kill(0, 0) would probe our own group, and succeed
    assert not process_exists(-1)
    assert not process_exists(2**80)


def test_check_output_refuses_a_folder_this_user_cannot_write(tmp_path, monkeypatch):
    """Root may write anywhere, so the refusal is shown with os.access saying no."""
    from othello_learn.files import check_output

    monkeypatch.setattr(os, "access", lambda p, mode: False)
    with pytest.raises(UserError, match=r"^--json .*out\.json: cannot write in .* \(permission denied\)$"):
        check_output(tmp_path / "new" / "out.json", "--json")
    # an existing run folder (train --out, loop --out) is written in itself, its parent aside
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != run)
    with pytest.raises(UserError, match=r"^--out .*run: cannot write in .*run \(permission denied\)$"):
        check_output(run, "--out", folder=True)
    check_output(tmp_path / "other", "--out", folder=True)  # a new one is made in tmp_path, which may be written


def test_a_hang_up_that_nohup_ignores_stays_ignored():
    """Under ``nohup`` a closed terminal must not stop a long run: the command leaves an ignored
    SIGHUP alone, and takes it where it is not ignored."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_signals_raise(STOP_SIGNALS):
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: the block runs on
            assert isinstance(signal.getsignal(signal.SIGTERM), StopOnce)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        with pytest.raises(HangUp):
            with stop_signals_raise(STOP_SIGNALS):
                _signal_self_and_wait(signal.SIGHUP)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, previous)


def _signal_self_and_wait(sig=signal.SIGTERM):
    os.kill(os.getpid(), sig)
    for _ in range(100):  # the handler runs in this (the main) thread at the next check
        time.sleep(0.002)


def test_a_stop_swallowed_on_its_way_out_is_raised_again_when_the_block_ends():
    """A SIGTERM that landed in numpy.random's first import (a Cython module's init catches
    everything) was lost: the engine session served on and exited 0 at end of input."""
    before = signal.getsignal(signal.SIGTERM)
    finished = []
    with pytest.raises(Terminated):
        with stop_signals_raise((signal.SIGTERM,)):
            try:
                _signal_self_and_wait()
            except BaseException:  # what such code does
                pass
            _signal_self_and_wait()  # a second one is still ignored: the first is being handled
            finished.append(True)
    assert finished and signal.getsignal(signal.SIGTERM) is before


def test_a_session_ends_at_its_next_read_after_a_swallowed_stop():
    """Raised again only at the block's end, a swallowed SIGTERM left an engine session serving
    until its input ended, every later SIGTERM ignored: the session checks before each read."""
    from othello_learn.frontends.session import serve_lines

    handled = []

    class Engine:
        def handle(self, line):
            handled.append(line)
            if line == "first\n":
                try:
                    _signal_self_and_wait()  # lands where code catches everything
                except BaseException:
                    pass
            return True

    with pytest.raises(Terminated):
        with stop_signals_raise((signal.SIGTERM,)) as stop:
            serve_lines(Engine(), ["first\n", "second\n", "third\n"], stop=stop)
    assert handled == ["first\n"]
    stop = StopOnce()
    stop.raised, stop.caught = Terminated, True
    stop.check()  # caught and reported by the block: not raised again


def test_a_stop_the_block_caught_and_reported_is_not_raised_again():
    with stop_signals_raise((signal.SIGTERM,)) as stop:
        try:
            _signal_self_and_wait()
        except Terminated:
            stop.caught = True
    with stop_signals_raise((signal.SIGTERM,)) as stop:  # and a block without a signal ends quietly
        pass
    assert stop.raised is None


def test_write_json_writes_indented_json_ending_in_a_newline_atomically(tmp_path):
    """Every --json and run record is the same text: two-space indents (a person reads them, a
    diff of two runs lines up) and a final newline (cat, tail and line tools), written whole."""
    from othello_learn.files import write_json

    path = tmp_path / "out.json"
    path.write_text("old")
    obj = {"a": [1, 2.5], "b": {"c": None, "d": "é"}}
    write_json(path, obj)
    assert path.read_text() == '{\n  "a": [\n    1,\n    2.5\n  ],\n  "b": {\n    "c": null,\n    "d": "\\u00e9"\n  }\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temporary file left


def test_engine_main_hands_its_stop_to_the_session():
    from othello_learn.frontends.session import engine_main

    seen = {}

    def serve(player, name, seed=0, stop=None):
        seen.update(stop=stop, seed=seed)
        return 0

    assert engine_main(["--player", "random", "--seed", "5"], "An engine.\n\nEpilog.", serve, "name") == 0
    assert isinstance(seen["stop"], StopOnce) and seen["seed"] == 5


@pytest.mark.parametrize("module", ["gtp", "nboard"])
def test_a_session_given_a_swallowed_stop_ends_before_reading(module):
    import importlib
    import io

    from othello_learn.players.base import AlphaBetaPlayer

    serve = importlib.import_module(f"othello_learn.frontends.{module}").serve
    stop = StopOnce()
    stop.raised = Terminated  # a SIGTERM something swallowed
    out = io.StringIO()
    with pytest.raises(Terminated):
        serve(AlphaBetaPlayer(1), "test", io.StringIO("name\nping 1\nquit\n"), out, io.StringIO(), stop=stop)
    assert out.getvalue() == ""



def test_at_least_with_a_ceiling_allows_the_ceiling_itself():
    import argparse

    from othello_learn.settings import at_least

    parse = at_least(1, most=1000)
    assert parse("1000") == 1000 and parse("1") == 1
    with pytest.raises(argparse.ArgumentTypeError, match="^must be at most 1000, got 1001$"):
        parse("1001")


def test_an_empty_path_argument_is_refused_in_groups_too(capsys):
    """Path("") is the current folder: --out "" trained into the checkout, --json "" failed late."""
    import argparse

    from othello_learn.cli import ArgumentParser

    parser = ArgumentParser(prog="cmd")
    parser.add_argument("--out", type=Path)
    parser.add_mutually_exclusive_group().add_argument("--json", type=Path)
    parser.add_argument_group("more").add_argument("run", type=Path, nargs="?")
    assert parser.parse_args(["--out", "a", "--json", "b.json", "r"]) == argparse.Namespace(
        out=Path("a"), json=Path("b.json"), run=Path("r"))
    for argv in (["--out", ""], ["--json="], [""]):
        with pytest.raises(SystemExit) as e:
            parser.parse_args(argv)
        assert e.value.code == 2 and "an empty path; give a file or folder name" in capsys.readouterr().err


def test_a_session_given_no_lines_reads_none_not_standard_input(monkeypatch):
    """``inp or sys.stdin``: an empty list of lines read the real standard input instead."""
    from othello_learn.frontends.session import serve_lines

    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.StringIO("quit\n"))
    handled = []

    class Engine:
        def handle(self, line):
            handled.append(line)
            return True

    assert serve_lines(Engine(), []) == 0 and handled == []


def test_a_symbolic_link_loop_is_named_as_one_not_as_file_exists(tmp_path):
    """A link that leads back to itself is missing to exists(), and making a folder through it
    fails with EEXIST: the error said "File exists" after the work. Now the checks name the loop
    before any work, and an OS error met through one says what it is."""
    from othello_learn.files import check_input, check_output, describe_os_error, write_json

    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    loop = tmp_path / "loop"
    with pytest.raises(UserError, match=r"^--out .*loop: it is a symbolic link loop; give another path$"):
        check_output(loop, "--out", folder=True)
    with pytest.raises(UserError, match=rf"^--json .*loop/x\.json: {loop} is a symbolic link loop; give another"):
        check_output(loop / "x.json", "--json")
    with pytest.raises(UserError, match=r"^--data .*a: it is a symbolic link loop"):
        check_input(tmp_path / "a", "--data", folder=True)
    with pytest.raises(UserError, match=rf"^--model .*a/m\.pt: {tmp_path / 'a'} is a symbolic link loop"):
        check_input(tmp_path / "a" / "m.pt", "--model")
    with pytest.raises(OSError) as raised:  # a write past the checks: the one line names the loop
        write_json(loop / "x.json", {})
    assert describe_os_error(raised.value) == f"symbolic link loop ({loop}): a link on this path leads back to itself"
    with pytest.raises(OSError) as raised:
        open(loop)
    assert describe_os_error(raised.value).startswith(f"symbolic link loop ({loop})")
    assert describe_os_error(FileExistsError(errno.EEXIST, "File exists", str(tmp_path))) == f"File exists ({tmp_path})"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "loop"], "nothing written"
