"""A training run's recipe: a YAML file of four sections (model, optim, data, trainer) with
``--set SECTION.KEY=VALUE`` overrides, every setting checked for its name, type and range
before any work starts, so a typo is one line naming the setting and where it came from, not
a traceback an hour in. ``train.py`` reads it; the benchmarks read the shipped recipes with it."""

from __future__ import annotations

import argparse

import datetime
import math
import re
from collections.abc import Hashable
from pathlib import Path

import yaml  # (a Lightning dependency)

from othello_learn.cli import type_name, type_ok
from othello_learn.files import NestingError, UserError, one_line, parse_nested


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

# The settings of each section and their types (None: optional): model is
# othello_learn.models.nets.NetConfig's fields, optim MovePredictor's other arguments, data
# WthorDataModule's (restated so that --help needs no torch; a test keeps them in step).
YEARS = (str, int)
SCHEMA = {
    "model": {"arch": str, "encoder": str, "depth": int, "width": int, "blocks": int, "value_head": bool},
    "optim": {"lr": float, "weight_decay": float, "scheduler": str, "value_weight": float, "label_smoothing": float,
              "ema": float},
    "data": {"batch_size": int, "symmetries": str, "train_years": YEARS, "val_years": YEARS, "test_years": YEARS,
             "train_positions": (int, None), "val_positions": (int, None), "num_workers": int},
}
# Trainer settings we check the type of; the others go to Lightning as they are.
TRAINER_TYPES = {"max_epochs": int, "max_steps": int, "log_every_n_steps": int, "val_check_interval": (int, float),
                 "enable_progress_bar": bool, "enable_model_summary": bool, "max_time": (dict, str, None),
                 "precision": (str, int), "gradient_clip_val": (float, None), "accumulate_grad_batches": int,
                 "limit_train_batches": (int, float), "limit_val_batches": (int, float),
                 "check_val_every_n_epoch": (int, None), "num_sanity_val_steps": int, "deterministic": bool}
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


# Loader processes: each one a Python with torch; more than the largest machines' cores only waits.
MAX_WORKERS = 128
# Every integer setting's ceiling: a typo's extra digits would allocate until memory runs out, end in
# Lightning's OverflowError (accumulate_grad_batches=99999999999999999999) or set a run that never ends.
MAX_BATCHES = 10**9  # steps and batches: more than any run here takes by far
INT_MAXIMA = {("data", "batch_size"): 2**20, ("data", "train_positions"): 2**40, ("data", "val_positions"): 2**40,
              ("data", "num_workers"): MAX_WORKERS, ("trainer", "max_epochs"): 10**6,
              ("trainer", "max_steps"): MAX_BATCHES, ("trainer", "log_every_n_steps"): MAX_BATCHES,
              ("trainer", "val_check_interval"): MAX_BATCHES, ("trainer", "accumulate_grad_batches"): 10_000,
              ("trainer", "limit_train_batches"): MAX_BATCHES, ("trainer", "limit_val_batches"): MAX_BATCHES,
              ("trainer", "check_val_every_n_epoch"): 10**6, ("trainer", "num_sanity_val_steps"): MAX_BATCHES}
MAX_INT = 2**31 - 1  # any other integer, a Lightning setting not typed here (min_steps, ...): its counters' int32


def check_config(cfg: dict, origin: dict | None = None) -> None:
    """Every setting known, of its type and in range, before any work starts."""
    from othello_learn.models.batch import SYMMETRY_GROUPS
    from othello_learn.data.dataset import parse_years
    from othello_learn.models.encoders import ENCODERS
    from othello_learn.models.nets import ARCHITECTURES, SIZE_LIMITS, NetConfig, NetConfigError
    from othello_learn.train.module import SCHEDULERS

    origin = origin or {}

    def fail(section, key, problem):
        where = origin.get((section, key))
        raise UserError(f"{section}.{key}: {problem}" + (f" ({where})" if where else ""))

    known = {**SCHEMA, "trainer": dict.fromkeys(_trainer_keys())}
    for section in SECTIONS:
        for key, value in cfg[section].items():
            if key not in known[section]:
                fail(section, key, f"unknown setting; the {section} settings are: {', '.join(sorted(known[section]))}")
            kind = SCHEMA.get(section, TRAINER_TYPES).get(key)
            if kind is not None and not type_ok(value, kind):
                fail(section, key, f"expected {type_name(kind)}, got {value!r}")
            if isinstance(value, float) and not math.isfinite(value):  # nan passes every bound below
                fail(section, key, f"must be a finite number, got {value!r}")
    choices = {("model", "arch"): sorted(ARCHITECTURES), ("model", "encoder"): sorted(ENCODERS),
               ("optim", "scheduler"): SCHEDULERS, ("data", "symmetries"): sorted(SYMMETRY_GROUPS)}
    for (section, key), allowed in choices.items():
        if key in cfg[section] and cfg[section][key] not in allowed:
            fail(section, key, f"expected one of {', '.join(allowed)}, got {cfg[section][key]!r}")
    minimum = {("model", "depth"): 1, ("model", "width"): 1, ("model", "blocks"): 1, ("data", "batch_size"): 1,
               ("data", "train_positions"): 1, ("data", "val_positions"): 1, ("data", "num_workers"): 0,
               ("optim", "weight_decay"): 0, ("optim", "value_weight"): 0, ("optim", "label_smoothing"): 0,
               ("trainer", "max_epochs"): -1, ("trainer", "max_steps"): -1, ("trainer", "gradient_clip_val"): 0}
    for (section, key), low in minimum.items():
        value = cfg[section].get(key)
        if value is not None and value < low:
            fail(section, key, f"must be at least {low}, got {value!r}")
    # a typo's extra digits would allocate until memory runs out, then end in a traceback (or, for
    # the loader's workers, start 100000 processes and hang): every integer has a ceiling
    maximum = {**{("model", key): high for key, high in SIZE_LIMITS.items()}, **INT_MAXIMA}
    for section in SECTIONS:
        for key, value in cfg[section].items():
            high = maximum.get((section, key), MAX_INT)
            if isinstance(value, int) and not isinstance(value, bool) and value > high:
                fail(section, key, f"must be at most {high}, got {value!r}")
    try:  # and together (NetConfig's MAX_WEIGHTS): each size within its limit can still be terabytes
        NetConfig.from_dict(cfg["model"])
    except NetConfigError as e:
        layers = "depth" if cfg["model"].get("arch", "reference") == "reference" else "blocks"
        width = origin.get(("model", "width"))  # the other setting to blame, with where it came from
        fail("model", layers, f"{e}" + (f" (width {width})" if width else ""))
    budget = cfg["trainer"].get("max_time")
    if isinstance(budget, dict):  # Lightning builds a timedelta of it after the set-up, or an OverflowError
        try:
            datetime.timedelta(**budget)
        except (TypeError, ValueError, OverflowError) as e:
            fail("trainer", "max_time", f"not a time budget such as {{hours: 2}} ({one_line(e)})")
    for key in ("max_epochs", "max_steps"):
        if cfg["trainer"].get(key) == 0:
            fail("trainer", key, "0 trains nothing: give at least 1, or -1 for no limit")
    # Lightning's own checks end in a traceback (val_check_interval=0: a modulo by zero a step in) or
    # in words that do not fit (-1 "has to be ... an int"): a count of batches, or a fraction of them
    for key, zero in (("val_check_interval", False), ("limit_train_batches", False), ("limit_val_batches", True)):
        value = cfg["trainer"].get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int) and value < (0 if zero else 1) or isinstance(value, float) and not (
                (0 <= value if zero else 0 < value) and value <= 1):
            fail("trainer", key, f"must be a whole number of batches (at least {0 if zero else 1}) or a fraction "
                 f"of an epoch ({'0.0' if zero else 'above 0'} to 1.0), got {value!r}")
    for key, low in (("accumulate_grad_batches", 1), ("log_every_n_steps", 1), ("check_val_every_n_epoch", 1),
                     ("num_sanity_val_steps", -1)):
        value = cfg["trainer"].get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value < low:
            fail("trainer", key, f"must be at least {low}, got {value!r}")
    if cfg["optim"].get("lr", 1.0) <= 0:
        fail("optim", "lr", f"must be positive, got {cfg['optim']['lr']!r}")
    if not 0 <= cfg["optim"].get("ema", 0.0) < 1:
        fail("optim", "ema", f"must be in [0, 1) (0: off; e.g. 0.999), got {cfg['optim']['ema']!r}")
    if cfg["optim"].get("label_smoothing", 0.0) >= 1:
        fail("optim", "label_smoothing", f"must be below 1, got {cfg['optim']['label_smoothing']!r}")
    for key in ("train_years", "val_years", "test_years"):
        if key in cfg["data"]:
            try:
                parse_years(str(cfg["data"][key]))
            except (ValueError, UserError) as e:
                fail("data", key, str(e))
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
