"""The shell commands of README.md's code blocks still parse: each script exists, its
parser takes every flag and value, the player specs build, and the shipped files they
name exist. Only the parsers run (and the players are built, from the shipped
checkpoints): no dataset is read, no game played, nothing trained."""

import argparse
import ast
import importlib
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHIPPED = re.compile(r"^(?:checkpoints|train/configs|results)/")
# the flags that take a player spec, by command module
SPEC_FLAGS = {"othello_learn.players.arena": ("a", "b"), "othello_learn.frontends.terminal": ("opponent",),
              "othello_learn.frontends.nboard": ("player",), "othello_learn.frontends.solve_obf": ("player",),
              "othello_learn.frontends.gtp": ("player",),
              "othello_learn.rl.loop": ("eval_vs",)}
RUN_OUTPUT_NET = "checkpoints/best_selfplay.pt"  # stands in for a net a documented run makes (runs/...)


def readme_commands() -> list[tuple[int, list[str]]]:
    """(line, argv) of every ``python SCRIPT ...`` in README.md's bash blocks."""
    commands, block, start = [], None, 0
    for number, line in enumerate((REPO / "README.md").read_text().splitlines(), 1):
        if line.strip().startswith("```"):
            if block is None and line.strip() == "```bash":
                block = []
            elif block is not None:
                text = "\n".join(block).replace("\\\n", " ")
                for offset, logical in enumerate(text.split("\n")):
                    lex = shlex.shlex(logical, posix=True, punctuation_chars=";&|")
                    lex.whitespace_split, lex.commenters = True, "#"
                    argv = []
                    for token in list(lex) + [";"]:
                        if set(token) <= set(";&|"):
                            while argv and re.fullmatch(r"\w+=\S*", argv[0]):  # OMP_NUM_THREADS=1 python ...
                                argv.pop(0)
                            if argv[:1] == ["python"] and not argv[1].startswith("-"):  # not python -m pytest
                                commands.append((start + offset, argv))
                            argv = []
                        else:
                            argv.append(token)
                block = None
            start = number + 1
            continue
        if block is not None:
            block.append(line)
    return commands


COMMANDS = readme_commands()


def test_the_readme_has_commands_to_check():
    scripts = {argv[1] for _, argv in COMMANDS}
    assert {"data_tools/wthor.py", "train/train.py", "selfplay/loop.py", "selfplay/arena.py"} <= scripts
    assert len(COMMANDS) >= 15


class _Parsed(Exception):
    pass


def _parse(module, argv, monkeypatch) -> argparse.Namespace:
    """What the command's parser makes of argv; the command stops there."""
    def capture(self, args=None, namespace=None):
        raise _Parsed(original(self, args, namespace))

    original = argparse.ArgumentParser.parse_args
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    with pytest.raises(_Parsed) as parsed:
        importlib.import_module(module).main(argv)
    return parsed.value.args[0]


def _stand_in(spec: str) -> str:
    """The spec with a checkpoint that only a documented run makes replaced by a shipped one."""
    return ":".join(RUN_OUTPUT_NET if p.endswith(".pt") and not SHIPPED.match(p) else p for p in spec.split(":"))


@pytest.mark.parametrize("line, argv", COMMANDS, ids=[f"README.md:{n}" for n, _ in COMMANDS])
def test_a_readme_command_parses(line, argv, monkeypatch, capsys):
    script = REPO / argv[1]
    assert script.is_file(), f"README.md:{line}: no script {argv[1]}"
    # the script path is a wrapper of its command module: ``start("MODULE")``
    module = next(n.args[0].value for n in ast.walk(ast.parse(script.read_text()))
                  if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "start")
    try:
        args = _parse(module, argv[2:], monkeypatch)
    except SystemExit:
        pytest.fail(f"README.md:{line}: {shlex.join(argv)}: {capsys.readouterr().err.strip()}")
    monkeypatch.undo()
    for token in argv[2:]:
        for piece in re.split(r"[:=]", token):
            if SHIPPED.match(piece):
                assert (REPO / piece).exists(), f"README.md:{line}: {piece} is not in the repository"
    if module == "othello_learn.train.train":  # the --set overrides name known settings (the configs
        from othello_learn.train.config import SCHEMA  # themselves are checked in test_commands.py)

        for item in args.set:
            section, _, key = item.split("=", 1)[0].partition(".")
            assert section == "trainer" or key in SCHEMA.get(section, {}), f"README.md:{line}: --set {item}"
    from othello_learn.players.specs import make_player

    monkeypatch.chdir(REPO)  # the specs name checkpoints from the checkout's root, as the README runs them
    for flag in SPEC_FLAGS.get(module, ()):
        spec = getattr(args, flag)
        if spec:
            player = make_player(_stand_in(spec))  # a bad kind, number or checkpoint raises, naming the spec
            if hasattr(player, "close"):
                player.close()


def test_the_readme_lists_every_fixed_loop_setting():
    """The settings a resumed run may not change, as the README lists them, are the loop's."""
    import dataclasses

    from othello_learn.rl.loop import RunConfig

    text = " ".join((REPO / "README.md").read_text().split())
    listed = re.search(r"\*\*\(fixed\)\*\* setting \(([^)]*)\)", text).group(1)
    flags = set(re.findall(r"`(--[a-z-]+)\*?`", listed))
    fixed = {"--" + f.name.replace("_", "-") for f in dataclasses.fields(RunConfig) if not f.metadata["resumable"]}
    assert {f for f in fixed if not f.startswith(("--arch-", "--grow-"))} == flags - {"--arch-", "--grow-"}
    assert {"--arch-", "--grow-"} <= flags
