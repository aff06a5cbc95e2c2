"""A training run's recipe: a YAML file of four sections (model, optim, data, trainer) with
``--set SECTION.KEY=VALUE`` overrides, every setting checked for its name, type and range
before any work starts, so a typo is one line naming the setting and where it came from, not
a traceback an hour in. ``train.py`` reads it; the benchmarks read the shipped recipes with it."""

from __future__ import annotations

import argparse
import datetime
import re
from collections.abc import Hashable
from pathlib import Path

import yaml  # (a Lightning dependency)

from othello_learn.files import NestingError, UserError, one_line, parse_nested
from othello_learn.settings import Setting, SettingError, check_table, imported


class _Loader(yaml.SafeLoader):
    """YAML as people write numbers: PyYAML follows YAML 1.1, where ``1e-4`` (no dot) is a
    string, so ``lr: 1e-4`` or ``--set optim.lr=1e-4`` would be refused as "not a number".
    And without aliases: no config needs them, and nested ones ("billion laughs") make a
    505-byte file a value whose error message alone runs to gigabytes."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, f"an alias (*{event.anchor}): "
                                              "configs take plain values, no anchors or aliases", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        """A key given twice is refused: YAML keeps the last in silence (a second ``model:`` section
        replaced the first whole, and the run trained another network)."""
        seen = set()
        for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():  # !!set x: super() says
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):  # {[1]: 2}: super() says so with its place ("key in seen" raised)
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"{key!r} is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node, deep=False):
        """A value its resolver or tag promised but that does not construct is a YAML error with its
        place, not PyYAML's bare exception: ``2014-13-45`` (a date, month 13), ``!!int x`` or
        ``!!bool x`` was a traceback from the file and from ``--set`` alike."""
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise yaml.constructor.ConstructorError(None, None, f"{node.value!r} is no {node.tag.rsplit(':', 1)[-1]} "
                                                    f"({one_line(e)})", node.start_mark) from None


# Numbers as YAML 1.2 reads them, in place of YAML 1.1's: "010" is ten, not octal eight (a
# model.width=010 trained a width-8 net), and "1:12:00:00" is text, not sexagesimal 259200 (a
# trainer.max_time Lightning reads as DD:HH:MM:SS was refused as "got 259200"); a float's sign
# comes once, and it has a digit ("--.inf" and "._" passed for floats, then float() raised a traceback).
_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    _INT, re.compile(r"^[-+]?(?:[0-9][0-9_]*|0x_*[0-9a-fA-F][0-9a-fA-F_]*|0b_*[01][01_]*)$"), list("-+0123456789"))
_Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?"
               r"|[0-9][0-9_]*[eE][-+]?[0-9]+|\.(?:inf|Inf|INF))$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."))


def _construct_int(loader, node):
    """YAML 1.1's integers less its octal and sexagesimal ones (the resolver above): a leading 0 is
    decimal, as in YAML 1.2; underscores are dropped, as YAML 1.1 does."""
    text = loader.construct_scalar(node).replace("_", "")
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    base = {"0x": 16, "0b": 2}.get(text[:2], 10)
    return sign * int(text[2:] if base != 10 else text, base)


_Loader.add_constructor(_INT, _construct_int)


def _yaml(text: str):
    return parse_nested(lambda t: yaml.load(t, Loader=_Loader), text)


SECTIONS = ("model", "optim", "data", "trainer")


def _size(key: str):
    """A network size's ceiling (``NetConfig``'s): beyond it a typo's extra digits would allocate
    until memory runs out, then end in a traceback."""
    return imported("othello_learn.models.nets", "SIZE_LIMITS", lambda limits: limits[key])


def _years(value) -> str | None:
    from othello_learn.data.dataset import parse_years

    try:
        parse_years(str(value))
    except (ValueError, UserError) as e:
        return str(e)
    return None


def _batches(zero: bool):
    """Lightning's count of batches, or fraction of an epoch: its own checks end in a traceback
    (val_check_interval=0: a modulo by zero a step in) or in words that do not fit (-1 "has to
    be ... an int")."""
    def rule(value) -> str | None:
        if isinstance(value, int) and value < (0 if zero else 1) or isinstance(value, float) and not (
                (0 <= value if zero else 0 < value) and value <= 1):
            return (f"must be a whole number of batches (at least {0 if zero else 1}) or a fraction of an epoch "
                    f"({'0.0' if zero else 'above 0'} to 1.0), got {value!r}")
        return None
    return rule


def _time_budget(value) -> str | None:
    """Lightning builds a timedelta of a mapping after the set-up, or an OverflowError."""
    if isinstance(value, dict):
        try:
            datetime.timedelta(**value)
        except (TypeError, ValueError, OverflowError) as e:
            return f"not a time budget such as {{hours: 2}} ({one_line(e)})"
    return None


def _trains(value) -> str | None:
    return "0 trains nothing: give at least 1, or -1 for no limit" if value == 0 else None


# Loader processes: each one a Python with torch; more than the largest machines' cores only waits.
MAX_WORKERS = 128
# Every integer setting's ceiling: a typo's extra digits would allocate until memory runs out, end in
# Lightning's OverflowError (accumulate_grad_batches=99999999999999999999) or set a run that never ends.
MAX_BATCHES = 10**9  # steps and batches: more than any run here takes by far
MAX_INT = 2**31 - 1  # any other integer, a Lightning setting not typed here (min_steps, ...): its counters' int32
YEARS = (str, int)
# Every setting of each section: model is othello_learn.models.nets.NetConfig's fields, optim
# MovePredictor's other arguments, data WthorDataModule's (restated so that --help needs no torch;
# a test keeps them in step); their defaults are those classes'.
SETTINGS = {
    "model": {"arch": Setting(str, choices=imported("othello_learn.models.nets", "ARCHITECTURES", sorted)),
              "encoder": Setting(str, choices=imported("othello_learn.models.encoders", "ENCODERS", sorted)),
              "depth": Setting(int, low=1, high=_size("depth")), "width": Setting(int, low=1, high=_size("width")),
              "blocks": Setting(int, low=1, high=_size("blocks")), "value_head": Setting(bool)},
    "optim": {"lr": Setting(float, low=0, low_open=True), "weight_decay": Setting(float, low=0),
              "scheduler": Setting(str, choices=imported("othello_learn.train.module", "SCHEDULERS", list)),
              "value_weight": Setting(float, low=0), "label_smoothing": Setting(float, low=0, high=1, high_open=True),
              "ema": Setting(float, low=0, high=1, high_open=True)},  # 0: off
    "data": {"batch_size": Setting(int, low=1, high=2**20),
             "symmetries": Setting(str, choices=imported("othello_learn.models.batch", "SYMMETRY_GROUPS", sorted)),
             **{key: Setting(YEARS, high=MAX_INT, rule=_years) for key in ("train_years", "val_years", "test_years")},
             "train_positions": Setting((int, None), low=1, high=2**40),
             "val_positions": Setting((int, None), low=1, high=2**40), "num_workers": Setting(int, low=0, high=MAX_WORKERS)},
    # the trainer settings we check; the others go to Lightning as they are (if finite)
    "trainer": {"max_epochs": Setting(int, low=-1, high=10**6, rule=_trains),
                "max_steps": Setting(int, low=-1, high=MAX_BATCHES, rule=_trains),
                "log_every_n_steps": Setting(int, low=1, high=MAX_BATCHES),
                "val_check_interval": Setting((int, float), high=MAX_BATCHES, rule=_batches(zero=False)),
                "enable_progress_bar": Setting(bool), "enable_model_summary": Setting(bool),
                "max_time": Setting((dict, str, None), rule=_time_budget), "precision": Setting((str, int), high=MAX_INT),
                "gradient_clip_val": Setting((float, None), low=0),
                "accumulate_grad_batches": Setting(int, low=1, high=10_000),
                "limit_train_batches": Setting((int, float), high=MAX_BATCHES, rule=_batches(zero=False)),
                "limit_val_batches": Setting((int, float), high=MAX_BATCHES, rule=_batches(zero=True)),
                "check_val_every_n_epoch": Setting((int, None), low=1, high=10**6),
                "num_sanity_val_steps": Setting(int, low=-1, high=MAX_BATCHES), "deterministic": Setting(bool)},
}
SCHEMA = {section: {key: setting.kind for key, setting in SETTINGS[section].items()}
          for section in ("model", "optim", "data")}  # the types, for the README's check and its tests
TRAINER_OWN = ("default_root_dir", "accelerator", "devices", "logger", "callbacks", "use_distributed_sampler",
               "plugins", "enable_checkpointing", "strategy", "num_nodes")  # set by train.py (its Trainer(...) call)


def _trainer_keys() -> list[str]:
    import inspect

    import lightning as L

    return sorted(set(inspect.signature(L.Trainer.__init__).parameters) - {"self", *TRAINER_OWN})


class Origin(str):
    """Where a setting came from, worded for an error ("in FILE", "from --set KEY=VALUE");
    ``from_file`` says which kind, so no check has to read the wording."""

    def __new__(cls, text: str, from_file: bool = False):
        origin = super().__new__(cls, text)
        origin.from_file = from_file
        return origin


def _yaml_problem(e: yaml.YAMLError) -> str:
    """Where and what: PyYAML's first line is often its context ("while scanning a simple key"),
    the problem ("could not find expected ':'") coming after it. The place is where that context
    began (the key without its colon, the unclosed brace or quote), else where the parser stopped:
    a block's context begins with the block ("while parsing a block mapping": line 1 for a stray
    line anywhere in the file)."""
    problem = getattr(e, "problem", None)
    context = getattr(e, "context", None) or ""
    mark = None if "block" in context else getattr(e, "context_mark", None)
    mark = mark or getattr(e, "problem_mark", None)
    if not problem:
        return str(e).splitlines()[0]
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark is not None else problem


RECIPES = Path(__file__).with_name("recipes")  # package data: an installed copy has them too


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPES.glob("*.yaml"))


def config_argument(text: str) -> Path:
    """``--config``'s value: a YAML file, or the name of a recipe the package ships
    (``cpu_value_fast``), so an installed toolkit, which has no checkout's ``train/configs/``,
    still finds them. A file of that name in the current folder comes first."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path; give a YAML file or a recipe's name")
    path = Path(text)
    if path.exists() or any(sep in text for sep in "/\\") or path.suffix in (".yaml", ".yml"):
        return path
    if (RECIPES / f"{text}.yaml").is_file():
        return RECIPES / f"{text}.yaml"
    raise argparse.ArgumentTypeError(f"{text!r}: no such file, nor a recipe's name ({', '.join(recipe_names())})")


def read_config(path: Path | None, overrides: list[str]) -> tuple[dict, dict]:
    """(config, where each setting came from) from the YAML file and ``--set`` items."""
    cfg = {s: {} for s in SECTIONS}
    origin = {}
    if path is not None:
        try:
            loaded = _yaml(Path(path).read_text(encoding="utf-8-sig")) or {}
        except yaml.YAMLError as e:
            raise UserError(f"{path}: not valid YAML ({_yaml_problem(e)})") from None
        except NestingError as e:
            raise UserError(f"{path}: {e}") from None
        except UnicodeDecodeError:
            raise UserError(f"{path}: not a YAML config (a binary file; give a train/configs/*.yaml)") from None
        if not isinstance(loaded, dict):
            raise UserError(f"{path}: expected sections {list(SECTIONS)}, found a {type(loaded).__name__}")
        unknown = set(loaded) - set(SECTIONS) - {"recipe"}
        if unknown:
            raise UserError(f"{path}: unknown sections {sorted(map(str, unknown))}; expected {list(SECTIONS)} "
                            "(and optionally recipe)")
        _check_recipe(path, loaded.get("recipe"))
        for s in SECTIONS:
            section = loaded.get(s) or {}
            if not isinstance(section, dict):
                raise UserError(f"{path}: section {s} must be a mapping of settings, found {section!r}")
            cfg[s].update(section)
            origin.update({(s, k): Origin(f"in {path}", from_file=True) for k in section})
    for item in overrides:
        key, sep, value = item.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or not name or section not in SECTIONS:
            raise UserError(f"--set {item}: expected SECTION.KEY=VALUE with SECTION one of {', '.join(SECTIONS)}")
        try:
            cfg[section][name] = _yaml(value)
        except yaml.YAMLError:
            cfg[section][name] = value
        except NestingError as e:
            raise UserError(f"--set {key}: {e}") from None
        origin[(section, name)] = Origin(f"from --set {item}")
    return cfg, origin


def _check_recipe(path, recipe) -> None:
    """``recipe: {device: gpu, on_cpu: FILE}`` marks a config sized for a GPU and names the
    CPU recipe to suggest instead; it describes the config and sets nothing."""
    if recipe is None:
        return
    if not isinstance(recipe, dict) or set(recipe) - {"device", "on_cpu"} or recipe.get("device") not in ("gpu", "cpu"):
        raise UserError(f"{path}: recipe must be {{device: gpu or cpu, on_cpu: CONFIG}}, found {recipe!r}")
    if "on_cpu" in recipe and not isinstance(recipe["on_cpu"], str):
        raise UserError(f"{path}: recipe.on_cpu must be a config file name, found {recipe['on_cpu']!r}")


def gpu_recipe_warning(path: Path | None, on_gpu: bool) -> str | None:
    """The line to print when a GPU recipe is about to train without a GPU: it runs, but takes
    days where the CPU recipes take two hours, which is better said before than found after."""
    if path is None or on_gpu:
        return None
    recipe = (_yaml(Path(path).read_text(encoding="utf-8-sig")) or {}).get("recipe") or {}
    if recipe.get("device") != "gpu":
        return None
    instead = recipe.get("on_cpu")
    hint = f"; on a CPU use {instead} instead" if instead else ""
    return f"warning: {path} is a GPU recipe and no GPU is in use: it will be very slow here{hint} (continuing)"


def load_config(path: Path | None, overrides: list[str]) -> dict:
    """The config of a YAML file with ``--set SECTION.KEY=VALUE`` overrides, checked
    (``check_config``): a bad setting is a ``UserError`` naming it."""
    cfg, origin = read_config(path, overrides)
    check_config(cfg, origin)
    return cfg


def check_config(cfg: dict, origin: dict | None = None) -> None:
    """Every setting known, of its type and in range (``SETTINGS``), before any work starts."""
    from othello_learn.models.nets import NetConfig, NetConfigError
    from othello_learn.train.module import SCHEDULERS

    origin = origin or {}

    def fail(section, key, problem):
        raise SettingError(f"{section}.{key}", problem, origin.get((section, key)))

    known = {**SETTINGS, "trainer": dict.fromkeys(_trainer_keys())}
    for section in SECTIONS:
        for key in cfg[section]:
            if key not in known[section]:
                fail(section, key, f"unknown setting; the {section} settings are: {', '.join(sorted(known[section]))}")
        check_table(cfg[section], SETTINGS[section], f"{section}.", lambda key, s=section: origin.get((s, key)),
                    other=Setting(object, high=MAX_INT))  # a Lightning setting we pass on: finite, in int32
    try:  # and together (NetConfig's MAX_WEIGHTS): each size within its limit can still be terabytes
        NetConfig.from_dict(cfg["model"])
    except NetConfigError as e:
        layers = "depth" if cfg["model"].get("arch", "reference") == "reference" else "blocks"
        width = origin.get(("model", "width"))  # the other setting to blame, with where it came from
        fail("model", layers, f"{e}" + (f" (width {width})" if width else ""))
    _check_applicable(cfg, origin, fail)
    t = cfg["trainer"]
    if (t.get("max_epochs") == -1 and t.get("max_steps", -1) == -1 and t.get("max_time") is None
            and cfg["optim"].get("scheduler", SCHEDULERS[0]) != "none"):
        fail("trainer", "max_epochs", "an open-ended run (max_epochs=-1) needs a time budget (--max-minutes) "
             "or optim.scheduler=none: the learning-rate schedule has no end")


def _check_applicable(cfg: dict, origin: dict, fail) -> None:
    """Refuse a setting the chosen network does not read, given a value other than its default:
    the run would not be the one asked for. A default is let through (the config.yaml of an
    --init run holds every setting of the net's config), and so is a config file's setting when
    --set changed the architecture it was written for (a variant of a recipe on another net)."""
    import inspect

    from othello_learn.models.nets import ARCH_ONLY, NetConfig  # settings only one architecture reads
    from othello_learn.train.module import MovePredictor

    def switched_away(section, key, by):
        """Whether the setting is the config file's and ``by`` (what it depends on) was given on the
        command line."""
        def from_file(k):
            return getattr(origin.get(k), "from_file", None)

        return from_file((section, key)) is True and any(from_file(("model", k)) is False for k in by)

    model = cfg["model"]
    arch = model.get("arch", "reference")
    for key, owner in ARCH_ONLY.items():
        if arch != owner and model.get(key, getattr(NetConfig, key)) != getattr(NetConfig, key) \
                and not switched_away("model", key, ("arch",)):
            fail("model", key, f"only the {owner} architecture has it, and model.arch is {arch}; remove it")
    default = inspect.signature(MovePredictor.__init__).parameters["value_weight"].default
    if cfg["optim"].get("value_weight", default) != default and not (arch == "resnet" and model.get("value_head")) \
            and not switched_away("optim", "value_weight", ("arch", "value_head")):
        fail("optim", "value_weight", "weighs the value head's loss, and the network has no value head "
             "(model.arch=resnet with model.value_head=true has one); remove it")
