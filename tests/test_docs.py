"""The shell commands of the code blocks of README.md and of every docs/ page still parse: each
script exists, its parser takes every flag and value, the player specs build, and the shipped files
they name exist (a benchmark's parser too; a removed research script of experiments/ only on a results page,
whose section names the commit holding it).
Only the parsers run (and the players are built, from the shipped checkpoints): no dataset is read, no
game played, nothing trained. The docs site builds with warnings as errors."""

import argparse
import ast
import fnmatch
import importlib
import os
import re
import shlex
import subprocess
import sys
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
PAGES = [REPO / "README.md", *sorted(p for p in (REPO / "docs").rglob("*.md") if "_build" not in p.parts)]


def readme_commands(page: Path = REPO / "README.md") -> list[tuple[int, list[str]]]:
    """(line, argv) of every ``python SCRIPT ...`` and console script (``othello-train ...``) in the
    page's bash blocks."""
    from othello_learn.commands import COMMANDS as CONSOLE_SCRIPTS

    commands, block, start = [], None, 0
    for number, line in enumerate(page.read_text().splitlines(), 1):
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
                            elif argv[:1] and argv[0] in CONSOLE_SCRIPTS:
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


RESULTS_DOCS = REPO / "docs" / "results"


def _checked(page: Path, argv: list[str]) -> bool:
    """Every command is checked but those of the results pages' Reproduce loops that name a shell
    variable (``--seed $s``, ``$RL``): what a loop expands them to is the page's record, not a command
    to parse. The README and the topic pages write every command out (a variable there fails the test)."""
    return page.parent != RESULTS_DOCS or not any("$" in token for token in argv)


COMMANDS = [(page.relative_to(REPO).as_posix(), line, argv) for page in PAGES for line, argv in readme_commands(page)
            if _checked(page, argv)]


def test_the_pages_have_commands_to_check():
    scripts = {argv[1] if argv[0] == "python" else argv[0] for _, _, argv in COMMANDS}
    assert {"data_tools/wthor.py", "train/train.py", "selfplay/loop.py", "selfplay/arena.py"} <= scripts
    assert {"othello-dataset", "othello-train", "othello-eval", "othello-play"} <= scripts  # the quick start's
    assert len(COMMANDS) >= 15
    assert len([page for page, _, _ in COMMANDS if page == "README.md"]) >= 5


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


def _command(where: str, argv: list[str]) -> tuple[str, list[str]]:
    """The command module argv runs and the arguments it gets."""
    if argv[0] != "python":  # a console script
        from othello_learn.commands import COMMANDS as CONSOLE_SCRIPTS

        return CONSOLE_SCRIPTS[argv[0]], argv[1:]
    script = REPO / argv[1]
    if argv[1].startswith("experiments/"):  # research scripts, removed: a results page names the commit holding them
        assert where.startswith("docs/results/"), f"{where}: {argv[1]} is no longer in the repository"
        return "experiments." + script.stem, argv[2:]
    assert script.is_file(), f"{where}: no script {argv[1]}"
    if script.parent.name == "benchmarks":  # not a command's wrapper
        return ".".join(script.relative_to(REPO).with_suffix("").parts), argv[2:]
    # the script path is a wrapper of its command module: ``start("MODULE")``
    module = next((n.args[0].value for n in ast.walk(ast.parse(script.read_text()))
                   if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "start"), None)
    assert module, f"{where}: {argv[1]} is not a command's script path"
    return module, argv[2:]


@pytest.mark.parametrize("page, line, argv", COMMANDS, ids=[f"{p}:{n}" for p, n, _ in COMMANDS])
def test_a_readme_command_parses(page, line, argv, monkeypatch, capsys):
    where = f"{page}:{line}"
    assert not any("$" in token for token in argv), f"{where}: a shell variable: write the command out"
    module, arguments = _command(where, argv)
    if module.startswith("experiments."):  # research scripts, kept to reproduce figures, not tested
        return
    try:
        args = _parse(module, arguments, monkeypatch)
    except SystemExit:
        pytest.fail(f"{where}: {shlex.join(argv)}: {capsys.readouterr().err.strip()}")
    monkeypatch.undo()
    for token in arguments:
        for piece in re.split(r"[:=]", token):
            if SHIPPED.match(piece):
                assert (REPO / piece).exists(), f"{where}: {piece} is not in the repository"
    if module == "othello_learn.train.train":  # the --set overrides name known settings (the configs
        from othello_learn.train.config import SCHEMA  # themselves are checked in test_commands.py)

        for item in args.set:
            section, _, key = item.split("=", 1)[0].partition(".")
            assert section == "trainer" or key in SCHEMA.get(section, {}), f"{where}: --set {item}"
    from othello_learn.players.specs import make_player

    monkeypatch.chdir(REPO)  # the specs name checkpoints from the checkout's root, as the README runs them
    if getattr(args, "imports", None):  # plug-in kinds, registered in a copy of the registry (undone after the test)
        from othello_learn.players import specs
        from othello_learn.players.arena import import_plugin

        monkeypatch.setattr(specs, "PLAYER_FACTORIES", dict(specs.PLAYER_FACTORIES))
        for plugin in args.imports:
            import_plugin(plugin)
    for flag in SPEC_FLAGS.get(module, ()):
        spec = getattr(args, flag)
        if spec:
            player = make_player(_stand_in(spec))  # a bad kind, number or checkpoint raises, naming the spec
            if hasattr(player, "close"):
                player.close()


def test_the_readme_lists_every_fixed_loop_setting():
    """The settings a resumed run may not change, as the self-play page lists them, are the loop's."""
    import dataclasses

    from othello_learn.rl.settings import RunConfig

    text = " ".join((REPO / "docs" / "selfplay.md").read_text().split())
    listed = re.search(r"\*\*\(fixed\)\*\* setting \(([^)]*)\)", text).group(1)
    flags = set(re.findall(r"`(--[a-z-]+)\*?`", listed))
    fixed = {"--" + f.name.replace("_", "-") for f in dataclasses.fields(RunConfig) if not f.metadata["resumable"]}
    assert {f for f in fixed if not f.startswith(("--arch-", "--grow-"))} == flags - {"--arch-", "--grow-"}
    assert {"--arch-", "--grow-"} <= flags


# The results pages (docs/results/): every pointer into them names a page and a heading that exist.
# a path from the repository's root (docs/results/PAGE#ANCHOR), or a docs page's link into results/
POINTER = re.compile(r"(?:\bdocs/|\]\()results/([\w.-]+\.md)(?:#([\w-]+))?")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITED = re.compile(r"\bresults/[\w./*\[\]-]*")
SKIP_DIRS = {"runs", "data", "build", "dist", "node_modules", "__pycache__", "site-packages"}
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".rst"}


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and MyST make it: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _prose(path: Path) -> list[str]:
    """The lines of a Markdown file outside its fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _headings(path: Path) -> list[str]:
    return [m.group(2) for line in _prose(path) if (m := re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line))]


def _anchors(path: Path) -> set[str]:
    return {slug(h) for h in _headings(path)}


def _project_text_files():
    for path in sorted(REPO.rglob("*")):
        parts = path.relative_to(REPO).parts
        if any(p.startswith(".") or p in SKIP_DIRS for p in parts[:-1]) or path.suffix not in TEXT_SUFFIXES:
            continue
        if path.is_file():
            yield path


RESULTS_PAGES = sorted(RESULTS_DOCS.glob("*.md"))


def test_the_results_pages_exist():
    assert (RESULTS_DOCS / "index.md") in RESULTS_PAGES and len(RESULTS_PAGES) >= 5


def test_slug_is_githubs():
    assert slug("The search's own time") == "the-searchs-own-time"
    assert slug("Runs from best_value") == "runs-from-best_value"
    assert slug("Width and depth: fitting the search's labels") == "width-and-depth-fitting-the-searchs-labels"


def test_every_pointer_into_the_results_pages_exists():
    """Code comments, READMEs and the pages themselves point at a page of docs/results and a heading
    of it (its anchor): both must exist."""
    pointers = []
    for path in _project_text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for match in POINTER.finditer(line):
                pointers.append((f"{path.relative_to(REPO)}:{number}", *match.groups()))
    assert len(pointers) >= 20
    for where, page, anchor in pointers:
        target = RESULTS_DOCS / page
        assert target.is_file(), f"{where}: no docs/results/{page}"
        if anchor:
            assert anchor in _anchors(target), f"{where}: no heading #{anchor} in docs/results/{page}"


def test_the_old_lab_notebook_is_not_pointed_at():
    old = "RESULTS" + ".md"
    assert not (REPO / old).exists()
    for path in _project_text_files():
        assert old not in path.read_text(errors="replace"), f"{path.relative_to(REPO)} still points at {old}"


@pytest.mark.parametrize("page", RESULTS_PAGES, ids=lambda p: p.name)
def test_a_results_page_links_resolve(page):
    """Relative links between the pages, and to the repository's files, name files and headings that exist."""
    for number, line in enumerate(_prose(page), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):  # an external URL
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            assert path.exists(), f"{page.name}: link to {target}: no such file"
            if anchor:
                assert anchor in _anchors(path), f"{page.name}: link to {target}: no such heading"


@pytest.mark.parametrize("page", RESULTS_PAGES, ids=lambda p: p.name)
def test_a_results_page_is_short_and_by_topic(page):
    """At most 600 lines (the index 120); each section of a topic page says Conclusion, Evidence, Reproduce;
    headings are unique (a repeated one would get a numbered anchor)."""
    lines = page.read_text().splitlines()
    assert len(lines) <= (120 if page.name == "index.md" else 600), f"{page.name}: {len(lines)} lines"
    headings = _headings(page)
    assert len({slug(h) for h in headings}) == len(headings), f"{page.name}: a repeated heading"
    if page.name == "index.md":
        return
    sections = re.split(r"^## ", page.read_text(), flags=re.MULTILINE)[1:]
    assert sections, f"{page.name}: no sections"
    for section in sections:
        title = section.splitlines()[0]
        for part in ("**Conclusion.**", "**Evidence.**", "**Reproduce**"):
            assert part in section, f"{page.name}, {title}: no {part}"
        assert re.search(r"\b[0-9a-f]{7,40}\b", section.split("**Reproduce**", 1)[1]), f"{page.name}, {title}: no commit"


def test_every_results_file_is_cited_and_every_citation_exists():
    """results/ keeps only what a page's prose cites (a file, its folder, or a glob), and a cited path is there."""
    cited = set()
    for page in RESULTS_PAGES:
        cited |= {c.rstrip(".") for line in _prose(page) for c in CITED.findall(line)}
    for citation in cited:
        assert list(REPO.glob(citation.rstrip("/"))), f"docs/results cites {citation}: not in the repository"
    for path in (REPO / "results").rglob("*"):
        if not path.is_file():
            continue
        name = path.relative_to(REPO).as_posix()
        assert any(name == c or name.startswith(c.rstrip("/") + "/") or fnmatch.fnmatch(name, c) for c in cited), \
            f"{name} is not cited by any page of docs/results"


def test_the_readme_is_short():
    """What the README promises a new reader: a page, the quick start near its top, no wide lines."""
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 150
    assert any(line.startswith("## Quick start") for line in lines[:40])
    assert "python -m pytest -q -n auto" in "\n".join(lines)  # .ci/run runs the README's test command
    assert [n for n, line in enumerate(lines, 1) if len(line) > 200] == []


def test_every_docs_page_is_in_the_site():
    """Each page is linked from the index's toctree, and each command has its generated reference."""
    index = (REPO / "docs" / "index.md").read_text()
    pages = {p.stem for p in (REPO / "docs").glob("*.md")} - {"index"}
    assert {p for p in pages if not re.search(rf"^{p}$", index, re.M)} == set()
    from othello_learn.commands import COMMANDS as CONSOLE_SCRIPTS

    reference = (REPO / "docs" / "commands.md").read_text()
    for script, module in CONSOLE_SCRIPTS.items():
        assert f":module: {module}\n:func: build_parser\n:prog: {script}" in reference, script
        assert isinstance(importlib.import_module(module).build_parser(), argparse.ArgumentParser)


@pytest.mark.xdist_group("docs")
def test_the_docs_build_without_warnings(tmp_path):
    """As CI builds them (.ci/run): the parsers' help renders, every link and anchor resolves. Skipped
    without the docs extra, except in CI (CI=true), which installs it: there a skip would hide the build."""
    for module in ("sphinx", "myst_parser", "sphinxarg"):
        if os.environ.get("CI") == "true":
            importlib.import_module(module)
        else:
            pytest.importorskip(module)
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-d", str(tmp_path / "doctrees"), str(REPO / "docs"), str(tmp_path / "html")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
