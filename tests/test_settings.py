"""One setting, one check, one error line: from a flag, a recipe's --set, the loop's settings."""

import argparse
import dataclasses

import pytest

from othello_learn.files import UserError
from othello_learn.settings import Setting, SettingError, check_table


@pytest.mark.parametrize("setting,value,problem", [
    (Setting(int, low=1), 0, "must be at least 1, got 0"),
    (Setting(float, low=0, low_open=True), 0.0, "must be above 0, got 0.0"),
    (Setting(float, low=0, high=1, high_open=True), 1.0, "must be below 1, got 1.0"),
    (Setting(int, low=0, high=2**64, high_open=True), 2**64, "must be below 2**64, got 18446744073709551616"),
    (Setting(int, high=10, note="why"), 11, "must be at most 10, got 11 (why)"),
    (Setting(float, low=0), float("nan"), "must be a finite number, got nan"),
    (Setting(int), True, "expected an integer, got True"),
    (Setting((int, None), low=1), "8", "expected an integer or null, got '8'"),
    (Setting(str, choices=lambda: ["a", "b"]), "c", "expected one of a, b, got 'c'"),
    (Setting(int, rule=lambda v: "odd" if v % 2 else None), 3, "odd"),
])
def test_one_check_words_each_problem(setting, value, problem):
    assert setting.problem(value) == problem
    with pytest.raises(SettingError, match=f"^x.y: {__import__('re').escape(problem)} \\(in c.yaml\\)$"):
        setting.check(value, "x.y", "in c.yaml")


@pytest.mark.parametrize("setting,good", [
    (Setting(int, low=1, high=10), [1, 10]), (Setting(float, low=-1, high=1), [-1, 1.0, 0]),
    (Setting((int, None), low=1), [None, 5]), (Setting(str, choices=("a",)), ["a"]), (Setting(object), [[1], {}])])
def test_the_ends_and_null_where_allowed_pass(setting, good):
    for value in good:
        assert setting.check(value, "x") == value


def test_a_flag_a_table_and_a_field_share_the_check_and_its_words():
    games = Setting(int, 100, "number of games", low=1)
    ap = argparse.ArgumentParser()
    ap.add_argument("--games", **games.argument())
    assert ap.parse_args([]).games == 100 and ap.parse_args(["--games", "3"]).games == 3
    with pytest.raises(argparse.ArgumentTypeError, match="^must be at least 1, got 0$"):
        games.parse("0")
    with pytest.raises(argparse.ArgumentTypeError, match="^expected an integer, got 'x'$"):
        games.parse("x")
    with pytest.raises(UserError, match="^sec.games: must be at least 1, got 0 \\(from --set sec.games=0\\)$"):
        check_table({"games": 0, "other": -5}, {"games": games}, "sec.", lambda key: f"from --set sec.{key}=0")

    declared = games

    @dataclasses.dataclass
    class Config:
        games: int = declared.field(resumable=True)

    f = dataclasses.fields(Config)[0]
    assert Config().games == 100 and f.metadata["setting"] is games and f.metadata["resumable"]


def test_choices_show_in_help_as_argparse_shows_them_and_are_refused_in_the_one_format(capsys):
    ap = argparse.ArgumentParser(prog="p")
    ap.add_argument("--tta", **Setting(int, 1, "symmetries", choices=[1, 4, 8]).argument())
    assert "--tta {1,4,8}" in ap.format_help()
    with pytest.raises(SystemExit):
        ap.parse_args(["--tta", "5"])
    assert "argument --tta: expected one of 1, 4, 8, got 5" in capsys.readouterr().err
