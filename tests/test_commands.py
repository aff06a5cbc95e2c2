"""The command-line tools as commands: console scripts, --help, examples that exist,
the GPU-recipe warning, and evaluation read from the built dataset."""

import argparse
import ast
import importlib
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from othello_learn.cli import run_main
from othello_learn.files import UserError
from othello_learn import commands
from othello_learn.commands import COMMANDS

REPO = Path(__file__).resolve().parents[1]
# Files an example may name that must ship with the repository (run outputs, runs/..., need not).
SHIPPED = re.compile(r"(?<![\w/])((?:train/configs/[\w.-]+\.ya?ml)|(?:checkpoints/[\w./-]+?\.(?:pt|ckpt)))")


def test_every_command_is_a_console_script_calling_its_cli(monkeypatch):
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == set(COMMANDS)
    started = []
    monkeypatch.setattr(commands, "start", started.append)
    for name, target in scripts.items():
        where, function = target.split(":")
        assert where == "othello_learn.commands"
        getattr(commands, function)()
        assert started[-1] == COMMANDS[name], name
    for module in COMMANDS.values():
        source = (REPO / (module.replace(".", "/") + ".py")).read_text()
        # python -m goes through the same cli() as the console script
        assert source.rstrip().endswith('if __name__ == "__main__":\n    cli()'), module


def test_a_ctrl_c_while_a_command_loads_is_one_line_and_exit_130(monkeypatch, capsys):
    """torch takes about two seconds to import: a Ctrl-C then ended in the import's traceback."""
    def interrupted(module):
        raise KeyboardInterrupt

    monkeypatch.setattr(commands.importlib, "import_module", interrupted)
    monkeypatch.setattr(sys, "argv", ["othello-train"])
    with pytest.raises(SystemExit) as e:
        commands.train()
    assert e.value.code == 130 and capsys.readouterr().err == "othello-train: interrupted\n"


def _help(module: str, capsys, monkeypatch) -> tuple[str, argparse.ArgumentParser]:
    """``NAME --help`` through the module's cli(), as the console script runs it; and the parser."""
    parsers = []
    original = argparse.ArgumentParser.parse_args

    def capture(self, *a, **k):
        parsers.append(self)
        return original(self, *a, **k)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        importlib.import_module(module).cli()
    assert e.value.code == 0
    return capsys.readouterr().out, parsers[-1]


@pytest.mark.parametrize("module", sorted(COMMANDS.values()))
def test_help_shows_defaults_and_examples_that_exist(module, capsys, monkeypatch):
    text, parser = _help(module, capsys, monkeypatch)
    assert text.startswith("usage:")
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.required or action.default in (None, False, [], argparse.SUPPRESS) or action.help is None:
            continue
        assert "default" in formatter._expand_help(action), f"{module} {action.option_strings}: default not shown"
    # the examples run from any folder, and the docstrings' reStructuredText is not shown raw
    assert not re.findall(r"python (?:-m )?[\w./]+", text), f"{module}: examples must use the console scripts"
    assert "``" not in text, f"{module}: reStructuredText literals in --help"
    named = set(SHIPPED.findall(text + (importlib.import_module(module).__doc__ or "")))
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert not missing, f"{module} names files that do not exist: {missing}"


def test_the_example_scan_finds_shipped_and_missing_files():
    found = SHIPPED.findall("train.py --config train/configs/cpu_small.yaml; mcts:checkpoints/cpu_hc_long.pt:64")
    assert found == ["train/configs/cpu_small.yaml", "checkpoints/cpu_hc_long.pt"]
    assert not (REPO / found[0]).exists() and (REPO / found[1]).exists()


@pytest.mark.parametrize("argv", [["-m", "othello_learn.train.train", "--help"], ["train/curves.py", "--help"]])
def test_module_and_script_path_run_as_commands(argv):
    proc = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:")


def test_help_and_bad_flags_do_not_import_lightning():
    """``--help`` answers in well under a second: Lightning, torchmetrics, torch and pandas take
    seconds to import, so the training and evaluation commands load them only once work starts."""
    code = ("import sys\n"
            "from othello_learn.train import train\n"
            "from othello_learn.evaluation import evaluate\n"
            "for main in (train.main, evaluate.main):\n"
            "    for argv in (['--help'], ['--out', 'x', '--batch-size', '0']):\n"
            "        try:\n"
            "            main(argv)\n"
            "        except SystemExit:\n"
            "            pass\n"
            "print(sorted(m for m in ('lightning', 'torchmetrics', 'torch', 'pandas') if m in sys.modules))\n")
    assert _last_line(code) == "[]"  # (the help texts come first)


def _last_line(code: str) -> str:
    """The last line ``code`` prints, run in a fresh interpreter (which has imported nothing yet)."""
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_the_loop_help_and_bad_flags_do_not_import_torch():
    """``othello-rl --help`` took seconds: its settings' defaults and limits came from modules that
    import torch, and so did the loop's stages; they are read once a run starts now."""
    code = ("import sys\n"
            "from othello_learn.rl import loop\n"
            "for argv in (['--help'], ['--out', 'x'], ['--init', 'random', '--out', 'x', '--games', 'many']):\n"
            "    try:\n"
            "        loop.main(argv)\n"
            "    except SystemExit:\n"
            "        pass\n"
            "print(sorted(m for m in ('lightning', 'torch', 'numpy', 'pandas') if m in sys.modules))\n")
    assert _last_line(code) == "[]"


def test_the_loop_settings_restated_for_its_help_match_their_homes():
    import dataclasses

    from othello_learn.models.encoders import ENCODERS
    from othello_learn.models.fastpath import default_device
    from othello_learn.rl import settings
    from othello_learn.search.gumbel import TARGET_Q

    assert settings.ENCODER_NAMES == tuple(sorted(ENCODERS)) and settings.POLICY_TARGETS == TARGET_Q
    cfg = settings.RunConfig.from_args(["--init", "random", "--out", "x"])
    assert cfg.device == default_device()  # the default, set once torch is there
    for f in dataclasses.fields(cfg):  # every ceiling read from its home
        setting = f.metadata["setting"]
        assert setting.ceiling() is None or isinstance(setting.ceiling(), (int, float)), f.name


def test_evaluating_an_exported_network_does_not_import_lightning(dataset_dir, tmp_path, monkeypatch):
    """An exported .pt needs no Lightning (seconds to import, most of a small evaluation's
    time); only a training checkpoint's .ckpt does. The LightningModule's module is made
    unimportable: the evaluation must not need it."""
    from othello_learn.models.nets import NetConfig, build_network, save_network
    from othello_learn.evaluation.evaluate import evaluate_command

    save_network(build_network(NetConfig(depth=1, width=4)), tmp_path / "net.pt")
    monkeypatch.setitem(sys.modules, "othello_learn.train.module", None)  # an import of it: ImportError
    result = evaluate_command(["--checkpoint", str(tmp_path / "net.pt"), "--data", str(dataset_dir), "--years", "2003"])
    assert result["positions"] > 0


SCRIPT_PATHS = {
    "data_tools/wthor.py": "othello-dataset", "train/train.py": "othello-train", "train/evaluate.py": "othello-eval",
    "train/curves.py": "othello-curves", "selfplay/loop.py": "othello-rl", "selfplay/arena.py": "othello-arena",
    "selfplay/play.py": "othello-play", "selfplay/nboard.py": "othello-engine", "selfplay/solve.py": "othello-solve",
    "selfplay/gtp.py": "othello-gtp",
}


@pytest.mark.parametrize("script,module", sorted(COMMANDS.items()))
def test_a_commands_help_names_console_scripts_not_script_paths(script, module):
    """Whoever installed the package reads ``othello-dataset``, not ``data_tools/wthor.py`` (a path in a
    checkout): no --help names a script path."""
    text = importlib.import_module(module).build_parser().format_help()
    assert [path for path in SCRIPT_PATHS if path in text] == [], script


@pytest.mark.parametrize("path", sorted(SCRIPT_PATHS))
def test_each_documented_script_path_is_a_thin_wrapper_of_its_command(path):
    """The old script paths stay, but as wrappers: the code lives in othello_learn only."""
    tree = ast.parse((REPO / path).read_text())
    module = COMMANDS[SCRIPT_PATHS[path]]
    imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert [(n.module, [a.name for a in n.names]) for n in imports] == [("pathlib", ["Path"]),
                                                                        ("othello_learn.commands", ["start"])]
    # guarded: a worker process spawned by the loop imports the script as __mp_main__ and must not rerun it
    assert ast.unparse(tree.body[-1]) == f"if __name__ == '__main__':\n    start({module!r})"
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert module in ast.get_docstring(tree) and SCRIPT_PATHS[path] in ast.get_docstring(tree)


def test_the_old_folders_hold_no_package_and_the_library_edits_no_sys_path():
    for folder in ("data_tools", "train", "selfplay", "models"):
        assert not (REPO / folder / "__init__.py").exists(), folder
        assert sorted(p.relative_to(REPO).as_posix() for p in (REPO / folder).glob("*.py")) == sorted(
            p for p in SCRIPT_PATHS if p.startswith(folder + "/")), folder
    for source in sorted((REPO / "othello_learn").rglob("*.py")) + sorted((REPO / "othello").rglob("*.py")):
        tree = ast.parse(source.read_text())
        attrs = {ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert not {a for a in attrs if a.startswith("sys.path")}, source


def test_a_recipe_is_found_by_name_and_ships_in_the_package(tmp_path, monkeypatch, capsys):
    """``--config cpu_value_fast`` finds the recipe inside the package (an installed copy has no
    checkout's train/configs/, which points there); a path still works, a file of the name in the
    current folder comes first, and an unknown name lists the recipes in one line."""
    from othello_learn.train import train as train_module
    from othello_learn.train.config import RECIPES, recipe_names

    assert (REPO / "train" / "configs").resolve() == RECIPES.resolve()
    assert {"cpu_raw", "cpu_value_fast", "resnet_best"} <= set(recipe_names())
    args = train_module.parse_args(["--config", "cpu_value_fast", "--out", "x"])
    assert args.config == RECIPES / "cpu_value_fast.yaml"
    assert train_module.parse_args(["--config", "train/configs/cpu_raw.yaml", "--out", "x"]).config == Path(
        "train/configs/cpu_raw.yaml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cpu_raw").write_text("model: {}\n")
    assert train_module.parse_args(["--config", "cpu_raw", "--out", "x"]).config == Path("cpu_raw")
    with pytest.raises(SystemExit) as e:
        run_main(train_module.main, ["--config", "cpu_valu_fast", "--out", "x"])
    code, err = e.value.code, capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cpu_value_fast" in err and "nor a recipe" in err, err
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert data["othello_learn.train"] == ["recipes/*.yaml"]


def test_the_distribution_ships_othello_and_othello_learn_only():
    from setuptools import find_packages

    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = find_packages(str(REPO), include=find["include"])
    assert {p.split(".")[0] for p in packages} == {"othello", "othello_learn"}
    assert {"othello_learn.data", "othello_learn.models", "othello_learn.train", "othello_learn.search",
            "othello_learn.players", "othello_learn.frontends", "othello_learn.rl"} <= set(packages)


# ---- GPU recipes on a CPU -------------------------------------------------------------------------

def test_gpu_recipes_name_a_cpu_recipe_and_cpu_recipes_say_nothing():
    from othello_learn.train.config import gpu_recipe_warning, load_config

    configs = sorted((REPO / "train" / "configs").glob("*.yaml"))
    gpu = [c for c in configs if c.name.startswith("ref_") or c.name == "resnet_best.yaml"]
    assert len(gpu) == 9
    for config in configs:
        load_config(config, [])  # the recipe key passes the config check
        warning = gpu_recipe_warning(config, on_gpu=False)
        if config in gpu:
            instead = re.search(r"use (\S+) instead", warning).group(1)
            assert (REPO / instead).is_file() and "cpu_" in instead and str(config) in warning
            assert "\n" not in warning
        else:
            assert warning is None, config
        assert gpu_recipe_warning(config, on_gpu=True) is None


@pytest.mark.parametrize("cuda,mps,accelerator,expected", [
    (True, False, "auto", True), (True, False, "GPU", True), (True, False, "cpu", False),
    (False, True, "auto", True), (False, True, "mps", True), (False, True, "cuda", False),  # an Apple GPU is a GPU
    (False, False, "auto", False), (False, False, "gpu", False)])
def test_the_gpu_recipe_warning_knows_every_gpu_lightning_trains_on(monkeypatch, cuda, mps, accelerator, expected):
    import torch

    from othello_learn.train.arguments import gpu_in_use

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert gpu_in_use(accelerator) is expected


def test_a_bad_recipe_key_is_refused(tmp_path):
    from othello_learn.train.config import load_config

    config = tmp_path / "c.yaml"
    config.write_text("model: {depth: 2}\nrecipe: {device: tpu}\n")
    with pytest.raises(UserError, match=r"c.yaml: recipe must be"):
        load_config(config, [])


def test_train_warns_once_before_any_work(tmp_path, monkeypatch, capsys):
    import torch

    from othello_learn.train.train import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    capsys.readouterr()
    code = run_main(main, ["--config", str(REPO / "train/configs/ref_raw_d10.yaml"), "--out", str(tmp_path / "run"),
                           "--data", str(tmp_path / "none"), "--logger", "none"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2  # the missing dataset: the warning came first, then the run went on to its checks
    assert [line for line in err if "GPU recipe" in line] == [err[0]]
    assert "cpu_raw_fast.yaml" in err[0]
    assert err[-1].endswith("build it with othello-dataset --out DIR")  # the console script, not its path


# ---- evaluation from the built dataset ------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_net(tmp_path_factory):
    from othello_learn.models.nets import NetConfig, build_network, save_network

    import torch

    torch.manual_seed(3)
    path = tmp_path_factory.mktemp("net") / "tiny.pt"
    save_network(build_network(NetConfig(depth=1, width=4)), path)
    return path


@pytest.mark.parametrize("years", ["2003", "2001,2003", "2001-2003"])
def test_evaluation_from_the_dataset_matches_a_replay_of_the_raw_files(dataset_dir, tiny_net, years,
                                                                       monkeypatch):
    from othello_learn.evaluation.evaluate import evaluate_command

    monkeypatch.setenv("TQDM_DISABLE", "1")
    common = ["--checkpoint", str(tiny_net), "--years", years]
    built = evaluate_command(common + ["--data", str(dataset_dir)])
    replayed = evaluate_command(common + ["--wthor-dir", str(dataset_dir.parent)])
    for r in (built, replayed):
        r.pop("seconds")
    assert built == replayed
    summary = json.loads((dataset_dir / "summary.json").read_text())["years"]
    wanted = {"2003": ["2003"], "2001,2003": ["2001", "2003"], "2001-2003": ["2001", "2002", "2003"]}[years]
    assert built["positions"] == sum(summary[y]["positions"] for y in wanted)


def test_evaluation_names_a_year_the_dataset_lacks_and_a_bad_dataset(dataset_dir, tiny_net, tmp_path,
                                                                     capsys):
    from othello_learn.evaluation.evaluate import main

    capsys.readouterr()
    assert run_main(main, ["--checkpoint", str(tiny_net), "--data", str(dataset_dir), "--years", "2003-2004"]) == 2
    err = capsys.readouterr().err
    assert "no year 2004" in err and "2001-2003" in err and "--wthor-dir" in err and len(err.splitlines()) == 1
    assert run_main(main, ["--checkpoint", str(tiny_net), "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--data {tmp_path}: not a usable dataset" in err and len(err.splitlines()) == 1
    assert "build it with othello-dataset --out DIR, or replay" in err


def test_evaluation_never_writes_over_the_datasets_summary(dataset_dir, tiny_net, tmp_path, capsys):
    """--json DATA/summary.json was written over the dataset's own summary after the evaluation:
    the dataset could not be opened again ("dataset format None is not 1; rebuild it")."""
    import shutil

    from othello_learn.evaluation.evaluate import main

    data = tmp_path / "ds"
    shutil.copytree(dataset_dir, data)
    before = (data / "summary.json").read_bytes()
    capsys.readouterr()
    argv = ["--checkpoint", str(tiny_net), "--data", str(data), "--years", "2003", "--limit", "20"]
    assert run_main(main, argv + ["--json", str(data / "summary.json")]) == 2
    err = capsys.readouterr().err
    assert f"--json {data / 'summary.json'}: is also the input --data" in err and len(err.splitlines()) == 1, err
    assert (data / "summary.json").read_bytes() == before


@pytest.mark.parametrize("years,missing", [("2003,2030", "2030"), ("2000-2003", "2000")])
def test_evaluation_names_a_year_the_wthor_folder_lacks(dataset_dir, tiny_net, tmp_path, years, missing,
                                                        capsys):
    """Not an evaluation of the years present, recorded under the years asked."""
    from othello_learn.evaluation.evaluate import main

    capsys.readouterr()
    out = tmp_path / "e.json"
    argv = ["--checkpoint", str(tiny_net), "--wthor-dir", str(dataset_dir.parent), "--years", years, "--json", str(out)]
    assert run_main(main, argv) == 2
    err = capsys.readouterr().err
    assert f"no WTH_YYYY.wtb file for {missing} " in err and str(dataset_dir.parent) in err, err
    assert len(err.splitlines()) == 1 and not out.exists()
    assert run_main(main, argv[:-4] + ["--years", ""]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--years: no years given" in err, err


def test_evaluation_refuses_a_file_named_for_another_year(dataset_dir, tiny_net, tmp_path, capsys):
    from othello_learn.evaluation.evaluate import main

    (tmp_path / "WTH_2004.wtb").write_bytes((dataset_dir.parent / "WTH_2003.wtb").read_bytes())
    capsys.readouterr()
    assert run_main(main, ["--checkpoint", str(tiny_net), "--wthor-dir", str(tmp_path), "--years", "2004"]) == 2
    err = capsys.readouterr().err
    assert "WTH_2004.wtb: the header says its games are from 2003, the file name says 2004" in err, err
    assert len(err.splitlines()) == 1


def _benchmark(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_benchmark_runs_through_run_main():
    """Benchmarks are commands too: a bad flag value or a missing file is one line and exit 2."""
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        source = path.read_text()
        assert "sys.exit(run_main(main))" in source and "def main(argv=None)" in source, path.name


@pytest.fixture
def no_training(monkeypatch):
    """recipe_compare starts train.py subprocesses once its checks pass: a check that let bad input
    through must fail the test, not train into the checkout (a mutant did, in a clone)."""
    def refused(*args, **kwargs):
        raise AssertionError(f"a subprocess was started: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "run", refused)


@pytest.mark.parametrize("name, argv, expected", [
    ("encoders", ["--repeats", "3"], "--repeats 3: expected 3 positive counts"),
    ("encoders", ["--repeats", "1,0,2"], "--repeats 1,0,2: expected 3 positive counts"),
    ("inference", ["--checkpoints", "no/such.pt"], "no/such.pt"),
    # tracebacks before: a KeyError after the first timed round, torch's AssertionError, a ValueError
    ("selfplay", ["--device", "nowhere"], "--device nowhere: not usable on this machine"),
    ("encoders", ["--devices", "cpu,gpu"], "--devices gpu: not usable on this machine"),
    ("encoders", ["--devices", "cpu:numpy"], "'cpu:numpy': the backend after ':' can only be torch"),
    ("train_throughput", ["--precision", "bf17"], "--precision 'bf17': expected auto, 32, bf16 or one of"),  # fp32
    ("train_throughput", ["--profile", "--compare"], "--profile times the recipe's stages alone"),  # was dropped
    ("train_throughput", ["--devices", "2"], "--devices N (2 or more) goes with --strategy ddp"),
    ("train_throughput", ["--strategy", "ddp"], "--devices N (2 or more) goes with --strategy ddp"),
    ("train_throughput", ["--strategy", "ddp", "--devices", "2", "--compare"], "--strategy ddp times the recipe"),
    ("selfplay_workers", ["--device", "nowhere"], "--device nowhere: not usable on this machine"),
    # outputs checked before the work: a source file replaced, logs written into a WTHOR folder, a plot refused
    # after hours of training
    ("train_throughput", ["--json", "results.py"], "--json results.py: expected a .json file name"),
    ("recipe_compare", ["--data", str(REPO / "tests"), "--out", str(REPO / "benchmarks")],
     "not a comparison's run; choose a new or an empty folder"),
    ("recipe_compare", ["--data", str(REPO / "tests"), "--out", "no/such/folder", "--plot", "curves.txt"],
     "--plot curves.txt: matplotlib cannot write .txt files"),
])
def test_benchmarks_refuse_bad_input_in_one_line(capsys, name, argv, expected, no_training):
    module = _benchmark(name)
    capsys.readouterr()
    assert run_main(module.main, argv) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("name, argv, expected", [
    ("selfplay", ["--searches", "puct,gumbl"],
     "argument --searches: expected a comma-separated list of puct and gumbel"),
    ("selfplay", ["--paths", "folded,fast"],
     "argument --paths: expected a comma-separated list of plain, folded, channels_last, compiled, bf16"),
    ("selfplay", ["--encoder", "hc"], "argument --encoder: expected one of handcrafted, raw, got 'hc'"),
    # NetConfig's ValueError, a traceback: a network size past nets.SIZE_LIMITS
    ("selfplay", ["--blocks", "2000"], "argument --blocks: must be at most 1000, got 2000"),
    ("inference", ["--depth", "1001"], "argument --depth: must be at most 1000, got 1001"),
])
def test_benchmark_flags_are_checked_as_they_are_parsed(capsys, name, argv, expected):
    with pytest.raises(SystemExit) as e:
        run_main(_benchmark(name).main, argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and expected in err and len(err.splitlines()) == 1


def test_the_recipe_comparison_checks_its_settings_and_dataset_before_any_training(tmp_path, capsys, no_training):
    """A bad --set or a folder that is no dataset failed inside the first train.py run, one line
    pointing at its log (a variant's own bad setting only after the variants before it had trained)."""
    module = _benchmark("recipe_compare")
    for argv, said in ((["--set", "model.nope=3"], "variant base: model.nope: unknown setting"),
                       (["--variants", "cosine", "--set", "optim.lr=x"], "variant cosine: optim.lr"),
                       ([], "--data " + str(REPO / "tests") + ": not a dataset data_tools/wthor.py built")):
        assert run_main(module.main, ["--data", str(REPO / "tests"), "--out", str(tmp_path / "cmp"), *argv]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err


def test_the_recipe_comparisons_own_report_in_its_out_folder_is_no_stranger(tmp_path, capsys, no_training):
    """A rerun (more seeds) with --json and --plot inside --out was refused as a foreign folder."""
    out = tmp_path / "cmp"
    (out / "base_seed0").mkdir(parents=True)
    (out / "summary.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    argv = ["--data", str(REPO / "tests"), "--out", str(out), "--json", str(out / "summary.json"), "--plot"]
    assert run_main(_benchmark("recipe_compare").main, argv + [str(out / "curves.txt")]) == 2
    assert "holds 'notes.txt', not a comparison's run" in capsys.readouterr().err
    (out / "notes.txt").unlink()
    assert run_main(_benchmark("recipe_compare").main, argv + [str(out / "curves.txt")]) == 2
    assert "--plot" in capsys.readouterr().err  # past the --out check: summary.json is the --json
    (out / "curves.png").write_text("")
    assert run_main(_benchmark("recipe_compare").main, argv + [str(out / "curves.pdf")]) == 2
    assert "holds 'curves.png', not a comparison's run" in capsys.readouterr().err


def test_the_recipe_comparison_checks_its_paths_before_any_training(tmp_path, capsys, no_training):
    """Each call ends at the --plot check at the latest (a .txt plot), so none can start a training."""
    compare = _benchmark("recipe_compare").main
    (tmp_path / "a_file").write_text("x")
    run = tmp_path / "cmp"
    (run / "base_seed0").mkdir(parents=True)
    (run / "base_seed0.log").write_text("")  # a rerun's own log is no stranger
    for argv, said in ((["--out", str(tmp_path / "a_file")], "is a file; give a folder"),
                       (["--out", str(run)], "--plot"),
                       (["--out", str(run), "--json", str(tmp_path / "s.txt")], "expected a .json file name"),
                       (["--out", str(run), "--data", str(tmp_path / "nodata")], "--data")):
        argv = ["--data", str(REPO / "tests"), *argv, "--plot", str(tmp_path / "c.txt")]
        assert run_main(compare, argv) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert sorted(p.name for p in run.iterdir()) == ["base_seed0", "base_seed0.log"]


def test_the_dataset_benchmark_without_wthor_files_says_how_to_give_them(capsys, monkeypatch):
    """It passed the string "None" on to the builder, which then failed in two lines."""
    module = _benchmark("build_dataset")
    monkeypatch.setattr(module, "default_wthor_dir", lambda: None)
    assert run_main(module.main, []) == 2
    err = capsys.readouterr().err
    assert "no --wthor-dir given" in err and "--download" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("name, flag", [
    ("loader", "--batches"), ("selfplay", "--games"), ("train_throughput", "--steps"), ("inference", "--rounds"),
    ("build_dataset", "--repeats"), ("selfplay_workers", "--games"), ("selfplay_busy", "--games"), ("engine", "--calls"),
])
def test_benchmarks_refuse_a_count_of_zero_before_any_work(capsys, name, flag):
    """A count of 0 ended in a ZeroDivisionError or an UnboundLocalError after the set-up."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main(_benchmark(name).main, [flag, "0"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {flag}: must be at least 1, got 0" in err and len(err.splitlines()) == 1


def test_the_selfplay_workers_benchmark_starts_from_a_checkpoint(monkeypatch):
    """The README's command: it passed --arch-blocks, which the loop refuses with --init CKPT."""
    module = _benchmark("selfplay_workers")

    class Reached(Exception):
        pass

    def open_run(cfg):  # the settings passed cfg.check(): stop before self-play
        raise Reached

    monkeypatch.setattr(module, "open_run", open_run)
    with pytest.raises(Reached):
        module.main(["--init", str(REPO / "checkpoints" / "best_handcrafted.pt"), "--games", "4", "--parallel", "2",
                     "--workers", "2"])
    # one process against itself, a one-row table without a ratio, is said to be nothing to compare
    with pytest.raises(module.UserError, match="nothing to compare: one process"):
        module.main(["--games", "2", "--parallel", "2", "--workers", "2"])


def test_the_loader_benchmark_runs_on_past_an_epoch_and_refuses_a_batch_larger_than_the_split(dataset_dir, capsys):
    """Three runs of --batches past the end of the training split ended in a StopIteration traceback."""
    module = _benchmark("loader")
    data = ["--data", str(dataset_dir), "--train-years", "2001"]
    module.main(data + ["--batch-size", "64", "--batches", "60"])  # some 55 batches an epoch
    assert "median" in capsys.readouterr().out
    with pytest.raises(module.UserError, match="--batch-size 100000: the training split has"):
        module.main(data + ["--batch-size", "100000"])


def test_the_training_throughput_benchmark_runs_on_past_an_epoch(dataset_dir, tmp_path, capsys, monkeypatch):
    """Its timed steps took one pass over the training split: more steps than an epoch has batches
    (a large --batch-size) ended in a StopIteration traceback after the timing, as loader.py once did."""
    import functools

    module = _benchmark("train_throughput")
    monkeypatch.setattr(module, "WthorDataModule", functools.partial(
        module.WthorDataModule, train_years="2001", val_years="2002", test_years="2003"))
    config = tmp_path / "tiny.yaml"
    config.write_text("model: {arch: reference, encoder: raw, depth: 1, width: 8}\ndata: {batch_size: 64}\n")
    argv = ["--config", str(config), "--data", str(dataset_dir), "--steps", "30", "--rounds", "1", "--compare"]
    assert run_main(module.main, argv) == 0  # 120 steps of 64 positions; some 55 batches an epoch
    assert "recipe / baseline" in capsys.readouterr().out
    assert run_main(module.main, argv + ["--batch-size", "100000"]) == 2
    assert "--batch-size 100000: the training split has" in capsys.readouterr().err


def test_the_training_throughput_profile_takes_compile(dataset_dir, tmp_path, capsys, monkeypatch):
    """--profile --compile profiled the uncompiled network without a word: the flag was dropped."""
    import functools

    module = _benchmark("train_throughput")
    monkeypatch.setattr(module, "WthorDataModule", functools.partial(
        module.WthorDataModule, train_years="2001", val_years="2002", test_years="2003"))
    compiled = []
    monkeypatch.setattr(module.torch, "compile", lambda m: compiled.append(m) or m)  # no seconds of Dynamo
    config = tmp_path / "tiny.yaml"
    config.write_text("model: {arch: reference, encoder: raw, depth: 1, width: 8}\ndata: {batch_size: 64}\n")
    argv = ["--config", str(config), "--data", str(dataset_dir), "--steps", "2", "--profile", "--compile"]
    assert run_main(module.main, argv) == 0 and "profile (" in capsys.readouterr().out
    assert len(compiled) == 1


@pytest.mark.parametrize("name, flag, value, said", [
    ("inference", "--threads", "0", "must be at least 1, got 0"), ("loader", "--workers", "-1", "must be at least 0, got -1"),
])
def test_benchmarks_refuse_other_bad_counts_before_any_work(capsys, name, flag, value, said):
    with pytest.raises(SystemExit) as e:
        run_main(_benchmark(name).main, [flag, value])
    assert e.value.code == 2 and f"argument {flag}: {said}" in capsys.readouterr().err


@pytest.mark.parametrize("module, argv, named", [
    ("othello_learn.train.train", ["--config", "{missing}"], "--config {missing}: no such file"),
    ("othello_learn.train.train", ["--init", "{missing}"], "--init {missing}: no such file"),
    ("othello_learn.train.train", ["--config", "{folder}"], "--config {folder}: is a folder; give a file"),
    ("othello_learn.evaluation.evaluate", ["--checkpoint", "{missing}"], "--checkpoint {missing}: no such file"),
    ("othello_learn.evaluation.evaluate", ["--checkpoint", "{file}", "--wthor-dir", "{missing}"],
     "--wthor-dir {missing}: no such folder"),
    ("othello_learn.evaluation.evaluate", ["--checkpoint", "{file}", "--wthor-dir", "{file}"],
     "--wthor-dir {file}: is a file; give a folder"),
    ("othello_learn.frontends.terminal", ["--opponent", "random", "--start", "{missing}.ggf"],
     "--start {missing}.ggf: no such file"),
    ("othello_learn.frontends.solve_obf", ["{missing}", "--player", "random"], "positions {missing}: no such file"),
])
def test_a_missing_input_is_one_line_naming_its_flag(tmp_path, capsys, module, argv, named):
    """Each of these named only the path ("no such file or folder (X)"), not the flag it came from,
    and nothing is written (train.py's --out is not made)."""
    paths = {"missing": tmp_path / "nope", "folder": tmp_path, "file": tmp_path / "a_file"}
    paths["file"].write_text("mine")
    main = importlib.import_module(module).main
    out = tmp_path / "out"
    extra = ["--out", str(out)] if module.endswith(".train") else []
    capsys.readouterr()
    assert run_main(main, [a.format(**paths) for a in argv] + extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named.format(**paths) in err, err
    assert not out.exists() and paths["file"].read_text() == "mine"


# ---- the layout ------------------------------------------------------------------------------------

# What each part of othello_learn may import (besides itself and the shared helpers: cli, files, lock,
# plots, tracking). The rules engine imports nothing of othello_learn.
MAY_IMPORT = {
    "models": set(),
    "data": {"models"},
    "train": {"data", "models"},
    "evaluation": {"train", "data", "models"},
    "search": {"models"},
    "players": {"search", "models"},
    "rl": {"players", "search", "models"},
    "frontends": {"players", "search", "data", "models"},  # data: othello-solve --make-obf's expert games
}
SHARED = {"cli", "files", "lock", "run_folder", "plots", "tracking", "commands", "settings"}


def _imports(path):
    tree = ast.parse(path.read_text())
    names = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names


def test_packages_by_role_import_down_the_layers_only():
    """The folder tree is the architecture: a subpackage imports only those below it, so a new
    reader can follow the search, the players, the loop and the front-ends one way."""
    for path in (REPO / "othello").glob("*.py"):
        if path.name != "__main__.py":  # ``python -m othello perft``: a command, run as every command runs
            assert not {m for m in _imports(path) if m.startswith("othello_learn")}, path
        tree = ast.parse(path.read_text())
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level and n.module in
                    ("cli", "files")], path  # those moved to othello_learn
    seen = set()
    for path in (REPO / "othello_learn").rglob("*.py"):
        part = path.relative_to(REPO / "othello_learn").parts[0].removesuffix(".py")
        seen.add(part)
        allowed = MAY_IMPORT.get(part, set()) | {part} | SHARED
        for module in _imports(path):
            if module.startswith("othello_learn."):
                target = module.split(".")[1]
                assert target in allowed, f"{path.relative_to(REPO)} imports {module}"
            if part in SHARED and module.startswith("othello_learn."):  # the helpers serve everything
                assert module.split(".")[1] in SHARED, f"{path.relative_to(REPO)} imports {module}"
    assert set(MAY_IMPORT) | SHARED | {"__init__"} == seen


def test_no_module_of_the_loop_or_the_training_passes_400_lines():
    """A module of the loop or the training holds one concern, small enough to read: the loop's
    settings, run-folder files, worker processes and stages each live in their own, and train.py is
    the command and its fit, with its arguments, resume checks, stops and Lightning's log lines beside it."""
    long = {path.relative_to(REPO).as_posix(): n for part in ("rl", "train")
            for path in (REPO / "othello_learn" / part).rglob("*.py")
            if (n := len(path.read_text().splitlines())) > 400}
    assert not long, long


def test_each_subpackage_lists_its_modules():
    """``__all__`` of each part of othello_learn names exactly its modules: the package docstring's map
    of the part stays true as modules come and go."""
    for part in MAY_IMPORT:
        package = importlib.import_module(f"othello_learn.{part}")
        modules = {p.stem for p in Path(package.__file__).parent.glob("*.py")} - {"__init__"}
        assert sorted(package.__all__) == sorted(modules), part
