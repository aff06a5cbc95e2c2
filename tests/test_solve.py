"""selfplay/solve.py (a player's answers for each OBF position) checked against
the players asked one position at a time, and the arena closing external
engines at the end of every match (othello_learn.players.arena.play_match)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import reference_engine as ref
from processes import gone_soon, pid_written
from othello import bitboard as bb
from othello_learn.cli import run_main
from othello.formats import format_obf
from othello.game import IllegalMoveError, Position
from othello.notation import PASS, parse_square, square_name
from othello.states import States
from othello_learn.players import external
from othello_learn.players.arena import play_match
from othello_learn.players.base import close_players
from othello_learn.players.specs import make_player
from othello_learn.frontends.solve_obf import format_record, main, solve

REPO = Path(__file__).resolve().parents[1]
CKPT = REPO / "checkpoints" / "cpu_rl_warm_long.pt"
FAKE = f"{sys.executable} {REPO / 'tests' / 'fake_engines' / 'gtp_engine.py'}"

# Black to move with no move (a1 white, b1 black), white can answer c1: a forced pass.
PASS_POS = Position(player=1 << 1, opponent=1 << 0, black_to_move=True)
# White (to move) has a1, b1 is empty, black has the rest: nobody can move.
OVER_POS = Position(player=1, opponent=((1 << 64) - 1) ^ 0b11, black_to_move=False)


def positions():
    """Openings of a few plies (both colours to move), a forced pass, a finished game."""
    out = [Position.from_transcript(t) for t in ("", "f5", "f5d6", "f5d6c3d3c4", "e6f4e3f6d3")]
    return out + [PASS_POS, OVER_POS]


@pytest.fixture(scope="module")
def network_player():
    return make_player(f"policy:{CKPT}")


def write_obf(path: Path, poss) -> Path:
    path.write_text("% test positions\n" + "".join(format_obf(p, "a comment") + "\n" for p in poss))
    return path


def one_by_one(player, pos):
    sq = player.select(States.from_positions([pos]), np.random.default_rng(0))
    return int(np.asarray(sq).reshape(-1)[0])


def test_alphabeta_answers_match_the_player_asked_one_at_a_time():
    player = make_player("alphabeta:1")
    poss = positions()
    recs = solve(player, poss)
    assert [r["number"] for r in recs] == list(range(1, len(poss) + 1))
    for pos, rec in zip(poss[:5], recs):
        assert rec["to_move"] == ("black" if pos.black_to_move else "white")
        assert rec["move"] == square_name(one_by_one(player, pos))
        v, _ = player.search(pos.player, pos.opponent)
        assert rec["eval"] == pytest.approx(v / 100.0)  # heuristic scale: far from the end
        assert rec["eval_unit"] == "heuristic / 100" and format_record(rec).endswith(" (heuristic / 100)")
    assert recs[5]["move"] == "PA" and not recs[5]["game_over"]
    assert recs[6]["game_over"] and recs[6]["move"] is None
    assert OVER_POS.is_over()
    assert recs[6]["final_disc_difference"] == -62  # white's view: 1 disc to black's 62 and the empty


def test_network_answers_match_a_forward_pass_per_position(network_player):
    poss = positions()
    recs = solve(network_player, poss)
    net = network_player.net
    device = next(net.parameters()).device  # the player's: a GPU where there is one
    from othello_learn.models.batch import from_arrays

    for pos, rec in zip(poss[:5], recs):
        with torch.inference_mode():
            out = net(from_arrays(np.array([pos.player], np.uint64), np.array([pos.opponent], np.uint64),
                                  np.array([pos.black_to_move]), np.full((1, 4), -1, np.int64), device))
            out = {k: v.cpu() for k, v in out.items()}
        probs = torch.softmax(out["policy"].float(), -1)[0].numpy()
        legal = pos.legal_moves()
        best = max(legal, key=lambda s: probs[s])
        assert rec["move"] == square_name(one_by_one(network_player, pos)) == square_name(best)
        tol = 1e-5 if device.type == "cpu" else 2e-3  # a GPU's convolutions run TF32, batch shapes pick kernels
        assert rec["probability"] == pytest.approx(float(probs[best]), abs=tol)
        assert rec["eval"] == pytest.approx(64.0 * float(out["value"][0]), abs=100 * tol)
        assert rec["eval_unit"] == "64 x net value" and f" ({rec['eval_unit']})  top: " in format_record(rec)
        top = sorted(legal, key=lambda s: -probs[s])[:3]
        assert [t["move"] for t in rec["top"]] == [square_name(s) for s in top]
        assert rec["top"][0]["move"] == rec["move"]
    assert recs[5]["move"] == "PA" and recs[5]["probability"] is None
    # A forced pass: minus the value after it (the head never saw a must-pass position), as the
    # NBoard engine's go gives it and the search values it (tree.evaluate).
    after = PASS_POS.play(PASS)
    with torch.inference_mode():
        out = net(from_arrays(np.array([after.player], np.uint64), np.array([after.opponent], np.uint64),
                              np.array([after.black_to_move]), np.array([[PASS, -1, -1, -1]]), device))
    assert recs[5]["eval"] == pytest.approx(-64.0 * float(out["value"][0].cpu()), abs=100 * tol)
    assert recs[5]["eval_unit"] == "64 x net value"
    assert recs[6]["game_over"]


def test_all_positions_go_to_the_player_in_one_call():
    player = make_player("alphabeta:1")
    calls = []
    select = player.select
    player.select = lambda p, *a, **k: calls.append(len(p)) or select(p, *a, **k)
    solve(player, positions())
    assert calls == [5]  # the forced pass and the finished game are not the player's to answer


def test_command_prints_one_line_per_position_and_writes_json(tmp_path, capsys):
    obf = write_obf(tmp_path / "p.obf", positions())
    out = tmp_path / "answers.json"
    assert run_main(main, [str(obf), "--player", "alphabeta:1", "--json", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(positions())
    assert lines[0].split()[:3] == ["1", "black", json.loads(out.read_text())[0]["move"]]
    assert "PA" in lines[5].split() and "game over" in lines[6]
    assert [r["number"] for r in json.loads(out.read_text())] == list(range(1, 8))


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path, capsys):
    """A Windows editor's mark made the first board 65 squares long."""
    obf = write_obf(tmp_path / "p.obf", positions())
    obf.write_bytes(b"\xef\xbb\xbf" + obf.read_bytes()[len(b"% test positions\n"):])
    assert run_main(main, [str(obf), "--player", "alphabeta:1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(positions())


def test_a_json_that_cannot_be_written_is_said_after_the_answers(tmp_path, capsys, monkeypatch):
    """A full disk lost every answer of a long run: the error came before they were printed."""
    import errno

    from othello_learn.frontends import solve_obf as solve_module

    def full_disk(path, records):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(solve_module, "write_json", full_disk)
    obf = write_obf(tmp_path / "p.obf", positions())
    assert run_main(main, [str(obf), "--player", "alphabeta:1", "--json", str(tmp_path / "a.json")]) == 2
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == len(positions())
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "no space left on device" in err[0] and "a.json" in err[0], err


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    """``othello-solve big.obf | head -1``: the closed pipe is the reader's choice, not an
    error to report (exit 141, as a process SIGPIPE ends, and nothing on stderr)."""
    import subprocess

    start = "-" * 27 + "OX------XO" + "-" * 27 + " X;\n"
    (tmp_path / "big.obf").write_text(start * 3000)  # more output than a pipe holds
    proc = subprocess.Popen([sys.executable, "selfplay/solve.py", str(tmp_path / "big.obf"), "--player", "alphabeta:1",
                             "--json", str(tmp_path / "out.json")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().split()[:3] == [b"1", b"black", b"e6"]
    proc.stdout.close()
    assert proc.wait(timeout=60) == 141 and proc.stderr.read() == b""
    assert len(json.loads((tmp_path / "out.json").read_text())) == 3000  # written before the output it cut


def test_malformed_line_is_one_error_naming_file_and_line(tmp_path, capsys):
    obf = write_obf(tmp_path / "p.obf", positions()[:2])
    with obf.open("a") as f:
        f.write("XO-- X;\n")
    out = tmp_path / "answers.json"
    assert run_main(main, [str(obf), "--player", "alphabeta:1", "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{obf} line 4" in err
    assert not out.exists()


def scored_positions():
    """Late positions of a random game, each with every legal move's exact score
    (the side to move's final disc difference), computed here by playing the move
    and solving the rest (the solver is checked against plain minimax in
    test_endgame): the comment an Edax-scored OBF carries."""
    from othello_learn.search.endgame import solve as exact

    rng = np.random.default_rng(5)
    for _ in range(50):
        pos, out = Position(), []
        while not pos.is_over():
            legal = pos.legal_moves()
            if legal and 6 <= 64 - bin(pos.player | pos.opponent).count("1") <= 9:
                scores = {}
                for sq in legal:
                    child = pos.play(sq)
                    if child.legal_moves():
                        scores[sq] = -exact(child.player, child.opponent)[0]
                    elif not child.is_over():  # the opponent passes
                        back = child.play(PASS)
                        scores[sq] = exact(back.player, back.opponent)[0]
                    else:
                        scores[sq] = -int(bb.final_disc_difference(np.array([child.player], np.uint64),
                                                                   np.array([child.opponent], np.uint64))[0])
                out.append((pos, scores))
            pos = pos.play(legal[rng.integers(len(legal))] if legal else PASS)
        if len(out) >= 3:
            return out
    raise AssertionError("no game reached the late positions")


def write_scored_obf(path: Path, scored) -> Path:
    lines = [format_obf(p, " ".join(f"{square_name(s)}:{v:+d};" for s, v in sc.items())) for p, sc in scored]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_scored_positions_grade_each_answer_and_the_exact_solver_finds_every_best_move(tmp_path, capsys):
    scored = scored_positions()
    obf = write_scored_obf(tmp_path / "scored.obf", scored)
    out = tmp_path / "answers.json"
    assert run_main(main, [str(obf), "--player", "endgame:14:alphabeta:1", "--json", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all("[best]" in line for line in lines[:-1])
    assert lines[-1].startswith(f"best move in {len(scored)} of {len(scored)} scored positions")
    assert all(r["best"] and r["loss"] == 0 for r in json.loads(out.read_text()))

    # A weak player: every grade agrees with the scores read directly.
    assert run_main(main, [str(obf), "--player", "alphabeta:1", "--json", str(out)]) == 0
    recs = json.loads(out.read_text())
    for (pos, sc), rec in zip(scored, recs):
        move = parse_square(rec["move"])
        top = max(sc.values())
        assert rec["loss"] == top - sc[move] and rec["best"] == (sc[move] == top)
        assert rec["best_moves"] == [square_name(s) for s in sorted(sc) if sc[s] == top]
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.startswith(f"best move in {sum(r['best'] for r in recs)} of {len(recs)} scored")


def test_an_exact_solver_reports_the_exact_result(tmp_path, capsys, network_player):
    """``endgame:E:SPEC`` within E empties knows the final disc difference under perfect play:
    that is its eval (over SPEC's network), here checked against plain minimax on the reference
    engine's boards."""
    from test_endgame import _endings, _minimax

    ends = _endings(6, seed=7, max_empties=6)[::7][:5]  # 6 empties down to 2, both colours to move
    poss = [Position(*ref.to_bitboards(board, colour), black_to_move=colour == 1) for board, colour in ends]
    expected = [float(_minimax(board, colour)) for board, colour in ends]
    obf = write_obf(tmp_path / "late.obf", poss)
    out = tmp_path / "answers.json"
    assert run_main(main, [str(obf), "--player", "endgame:14:alphabeta:1", "--json", str(out)]) == 0
    assert [r["eval"] for r in json.loads(out.read_text())] == expected
    lines = capsys.readouterr().out.splitlines()
    assert [float(line.split("eval=")[1].split()[0]) for line in lines] == expected
    assert all(line.endswith(" (exact discs)") for line in lines)
    assert [r["eval"] for r in solve(make_player(f"endgame:14:{network_player.name}"), poss)] == expected
    deep = solve(make_player("alphabeta:7"), poss)  # its search sees the end: the same exact result
    assert [(r["eval"], r["eval_unit"]) for r in deep] == [(e, "exact discs") for e in expected]
    beyond = solve(make_player("endgame:4:alphabeta:1"), poss[:1])[0]  # 6 empties: not solved, searched
    assert beyond["eval"] == solve(make_player("alphabeta:1"), poss[:1])[0]["eval"] != expected[0]


def test_beyond_its_range_an_endgame_player_answers_as_its_alphabeta(tmp_path, capsys):
    """``endgame:E:alphabeta:D`` plays alpha-beta's moves until E squares are empty, so it reports
    alpha-beta's search value there too, not nothing."""
    obf = write_obf(tmp_path / "p.obf", positions())
    answers = []
    for spec in ("endgame:12:alphabeta:2", "alphabeta:2"):
        assert run_main(main, [str(obf), "--player", spec, "--json", str(tmp_path / "a.json")]) == 0
        answers.append((capsys.readouterr().out, json.loads((tmp_path / "a.json").read_text())))
    assert answers[0] == answers[1]
    assert all(r["eval"] is not None for r in answers[0][1] if r["move"] is not None)
    # a forced pass too: minus the search value after it, as the NBoard engine's hint gives it
    from othello_learn.frontends.analysis import Analyst

    [forced] = [(i, r) for i, r in enumerate(answers[1][1]) if r["move"] == "PA"]
    assert forced[1]["eval"] == Analyst(make_player("alphabeta:2")).pass_eval(positions()[forced[0]], [])


def test_a_scored_move_that_is_not_legal_is_one_error_naming_the_position(tmp_path, capsys):
    scored = scored_positions()[:2]
    pos, sc = scored[1]
    illegal = next(s for s in range(64) if s not in pos.legal_moves())
    obf = write_scored_obf(tmp_path / "bad.obf", [scored[0], (pos, {**sc, illegal: 0})])
    out = tmp_path / "answers.json"
    assert run_main(main, [str(obf), "--player", "alphabeta:1", "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{obf} line 2 (position 2) scores {square_name(illegal)}" in err
    assert not out.exists()


def test_unscored_move_and_unscored_files(tmp_path, capsys):
    pos, sc = scored_positions()[0]
    from othello_learn.frontends.solve_obf import format_record, grade

    rec = solve(make_player("alphabeta:1"), [pos])[0]
    only_other = {s: v for s, v in sc.items() if square_name(s) != rec["move"]} or {PASS: 0}
    summary = grade([rec], [only_other])
    assert rec["loss"] is None and not rec["best"] and "move not scored" in format_record(rec)
    assert summary == {"scored": 1, "best": 0, "loss_known": 0, "mean_loss": None}
    assert grade(solve(make_player("alphabeta:1"), [pos]), [{}]) is None  # no scores: no grades, no summary line


# --------------------------------------------------------------------------
# The arena closes every player with a close() when a match ends


@pytest.fixture
def started(monkeypatch):
    """Every engine process started during the test."""
    procs = []
    start = external.EngineProcess.start

    def spy(self):
        start(self)
        procs.append(self.proc)

    monkeypatch.setattr(external.EngineProcess, "start", spy)
    return procs


def test_match_closes_engine_processes(started):
    gtp = make_player(f"gtp:timeout=20:{FAKE}")
    play_match(gtp, make_player("random"), games=2, seed=1, progress=False)
    assert started and all(p.poll() is not None for p in started)
    assert not gtp.engine.running


def test_match_that_fails_still_closes_engine_processes(started):
    bad = make_player(f"gtp:timeout=20:{FAKE} --illegal")
    with pytest.raises(external.EngineError, match="illegal"):
        play_match(bad, make_player("random"), games=2, seed=1, progress=False)
    assert started and all(p.poll() is not None for p in started)


class _Closable:
    """A player with a ``close`` that logs its name in ``closed`` and raises ``error`` if given."""

    def __init__(self, name, closed, error=None):
        self.name, self.closed, self.error = name, closed, error

    def close(self):
        self.closed.append(self.name)
        if self.error is not None:
            raise self.error


def test_close_players_closes_each_once_and_all_despite_a_failure():
    closed = []
    a, b = _Closable("a", closed, RuntimeError("a failed")), _Closable("b", closed)
    with pytest.raises(RuntimeError, match="a failed"):
        close_players(a, b, a, object())
    assert closed == ["a", "b"]


def test_a_second_ctrl_c_during_a_close_still_closes_the_other_players():
    """An engine's polite close waits seconds, and the arena takes Ctrl-C as Python does: a second
    one there left the next engine running."""
    closed = []
    with pytest.raises(KeyboardInterrupt):
        close_players(_Closable("a", closed, KeyboardInterrupt()), _Closable("b", closed))
    assert closed == ["a", "b"]


def test_close_players_raises_the_first_failure_after_closing_the_rest():
    """Of several players that fail to close, the first one's error is the one raised (the
    cause a person looks at first; a later one is often its consequence), after all are tried."""
    closed = []
    with pytest.raises(RuntimeError, match="^a failed$"):
        close_players(*(_Closable(n, closed, RuntimeError(f"{n} failed")) for n in "abc"))
    assert closed == ["a", "b", "c"]


@pytest.mark.parametrize("comment, why", [("h7:abc;", "'h7:abc' is not a score"), ("zz:+3;", "'zz:+3' is not a score"),
                                          ("h7:-6; h7:-8;", "h7 is scored twice")])
def test_a_score_that_does_not_parse_or_is_given_twice_is_one_error_naming_file_and_line(tmp_path, capsys, comment,
                                                                                          why):
    obf = tmp_path / "s.obf"
    obf.write_text("% scores\n" + format_obf(Position.from_transcript("f5")) + "\n"
                   + format_obf(Position.from_transcript("f5d6"), comment) + "\n")
    assert run_main(main, [str(obf), "--player", "alphabeta:1"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and lines[0].split(": error: ")[1] == f"{obf} line 3: {why}" + (
        "" if "twice" in why else " (expected a move and the side to move's disc difference, as in 'g8:+18')")


def test_the_side_to_move_is_written_as_the_board_s_discs_are(tmp_path, capsys):
    """Edax reads X, * or B as black and O or W as white, in the board and for the side to move alike."""
    pos = Position.from_transcript("f5")  # white to move
    board = format_obf(pos).split()[0]
    black = Position(pos.opponent, pos.player, True)
    obf = tmp_path / "sides.obf"
    obf.write_text("".join(f"{board.replace('X', '*')} {side};\n" for side in ("*", "b", "X", "x", "O", "w", "W")))
    assert run_main(main, [str(obf), "--player", "alphabeta:1", "--json", str(tmp_path / "a.json")]) == 0
    records = json.loads((tmp_path / "a.json").read_text())
    assert [r["to_move"] for r in records] == ["black"] * 4 + ["white"] * 3
    from othello.formats import parse_obf

    assert [x.position for x in parse_obf(obf.read_text())] == [black] * 4 + [pos] * 3


def test_an_engine_that_fails_names_the_file_line_and_position(tmp_path, capsys):
    """A GTP engine without GRhino's set-up command cannot be given a set-up position: the
    error says which one, and why."""
    obf = write_obf(tmp_path / "p.obf", positions()[1:3])  # after a comment line: line 2 is position 1
    assert run_main(main, [str(obf), "--player", f"gtp:timeout=20:{FAKE}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"error: {obf} line 2 (position 1): engine" in err
    assert "cannot be given a position that is not reached from the start: refused 'grhino-setup_board" in err


def test_an_engine_that_cannot_start_is_named_by_its_flag_not_by_a_position(tmp_path, capsys):
    """A missing engine read as a fault of the file's first position ("line 2 (position 1)")."""
    obf = write_obf(tmp_path / "p.obf", positions()[1:3])
    assert run_main(main, [str(obf), "--player", f"gtp:{tmp_path / 'no_such_engine'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ": error: --player: cannot start engine" in err and "position" not in err, err


def test_a_gtp_engine_is_given_each_position_with_grhinos_set_up(tmp_path, capsys):
    """Our own GTP engine knows grhino-setup_board: over a pipe, set up position by position,
    it answers as the wrapped player does (a network's argmax: no random tie-breaks)."""
    obf = write_obf(tmp_path / "p.obf", positions()[1:6])
    spec = f"policy:{CKPT}"
    wrapped = f"gtp:timeout=60:{sys.executable} {REPO / 'selfplay' / 'gtp.py'} --player {spec}"
    for name, player in (("gtp", wrapped), ("direct", spec)):
        assert run_main(main, [str(obf), "--player", player, "--json", str(tmp_path / f"{name}.json")]) == 0
    gtp, direct = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("gtp", "direct"))
    assert [r["move"] for r in gtp] == [r["move"] for r in direct] == ["d6", "c5", "f4", "d6", "PA"]


def test_grade_and_summary_by_hand():
    """Three hand-scored answers: a scored non-best move, an unscored move, the best move.
    best_moves come in board order (not the comment's), the mean loss is over the answers
    whose move is scored (4 and 0: 2.00, not 4/3), and the summary's wording."""
    from othello_learn.frontends.solve_obf import format_summary, grade

    sq = parse_square
    recs = [{"game_over": False, "move": m} for m in ("d3", "c4", "e6")]
    scored = [{sq("f5"): 6, sq("d3"): 2, sq("c4"): 6}, {sq("d3"): 0}, {sq("f4"): -10, sq("e6"): -2}]
    summary = grade(recs, scored)
    assert [(r["best"], r["loss"], r["best_moves"]) for r in recs] == [
        (False, 4, ["c4", "f5"]), (False, None, ["d3"]), (True, 0, ["e6"])]
    assert summary == {"scored": 3, "best": 1, "loss_known": 2, "mean_loss": 2.0}
    assert format_summary(summary) == ("best move in 1 of 3 scored positions; discs given up where the move "
                                       "is scored: 2.00 a position (2 positions)")
    assert format_summary({"scored": 2, "best": 0, "loss_known": 1, "mean_loss": 3.0}).endswith(
        ": 3.00 a position (1 position)")
    assert format_summary({"scored": 1, "best": 0, "loss_known": 0, "mean_loss": None}) == (
        "best move in 0 of 1 scored positions")


def test_a_forced_pass_may_be_scored_and_a_file_without_positions_is_an_error(tmp_path, capsys):
    """At a forced pass the one legal answer is PA: a comment scoring it grades the pass as best.
    A file of comments only is an error, not an empty success."""
    obf = tmp_path / "pass.obf"
    obf.write_text(format_obf(PASS_POS, "PA:-3;") + "\n")
    assert run_main(main, [str(obf), "--player", "alphabeta:1", "--json", str(tmp_path / "a.json")]) == 0
    rec = json.loads((tmp_path / "a.json").read_text())[0]
    assert (rec["move"], rec["best"], rec["loss"], rec["best_moves"]) == ("PA", True, 0, ["PA"])
    capsys.readouterr()
    empty = tmp_path / "empty.obf"
    empty.write_text("% nothing here\n")
    assert run_main(main, [str(empty), "--player", "alphabeta:1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"{empty}: no positions" in captured.err


def test_a_player_that_chooses_an_illegal_move_is_an_error_naming_the_position():
    player = make_player("alphabeta:1")
    select = player.select

    def second_illegal(p, *a, **k):
        sq = np.array(select(p, *a, **k), np.int64).reshape(-1)
        sq[1] = 0  # a1: never legal in an opening
        return sq

    player.select = second_illegal
    with pytest.raises(IllegalMoveError, match="played a1, which is illegal, at position 2 "):
        solve(player, positions()[1:3])


@pytest.mark.parametrize("answer,said", [(PASS, r"played pass, which is illegal, {} \(legal: "),
                                         (19.7, r"returned float64 moves of shape \(\d+,\), expected")])
def test_every_caller_checks_a_players_answer_alike(answer, said):
    """solve, the arena and the one-position callers (a GUI's, a person's opponent) share
    one check: a pass where a move exists, or a move that is not an integer (19.7 read
    as d3 by two of the three), is the player's bug, named, never played."""
    from othello_learn.players.base import Player, RandomPlayer, select_one

    class Odd(Player):
        name = "odd"

        def select(self, states, rng, moves=None):
            return np.full(len(states), answer)

    for call, where in ((lambda: solve(Odd(), [Position()]), "at position 1"),
                        (lambda: select_one(Odd(), States.from_positions([Position()]), np.random.default_rng(0)),
                         "here"),
                        (lambda: play_match(Odd(), RandomPlayer(), 2, progress=False), "in game 0")):
        with pytest.raises(IllegalMoveError, match=said.format(where)):
            call()


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_kill_stops_the_command_and_its_engine(tmp_path, sig):
    """Killed, the command died at once and left its external engine thinking, orphaned."""
    import signal
    import subprocess

    start = "-" * 27 + "OX------XO" + "-" * 27 + " X;\n"
    (tmp_path / "p.obf").write_text(start)
    hung = tmp_path / "hung"
    fake = f"{sys.executable} {REPO / 'tests' / 'fake_engines' / 'gtp_engine.py'} --hang --hung-file {hung}"
    proc = subprocess.Popen([sys.executable, "selfplay/solve.py", str(tmp_path / "p.obf"), "--player",
                             f"gtp:timeout=100:{fake}"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    engine = pid_written(hung, proc)  # the engine is thinking on its genmove
    proc.send_signal(getattr(signal, sig))
    assert proc.wait(timeout=30) == (143 if sig == "SIGTERM" else 129)
    gone_soon(engine, "solve.py")


# ---- scored problem sets: --make-obf, and the shipped one ------------------------------------------


def _random_move_lists(n, seed):
    """Random legal games as WTHOR records them (the moves, no passes) and black's final discs."""
    rng = np.random.default_rng(seed)
    games, scores = [], []
    for _ in range(n):
        pos, moves = Position.from_transcript(""), []
        while not pos.is_over():
            legal = pos.legal_moves()
            move = int(rng.choice(legal)) if legal else PASS
            moves += [move] if legal else []
            pos = pos.play(move)
        black = pos.player if pos.black_to_move else pos.opponent
        discs = int(black).bit_count(), (pos.player | pos.opponent).bit_count()
        score = discs[0] + (64 - discs[1]) * (2 * discs[0] > discs[1])  # the empties to the winner
        games.append(moves)
        scores.append(score)
    return games, scores


@pytest.fixture(scope="module")
def synthetic_wthor(tmp_path_factory):
    from othello_learn.data import wtb

    d = tmp_path_factory.mktemp("wthor")
    for year, seed in ((2001, 1), (2002, 2)):
        moves, scores = _random_move_lists(12, seed)
        wtb.write_wtb(d / f"WTH_{year}.wtb", wtb.make_games(moves, scores), year)
    short = _random_move_lists(1, 3)[0][0][:20]  # a game resigned 20 moves in: no endgame
    wtb.write_wtb(d / "WTH_2003.wtb", wtb.make_games([short], [30]), 2003)
    return d, {tuple(m) for m in moves}  # 2002's games


def _check_scored(lines, empties):
    """Every position of the lines has its empties and two moves or more, each legal move
    scored once with the exact solver's value, best first."""
    from othello.formats import parse_obf
    from othello_learn.search.endgame import empties as count_empties
    from othello_learn.search.endgame import move_value

    obf = parse_obf("\n".join(lines))
    for x in obf:
        pos, scores = x.position, x.scores()
        assert count_empties(pos.player, pos.opponent) in empties
        assert sorted(scores) == sorted(pos.legal_moves()) and len(scores) >= 2, x.what
        assert scores == {m: move_value(pos.player, pos.opponent, m) for m in scores}, x.what
        assert list(scores.values()) == sorted(scores.values(), reverse=True), x.what  # best first, as Edax
    return obf


def test_make_obf_scores_one_endgame_a_game_from_wthor_files_and_the_dataset_alike(synthetic_wthor, tmp_path,
                                                                                   capsys):
    """The OBF builder of the research scripts, now othello-solve --make-obf: from the raw files
    (--wthor-dir) and from the built dataset (--data) the same problems, each of a distinct game
    of the years asked for, and a perfect player grades best on every one."""
    from othello_learn.data.wthor import main as dataset_main

    wthor, games_2002 = synthetic_wthor
    out = tmp_path / "end6.obf"
    argv = ["--make-obf", str(out), "--years", "2002", "--empties", "6", "--count", "4", "--seed", "3"]
    assert run_main(main, argv + ["--wthor-dir", str(wthor)]) == 0
    text = out.read_text()
    assert text.startswith("% 4 endgame problems") and "--empties 6 --seed 3 --count 4" in text.splitlines()[0]
    obf = _check_scored(text.splitlines()[1:], {6})
    assert len(obf) == 4
    ends = [Position.from_transcript("".join(square_name(m) for m in g[:54])) for g in games_2002 if len(g) >= 54]
    keys = [(p.player, p.opponent) for p in ends]
    found = [keys.index((x.position.player, x.position.opponent)) for x in obf]  # 2002's, 6 empties: ply 54
    assert len(set(found)) == 4  # one a game

    data = tmp_path / "ds"
    assert run_main(dataset_main, ["--wthor-dir", str(wthor), "--out", str(data), "--quiet"]) == 0
    again = tmp_path / "again.obf"
    argv[1] = str(again)
    assert run_main(main, argv + ["--data", str(data)]) == 0
    assert again.read_text().splitlines()[1:] == text.splitlines()[1:]
    capsys.readouterr()
    assert run_main(main, [str(out), "--player", "endgame:14:random"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("best move in 4 of 4 scored positions")


@pytest.mark.parametrize("argv, named", [
    (["--random-games", "--empties", "15"], "--empties"),  # past the solver's range
    (["--random-games", "--empties", "9-7"], "--empties"),
    (["--random-games", "--player", "random"], "--player"),  # a problem set asks no player
    (["--random-games", "p.obf"], "positions"),
    (["--random-games", "--wthor-dir", "."], "not both"),
    (["--wthor-dir", "{wthor}", "--years", "2004"], "2004"),  # a year without its file
    (["--data", "{tmp}", "--years", "2002"], "--data"),  # not a dataset
    (["--wthor-dir", "{wthor}", "--years", "2003"], "no position"),
])
def test_make_obf_bad_input_is_one_line_and_writes_nothing(synthetic_wthor, tmp_path, capsys, argv, named):
    out = tmp_path / "set.obf"
    argv = [a.format(wthor=synthetic_wthor[0], tmp=tmp_path) for a in argv]
    with pytest.raises(SystemExit) if named == "--empties" else _no_exit() as e:
        code = run_main(main, ["--make-obf", str(out), "--count", "2"] + argv)
    code = e.value.code if named == "--empties" else code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and named in err, err
    assert not out.exists()


def _no_exit():
    import contextlib

    return contextlib.nullcontext()


def test_without_make_obf_a_file_and_a_player_are_needed(capsys):
    with pytest.raises(SystemExit) as e:
        run_main(main, ["--player", "random"])
    assert e.value.code == 2 and "--player SPEC" in capsys.readouterr().err


def test_the_shipped_problem_set_is_scored_by_the_solver_and_found_by_name(tmp_path, capsys, monkeypatch):
    """othello_learn/frontends/problems/endgames.obf (package data, named in --help): random
    games' endgames, not WTHOR's; every score is the exact solver's. 'endgames' finds it, a
    file of that name in the current folder comes first."""
    from othello_learn.frontends import solve_obf as solve_module

    shipped, help_text = solve_module.PROBLEMS / "endgames.obf", solve_module.__doc__
    lines = [x for x in shipped.read_text().splitlines() if not x.startswith("%")]
    assert len(lines) == 20 and "--random-games" in shipped.read_text().splitlines()[0]
    _check_scored(lines, {8, 9, 10})
    assert "othello-solve endgames --player" in help_text
    monkeypatch.chdir(tmp_path)
    assert run_main(main, ["endgames", "--player", "random"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("(20 positions)")  # each answer graded
    write_obf(tmp_path / "endgames", positions()[:2])
    assert run_main(main, ["endgames", "--player", "random"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
