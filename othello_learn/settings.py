"""One declaration of each setting, for every command: a ``Setting`` says a value's kind,
default, help, range and choices once, and its one check (``Setting.check``) validates it
wherever it comes from: a command-line argument (``Setting.argument``, argparse's keywords),
a training recipe's YAML and its ``--set`` overrides (``check_table``), the loop's
``RunConfig`` field and the run folder's config.json (``Setting.field``). An error is one line,
``NAME: PROBLEM`` (``--games: must be at least 1, got 0``, ``model.width: must be at most
4096, got 4097 (in FILE)``); argparse words it ``argument --games: PROBLEM``.

Ours rather than LightningCLI or pydantic: no new dependency (pydantic is none of ours, and
LightningCLI's jsonargparse would be another), one error format naming the flag or the setting
and the file or ``--set`` it came from (theirs are multi-line reports), YAML numbers as YAML
1.2 reads them (``train/config.py``'s loader), every command's ``--help`` unchanged, and the
loop's settings with their own resume rules (``resumable``, ``saved_default``)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
from collections.abc import Callable, Sequence
from typing import Any

from othello_learn.files import UserError

_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", dict: "a mapping",
          None: "null"}


def type_ok(value, kind) -> bool:
    """Whether ``value`` (from YAML, JSON or a config file) is of ``kind``: a type, None, or a tuple of
    them (any class: its instances); ``object``: anything. Stricter than isinstance where a slip would pass: true is no integer,
    and a number may be an integer."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if k is object or (k is None and value is None) or (k is bool and isinstance(value, bool)):
            return True
        if k in (int, float) and isinstance(value, (int, float) if k is float else int) \
                and not isinstance(value, bool):
            return True
        if isinstance(k, type) and k not in (int, float, bool) and isinstance(value, k):  # str, dict, Path
            return True
    return False


def type_name(kind) -> str:
    """``kind`` in words, for an error: "an integer or null"."""
    return " or ".join(_NAMES.get(k) or f"a {k.__name__}" for k in (kind if isinstance(kind, tuple) else (kind,)))


def _below(x) -> str:
    """An exclusive ceiling as an error shows it: a large power of two as one (a seed's 2**64, a bit width)."""
    if isinstance(x, int) and x >= 2**32 and x & (x - 1) == 0:
        return f"2**{x.bit_length() - 1}"
    return str(x)


class SettingError(UserError, ValueError):
    """A setting's value refused: ``NAME: PROBLEM``, with where it came from when known."""

    def __init__(self, name: str, problem: str, where: str | None = None):
        super().__init__(f"{name}: {problem}" + (f" ({where})" if where else ""))
        self.name, self.problem = name, problem


@dataclasses.dataclass(frozen=True)
class Setting:
    """A setting's declaration. ``kind``: int, float, bool, str, dict, ``object`` (any), or a
    tuple of them, None among them where null is allowed; a float is finite unless ``infinite``.
    ``low`` / ``high``: inclusive ends,
    exclusive with ``low_open`` / ``high_open``. ``choices``: the values allowed. ``high`` and
    ``choices`` may be functions returning them, read at the check (those whose home imports
    torch: ``--help`` needs none). ``rule``: a
    further check returning a problem or None (a union of ranges, a year list). ``note``: why the
    ceiling is where it is, said with an error at it (a typo's digits would fill memory)."""

    kind: Any = int
    default: Any = None
    help: str = ""
    low: int | float | None = None
    high: int | float | Callable[[], int | float] | None = None
    low_open: bool = False
    high_open: bool = False
    choices: Sequence | Callable[[], Sequence] | None = None
    infinite: bool = False  # inf allowed (a wait without end); nan never
    rule: Callable[[Any], str | None] | None = None
    note: str = ""

    def allowed(self) -> Sequence | None:
        return self.choices() if callable(self.choices) else self.choices

    def ceiling(self) -> int | float | None:
        return self.high() if callable(self.high) else self.high

    def problem(self, value) -> str | None:
        """What is wrong with ``value``, in words ("must be at least 1, got 0"), or None."""
        if not type_ok(value, self.kind):
            return f"expected {type_name(self.kind)}, got {value!r}"
        if isinstance(value, float) and (math.isnan(value) or not (self.infinite or math.isfinite(value))):
            return f"must be a {'' if self.infinite else 'finite '}number, got {value!r}"  # nan passes every bound
        if value is None or isinstance(value, bool):
            return None
        allowed = self.allowed()
        if allowed is not None and value not in allowed:
            return f"expected one of {', '.join(map(str, allowed))}, got {value!r}"
        if isinstance(value, (int, float)):  # the range is a number's (a precision may be a name)
            if self.low is not None and (value <= self.low if self.low_open else value < self.low):
                return f"must be {'above' if self.low_open else 'at least'} {self.low}, got {value!r}"
            note, high = f" ({self.note})" if self.note else "", self.ceiling()
            if high is not None and (value >= high if self.high_open else value > high):
                return f"must be {f'below {_below(high)}' if self.high_open else f'at most {high}'}, got {value!r}{note}"
        return self.rule(value) if self.rule else None

    def check(self, value, name: str, where: str | None = None):
        """``value`` if it is allowed, else a ``SettingError`` naming the setting (and ``where``
        it came from: "in FILE", "from --set KEY=VALUE")."""
        problem = self.problem(value)
        if problem:
            raise SettingError(name, problem, where)
        return value

    def convert(self, text: str):
        """A command-line word as this setting's kind, unchecked (argparse's ``type``)."""
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        for kind in (int, float):
            if kind in kinds:
                try:
                    return kind(text)
                except ValueError:
                    raise argparse.ArgumentTypeError(f"expected {_NAMES[kind]}, got {text!r}") from None
        return text

    def parse(self, text: str):
        """A command-line word as this setting's value, checked: argparse's ``type``, whose error
        argparse words ``argument --flag: PROBLEM``."""
        value = self.convert(text)
        problem = self.problem(value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    def argument(self, checked: bool = True, **extra) -> dict:
        """``add_argument``'s keywords for this setting: its type (checked at parse time unless
        ``checked`` is false), default and help; choices show as argparse shows them, checked by
        ``parse`` so that a wrong one is worded as every other setting's error."""
        kw = {"help": self.help} if self.help else {}  # else the call's own help=
        if self.kind is bool:
            return {"action": "store_true", **kw, **extra}
        kw.update(type=self.parse if checked else self.convert, default=self.default)
        allowed = self.allowed()
        if allowed is not None:
            kw["metavar"] = "{" + ",".join(map(str, allowed)) + "}"
        return {**kw, **extra}

    def field(self, **metadata) -> dataclasses.Field:
        """A dataclass field holding this setting, its declaration in ``metadata["setting"]``;
        no default makes it a required field."""
        default = dataclasses.MISSING if self.default is REQUIRED else self.default
        return dataclasses.field(default=default, metadata={"setting": self, **metadata})


REQUIRED = object()  # a field's default that makes it required


def imported(module: str, name: str, then: Callable[[Any], Any] = lambda value: value) -> Callable[[], Any]:
    """A setting's ceiling or choices read from its home when a check needs it (``then`` of
    ``module.name``): those homes import torch or numpy, and ``--help`` needs neither."""
    return lambda: then(getattr(importlib.import_module(module), name))


def check_table(values: dict, table: dict, prefix: str = "", where: Callable[[str], str | None] = lambda key: None,
                other: Setting | None = None) -> None:
    """Check each of ``values`` against its ``Setting`` in ``table`` (a recipe's section, say), the
    setting named ``prefix + key`` and ``where(key)`` saying where it came from; a key the table
    lacks against ``other``, where given."""
    for key, value in values.items():
        setting = table.get(key, other)
        if setting is not None:
            setting.check(value, prefix + key, where(key))


def at_least(low: float, kind=int, above: bool = False, most: float | None = None):
    """An argparse ``type`` for a number of ``kind`` from ``low`` (above it, with ``above``) up to
    ``most``: a ``Setting`` declared in place."""
    return Setting(kind, low=low, low_open=above, high=most).parse


def seed_below(limit: int):
    """An argparse ``type`` for a command's ``--seed``: 0 up to ``limit`` - 1, what its generators
    take (``torch.manual_seed``: below 2**64; numpy's legacy seeding, which Lightning's
    ``seed_everything`` uses: below 2**32); beyond it they fail with a traceback after the work
    has been set up."""
    return Setting(int, low=0, high=limit, high_open=True).parse


seed_arg = seed_below(2**64)
