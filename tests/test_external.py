"""External-engine players: the GTP driver against fake engines (normal, hanging,
illegal), the NBoard driver against our own engine, in real arena matches."""

import sys
import time
from pathlib import Path

import pytest

from othello_learn.files import UserError
from othello.game import Position
from othello.notation import PASS
from othello.states import States
from othello_learn.players.arena import play_match
from othello_learn.players.external import EngineError, GTPPlayer, NBoardPlayer
from othello_learn.players.specs import make_player
from processes import gone_soon, pid_written

REPO = Path(__file__).resolve().parents[1]
FAKE = f"{sys.executable} {REPO / 'tests' / 'fake_engines' / 'gtp_engine.py'}"


def test_spec_keeps_colons_in_the_command_and_reads_options():
    p = make_player(f"nboard:depth=3:timeout=2.5:{sys.executable} selfplay/nboard.py --player alphabeta:2")
    assert isinstance(p, NBoardPlayer)
    assert (p.depth, p.engine.timeout) == (3, 2.5)
    assert p.command.endswith("--player alphabeta:2")
    g = make_player("gtp:gtp-rhino -l 1 -b 0")
    assert isinstance(g, GTPPlayer) and g.engine.argv == ["gtp-rhino", "-l", "1", "-b", "0"]
    with pytest.raises(ValueError, match="COMMAND"):
        make_player("gtp:timeout=3")
    with pytest.raises(ValueError, match="number"):
        make_player("gtp:timeout=soon:x")
    assert make_player("nboard:timeout=inf:x").engine.timeout == float("inf")  # no limit
    for bad in ("timeout=0", "timeout=-1", "timeout=nan", "depth=0"):
        with pytest.raises(ValueError, match=f"'nboard:{bad}:x': {bad.split('=')[0]}: must be (above 0|a number), got"):
            make_player(f"nboard:{bad}:x")


def test_gtp_fake_engine_plays_a_match():
    gtp = make_player(f"gtp:timeout=20:{FAKE}")
    try:
        result = play_match(gtp, make_player("random"), games=4, seed=1, progress=False)
    finally:
        gtp.close()
    assert result.games == 4 and gtp.restarts == 0


def test_gtp_hang_is_restarted_once_then_reported(tmp_path):
    once = make_player(f"gtp:timeout=1:{FAKE} --hang-once {tmp_path / 'flag'}")
    try:
        pos = Position.from_transcript("f5")
        assert once.select(States.from_positions([pos]), None, moves=[[37]])[0] in pos.legal_moves()
        assert once.restarts == 1
    finally:
        once.close()
    hang = make_player(f"gtp:timeout=0.5:{FAKE} --hang")
    t0 = time.perf_counter()
    with pytest.raises(EngineError, match=r"gtp_engine\.py --hang.*failed again after a restart.*after f5") as e:
        hang.select(States.from_positions([pos]), None, moves=[[37]])
    hang.close()
    assert time.perf_counter() - t0 < 10
    assert isinstance(e.value, UserError)


def test_a_hung_engine_behind_a_wrapper_is_killed_with_it(tmp_path):
    """Killing the wrapper (sh -c, a launcher script) alone left the engine under it holding
    the pipes: close() waited for as long as the engine hung, the arena with it."""
    import re
    import shlex
    import threading

    pid_file = tmp_path / "pid"
    wrapped = shlex.quote(f"{FAKE} --hang --pid-file {pid_file}; true")  # sh waits for the engine: no exec
    hang = make_player(f"gtp:timeout=0.5:sh -c {wrapped}")
    pos = Position.from_transcript("f5")
    raised = []

    def match():
        try:
            hang.select(States.from_positions([pos]), None, moves=[[37]])
        except EngineError as e:
            raised.append(str(e))
        hang.close()

    worker = threading.Thread(target=match, daemon=True)  # a regression fails here, rather than hang
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "close() waited on the hung engine"
    assert len(raised) == 1 and re.search(r"failed again after a restart.*after f5", raised[0])
    gone_soon(int(pid_file.read_text()), "close()", orphan=True)  # the restarted one; orphaned, init reaps it


@pytest.mark.parametrize("kind", ["gtp", "nboard"])
def test_engine_that_exits_at_once_is_an_error_not_a_traceback(kind):
    """Its handshake fails on the restart too: that is the second failure, an EngineError."""
    dead = make_player(f"{kind}:timeout=2:{sys.executable} -c pass")
    pos = Position.from_transcript("f5")
    with pytest.raises(EngineError, match=r"-c pass.*failed again after a restart.*after f5"):
        dead.select(States.from_positions([pos]), None, moves=[[37]])
    assert dead.restarts == 1
    dead.close()


def test_gtp_illegal_move_is_an_error_naming_the_game():
    bad = make_player(f"gtp:timeout=20:{FAKE} --illegal")
    try:
        with pytest.raises(EngineError, match=r"illegal \(legal: .*after f5d6"):
            pos = Position.from_transcript("f5d6")
            bad.select(States.from_positions([pos]), None, moves=[[37, 43]])
    finally:
        bad.close()


def test_nboard_player_drives_our_engine_in_a_match():
    nb = make_player(f"nboard:timeout=60:{sys.executable} {REPO / 'selfplay' / 'nboard.py'} --player alphabeta:1")
    try:
        result = play_match(nb, make_player("random"), games=2, seed=3, progress=False)
    finally:
        nb.close()
    assert result.games == 2 and nb.restarts == 0


def test_gtp_game_with_a_pass_is_replayed_without_sending_it():
    from test_formats import random_game

    moves = next(m for s in range(2000) if PASS in (m := random_game(s)))
    cut = moves.index(PASS) + 1
    pos = Position()
    for m in moves[:cut]:
        pos = pos.play(m)
    gtp = make_player(f"gtp:timeout=20:{FAKE}")
    try:
        sq = gtp.select(States.from_positions([pos]), None, moves=[moves[:cut]])[0]
    finally:
        gtp.close()
    assert sq == pos.legal_moves()[0]  # the fake plays its lowest legal square: it followed the pass


def test_close_lets_the_reader_threads_finish_before_closing_the_pipes(monkeypatch):
    """The GRhino matches ended with "ValueError: I/O operation on closed file" from
    the stdout reader thread: close() closed the pipe while the thread was still
    between reads. A slow queue holds the reader there every time."""
    import queue
    import threading

    from othello_learn.players.external import EngineProcess

    class SlowQueue(queue.Queue):
        def put(self, item, *a, **k):
            time.sleep(0.1)
            super().put(item, *a, **k)

    errors = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    monkeypatch.setattr(queue, "Queue", SlowQueue)
    engine = EngineProcess(FAKE, 20.0)
    engine.start()
    engine.send("boardsize 8")
    assert engine.read_line().startswith("=")
    lines = engine.lines
    engine.close()  # the fake answers quit with "= " and a blank line, then exits
    deadline = time.monotonic() + 5
    while lines.empty() or lines.queue[-1] is not None:  # the reader ends with None at EOF
        assert not errors and time.monotonic() < deadline, errors
        time.sleep(0.05)
    assert not errors


def test_check_starts_a_working_engine_once_and_stops_it():
    nb = make_player(f"nboard:timeout=60:{sys.executable} {REPO / 'selfplay' / 'nboard.py'} --player alphabeta:1")
    nb.check()  # ping answered with pong
    assert not nb.engine.running
    gtp = make_player(f"gtp:timeout=20:{FAKE}")
    gtp.check()  # boardsize answered
    assert not gtp.engine.running and gtp.restarts == 0


def _f5():
    pos = Position.from_transcript("f5")
    return States.from_positions([pos]), None


def test_an_engine_that_writes_forever_without_moving_is_a_hang():
    """The limit is on the whole answer: comment lines every 50 ms used to reset it forever."""
    chatty = make_player(f"gtp:timeout=0.5:{FAKE} --chatty")
    t0 = time.perf_counter()
    with pytest.raises(EngineError, match=r"--chatty.*no full answer within 0.5 s.*after f5"):
        chatty.select(*_f5(), moves=[[37]])
    chatty.close()
    assert time.perf_counter() - t0 < 10


def test_the_restart_is_once_a_match_and_said(capsys):
    """An engine that dies at every second move was restarted hundreds of times in silence."""
    flaky = make_player(f"gtp:timeout=20:{FAKE} --die-after 1")
    with pytest.raises(EngineError, match=r"--die-after 1.*failed again after a restart"):
        play_match(flaky, make_player("random"), games=2, seed=1, progress=False)
    assert flaky.restarts == 1 and not flaky.engine.running
    assert capsys.readouterr().err.count("restarting it (once; a second failure") == 1
    flaky.reset()  # a new match may restart it once again
    assert flaky.restarts == 0


def test_an_engine_that_dies_between_moves_is_restarted_once_and_said(capsys):
    """An engine that exited after each answer (dead while idle) was started afresh at the next
    move in silence, every move, never counted as the failure a death during an answer is."""
    dies = make_player(f"gtp:timeout=20:{FAKE} --exit-after-answer")
    legal = Position.from_transcript("f5").legal_moves()
    try:
        for _ in range(2):  # the first process's answer, then the restarted one's
            assert dies.select(*_f5(), moves=[[37]])[0] in legal
            dies.engine.proc.wait(timeout=20)  # dead before the next move is asked
        assert dies.restarts == 1
        assert capsys.readouterr().err.count("exited (status 1) after its last answer), after f5; restarting it") == 1
        with pytest.raises(EngineError, match=r"--exit-after-answer.*failed again after a restart \(the engine "
                                              r"exited \(status 1\) after its last answer\), after f5"):
            dies.select(*_f5(), moves=[[37]])
    finally:
        dies.close()


def test_a_refusal_and_an_unended_answer_name_the_position():
    refuses = make_player(f"gtp:timeout=20:{FAKE} --refuse-genmove")
    with pytest.raises(EngineError, match=r"refused 'genmove white': not now, after f5"):
        refuses.select(*_f5(), moves=[[37]])
    refuses.close()
    resigns = make_player(f"gtp:timeout=20:{FAKE} --resign")  # GTP allows it; games here are played out
    with pytest.raises(EngineError, match=r"resigned: games here are played to the end.*turn the engine's "
                                          r"resignation off, after f5"):
        resigns.select(*_f5(), moves=[[37]])
    resigns.close()
    noblank = make_player(f"gtp:timeout=0.2:{FAKE} --noblank")  # waited for in full: the blank line never comes
    with pytest.raises(EngineError, match=r"never ended the answer with an empty line"):
        noblank.check()


def test_timeout_inf_means_no_limit_and_depth_must_be_whole():
    gtp = make_player(f"gtp:timeout=inf:{FAKE}")
    try:
        assert play_match(gtp, make_player("random"), games=2, seed=1, progress=False).games == 2
    finally:
        gtp.close()
    with pytest.raises(ValueError, match=r"depth='2.5': expected a whole number"):
        make_player("nboard:depth=2.5:x")


def test_check_can_keep_the_engine_for_the_match():
    gtp = make_player(f"gtp:timeout=20:{FAKE}")
    gtp.check(keep_running=True)
    proc = gtp.engine.proc
    try:
        assert gtp.engine.running
        play_match(gtp, make_player("random"), games=2, seed=1, progress=False)
        assert proc.poll() is not None  # the match closed the very process the check started
    finally:
        gtp.close()


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_arena_stopped_by_a_signal_stops_its_engine(tmp_path, sig):
    import signal
    import subprocess

    hung = tmp_path / "hung"
    arena = subprocess.Popen([sys.executable, str(REPO / "selfplay" / "arena.py"), "--a",
                              f"gtp:timeout=100:{FAKE} --hang --hung-file {hung}", "--b", "random",
                              "--games", "2", "--quiet"], stderr=subprocess.PIPE, text=True)
    engine = pid_written(hung, arena)  # into the match: the engine is thinking forever on its first genmove
    arena.send_signal(getattr(signal, sig))
    _, err = arena.communicate(timeout=30)
    assert arena.returncode == (143 if sig == "SIGTERM" else 129), err
    gone_soon(engine, "the arena")  # the engine was killed and reaped by the arena


def test_the_first_answer_may_take_the_startup_time_the_rest_only_the_timeout():
    """An engine loading a book may take long over its first answer (``startup_timeout``); once
    it has answered a line, the rest of that answer gets the usual limit again."""
    import shlex

    from othello_learn.players.external import EngineProcess, EngineTimeout

    script = ("import sys, time; sys.stdin.readline(); time.sleep(0.3); print('first', flush=True); "
              "time.sleep(3); print('second', flush=True); time.sleep(30)")
    engine = EngineProcess(f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}", 0.1)
    engine.start()
    try:
        engine.send("go")
        assert engine.read_line() == "first"  # 0.3 s and more: over the timeout, within the startup time
        with pytest.raises(EngineTimeout, match=r"within 0.1 s"):
            engine.read_line()
    finally:
        engine.close(polite=False)


def test_an_engine_writing_faster_than_it_is_read_still_times_out():
    """The deadline was checked only once the queue of lines ran dry: an engine writing comment
    lines at full speed (a C engine's runaway loop) kept it full, so a 0.2 s limit never came and
    the queue grew by the gigabyte. A line that arrives after the deadline is a timeout."""
    import shlex

    from othello_learn.players.external import EngineProcess, EngineTimeout

    script = ("import os, sys; sys.stdin.readline(); chunk = b'# thinking\\n' * 20000\n"
              "while True: os.write(1, chunk)")
    engine = EngineProcess(f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}", 0.2)
    engine.startup_timeout = 0.2
    engine.start()
    t0 = time.monotonic()
    try:
        engine.send("genmove black")
        with pytest.raises(EngineTimeout, match=r"within 0.2 s"):
            while time.monotonic() - t0 < 20:  # before the fix: lines for as long as one waits
                engine.read_line()
        assert time.monotonic() - t0 < 10
    finally:
        engine.close(polite=False)


class Scripted:
    """Stands in for an engine process: keeps the lines sent, answers each GTP command with
    ``replies[command word]`` (default ``=``) and GTP's empty line."""

    running, proc = True, None  # proc: no process of its own that could have died

    def __init__(self, replies):
        self.replies, self.sent, self.out = replies, [], []

    def send(self, line):
        self.sent.append(line)
        self.out += [self.replies.get(line.split()[0], "="), ""]

    def read_line(self):
        return self.out.pop(0)

    def close(self, polite=True):
        pass


def test_gtp_answers_are_read_with_or_without_an_id():
    gtp = GTPPlayer("an-engine")
    for genmove in ("= c3", "=7 c3", "=12 C3"):
        gtp.engine = Scripted({"genmove": genmove})
        assert gtp.command_ok("genmove black").lower() == "c3", genmove


def test_a_position_the_moves_do_not_reach_is_set_up_without_them():
    """The moves a caller hands over must lead to the position; where they do not (a GUI's
    partial list), the engine gets the position set up and no moves, not the moves replayed
    on top of it."""
    pos = Position.from_transcript("f5d6")
    gtp = GTPPlayer("an-engine")
    gtp.engine = Scripted({"genmove": "= c3"})
    sq = gtp.select(States.from_positions([pos]), None,
                    moves=[[37]])[0]  # f5 only
    assert sq == 18  # c3
    assert [line.split()[0] for line in gtp.engine.sent] == ["grhino-setup_board", "genmove"]
    assert gtp.engine.sent[1] == "genmove black" and gtp.engine.sent[0].endswith(" black")
    gtp.engine = Scripted({"genmove": "= c3"})
    gtp.select(States.from_positions([pos]), None,
               moves=[[37, 43]])  # the whole game: replayed from the start
    assert gtp.engine.sent == ["clear_board", "play black f5", "play white d6", "genmove black"]


def test_an_interrupt_during_the_polite_close_still_kills_the_engine(tmp_path, monkeypatch):
    """A second Ctrl-C in close()'s wait for the engine to quit left a hung engine running, orphaned."""
    import subprocess

    from othello_learn.players.external import EngineProcess

    pid_file = tmp_path / "pid"
    engine = EngineProcess(f"{FAKE} --hang --pid-file {pid_file}", 5.0)
    engine.start()
    engine.send("genmove b")  # thinking forever: it will not read quit
    engine_pid = pid_written(pid_file)
    wait = subprocess.Popen.wait

    def interrupted_wait(self, timeout=None):
        if timeout == 1.0:  # the polite wait
            raise KeyboardInterrupt
        return wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        engine.close()
    gone_soon(engine_pid, "an interrupted close()")


def test_close_returns_while_a_process_outside_the_engines_group_holds_its_pipes(tmp_path):
    """An engine that starts a process in a session of its own (a daemon) leaves the pipes
    open after the group is killed: the reader stays blocked, holding its stream's lock, and
    closing that stream under it waited for as long as the daemon lived."""
    import os
    import shlex
    import signal
    import threading

    from othello_learn.players.external import EngineProcess

    pid_file = tmp_path / "pid"
    script = ("import subprocess, sys, time; "
              "d = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True); "
              f"open({str(pid_file)!r}, 'w').write(str(d.pid)); time.sleep(30)")
    engine = EngineProcess(f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}", 5.0)
    engine.reader_wait = 0.2  # the blocked reader is waited on this long, not 1 s
    engine.start()
    daemon = pid_written(pid_file)
    try:
        closer = threading.Thread(target=engine.close, kwargs={"polite": False}, daemon=True)
        closer.start()
        closer.join(10)  # a regression fails here, rather than hang
        assert not closer.is_alive(), "close() waited on the pipes a process outside the group holds"
    finally:
        os.kill(daemon, signal.SIGKILL)
