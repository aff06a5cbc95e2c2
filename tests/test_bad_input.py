"""Bad settings that users type, refused by the commands in one line (exit 2) before any
work: output paths that cannot be written, seeds the generators cannot take, a human where no one can
answer, a device this machine lacks, a plot format matplotlib cannot write."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from othello_learn.cli import run_main
from othello_learn.files import UserError
from othello_learn.models.fastpath import usable_device

REPO = Path(__file__).resolve().parents[1]


def _run(main, argv, capsys):
    capsys.readouterr()
    try:
        code = run_main(main, argv)
    except SystemExit as e:  # argparse's own refusal of a value its ``type`` rejects
        code = e.code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return code, err


def _command(name):
    import importlib

    return importlib.import_module(f"othello_learn.{name}").main


@pytest.fixture
def under_a_file(tmp_path):
    """An output path whose folder is a file: writing there must fail, so the check must come first."""
    (tmp_path / "notes.txt").write_text("mine\n")
    return tmp_path / "notes.txt" / "out"


@pytest.mark.parametrize("command,argv,flag", [
    # a player spec that would fail if it were reached: the output path is refused before it
    ("players.arena", ["--a", "policy:/no/such.pt", "--b", "random", "--json", "{out}.json"], "--json"),
    ("players.arena", ["--a", "policy:/no/such.pt", "--b", "random", "--games-out", "{out}.csv"], "--games-out"),
    ("frontends.solve_obf", ["/no/such.obf", "--player", "random", "--json", "{out}.json"], "--json"),
    ("frontends.terminal", ["--opponent", "policy:/no/such.pt", "--save", "{out}.ggf"], "--save"),
    ("evaluation.evaluate", ["--checkpoint", "/no/such.pt", "--json", "{out}.json"], "--json"),
    ("evaluation.evaluate", ["--checkpoint", "/no/such.pt", "--plot", "{out}.png"], "--plot"),
    ("evaluation.curves", ["/no/such/run", "--out", "{out}.png"], "--out"),
    ("train.train", ["--out", "{out}", "--logger", "none"], "--out"),
    ("data.wthor", ["--wthor-dir", "/no/such", "--out", "{out}", "--quiet"], "--out"),
])
def test_an_output_under_a_file_is_refused_first(command, argv, flag, under_a_file, capsys):
    argv = [a.replace("{out}", str(under_a_file)) for a in argv]
    code, err = _run(_command(command), argv, capsys)
    assert code == 2 and flag in err and "is a file, not a folder" in err
    assert under_a_file.parent.read_text() == "mine\n"


@pytest.mark.parametrize("suffix,problem", [(".txt", "cannot write .txt"), ("", "no extension")])
def test_a_plot_name_matplotlib_cannot_write_is_refused_first(tmp_path, capsys, suffix, problem):
    out = tmp_path / f"plot{suffix}"
    code, err = _run(_command("evaluation.evaluate"), ["--checkpoint", "/no/such.pt", "--plot", str(out)], capsys)
    assert code == 2 and "--plot" in err and problem in err and ".png" in err
    code, err = _run(_command("evaluation.curves"), ["/no/such/run", "--out", str(out)], capsys)
    assert code == 2 and "--out" in err and problem in err
    assert not out.exists()


@pytest.mark.parametrize("command,argv", [
    ("frontends.terminal", []), ("frontends.nboard", ["--player", "random"]),
    ("frontends.solve_obf", ["/no/such.obf", "--player", "random"]), ("players.arena", ["--a", "random", "--b", "random"]),
])
@pytest.mark.parametrize("seed,problem", [("-1", "must be at least 0, got -1"),
                                          ("18446744073709551616", "must be below 2**64, got 18446744073709551616")])
def test_a_seed_the_generators_cannot_take_is_refused(command, argv, seed, problem, capsys):
    code, err = _run(_command(command), argv + ["--seed", seed], capsys)
    assert code == 2 and f"--seed: {problem}" in err


@pytest.mark.parametrize("command,argv", [
    ("frontends.nboard", ["--player", "human"]), ("frontends.solve_obf", ["/no/such.obf", "--player", "human"]),
    ("frontends.nboard", ["--player", "endgame:4:human"]),  # interactive however wrapped
    ("frontends.terminal", ["--opponent", "endgame:4:human"]),  # it would read your own moves, and end in a traceback
])
def test_a_human_is_refused_where_no_one_can_answer(command, argv, tmp_path, capsys):
    if command == "frontends.solve_obf":
        obf = tmp_path / "p.obf"
        obf.write_text("-" * 27 + "XO------OX" + "-" * 27 + " X;\n")
        argv = [str(obf)] + argv[1:]
    code, err = _run(_command(command), argv, capsys)
    assert code == 2 and "human'" in err and "a human cannot play " in err and "Traceback" not in err


def test_where_no_one_can_answer_an_unknown_kind_lists_only_programs():
    from othello_learn.players.specs import PlayerSpecError, make_player, make_program

    with pytest.raises(PlayerSpecError, match="known kinds are alphabeta, ") as e:
        make_program("nosuch")
    assert "human" not in str(e.value) and "gumbel, " in str(e.value)
    with pytest.raises(PlayerSpecError, match="known kinds are alphabeta, .*, human, "):
        make_player("nosuch")


def test_a_device_this_machine_lacks_is_one_line_naming_the_flag():
    assert usable_device("cpu") == torch.device("cpu")
    with pytest.raises(UserError, match=r"^--device nosuch: not usable on this machine \(.+\)$"):
        usable_device("nosuch")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match=r"^--device cuda: not usable on this machine"):
            usable_device("cuda")
    with pytest.raises(UserError, match=r"^--device meta: holds no data \(torch's meta device\); give cpu or cuda$"):
        usable_device("meta")  # torch makes tensors there, of shapes only: evaluate ended in a traceback


def test_evaluate_refuses_a_missing_device_before_loading(capsys):
    code, err = _run(_command("evaluation.evaluate"), ["--checkpoint", "/no/such.pt", "--device", "nosuch"], capsys)
    assert code == 2 and "--device nosuch" in err


def test_an_obf_file_without_positions_is_an_error_not_an_empty_answer(tmp_path, capsys):
    obf = tmp_path / "empty.obf"
    obf.write_text("\n")
    code, err = _run(_command("frontends.solve_obf"), [str(obf), "--player", "random"], capsys)
    assert code == 2 and f"{obf}: no positions" in err


def test_a_checkpoint_cut_anywhere_is_named_as_truncated(tmp_path, capsys):
    """A copy cut short (a full disk, a killed download): torch reports some cuts as a bare
    EINVAL with no file name; every cut must read as one line naming the file."""
    from othello_learn.models.nets import NetConfig, build_network, save_network

    whole = tmp_path / "whole.pt"
    save_network(build_network(NetConfig(depth=2, width=8)), whole)
    data = whole.read_bytes()
    for cut in (1, 100, 1000, 5000, len(data) // 2, len(data) - 10):
        path = tmp_path / f"cut{cut}.pt"
        path.write_bytes(data[:cut])
        code, err = _run(_command("players.arena"), ["--a", f"policy:{path}", "--b", "random", "--games", "2"],
                         capsys)
        assert code == 2 and str(path) in err and ("truncated" in err or "not a checkpoint" in err), err


@pytest.mark.parametrize("command,argv,needle", [
    ("train.train", ["--seed", "-1"], "--seed: must be at least 0, got -1"),
    ("train.train", ["--seed", "4294967296"], "--seed: must be below 2**32, got 4294967296"),  # Lightning's seed_everything
    ("train.train", ["--max-steps", "-3"], "--max-steps: must be at least -1"),
    ("evaluation.evaluate", ["--limit", "0"], "--limit"),
    ("data.wthor", ["--years", "abc"], "bad year range 'abc'"),
    ("players.arena", ["--a", "random"], "--b"),
])
def test_argument_errors_are_one_line_not_the_usage_block(command, argv, needle, tmp_path, capsys):
    """argparse's own errors print the usage block first; ours say only what was wrong."""
    with pytest.raises(SystemExit) as exit_:
        run_main(_command(command), argv + (["--out", str(tmp_path / "o")] if command == "train.train" else []))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and needle in err and err.count("\n") == 1 and "usage" not in err, err
    assert not (tmp_path / "o").exists()


def test_an_output_that_is_an_input_or_another_output_is_refused_first(tmp_path, capsys):
    """The second write would replace the first, or the answers would replace the positions."""
    obf = tmp_path / "p.obf"
    obf.write_text("---------------------------OX------XO--------------------------- X;\n")
    before = obf.read_bytes()
    code, err = _run(_command("frontends.solve_obf"), [str(obf), "--player", "random", "--json", str(obf)], capsys)
    assert code == 2 and "p.obf: expected a .json file name" in err and obf.read_bytes() == before
    out = tmp_path / "x.json"
    code, err = _run(_command("evaluation.evaluate"), ["--checkpoint", "checkpoints/best_raw.pt", "--json", str(out),
                                                  "--plot", str(out.with_suffix(".png")), "--export", str(out)], capsys)
    assert code == 2 and "--export" in err and "expected a .pt or .pth file name" in err and not out.exists()


def test_an_output_of_another_kind_is_refused_untouched(tmp_path, capsys):
    """A slip of the shell (--json train.py, --export of a file of another kind) replaced it."""
    source = tmp_path / "victim.py"
    source.write_text("print('mine')\n")
    for command, argv in (("evaluation.evaluate", ["--checkpoint", "checkpoints/best_raw.pt", "--json", str(source)]),
                          ("evaluation.evaluate", ["--checkpoint", "checkpoints/best_raw.pt", "--export", str(source)]),
                          ("players.arena", ["--a", "random", "--b", "random", "--json", str(source)]),
                          ("players.arena", ["--a", "random", "--b", "random", "--games-out", str(source)]),
                          ("frontends.solve_obf", [str(source), "--player", "random", "--json", str(source)])):
        code, err = _run(_command(command), argv, capsys)
        assert code == 2 and "victim.py: expected a ." in err and len(err.strip().splitlines()) == 1, (command, err)
    assert source.read_text() == "print('mine')\n"


def test_a_folder_given_as_the_loops_init_is_named_as_a_folder(tmp_path, capsys):
    code, err = _run(_command("rl.loop"), ["--init", str(tmp_path), "--out", str(tmp_path / "rl")], capsys)
    assert code == 2 and f"--init {tmp_path}: a folder, not a checkpoint file" in err  # "no such file" before
    assert not (tmp_path / "rl").exists()


def test_a_closed_standard_input_is_one_line_and_exit_2(tmp_path):
    """``<&-`` (Python's sys.stdin is None) was a traceback at the first read; a game played so far is
    still saved. One process, started by the shell with its input closed, runs the four commands."""
    game = tmp_path / "g.ggf"
    script = (
        "from othello_learn.cli import run_main\n"
        "from othello_learn.frontends import gtp, nboard, terminal\n"
        "from othello_learn.players import arena\n"
        f"for main, argv in ((nboard.main, ['--player', 'random']), (gtp.main, ['--player', 'random']),\n"
        f"                   (terminal.main, ['--opponent', 'greedy', '--colour', 'white', '--save', {str(game)!r}]),\n"
        "                   (arena.main, ['--a', 'human', '--b', 'random', '--games', '1', '--quiet'])):\n"
        "    print('status', run_main(main, argv), flush=True)\n")
    proc = subprocess.run(["sh", "-c", 'exec "$0" -c "$1" <&-', sys.executable, script], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert [line for line in proc.stdout.splitlines() if line.startswith("status")] == ["status 2"] * 4, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 4 and all("standard input is closed" in line for line in lines), proc.stderr
    assert "the session's commands" in lines[0] and "your moves" in lines[2] and lines[3].startswith("-c: error: --a:")
    assert "B[" in game.read_text()  # greedy's first move, kept


DEEP = "[" * 1000 + "]" * 1000  # a RecursionError in the parsers, and a traceback, before


def test_deeply_nested_settings_and_run_records_are_one_line_naming_them(tmp_path, capsys):
    import json

    from othello_learn.rl import records as rl_records

    config = tmp_path / "deep.yaml"
    config.write_text(f"model: {DEEP}\n")
    nested = "lists or mappings nested more than 100 levels deep"
    for argv, named in ((["--config", str(config)], f"{config}: {nested}"),
                        (["--set", f"model.width={DEEP}"], f"--set model.width: {nested}")):
        code, err = _run(_command("train.train"), argv + ["--out", str(tmp_path / "run"), "--logger", "none"], capsys)
        assert code == 2 and named in err, err
    out = tmp_path / "rl"
    out.mkdir()
    (out / "config.json").write_text(DEEP)
    code, err = _run(_command("rl.loop"), ["--init", "random", "--out", str(out)], capsys)
    assert code == 2 and f"{out / 'config.json'}: {nested}" in err, err
    state = {"generation": 0, "best": "nets/gen_0000.pt", "trainee": "nets/gen_0000.pt", "elo_best": 0.0,
             "history": [], "wandb_id": "x", "resign_threshold": None}
    (out / "state.json").write_text(json.dumps(state)[:-1] + f', "notes": {DEEP}}}')
    with pytest.raises(UserError, match=f"state.json: {nested}"):
        rl_records.read_state(out / "state.json")
    assert not (tmp_path / "run").exists()
