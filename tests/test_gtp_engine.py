"""Our players as a GTP engine (othello_learn.frontends.gtp): the protocol's answers,
implied passes, errors that leave the game as it was, and our own GTP client driving it;
what it shares with the NBoard engine (othello_learn.frontends.session) is tested for both."""

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from othello.game import Position
from othello.notation import PASS, square_name
from othello_learn.players.base import AlphaBetaPlayer
from othello_learn.frontends.gtp import GTPEngine, serve
from processes import pid_written
from test_nboard import pass_position

REPO = Path(__file__).resolve().parents[1]


def answers(player, lines, err=None):
    """The answers of a session, one string each (``=`` / ``?`` and the text)."""
    out = io.StringIO()
    serve(player, "test", io.StringIO("".join(line + "\n" for line in lines)), out, err or io.StringIO())
    return [a.strip() for a in out.getvalue().split("\n\n") if a.strip()]


def test_the_protocol_answers_with_ids_and_errors():
    """GTP's standard error messages alone on stdout (a controller may compare them), the
    why on stderr, one line each."""
    err = io.StringIO()
    got = answers(AlphaBetaPlayer(1), ["protocol_version", "7 name", "# a comment", "", "known_command genmove",
                                       "known_command frobnicate", "boardsize 9", "boardsize 8", "komi x",
                                       "komi 0.5", "3 frobnicate", "12 play black f5", "final_score", "quit", "name"],
                  err)
    assert got == ["= 2", "=7 test", "= true", "= false", "? unacceptable size", "=", "? syntax error", "=",
                   "?3 unknown command", "=12", "? cannot score", "="]  # nothing after quit
    assert err.getvalue().splitlines() == ["gtp: boardsize 9: unacceptable size: Othello here is 8x8, not 9",
                                           "gtp: komi x: syntax error: komi takes a number, not x",
                                           "gtp: frobnicate: unknown command: frobnicate",
                                           "gtp: final_score: cannot score: the game is not over"]
    # Quarry's questions, a clock's, GTP's preprocessing (control characters go), odd ids and sizes
    got = answers(AlphaBetaPlayer(1), ["list_games", "set_game othello", "set_game Go", "time_settings 300 0 0",
                                       "time_left black 30 0", "na\x01me", "5", "\u00b2 name", "boardsize",
                                       "play black " + "x" * 10_000, "set_game", "time_settings",
                                       "time_left purple 30 0", "time_left b 30"], err := io.StringIO())
    assert got == ["= Othello", "=", "? unsupported game", "=", "=", "= test", "?5 syntax error", "? unknown command",
                   "? syntax error", "? syntax error", "? syntax error", "? syntax error", "? syntax error",
                   "? syntax error"]
    assert max(len(line) for line in err.getvalue().splitlines()) < 700  # a long bad line is not echoed whole
    listed = answers(AlphaBetaPlayer(1), ["list_commands"])[0].removeprefix("= ").split("\n")
    assert "genmove" in listed and all(answers(AlphaBetaPlayer(1), [f"known_command {c}"]) == ["= true"] for c in listed)


def test_play_and_genmove_keep_the_game_and_refuse_without_changing_it():
    engine = GTPEngine(AlphaBetaPlayer(1), "t", io.StringIO(), io.StringIO())
    for line in ("play B F5", "genmove white"):
        engine.handle(line)
    assert square_name(engine.game.moves[0]) == "f5"
    assert len(engine.game.moves) == 2 and engine.game.position == Position().play("f5").play(engine.game.moves[1])
    before = (list(engine.game.moves), engine.game.position)
    for line in ("play white d3", "play black a1", "play black z9", "play black", "genmove purple", "play black pass"):
        engine.handle(line)
    replies = [a.strip() for a in engine.out.getvalue().split("\n\n") if a.strip()]
    legal = ", ".join(engine.game.position.legal_moves(names=True))
    assert replies[2:] == ["? illegal move", "? illegal move", "? syntax error", "? syntax error", "? syntax error",
                           "? illegal move"]
    assert engine.err.getvalue().splitlines() == [
        f"gtp: play white d3: illegal move: it is black's turn (legal: {legal})",
        f"gtp: play black a1: illegal move: a1 is not legal here (legal: {legal})",
        "gtp: play black z9: syntax error: 'z9' is not a move (a1..h8 or pass)",
        "gtp: play black: syntax error: play takes a colour and a move, as in 'play black d3'",
        "gtp: genmove purple: syntax error: 'purple' is not a colour (black, white, b or w)",
        "gtp: play black pass: illegal move: cannot pass: a legal move exists"]
    assert (engine.game.moves, engine.game.position) == before
    engine.handle("reg_genmove black")  # answered, not played
    assert (engine.game.moves, engine.game.position) == before
    engine.handle("undo")
    engine.handle("undo")
    assert engine.game.moves == [] and engine.game.position == Position()
    engine.handle("undo")
    assert engine.out.getvalue().rstrip().endswith("? cannot undo")


def test_genmove_for_the_colour_not_to_move_says_whose_turn_it_is():
    """Othello has no voluntary pass, so the other colour cannot move while the side to move can:
    GTP's genmove has no standard error for it, and the answer itself names the side to move (as
    Edax's "wrong color"), where a bare "illegal move" left a controller guessing which move."""
    engine = GTPEngine(AlphaBetaPlayer(1), "t", io.StringIO(), io.StringIO())
    for line in ("genmove white", "7 reg_genmove w", "play black f5", "genmove black"):
        engine.handle(line)
    replies = [a.strip() for a in engine.out.getvalue().split("\n\n") if a.strip()]
    assert replies == ["? wrong color: it is black's turn", "?7 wrong color: it is black's turn", "=",
                       "? wrong color: it is white's turn"]
    after = ", ".join(Position().play("f5").legal_moves(names=True))
    assert engine.err.getvalue().splitlines() == [
        "gtp: genmove white: wrong color: it is black's turn (legal: d3, c4, f5, e6)",
        "gtp: reg_genmove w: wrong color: it is black's turn (legal: d3, c4, f5, e6)",
        f"gtp: genmove black: wrong color: it is white's turn (legal: {after})"]
    assert [square_name(m) for m in engine.game.moves] == ["f5"] and engine.turns == [1]  # nothing else played


def test_a_forced_pass_is_implied_by_the_colours_and_genmove_answers_pass():
    moves = pass_position()  # from the start to a position whose side to move must pass
    pos = Position()
    lines = []
    for m in moves:
        lines.append(f"play {'black' if pos.black_to_move else 'white'} {square_name(m)}")
        pos = pos.play(m)
    assert pos.must_pass()
    stuck = "black" if pos.black_to_move else "white"
    other = "white" if pos.black_to_move else "black"
    reply = pos.play(PASS).legal_moves(names=True)[0]
    engine = GTPEngine(AlphaBetaPlayer(1), "t", io.StringIO(), io.StringIO())
    for line in lines + [f"play {other} {reply}"]:  # the pass is not sent, as GRhino and referees do
        assert engine.handle(line)
    assert engine.game.moves == moves + [PASS, pos.play(PASS).legal_moves()[0]]
    assert "?" not in engine.out.getvalue()
    engine.handle("undo")  # the move and the pass it let through
    assert engine.game.moves == moves
    engine.handle(f"genmove {stuck}")
    assert engine.out.getvalue().rstrip().endswith("= pass") and engine.game.moves == moves + [PASS]


def test_final_score_of_a_finished_game():
    from test_formats import random_game

    pos, lines = Position(), []
    for m in random_game(3):
        if m != PASS:
            lines.append(f"play {'black' if pos.black_to_move else 'white'} {square_name(m)}")
        pos = pos.play(m)
    d = pos.score()
    got = answers(AlphaBetaPlayer(1), lines + ["final_score", "genmove black"])
    assert got[-2:] == ["= " + ("0" if d == 0 else f"{'B' if d > 0 else 'W'}+{abs(d)}"), "= pass"]


def test_undo_takes_back_what_one_play_or_genmove_added():
    """A controller that sends its passes counts each as a move and sends one undo for it; only a
    pass we inferred goes with the move after it. Two undos took back a sent pass, the move before
    it and the move after it, and the pass re-sent was refused."""
    moves = pass_position()
    pos = Position()
    for m in moves:
        pos = pos.play(m)
    stuck, other = ("black", "white") if pos.black_to_move else ("white", "black")
    reply = square_name(pos.play(PASS).legal_moves()[0])
    engine = GTPEngine(AlphaBetaPlayer(1), "t", io.StringIO(), io.StringIO())
    for m in moves:
        engine.handle(f"play {'black' if engine.game.position.black_to_move else 'white'} {square_name(m)}")
    for line in (f"play {stuck} pass", f"play {other} {reply}", "undo", "undo"):
        engine.handle(line)
    assert engine.game.moves == moves and engine.game.position == pos
    assert engine.handle(f"play {stuck} pass") and engine.game.moves == moves + [PASS]
    assert "?" not in engine.out.getvalue()


def test_at_the_end_a_pass_is_taken_as_genmove_gives_it_and_undone_alone():
    """A referee relays each engine's moves to the other: genmove's game-over pass came back as a
    play the engine refused, and undo then took back real moves for the passes."""
    from test_formats import random_game

    game = random_game(3)
    engine = GTPEngine(AlphaBetaPlayer(1), "t", io.StringIO(), io.StringIO())
    for m in game:
        if m != PASS:
            engine.handle(f"play {'black' if engine.game.position.black_to_move else 'white'} {square_name(m)}")
    final, played = engine.game.position, list(engine.game.moves)
    assert final.is_over()
    for line in ("genmove black", "play white pass", "undo", "undo"):
        engine.handle(line)
    assert [a.strip() for a in engine.out.getvalue().split("\n\n") if a.strip()][-4:] == ["= pass", "=", "=", "="]
    assert engine.game.position == final and engine.game.moves == played
    engine.handle("undo")  # now the last disc
    assert engine.game.moves == played[:-2 if played[-2] == PASS else -1]  # with a pass inferred before it


def test_a_player_that_fails_is_an_error_answer_and_the_session_goes_on():
    class Failing(AlphaBetaPlayer):
        def select(self, *a, **k):
            raise RuntimeError("the engine fell over")

    err = io.StringIO()
    out = io.StringIO()
    serve(Failing(1), "t", io.StringIO("play black f5\ngenmove white\nname\n"), out, err)
    assert out.getvalue() == "=\n\n? genmove failed: RuntimeError: the engine fell over\n\n= t\n\n"
    assert err.getvalue() == "gtp: genmove white: genmove failed: RuntimeError: the engine fell over\n"


def test_our_gtp_client_drives_our_gtp_engine_move_for_move(tmp_path):
    """The arena's gtp: player over a real pipe plays exactly as the wrapped player itself
    (the engine is a real process; the direct match runs in this one, which is quicker)."""
    from othello_learn.cli import run_main
    from othello_learn.players.arena import main as arena_main

    spec = f"policy:{REPO / 'checkpoints' / 'cpu_rl_warm_long.pt'}"
    wrapped = f"gtp:timeout=60:{sys.executable} {REPO / 'selfplay' / 'gtp.py'} --player {spec}"
    games = {}
    for name, a in (("gtp", wrapped), ("direct", spec)):
        argv = ["--a", a, "--b", "alphabeta:1", "--games", "2", "--seed", "5", "--quiet",
                "--games-out", str(tmp_path / f"{name}.csv")]
        assert run_main(arena_main, argv) == 0
        games[name] = [row["transcript"] for row in csv.DictReader(open(tmp_path / f"{name}.csv"))]
    assert games["gtp"] == games["direct"] and all(len(t) > 100 for t in games["gtp"])


def test_a_bad_player_is_one_line_exit_2(capsys):
    from othello_learn.cli import run_main
    from othello_learn.frontends.gtp import main

    code = run_main(main, ["--player", "policy:nowhere.pt"])
    err = capsys.readouterr()
    assert code == 2 and err.out == "" and len(err.err.splitlines()) == 1 and "--player" in err.err, err


def test_grhinos_set_up_starts_the_game_from_a_board():
    """GRhino's grhino-setup_board, as gtp-rhino reads it: 64 cells a1..h8, then the colour to move."""
    from othello.formats import board_to_text

    pos = Position.from_transcript("f5d6c3d3c4")
    engine = GTPEngine(AlphaBetaPlayer(1), "t", io.StringIO(), io.StringIO())
    cells = board_to_text(pos).replace("O", "0").replace("-", ".")  # GRhino's other spellings too
    for line in (f"grhino-setup_board {cells} white", "play white f4", "genmove black", "undo", "undo", "undo",
                 "grhino-setup_board xx", f"grhino-setup_board {cells} purple"):
        engine.handle(line)
    assert engine.game.start == pos and engine.game.moves == [] and engine.game.position == pos  # undo stops at the set-up board
    replies = [a.strip() for a in engine.out.getvalue().split("\n\n") if a.strip()]
    assert replies[0] == replies[1] == "=" and replies[3:] == ["=", "=", "? cannot undo", "? syntax error",
                                                               "? syntax error"]
    engine.handle(f"grhino-setup_board {cells}")  # black to move unless the colour says otherwise
    assert engine.game.position == Position(pos.opponent, pos.player, True)


@pytest.mark.parametrize("slow_start", [0, 5], ids=["running", "still-loading"])
def test_a_signal_to_the_engine_stops_the_external_player_it_wraps(tmp_path, slow_start):
    """A referee's SIGTERM unwinds the session (exit 143), so an external --player's process
    is stopped with it, not left running: also while that engine is still starting (its
    process up, its first answer not yet given), which used to be the default death."""
    import os
    import signal
    import time

    pid_file = tmp_path / "pid"
    fake = (f"{sys.executable} {REPO / 'tests' / 'fake_engines' / 'gtp_engine.py'} --pid-file {pid_file}"
            f" --slow-start {slow_start}")
    engine = subprocess.Popen([sys.executable, str(REPO / "selfplay" / "gtp.py"), "--player", f"gtp:timeout=60:{fake}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    inner = pid_written(pid_file, engine)
    engine.send_signal(signal.SIGTERM)
    _, err = engine.communicate(timeout=30)
    assert engine.returncode == 143, err
    for _ in range(100):
        try:
            os.kill(inner, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the wrapped engine {inner} outlived the session")


@pytest.mark.parametrize("script,lines,answer", [
    ("nboard.py", [b"nboard 2", b"set game (;GM[Othello]PB[J\xe9r\xf4me]TY[8];)", b"ping 1"], "pong 1"),
    ("gtp.py", [b"na\xffme", b"1 name"], "=1 othello-learn alphabeta:1"),
])
def test_input_bytes_that_are_not_utf8_do_not_end_an_engine_session(script, lines, answer):
    """A GGF name in Latin-1, a stray byte: a refused or tolerated line, not a traceback."""
    import os

    r = subprocess.run([sys.executable, str(REPO / "selfplay" / script), "--player", "alphabeta:1"],
                       input=b"\n".join(lines + [b"quit"]) + b"\n", capture_output=True, timeout=60,
                       env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert r.returncode == 0 and answer in r.stdout.decode(), r.stderr.decode()


def test_reg_genmove_and_a_failed_genmove_leave_the_game_without_the_inferred_pass():
    """At a position whose side to move must pass, asking the other colour for a move infers the
    pass; reg_genmove (answered, not played) and a genmove that fails take it back out."""
    class Failing(AlphaBetaPlayer):
        def select(self, *a, **k):
            raise RuntimeError("the engine fell over")

    moves = pass_position()
    pos = Position()
    for m in moves:
        pos = pos.play(m)
    other = "white" if pos.black_to_move else "black"
    for player, command, answer in ((AlphaBetaPlayer(1), "reg_genmove", "="), (Failing(1), "genmove", "? genmove failed")):
        engine = GTPEngine(player, "t", io.StringIO(), io.StringIO())
        for m in moves:
            engine.handle(f"play {'black' if engine.game.position.black_to_move else 'white'} {square_name(m)}")
        engine.handle(f"{command} {other}")
        last = engine.out.getvalue().strip().split("\n\n")[-1]
        assert last.startswith(answer), last
        if command == "reg_genmove":
            assert last[2:].lower() in pos.play(PASS).legal_moves(names=True)  # the reply after the pass
        assert engine.game.moves == moves and engine.game.position == pos, command


def test_an_illegal_move_after_an_inferred_pass_leaves_the_pass_out_too():
    moves = pass_position()
    pos = Position()
    for m in moves:
        pos = pos.play(m)
    other = "white" if pos.black_to_move else "black"
    after = pos.play(PASS)
    illegal = next(square_name(sq) for sq in range(64) if sq not in after.legal_moves())  # taken, or no flips
    engine = GTPEngine(AlphaBetaPlayer(1), "t", io.StringIO(), io.StringIO())
    for m in moves:
        engine.handle(f"play {'black' if engine.game.position.black_to_move else 'white'} {square_name(m)}")
    engine.handle(f"play {other} {illegal}")
    assert engine.out.getvalue().strip().split("\n\n")[-1] == "? illegal move"
    assert engine.game.moves == moves and engine.game.position == pos and len(engine.game.positions) == len(moves) + 1


@pytest.mark.parametrize("front_end", ["gtp.py", "nboard.py"])
def test_a_hang_up_stops_the_session_and_the_external_player_it_wraps(tmp_path, front_end):
    """A closed terminal or dropped ssh session (SIGHUP) unwinds the session as SIGTERM does
    (exit 129), so the external --player's process is stopped with it, not left thinking."""
    import signal

    from processes import gone_soon

    pid_file = tmp_path / "pid"
    fake = f"{sys.executable} {REPO / 'tests' / 'fake_engines' / 'gtp_engine.py'} --pid-file {pid_file}"
    engine = subprocess.Popen([sys.executable, str(REPO / "selfplay" / front_end), "--player",
                               f"gtp:timeout=60:{fake}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    inner = pid_written(pid_file, engine)
    engine.send_signal(signal.SIGHUP)
    _, err = engine.communicate(timeout=30)
    assert engine.returncode == 129 and "hung up" in err, err
    gone_soon(inner, f"{front_end}'s session")


@pytest.mark.parametrize("front_end,lines,answers", [
    ("gtp", ["frobnicate", "1 name"], "? unknown command\n\n=1 test\n\n"),
    ("nboard", ["frobnicate", "move z9", "ping 1"], "pong 1\n"),
], ids=["gtp", "nboard"])
def test_an_engine_started_with_stderr_closed_keeps_stdout_to_the_protocol(front_end, lines, answers, capsys,
                                                                             monkeypatch):
    """With fd 2 closed Python has no sys.stderr: print(file=sys.stderr) then wrote the mcts player's
    start-up note on stdout, before the first answer, and the first refused command's note was an
    AttributeError that ended the session. Notes now go nowhere; stdout is the answers alone."""
    import importlib

    main = importlib.import_module(f"othello_learn.frontends.{front_end}").main
    monkeypatch.setattr(sys, "stderr", None)
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(line + "\n" for line in lines)))
    assert main(["--player", "mcts:checkpoints/cpu_raw.pt:8", "--name", "test"]) == 0  # no value head: a note
    assert capsys.readouterr().out == answers


def test_the_three_front_ends_keep_one_game_type():
    """The GTP engine, the NBoard engine and the terminal game each keep an ``othello.Game``:
    told the same moves (GTP's colours and NBoard's bare moves both leave the forced pass out),
    they hold the same game, and the GTP engine's undo is the game's truncation."""
    from othello.game import Game
    from othello_learn.frontends.nboard import Engine
    from othello_learn.frontends.terminal import TerminalGame

    moves = pass_position()
    pos = Position()
    for m in moves:
        pos = pos.play(m)
    after = pos.play(PASS).legal_moves()[0]  # the other side's move, the pass inferred before it
    gtp = GTPEngine(AlphaBetaPlayer(1), "t", io.StringIO(), io.StringIO())
    nboard = Engine(AlphaBetaPlayer(1), "t", io.StringIO(), io.StringIO())
    for m in moves + [after]:
        colour = "black" if gtp.game.position.black_to_move != (m == after) else "white"
        gtp.handle(f"play {colour} {square_name(m)}")
        nboard.handle(f"move {square_name(m)}")
    terminal = TerminalGame(AlphaBetaPlayer(1), True, io.StringIO(), io.StringIO())
    terminal.replay(moves + [after])
    for game in (gtp.game, nboard.game, terminal.game):
        assert type(game) is Game
        assert game.moves == moves + [PASS, after] and game.positions == gtp.game.positions
    gtp.handle("undo")
    assert gtp.game.moves == moves and gtp.game.position == pos
