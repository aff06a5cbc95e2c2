"""The terminal game, the arena's human player and the games kept by the arena
and self-play: driven through their input as a person would (reading the board
that was printed, checked against the slow reference engine), and every
transcript replayed by that engine."""

from __future__ import annotations

import csv
import io
import os
import pty
import random
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import reference_engine as ref
from othello import Position
from othello.notation import PASS, format_transcript, parse_square, parse_transcript, square_name
from othello.states import States
from othello_learn.frontends import terminal as play
from othello_learn.players.arena import play_match, write_games
from othello_learn.players.base import GreedyPlayer, RandomPlayer
from othello_learn.players.specs import make_player

REPO = Path(__file__).resolve().parents[1]
HC = REPO / "checkpoints" / "cpu_hc_long.pt"  # policy only
RL = REPO / "checkpoints" / "cpu_rl_warm_long.pt"  # policy + value
HEADER = "   a  b  c  d  e  f  g  h"
FAKE = f"{sys.executable} {REPO / 'tests' / 'fake_engines' / 'gtp_engine.py'}"


def last_board(text: str):
    """The last board printed: {square: cell} with cells 'X', 'O', '*', '.' or a percentage."""
    screen = text.splitlines()
    at = max(i for i, line in enumerate(screen) if line.strip() == HEADER.strip())
    header, lines = screen[at], screen[at + 1: at + 9]
    assert [header.index(f) for f in "abcdefgh"] == [2 + 3 * c + 1 for c in range(8)]  # each letter over its discs
    cells = {}
    for r, line in enumerate(lines):
        assert line.startswith(f"{r + 1} "), line
        row = line[2:]
        for c in range(8):
            cells[8 * r + c] = row[3 * c: 3 * c + 3].strip().strip("[]()")
    return cells


def ref_board(cells) -> list[list[int]]:
    return [[1 if cells[8 * r + c] == "X" else -1 if cells[8 * r + c] == "O" else 0 for c in range(8)] for r in range(8)]


class Person:
    """stdin for the game: answers each prompt like a person, from the board on
    screen: first the scripted lines, then a random marked square (or pass when
    none is marked). Checks that the marks are exactly the reference engine's
    legal moves for ``colour``."""

    def __init__(self, out: io.StringIO, colour: int, seed: int = 0, script=(), then_eof: bool = False):
        self.out, self.colour, self.rng = out, colour, random.Random(seed)
        self.script, self.then_eof = list(script), then_eof
        self.prompts = 0

    def readline(self) -> str:
        self.prompts += 1
        assert self.prompts < 300, "the game keeps asking"
        if self.script:
            return self.script.pop(0) + "\n"
        if self.then_eof:
            return ""
        cells = last_board(self.out.getvalue())
        marked = sorted(sq for sq, v in cells.items() if v not in ("X", "O", "."))
        expected = sorted(8 * r + c for r, c in ref.legal(ref_board(cells), self.colour))
        assert marked == expected
        return (square_name(self.rng.choice(marked)) if marked else "pass") + "\n"


def run_game(argv, script=(), colour=1, seed=0, then_eof=False):
    out = io.StringIO()
    rc = play.main(argv, stdin=Person(out, colour, seed, script, then_eof), stdout=out)
    return rc, out.getvalue()


def replay_reference(transcript: str):
    """The slow engine's board after the moves, passes inferred, and whether each move was legal."""
    board, colour = ref.start_board(), 1
    for sq in parse_transcript(transcript):
        if not ref.legal(board, colour):
            colour = -colour
        r, c = divmod(sq, 8)
        assert (r, c) in ref.legal(board, colour), f"{square_name(sq)} illegal in {transcript}"
        board, colour = ref.apply(board, colour, r, c), -colour
    return board


def transcript_of(text: str) -> str:
    return re.search(r"Transcript: (\S*)", text).group(1)


# --------------------------------------------------------------------------
# The terminal game


@pytest.mark.parametrize("opponent,colour,seed", [("random", "black", 1), ("greedy", "white", 2)])
def test_full_game_to_the_end(opponent, colour, seed):
    rc, text = run_game(["--opponent", opponent, "--colour", colour, "--seed", str(seed)],
                        colour=1 if colour == "black" else -1, seed=seed)
    assert rc == 0 and "Traceback" not in text
    board = replay_reference(transcript_of(text))
    assert ref.game_over(board)
    m = re.search(r"Final score: black (\d+), white (\d+): (.*) \(black ([+-]\d+)", text)
    d = ref.final_score(board)
    assert int(m.group(4)) == d
    assert (int(m.group(1)), int(m.group(2))) == (sum(v == 1 for row in board for v in row),
                                                  sum(v == -1 for row in board for v in row))
    mine = d if colour == "black" else -d
    assert m.group(3) == ("a draw" if mine == 0 else f"you win by {mine}" if mine > 0 else f"you lose by {-mine}")


def test_invalid_input_gets_a_reason_and_the_prompt_again():
    rc, text = run_game(["--opponent", "greedy"], script=["z9", "e4", "i1", "pass", "", "hello there", "F5", "quit"])
    assert rc == 0 and "Traceback" not in text
    assert "'z9' is not a move or a command" in text
    assert "e4 is not legal here; legal moves: d3, c4, f5, e6" in text
    assert "'i1' is not a move" in text
    assert "you cannot pass: you have legal moves (d3, c4, f5, e6)" in text
    assert "type a move (legal: d3, c4, f5, e6), or help" in text
    assert "'hello there' is not a move" in text
    assert text.count("your move: ") == 8  # 7 prompts on the first move, then one after F5 and the reply
    assert transcript_of(text).startswith("f5") and len(transcript_of(text)) == 4
    assert "game abandoned" in text


def test_undo_takes_back_the_move_and_the_reply():
    rc, text = run_game(["--opponent", "greedy"], script=["undo", "f5", "undo", "d3", "quit"])
    assert rc == 0
    assert "Nothing to undo." in text
    assert re.search(r"Took back f5 [a-h][1-8]\.", text)
    t = transcript_of(text)
    assert t.startswith("d3") and len(t) == 4
    replay_reference(t)


def test_hints():
    _, text = run_game(["--opponent", "greedy"], script=["hint", "quit"])
    assert play.NO_HINT in text
    _, text = run_game(["--opponent", f"policy:{RL}"], script=["hint", "quit"])
    line = next(x for x in text.splitlines() if "hint:" in x)
    assert "value" in line and "for you (black)" in line
    net = make_player(f"policy:{RL}")
    expected = square_name(int(net.select(States.from_positions([Position()]), np.random.default_rng(0))[0]))
    assert line.split("hint: ")[1].startswith(expected + " ")
    _, text = run_game(["--opponent", "greedy", "--hint-net", str(HC)], script=["hint", "quit"])
    line = next(x for x in text.splitlines() if "hint:" in x)
    assert "value" not in line
    pct = [int(p) for p in re.findall(r"(\d+)%", line)]
    assert len(pct) == 4 and abs(sum(pct) - 100) <= 2  # four legal moves at the start
    for spec in (f"gumbel:{RL}:4", f"endgame:10:policy:{RL}"):  # the network inside a search or a solver's wrapper
        _, text = run_game(["--opponent", spec], script=["hint", "quit"])
        assert "hint:" in text and play.NO_HINT not in text, spec


def test_the_board_marks_the_last_moves_flips_and_the_moves_are_listed():
    """The opponent's reply in brackets, each disc it flipped in parentheses (the reference engine's
    flips), the notes count them, and every move so far is listed below the board, passes named."""
    rc, text = run_game(["--opponent", "greedy", "--seed", "3"], script=["f5", "d3", "quit"])
    assert rc == 0
    moves = parse_transcript(transcript_of(text))
    screen = text[text.rindex(HEADER):]
    rows = screen.splitlines()[1:9]
    marked = {8 * r + c: rows[r][2 + 3 * c: 5 + 3 * c] for r in range(8) for c in range(8)}
    before, after = replay_reference(format_transcript(moves[:-1])), replay_reference(format_transcript(moves))
    flipped = {8 * r + c for r in range(8) for c in range(8) if before[r][c] and before[r][c] != after[r][c]}
    assert {sq for sq, cell in marked.items() if cell.startswith("(")} == flipped and flipped
    assert [sq for sq, cell in marked.items() if cell.startswith("[")] == [moves[-1]]
    assert f"moves: {' '.join(f'{n}.{square_name(m)}' for n, m in enumerate(moves, 1))}\n" in screen
    n = len(flipped)
    assert f"greedy plays {square_name(moves[-1])}, flipping {n} disc{'s' if n > 1 else ''}." in screen
    long = play.TerminalGame(GreedyPlayer(), True, io.StringIO(), io.StringIO(), tty=False)
    long.game.extend(_whole_moves())
    listed = long.move_list()
    assert all(len(line) <= 78 for line in listed.splitlines()) and len(listed.splitlines()) > 1
    assert " ".join(listed.split()) == "moves: " + " ".join(
        f"{n}.{'pass' if m == PASS else square_name(m)}" for n, m in enumerate(long.game.moves, 1))


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("tty, no_colour, coloured", [(True, None, True), (True, "1", False), (False, None, False)])
def test_colour_only_on_a_terminal_without_no_color(tty, no_colour, coloured, monkeypatch):
    """ANSI colours on a terminal; plain text where NO_COLOR is set, or output is a pipe, a file or a
    test. The coloured board is the plain one, cell for cell, once its colour codes are taken out."""
    if no_colour is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_colour)
    out = _Terminal() if tty else io.StringIO()
    game = play.TerminalGame(GreedyPlayer(), True, io.StringIO(), out, start=Position.from_transcript("f5f6"))
    game.draw()
    text = out.getvalue()
    assert ("\x1b[" in text.replace(play.CLEAR, "")) == coloured
    plain = io.StringIO()
    play.TerminalGame(GreedyPlayer(), True, io.StringIO(), plain, tty=tty, ansi=False,
                      start=Position.from_transcript("f5f6")).draw()
    assert re.sub(r"\x1b\[[0-9;]*m", "", text) == plain.getvalue()


def test_levels_are_documented_player_specs_and_exclude_opponent(tmp_path, monkeypatch, capsys):
    """Each level is a spec of the shipped networks that --help lists with its strength; read from
    the checkout from another folder; --level with --opponent is one line, exit 2."""
    doc = " ".join(play.__doc__.split())
    assert list(play.LEVELS) == ["easy", "medium", "hard", "max"] and play.DEFAULT_OPPONENT == play.LEVELS["medium"]
    for level, spec in play.LEVELS.items():
        assert f"{level} {spec}," in doc, level
    rc = play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("")), ["--level", "hard", "--opponent", "greedy"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--level hard and --opponent greedy" in err[0], err
    monkeypatch.chdir(tmp_path)
    for level in play.LEVELS:
        rc, text = run_game(["--level", level], script=["quit"])
        spec = play.LEVELS[level].replace("checkpoints/", str(REPO / "checkpoints") + "/")
        assert rc == 0 and f"opponent: {spec}   " in text, (level, text[:300])
    monkeypatch.setattr(play, "HOME", tmp_path / "no-checkout")
    assert play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("")), ["--level", "max"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("--level max, endgame:14:gumbel:checkpoints/best_selfplay.pt:100, is a "
                                             f"network of the othello-learn checkout and is not here or in "
                                             f"{tmp_path / 'no-checkout'}; run from the checkout, or give --opponent "
                                             "(alphabeta:3, policy:CKPT, ...)"), err


def test_show_policy_puts_percentages_on_the_legal_squares():
    _, text = run_game(["--opponent", "greedy", "--hint-net", str(HC), "--show-policy"], script=["quit"])
    cells = last_board(text)
    marked = {sq: int(v) for sq, v in cells.items() if v.isdigit()}
    assert sorted(marked) == Position().legal_moves()
    assert abs(sum(marked.values()) - 100) <= 2
    assert play.run_main(play.main, ["--opponent", "greedy", "--show-policy"]) == 2  # no network to show


def test_eof_ends_cleanly():
    rc, text = run_game(["--opponent", "greedy"], script=["f5"], then_eof=True)
    assert rc == 0 and "Input ended: game abandoned." in text and "Traceback" not in text
    assert text.count("game abandoned.") == 1
    assert transcript_of(text).startswith("f5")


class Interrupted(io.StringIO):
    """stdin that gives ``lines``, then is interrupted at the next prompt: ``os.kill`` sends the
    signal (SIGTERM goes through the handler play.py sets), or Ctrl-C's KeyboardInterrupt is raised."""

    def __init__(self, lines, sig):
        super().__init__("".join(line + "\n" for line in lines))
        self.sig = sig

    def readline(self, *a):
        line = super().readline(*a)
        if line:
            return line
        if self.sig == signal.SIGINT:
            raise KeyboardInterrupt
        if signal.getsignal(self.sig) in (signal.SIG_DFL, None):  # the signal would end pytest too
            raise AssertionError("play.py does not handle the signal")
        os.kill(os.getpid(), self.sig)
        time.sleep(5)  # the handler raises before this ends
        raise AssertionError("the signal was not handled")


def _abandoned(argv, stdin, path, capsys, out=None):
    """(exit status, stderr lines, stdout, the saved game) of a game that ends before its end."""
    from othello import formats

    out = out or io.StringIO()
    rc = play.run_main(lambda a: play.main(a, stdin=stdin, stdout=out), argv + ["--save", str(path)])
    [rec] = formats.parse_ggf(path.read_text())
    assert not [f for f in path.parent.iterdir() if f.name.endswith(".tmp")]
    return rc, capsys.readouterr().err.strip().splitlines(), out.getvalue(), rec


@pytest.mark.parametrize("sig,code,said", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated"),
                                            (signal.SIGHUP, 129, "hung up")])
def test_an_interrupted_game_is_saved_and_its_transcript_printed(sig, code, said, tmp_path, capsys):
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
    rc, err, text, rec = _abandoned(["--opponent", "greedy"], Interrupted(["f5"], sig), tmp_path / "g.ggf", capsys)
    assert rc == code and len(err) == 1 and err[0].endswith(f": {said}")  # as before the game was kept
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == handlers
    t = transcript_of(text)  # the move and the reply
    assert t.startswith("f5") and len(t) == 4 and text.count("game abandoned.") == 1 and "(unfinished)" in text
    assert rec.moves == parse_transcript(t) and rec.result is None and rec.white == "greedy"


class GoneTerminal(io.StringIO):
    """A terminal that closes with the hang-up: every write after it fails, as a tty's does (EIO)."""

    def __init__(self, stdin):
        super().__init__()
        self.stdin = stdin

    def write(self, text):
        if self.stdin.hung_up:
            raise OSError(5, "Input/output error")
        return super().write(text)


def test_a_hang_up_saves_the_game_though_the_terminal_is_gone(tmp_path, capsys):
    class HungUp(Interrupted):
        hung_up = False

        def readline(self, *a):
            line = io.StringIO.readline(self, *a)
            if not line:
                self.hung_up = True
            return line or Interrupted.readline(self, *a)

    stdin = HungUp(["f5"], signal.SIGHUP)
    rc, err, text, rec = _abandoned(["--opponent", "greedy"], stdin, tmp_path / "g.ggf", capsys, GoneTerminal(stdin))
    assert rc == 129 and err[-1].endswith(": hung up") and "game abandoned." not in text
    assert len(rec.moves) == 2 and rec.moves[0] == parse_square("f5") and rec.result is None


@pytest.mark.parametrize("fault,message", [("--illegal", "which is illegal")])  # a hang takes the same path, 2 s later
def test_a_game_an_engine_fails_in_is_saved_and_its_transcript_printed(fault, message, tmp_path, capsys):
    spec = f"gtp:timeout=1:{FAKE} {fault}"
    rc, err, text, rec = _abandoned(["--opponent", spec], io.StringIO("f5\n"), tmp_path / "g.ggf", capsys)
    assert rc == 2 and len(err) == 1 and message in err[0] and "after f5" in err[0]
    assert transcript_of(text) == "f5" and "game abandoned." in text
    assert rec.moves == [parse_square("f5")] and rec.result is None and rec.white == spec


def test_bad_opponent_is_one_line_exit_2(capsys):
    assert play.run_main(play.main, ["--opponent", "nosuch"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown player spec 'nosuch'" in err[0]
    assert play.run_main(play.main, ["--opponent", "policy:/nonexistent/x.pt"]) == 2
    assert "/nonexistent/x.pt" in capsys.readouterr().err
    for flag, said in (("--opponent", "a player spec"), ("--hint-net", "a checkpoint")):  # the default played
        assert play.run_main(play.main, [flag, ""]) == 2
        assert capsys.readouterr().err.endswith(f" error: {flag}: empty; give {said}, or leave the flag out\n")


def test_the_default_opponent_away_from_the_checkout_says_where_it_lives(tmp_path, monkeypatch, capsys):
    """A plain pip install run from another folder has no checkpoints/: the error named a
    missing file, not that the default is the checkout's network nor how to pick another."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(play, "HOME", tmp_path / "no-checkout")
    assert play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("")), []) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "default opponent" in err[0] and "give --opponent" in err[0], err


@pytest.mark.parametrize("spec", ["gtp:/nonexistent", "endgame:10:gtp:/nonexistent"])
def test_an_engine_that_cannot_start_is_one_line_before_the_first_prompt(spec, capsys):
    out = io.StringIO()
    rc = play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("f5\nquit\n"), stdout=out), ["--opponent", spec])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--opponent: cannot start engine '/nonexistent'" in err[0]
    assert out.getvalue() == ""  # no board, no prompt: the move typed was never asked for


def test_a_full_game_against_a_gtp_engine(tmp_path):
    """A GTP engine cannot be given a board: play.py tells it the game's moves, as the arena does.
    The engine started for the check plays the game (it was started twice: a book loaded twice)
    and is stopped at the end."""
    starts, pid = tmp_path / "starts", tmp_path / "pid"
    rc, text = run_game(["--opponent", f"gtp:timeout=20:{FAKE} --starts-file {starts} --pid-file {pid}"],
                        colour=1, seed=4)
    assert rc == 0 and "Final score" in text
    assert ref.game_over(replay_reference(transcript_of(text)))
    assert starts.read_text() == "started\n"
    for _ in range(100):  # stopped by close, not left to the interpreter's exit
        try:
            os.kill(int(pid.read_text()), 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the engine is still running after the game")


def _find(pred, seed=0):
    """A position reached by random play where ``pred`` holds."""
    rng = random.Random(seed)
    for _ in range(200):
        pos = Position()
        while not pos.is_over():
            if pred(pos):
                return pos
            moves = pos.legal_moves()
            pos = pos.play(rng.choice(moves) if moves else PASS)
    raise AssertionError("no such position found")


def test_forced_passes_are_announced_and_only_then_accepted():
    pos = _find(lambda p: p.must_pass())  # the human must pass
    colour = pos.black_to_move
    out = io.StringIO()
    person = Person(out, 1 if colour else -1, script=["f5", "pass", "quit"])
    game = play.TerminalGame(GreedyPlayer(), colour, person, out, start=pos)
    game.play()
    text = out.getvalue()
    assert "You have no legal move and must pass: type pass or press Enter." in text
    assert "you have no legal move: type pass (or press Enter)" in text
    assert "You pass." in text and game.game.moves[0] == PASS
    # Enter passes too
    out = io.StringIO()
    game = play.TerminalGame(GreedyPlayer(), colour, Person(out, 0, script=["", "quit"]), out, start=pos)
    game.play()
    assert game.game.moves[:1] == [PASS]
    # the opponent's pass
    out = io.StringIO()
    game = play.TerminalGame(GreedyPlayer(), not colour, Person(out, 0, script=["quit"]), out, start=pos)
    game.play()
    assert "greedy has no legal move and passes." in out.getvalue()


def test_a_game_started_from_moves_plays_on_from_them_and_keeps_them(tmp_path):
    """--start f5d6c3: the line's moves open the game (transcript, saved record) and are not
    the human's to undo; white (the human, here) is to move after three moves."""
    from othello import formats
    path = tmp_path / "game.ggf"
    rc, text = run_game(["--opponent", "greedy", "--colour", "white", "--start", "f5d6c3", "--save", str(path)],
                        script=["undo"], colour=-1, seed=2)
    assert rc == 0 and "Nothing to undo." in text and "Final score" in text
    assert transcript_of(text).startswith("f5d6c3") and ref.game_over(replay_reference(transcript_of(text)))
    [rec] = formats.parse_ggf(path.read_text())
    assert [m for m in rec.moves if m != PASS][:3] == parse_transcript("f5d6c3") and rec.black == "greedy"


def test_a_saved_game_resumes_where_it_was_left(tmp_path, capsys):
    """--save then --start GAME.ggf: a game quit halfway goes on from its last position (with its
    passes), and saving again keeps every move."""
    from othello import formats

    from test_formats import random_game

    moves = next(m[:-6] for s in range(2000) if PASS in (m := random_game(s))[:-6])  # a pass in the part played
    path = tmp_path / "game.ggf"
    play.write_ggf(path, [(moves, "human", "greedy")])
    out = io.StringIO()
    black = Position()
    for m in moves:
        black = black.play(m)
    colour = "black" if black.black_to_move else "white"  # the human moves first on resuming
    rc = play.main(["--opponent", "greedy", "--colour", colour, "--start", str(path), "--save", str(path)],
                   stdin=io.StringIO("quit\n"), stdout=out)
    assert rc == 0 and transcript_of(out.getvalue()) == format_transcript([m for m in moves if m != PASS])
    [rec] = formats.parse_ggf(path.read_text())
    assert rec.moves == moves
    two = tmp_path / "two.ggf"
    play.write_ggf(two, [(moves, "a", "b"), (moves, "a", "b")])
    setup = tmp_path / "setup.ggf"
    setup.write_text(formats.format_ggf(formats.GameRecord(moves=[], start=black)) + "\n")
    for bad, said in ((two, "holds 2 games"), (setup, "starts from a set-up board"), (tmp_path / "none.ggf", "none.ggf")):
        assert play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("quit\n"), stdout=io.StringIO()),
                             ["--opponent", "greedy", "--start", str(bad)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err


def test_a_saved_game_with_a_byte_order_mark_resumes(tmp_path):
    """A Windows editor's byte-order mark was "text outside any game". (The file is read as UTF-8,
    as --save writes it, also where the locale's encoding is another: latin-1 mangled "José".)"""
    path = tmp_path / "game.ggf"
    play.write_ggf(path, [(parse_transcript("f5d6c3"), "José", "greedy")])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    game = play.saved_game(path)
    assert game.black == "José" and game.moves == parse_transcript("f5d6c3")


def test_a_saved_game_resumes_with_its_colours_and_opponent_unless_told_otherwise(tmp_path, capsys):
    """The saved game named who played what (PB, PW): resumed without --colour and --opponent,
    you took black against the default network, which played your side's moves."""
    from othello import formats

    path, again = tmp_path / "game.ggf", tmp_path / "again.ggf"
    play.write_ggf(path, [(parse_transcript("f5"), "greedy", "human")])  # you were white
    out = io.StringIO()
    assert play.main(["--start", str(path), "--save", str(again)], stdin=io.StringIO("quit\n"), stdout=out) == 0
    assert f"resuming {path}: you play white against greedy" in out.getvalue() and "You: white" in out.getvalue()
    [rec] = formats.parse_ggf(again.read_text())
    assert (rec.black, rec.white) == ("greedy", "human")
    out = io.StringIO()  # what is given wins
    assert play.main(["--start", str(path), "--colour", "black", "--opponent", "random"], stdin=io.StringIO("quit\n"),
                     stdout=out) == 0
    assert "resuming" not in out.getvalue() and "You: black" in out.getvalue() and "opponent: random" in out.getvalue()
    marker = tmp_path / "ran"
    for program in (f"gtp:touch {marker}", f"endgame:4:nboard:touch {marker}"):  # a game file runs no command
        hostile = tmp_path / "hostile.ggf"
        play.write_ggf(hostile, [(parse_transcript("f5"), program, "human")])
        assert play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("quit\n"), stdout=io.StringIO()),
                             ["--start", str(hostile)]) == 2
        assert "starts a program; give it as --opponent to run it" in capsys.readouterr().err
        assert not marker.exists()
    gone = tmp_path / "gone.ggf"
    play.write_ggf(gone, [(parse_transcript("f5"), "human", "policy:no/such.pt")])
    notgame = tmp_path / "games.csv"
    notgame.write_text("moves\n")
    for start, said in ((gone, f"--start {gone}: the saved opponent (give --opponent to choose another): "),
                        (notgame, f"--start {notgame}: a file, but not a .ggf game")):
        assert play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("quit\n"), stdout=io.StringIO()),
                             ["--start", str(start)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err


def _whole_moves() -> list[int]:
    pos, moves = Position(), []
    while not pos.is_over():
        mv = (pos.legal_moves() or [PASS])[0]
        pos, moves = pos.play(mv), moves + [mv]
    return moves


def _whole_game() -> str:
    return format_transcript(_whole_moves())


@pytest.mark.parametrize("start,message", [("f5d6x9", "'x' where a move"), ("f5f5", "ply 2 (f5): f5 is not legal here (legal: "),
                                           ("whole", "the game is over after these moves"),
                                           ("whole+a1", "(a1): a1 is not legal here (the game is over)")])
def test_a_bad_start_is_one_line_before_the_first_prompt(start, message, capsys):
    start = start.replace("whole", _whole_game()).replace("+", "")
    out = io.StringIO()
    rc = play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("quit\n"), stdout=out),
                       ["--opponent", "greedy", "--start", start])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--start" in err[0] and message in err[0], err
    assert out.getvalue() == ""


def test_a_save_that_fails_at_the_end_still_prints_the_score_and_the_transcript(tmp_path, capsys, monkeypatch):
    """A full disk at the end lost the finished game: the error came before the score and the
    transcript, which keep it (a transcript can be played again with --start)."""
    import errno

    def full_disk(path, games):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(play, "write_ggf", full_disk)
    out = io.StringIO()
    rc = play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("c5\n"), stdout=out),
                       ["--opponent", "alphabeta:1", "--start", "e6f4e3f6g5d6e7f5", "--save", str(tmp_path / "g.ggf")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "no space left on device" in err[0] and "g.ggf" in err[0], err
    text = out.getvalue()
    assert "Final score" in text and transcript_of(text) == "e6f4e3f6g5d6e7f5c5" and "Saved to" not in text


def test_a_finished_saved_game_is_one_error_without_a_resuming_line(tmp_path, capsys):
    """Resuming a finished game printed "resuming ...: you play white against greedy" before its error."""
    path = tmp_path / "done.ggf"
    play.write_ggf(path, [(_whole_moves(), "greedy", "human")])
    out = io.StringIO()
    rc = play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("quit\n"), stdout=out), ["--start", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "the game is over after these moves" in err[0], err
    assert out.getvalue() == ""


def test_a_save_name_that_start_could_not_resume_is_refused_before_the_game(tmp_path, capsys):
    out = io.StringIO()
    rc = play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("quit\n"), stdout=out),
                       ["--opponent", "greedy", "--save", str(tmp_path / "game.txt")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--save " in err[0] and "game.txt: expected a .ggf file name" in err[0]
    assert out.getvalue() == "" and not (tmp_path / "game.txt").exists()
    rc, _ = run_game(["--opponent", "greedy", "--save", str(tmp_path / "game.GGF")], seed=1)  # any case
    assert rc == 0 and (tmp_path / "game.GGF").exists()


def test_save_ggf_round_trips(tmp_path):
    from othello import formats
    path = tmp_path / "game.ggf"
    rc, text = run_game(["--opponent", "greedy", "--seed", "4", "--save", str(path)], seed=4)
    assert rc == 0
    [rec] = formats.parse_ggf(path.read_text())
    assert [m for m in rec.moves if m != PASS] == parse_transcript(transcript_of(text))
    assert rec.black == "human" and rec.white == "greedy"
    assert rec.result == ref.final_score(replay_reference(transcript_of(text)))


def test_terminal_redraws_in_place_under_a_pty():
    master, slave = pty.openpty()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(REPO / "selfplay" / "play.py"), "--opponent", "greedy"],
                            stdin=slave, stdout=slave, stderr=slave, cwd=REPO, env=env)
    os.close(slave)
    os.write(master, b"f5\nhint\nquit\n")
    data, deadline = b"", time.time() + 60
    while time.time() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            data += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.wait(timeout=30) == 0
    text = data.decode(errors="replace")
    assert text.count(play.CLEAR) == 2 and "Traceback" not in text
    assert "Transcript: f5" in text


# --------------------------------------------------------------------------
# The arena's human player


def test_arena_human_player_reads_moves_with_the_same_prompt():
    out = io.StringIO()
    # Both games wait on the human in turn; the person reads each board shown.
    human = play.HumanPlayer(inp=None, out=out)
    colours = []

    class Seat:
        def readline(self):
            m = re.findall(r"you are (black|white)", out.getvalue())
            colours.append(m[-1])
            return Person(out, 1 if m[-1] == "black" else -1, seed=len(colours)).readline() if len(colours) != 1 else "z9\n"

    human.inp = Seat()
    result = play_match(human, RandomPlayer(), 2, seed=3, progress=True)
    text = out.getvalue()
    assert "'z9' is not a move or a command" in text
    assert {"black", "white"} <= set(colours)
    for i, t in enumerate(result.transcripts):
        board = replay_reference(t)
        assert ref.game_over(board)
        d = ref.final_score(board)
        assert result.disc_diffs[i] == (d if result.a_black[i] else -d)


def test_arena_human_quit_abandons_the_match():
    proc = subprocess.run([sys.executable, str(REPO / "selfplay" / "arena.py"), "--a", "human", "--b", "random",
                           "--games", "2"], input="hint\nundo\nquit\n", capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=60)
    assert proc.returncode == 1
    assert "hints need a network: play as human:CKPT" in proc.stdout
    assert "undo is not available here" in proc.stdout
    assert "match abandoned: the human player quit" in proc.stderr and "Traceback" not in proc.stderr


def test_arena_checks_an_engine_before_the_human_plays():
    proc = subprocess.run([sys.executable, str(REPO / "selfplay" / "arena.py"), "--a", "human", "--b", "gtp:/nonexistent",
                           "--games", "1"], input="f5\nquit\n", capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "arena.py: error: --b: cannot start engine '/nonexistent': [Errno 2] No such file or directory: '/nonexistent'"]


# --------------------------------------------------------------------------
# Keeping the games


def test_arena_games_out_csv_and_ggf(tmp_path):
    result = play_match(GreedyPlayer(), RandomPlayer(), 6, seed=5, progress=False)
    write_games(tmp_path / "games.csv", result)
    with open(tmp_path / "games.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6
    for i, row in enumerate(rows):
        assert row["transcript"].startswith(row["opening"]) and len(row["opening"]) == 8
        a_black = i % 2 == 0
        assert row["a_colour"] == ("black" if a_black else "white")
        assert (row["black"], row["white"]) == (("greedy", "random") if a_black else ("random", "greedy"))
        board = replay_reference(row["transcript"])
        assert ref.game_over(board) and int(row["black_disc_diff"]) == ref.final_score(board)
        d = ref.final_score(board)
        assert row["winner"] == ("black" if d > 0 else "white" if d < 0 else "draw")
        assert result.disc_diffs[i] == (d if a_black else -d)
    from othello import formats
    write_games(tmp_path / "games.ggf", result)
    recs = formats.parse_ggf((tmp_path / "games.ggf").read_text())
    assert [[m for m in r.moves if m != PASS] for r in recs] == [parse_transcript(r["transcript"]) for r in rows]
    assert [r.result for r in recs] == [float(r["black_disc_diff"]) for r in rows]


def test_arena_cli_rejects_other_games_out_suffix(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "selfplay" / "arena.py"), "--a", "random", "--b", "random",
                           "--games", "2", "--games-out", str(tmp_path / "x.txt")], capture_output=True, text=True,
                          cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=60)
    assert proc.returncode == 2 and "expected a .csv or .ggf" in proc.stderr
    assert not (tmp_path / "x.txt").exists()


@pytest.fixture(scope="module")
def selfplay_games():
    from othello_learn.models.nets import NetConfig, build_network
    from othello_learn.search.mcts import Evaluator, MCTSConfig
    from othello_learn.rl.selfplay import SelfPlayConfig, play_games

    torch.manual_seed(0)
    tiny = {"arch": "resnet", "encoder": "raw", "blocks": 1, "width": 8, "value_head": True}
    net = build_network(NetConfig(**tiny)).eval()
    return play_games(Evaluator(net, "cpu"), 8, MCTSConfig(simulations=4),
                      SelfPlayConfig(resign_threshold=-0.3, no_resign_fraction=0.5), seed=2, progress=False)


def test_selfplay_games_keep_their_moves(selfplay_games):
    g = selfplay_games
    assert g.moves is not None and g.moves.shape[0] == len(g.winner)
    for i in range(len(g.winner)):
        moves = g.game_moves(i)
        assert len(moves) == g.length[i] and (g.moves[i, len(moves):] == -1).all()
        positions = [Position()]
        for mv in moves:
            positions.append(positions[-1].play(mv))
        # every sample of the game is the position before one of its moves, in play order
        at_choice = [p for p in positions[:-1] if p.legal_moves()]
        if g.resigned[i]:  # the side to move resigned at the last position: recorded, not played
            at_choice.append(positions[-1])
        samples = np.nonzero(g.game == i)[0]
        assert [(int(g.player[s]), int(g.opponent[s])) for s in samples] == [(p.player, p.opponent) for p in at_choice]
        if not g.resigned[i]:
            assert positions[-1].is_over() and positions[-1].score() == g.disc_diff[i]
        board = replay_reference(g.transcript(i))
        assert ref.to_bitboards(board, 1 if positions[-1].black_to_move else -1) == (positions[-1].player, positions[-1].opponent)
    assert g.resigned.any(), "the test should cover a resigned game"


def test_selfplay_npz_backward_compatible(selfplay_games, tmp_path):
    from othello_learn.rl.selfplay import SelfPlayGames

    g = selfplay_games
    g.save(tmp_path / "new.npz")
    back = SelfPlayGames.load(tmp_path / "new.npz")
    assert np.array_equal(back.moves, g.moves) and back.transcript(0) == g.transcript(0)
    old = {k: v for k, v in g.__dict__.items() if k != "moves" and v is not None}  # (nor the network: none here)
    np.savez(tmp_path / "old.npz", **old)  # a file written before moves were kept
    legacy = SelfPlayGames.load(tmp_path / "old.npz")
    assert legacy.moves is None and np.array_equal(legacy.policy, g.policy)
    with pytest.raises(ValueError, match="without their moves"):
        legacy.game_moves(0)
    legacy.save(tmp_path / "old2.npz")  # saving it again works, still without moves
    both = SelfPlayGames.concat([back, back])
    assert both.moves.shape[0] == 2 * len(g.winner) and both.transcript(len(g.winner)) == g.transcript(0)
    short = SelfPlayGames(**{**back.__dict__, "moves": back.moves[:, :70]})
    assert SelfPlayGames.concat([short, back]).moves.shape[1] == back.moves.shape[1]
    assert SelfPlayGames.concat([legacy, back]).moves is None


def test_a_failed_save_leaves_the_old_generation_file(selfplay_games, tmp_path, monkeypatch):
    """A generation file is the loop's record: a save that dies half-way keeps the one there."""
    from othello_learn.rl import selfplay as sp_module

    path = tmp_path / "gen_0001.npz"
    selfplay_games.save(path)
    before = path.read_bytes()

    def dies(f, **arrays):
        f.write(b"PK half a zip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sp_module.np, "savez", dies)
    with pytest.raises(OSError):
        selfplay_games.save(path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["gen_0001.npz"]


# --------------------------------------------------------------------------
# One position, no batch plumbing


def test_legal_move_names():
    pos = Position.from_transcript("f5d6c3")
    assert pos.legal_moves(names=True) == [square_name(s) for s in pos.legal_moves()]
    board = replay_reference("f5d6c3")
    assert sorted(pos.legal_moves(names=True)) == sorted(square_name(8 * r + c) for r, c in ref.legal(board, -1))


def test_best_move_matches_the_batched_players():
    from othello_learn.models.batch import from_arrays
    from othello_learn.models.nets import load_network
    from othello_learn.search.mcts import Evaluator
    from othello_learn.players.network import PolicyPlayer, best_move

    rng = random.Random(0)
    positions = []
    pos = Position()
    while not pos.is_over():
        positions.append(pos)
        moves = pos.legal_moves()
        pos = pos.play(rng.choice(moves) if moves else PASS)
    final = pos
    for ckpt, has_value in ((HC, False), (RL, True)):
        net = load_network(ckpt)
        player, ev = PolicyPlayer(net, "cpu"), Evaluator(net, "cpu")
        for pos in positions[::6]:
            sq, probs, value = best_move(net, pos)
            if not pos.legal_moves():
                assert sq == PASS and not probs.any()
                continue
            chosen = player.select(States.from_positions([pos]), np.random.default_rng(0))[0]
            assert sq == chosen
            b = from_arrays([pos.player], [pos.opponent], [pos.black_to_move], None, "cpu")
            prior, v = ev(b["player"], b["opponent"], b["history"], b["black_to_move"])
            np.testing.assert_allclose(probs, prior[0, :64].double().numpy(), atol=1e-5)
            assert (probs[[s for s in range(64) if s not in pos.legal_moves()]] == 0).all()
            if has_value:
                assert value == pytest.approx(float(v[0]), abs=1e-5) and -1 <= value <= 1
            else:
                assert value is None
    with pytest.raises(ValueError, match="game is over"):
        best_move(net, final)


def test_best_move_reads_the_history_most_recent_first():
    """On a net whose planes read the last moves (handcrafted), best_move's probabilities and
    value are the batched evaluator's given the same history, most recent first; a forced
    pass is minus the value after it, whose history starts with the pass."""
    from othello.states import last_actions
    from othello_learn.models.batch import from_arrays
    from othello_learn.models.nets import NetConfig, build_network
    from othello_learn.search.mcts import Evaluator
    from othello_learn.players.network import best_move

    torch.manual_seed(0)
    net = build_network(NetConfig(arch="resnet", encoder="handcrafted", blocks=1, width=8, value_head=True)).eval()
    ev = Evaluator(net, "cpu")

    def batched(pos, history):
        b = from_arrays([pos.player], [pos.opponent], [pos.black_to_move], np.array([history], np.int64), "cpu")
        prior, v = ev(b["player"], b["opponent"], b["history"], b["black_to_move"])
        return prior[0, :64].double().numpy(), float(v[0])

    rng, seen, passed = random.Random(0), [], None
    while passed is None:  # random games until one has a forced pass
        pos, moves = Position(), []
        while not pos.is_over() and passed is None:
            if pos.legal_moves():
                seen.append((pos, list(last_actions(moves))))
            else:
                passed = (pos, list(last_actions(moves)))
            moves.append(rng.choice(pos.legal_moves()) if pos.legal_moves() else PASS)
            pos = pos.play(moves[-1])
    for pos, hist in seen[:60:4]:
        sq, probs, value = best_move(net, pos, hist)
        prior, v = batched(pos, hist)
        np.testing.assert_allclose(probs, prior, atol=1e-5)
        assert value == pytest.approx(v, abs=1e-5)
    pos, hist = passed
    sq, probs, value = best_move(net, pos, hist)
    assert sq == PASS and value == pytest.approx(-batched(pos.play(PASS), [PASS] + hist[:3])[1], abs=1e-5)


def test_best_move_leaves_a_training_net_training_and_reads_it_in_eval_mode():
    from othello_learn.models.nets import load_network
    from othello_learn.players.network import best_move

    net = load_network(RL)
    pos = Position.from_transcript("f5d6c3")
    want = best_move(net, pos)
    net.train()
    got = best_move(net, pos)
    assert net.training and got[0] == want[0] and got[2] == want[2]
    np.testing.assert_array_equal(got[1], want[1])


def test_best_move_values_a_forced_pass_as_the_position_after_it():
    from othello_learn.models.nets import load_network
    from othello_learn.players.network import best_move

    net = load_network(RL)
    pos = _find(lambda p: p.must_pass() and not p.is_over())
    square, probs, value = best_move(net, pos, [parse_square("d3")])
    after = best_move(net, pos.play(PASS), [PASS, parse_square("d3")])
    assert square == PASS and not probs.any() and value == pytest.approx(-after[2])


# --------------------------------------------------------------------------
# Small pins: command words, the board header after a pass, hints' length, the arena's
# last move, what an engine is told, an upper-case .GGF name


@pytest.mark.parametrize("word,kind", [("undo", "undo"), ("U", "undo"), ("takeback", "undo"), ("hint", "hint"),
                                       ("h", "hint"), ("?", "hint"), ("Help", "help"), ("quit", "quit"), ("q", "quit"),
                                       ("exit", "quit"), ("resign", "quit"), ("  D3 ", "move")])
def test_every_command_word(word, kind):
    cmd = play.parse_command(word, Position())
    assert cmd.kind == kind and (cmd.square == parse_square("d3") if kind == "move" else True)


def test_after_a_pass_the_header_counts_discs_played_and_brackets_the_last_disc():
    """A move that leaves the opponent without one, then the opponent's pass: the header says
    move 2 (a pass puts no disc on the board) and the move's disc keeps its brackets."""
    start = _find(lambda p: any(p.play(m).must_pass() for m in p.legal_moves()))
    m = next(m for m in start.legal_moves() if start.play(m).must_pass())
    out = io.StringIO()
    game = play.TerminalGame(GreedyPlayer(), start.black_to_move, io.StringIO(), out, tty=False, start=start)
    game.game.play(m)
    game.game.play(PASS)
    game.draw()
    text = out.getvalue()
    row = next(x for x in text.splitlines() if x.startswith(f"{m // 8 + 1} "))
    assert "   move 2\n" in text and text.count("[") == 1
    assert row[2 + 3 * (m % 8): 5 + 3 * (m % 8)] == ("[X]" if start.black_to_move else "[O]")


def test_a_hint_names_the_networks_top_five_moves():
    from othello_learn.models.nets import load_network
    from othello_learn.players.network import best_move

    net = load_network(str(HC))
    pos = Position.from_transcript("f5d6c3d3c4f4")
    assert len(pos.legal_moves()) > 5
    _, probs, _ = best_move(net, pos, [])
    top = sorted(pos.legal_moves(), key=lambda s: -probs[s])[:5]
    line = play.hint_text(net, pos, [])
    assert [m.split()[0] for m in line.split("hint: ")[1].split(", ")] == [square_name(s) for s in top]


def test_the_arena_human_is_shown_the_most_recent_move():
    out = io.StringIO()
    pos = Position.from_transcript("f5d6")
    human = play.HumanPlayer(inp=io.StringIO(square_name(pos.legal_moves()[0]) + "\n"), out=out)
    human.select(States.from_positions([pos], np.array([[parse_square("d6"), parse_square("f5"), -1, -1]])),
                 np.random.default_rng(0))
    assert "you are black (X); last move d6\n" in out.getvalue()


def test_an_engine_is_told_the_moves_only_of_a_game_from_the_start():
    told = []

    class Engine(GreedyPlayer):
        uses_moves = True

        def select(self, states, rng, moves=None):
            told.append(None if moves is None else [list(m) for m in moves])
            return super().select(states, rng)

    for start in (Position(), Position.from_transcript("f5")):
        game = play.TerminalGame(Engine(), start.black_to_move is False, io.StringIO(), io.StringIO(), start=start)
        game.opponent_move()
    assert told == [[[]], None]


def test_a_game_saved_under_an_upper_case_name_resumes(tmp_path):
    path = tmp_path / "GAME.GGF"
    play.write_ggf(path, [(parse_transcript("f5d6"), "human", "greedy")])
    out = io.StringIO()
    rc = play.main(["--opponent", "greedy", "--start", str(path)], stdin=io.StringIO("quit\n"), stdout=out)
    assert rc == 0 and transcript_of(out.getvalue()) == "f5d6"


def test_saved_sides_needs_one_human_and_a_named_program():
    from othello.formats import GameRecord

    from othello_learn.frontends.terminal import saved_sides

    assert saved_sides(GameRecord(black=" human ", white=" greedy ")) == ("black", "greedy")
    assert saved_sides(GameRecord(black="random", white="human")) == ("white", "random")
    assert saved_sides(GameRecord(black="human", white="human")) is None
    assert saved_sides(GameRecord(black="human", white="  ")) is None
    assert saved_sides(GameRecord(black="greedy", white="random")) is None


def test_a_resumed_game_with_one_side_given_says_so_and_names_the_flag_of_a_bad_opponent(tmp_path, capsys):
    path = tmp_path / "game.ggf"
    play.write_ggf(path, [(parse_transcript("f5"), "greedy", "human")])  # you were white
    out = io.StringIO()
    assert play.main(["--start", str(path), "--opponent", "random"], stdin=io.StringIO("quit\n"), stdout=out) == 0
    assert f"resuming {path}: you play white against random" in out.getvalue()
    capsys.readouterr()
    assert play.run_main(lambda argv: play.main(argv, stdin=io.StringIO("quit\n"), stdout=io.StringIO()),
                         ["--start", str(path), "--opponent", "policy:no/such.pt"]) == 2
    err = capsys.readouterr().err.strip()
    assert "error: --opponent: bad player spec" in err and "saved opponent" not in err, err

