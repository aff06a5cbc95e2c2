"""Our NBoard engine: a scripted session piped through the real command, and
the protocol's details in-process (fast)."""

import io
import subprocess
import sys
from pathlib import Path

import pytest

from othello.formats import GameRecord, format_ggf
from othello.game import IllegalMoveError, Position
from othello.notation import PASS, parse_square, square_name
from othello_learn.players.base import AlphaBetaPlayer
from othello_learn.frontends.nboard import Engine, serve
from othello_learn.players.specs import make_player

REPO = Path(__file__).resolve().parents[1]


def session(player, lines):
    out, err = io.StringIO(), io.StringIO()
    serve(player, "test", io.StringIO("".join(line + "\n" for line in lines)), out, err)
    return out.getvalue().splitlines(), err.getvalue()


def pass_position():
    """A game that reaches a position where the side to move must pass."""
    from test_formats import random_game

    for s in range(2000):
        moves = random_game(s)
        if PASS in moves:
            return moves[: moves.index(PASS)]
    raise AssertionError("no pass found")


def test_piped_session_end_to_end():
    game = format_ggf(GameRecord.from_transcript("f5f6d3c5"))
    script = ["nboard 2", "set depth 6", f"set game {game}", "ping 1", "hint 3", "go",
              "move e6/1.00/2.5", "frobnicate now", "move z9", "set contempt 0", "set time 10 20",
              "learn", "ping 2", "go", "quit"]
    r = subprocess.run([sys.executable, "-m", "othello_learn.frontends.nboard", "--player", "alphabeta:1"], cwd=REPO,
                       input="\n".join(script) + "\n", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[:4] == ["set myname othello-learn-alphabeta:1"] * 2 + [  # one word: NBoard reads one
        "status set depth 6 not followed: alphabeta:1 searches depth 1, as its --player spec says", "pong 1"]
    pos = Position.from_transcript("f5f6d3c5")
    searches = [line.split() for line in out if line.startswith("search ")]
    assert 1 <= len(searches) <= 3 and all(parse_square(s[1]) in pos.legal_moves() for s in searches)
    moves = [line.split()[1].split("/")[0] for line in out if line.startswith("=== ")]
    assert parse_square(moves[0]) in pos.legal_moves()
    assert parse_square(moves[1]) in pos.play("e6").legal_moves()  # the move was followed
    assert "learned" in out and out.index("pong 2") < out.index("=== " + out[-2].split()[1])
    assert "frobnicate" in r.stderr and "z9" in r.stderr


def test_the_name_is_one_word_and_noise_is_quoted_short():
    """NBoard reads ``set myname``'s name as one word (two engines here read "othello-learn");
    a GUI's line of any length is quoted on stderr in at most ECHO x 2 characters; bytes that
    are no move are an unknown command, shown as they are."""
    out = io.StringIO()
    err = io.StringIO()
    serve(make_player("random"), "my  engine 2",
          io.StringIO("nboard 2\n" + "x" * 100_000 + "\n\x01\x02\n\uff46\uff15\n"), out, err)
    assert out.getvalue().splitlines() == ["set myname my-engine-2"]
    lines = err.getvalue().splitlines()
    assert len(lines) == 3 and lines[0] == "nboard: " + ("ignored unknown command: '" + "x" * 400)[:400] + "..."
    assert lines[1] == "nboard: ignored unknown command: '\\x01\\x02'"
    assert lines[2] == "nboard: ignored unknown command: '\uff46\uff15'"  # full-width letters are no move
    out = io.StringIO()
    serve(make_player("random"), "  ", io.StringIO("nboard 2\n"), out, io.StringIO())
    assert out.getvalue() == "set myname othello-learn\n"


def test_bad_player_spec_is_one_line_exit_2():
    r = subprocess.run([sys.executable, "selfplay/nboard.py", "--player", "nonsense:1"], cwd=REPO,
                       input="", capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "error:" in r.stderr and "Traceback" not in r.stderr


def test_a_malformed_command_is_one_line_naming_it_and_the_engine_goes_on():
    out, err = session(AlphaBetaPlayer(1), ["hint abc", "set depth x", "set depth", "hint 0", "hint -2", "hint",
                                            "set game (;GM[Othello]B[z9];)", "move z9", "ping 3"])
    not_a_move = "not a move: 'z9' (expected a1..h8 or a pass: PA, pass, --) (position unchanged)"
    assert err.splitlines() == ["nboard: hint abc: expected a number of moves, as in 'hint 3'; ignored",
                                "nboard: set depth x: expected a search depth, as in 'set depth 6'; ignored",
                                "nboard: set depth: expected a search depth, as in 'set depth 6'; ignored",
                                "nboard: hint 0: expected a number of moves, as in 'hint 3'; ignored",
                                "nboard: hint -2: expected a number of moves, as in 'hint 3'; ignored",
                                f"nboard: set game, ply 1: {not_a_move}",  # not "set: set game"
                                f"nboard: move: {not_a_move}"]
    assert sum(line.startswith("search ") for line in out) == 1 and out[-1] == "pong 3"


def test_set_depth_is_not_followed_and_a_status_line_says_so():
    """The spec fixes the strength (NBoard's level, or the arena's default depth 10, would make
    alphabeta:3 a Python depth-10 search): the GUI is told in a status line it shows until the
    next, not one an empty status clears at once, and only where the depth is not the player's."""
    out, err = session(AlphaBetaPlayer(3), ["nboard 2", "set depth 3", "set depth 12", "hint 1", "ping 1"])
    assert out[:4] == ["set myname test"] * 3 + [
        "status set depth 12 not followed: alphabeta:3 searches depth 3, as its --player spec says"]
    assert out[4] == "status Analyzing" and out[5].split()[4] == "3" and out[-2:] == ["status", "pong 1"]
    assert err == ""
    out, _ = session(make_player("random"), ["set depth 1"])
    assert out == ["set myname test", "status set depth 1 not followed: random has no search depth, as its "
                                      "--player spec says"]


def test_a_gui_that_closes_our_output_ends_the_session_quietly():
    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    err = io.StringIO()
    rest = io.StringIO("".join(f"ping {i}\n" for i in range(5)))
    assert serve(AlphaBetaPlayer(1), "test", rest, Closed(), err) == 0
    assert err.getvalue() == "" and rest.read() == "ping 1\nping 2\nping 3\nping 4\n"  # stopped at the first


def test_a_gui_that_closes_our_stderr_costs_the_warnings_not_the_session():
    """The first warning's BrokenPipeError used to end the session (exit 1, no pong)."""
    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    out = io.StringIO()
    lines = io.StringIO("frobnicate\nmove z9\nhint abc\nset game (;)\nping 1\n")
    assert serve(AlphaBetaPlayer(1), "test", lines, out, Closed()) == 0
    assert out.getvalue() == "pong 1\n"


def test_forced_pass_and_game_over_answer_pa():
    moves = pass_position()
    rec = GameRecord.from_transcript("".join("pa" if m == PASS else f"{'abcdefgh'[m % 8]}{m // 8 + 1}" for m in moves))
    out, _ = session(AlphaBetaPlayer(1), [f"set game {format_ggf(rec)}", "hint 2", "go", "move PA", "ping 7"])
    assert "search PA" in "\n".join(out) and any(line.startswith("=== PA/") for line in out) and out[-1] == "pong 7"
    assert [line for line in out if line.startswith("search ")] == [line for line in out if line.startswith("search PA ")]
    # a finished game: no hint, go answers PA with a note on stderr
    from test_formats import random_game

    over = GameRecord.from_transcript("".join("pa" if m == PASS else f"{'abcdefgh'[m % 8]}{m // 8 + 1}"
                                              for m in random_game(3)))
    out, err = session(AlphaBetaPlayer(1), [f"set game {format_ggf(over)}", "hint 2", "go", "ping 8"])
    assert not [line for line in out if line.startswith("search ")] and "=== PA" in out and out[-1] == "pong 8"
    assert "game is over" in err


def test_alphabeta_hints_agree_with_its_search_and_are_sorted():
    player = AlphaBetaPlayer(2)
    rec = GameRecord.from_transcript("f5d6c3d3c4f4")
    out, _ = session(player, [f"set game {format_ggf(rec)}", "hint 20", "go"])
    evals = [float(line.split()[2]) for line in out if line.startswith("search ")]
    pos = rec.final
    assert len(evals) == len(pos.legal_moves()) and evals == sorted(evals, reverse=True)
    value, best = player.search(pos.player, pos.opponent)
    top = [parse_square(line.split()[1]) for line in out if line.startswith("search ")][0]
    assert top in best and abs(evals[0] - value / 100) < 1e-9
    go = next(line for line in out if line.startswith("=== "))
    assert parse_square(go.split()[1].split("/")[0]) in best


def test_network_hints_are_policy_ordered_with_values():
    player = make_player("policy:checkpoints/cpu_rl_warm_long.pt")  # has a value head
    out, err = session(player, ["hint 4", "analyze", "go"])
    probs = [float(line.split("policy ")[1].split(",")[0]) for line in out if line.startswith("search ")]
    assert len(probs) == 4 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1.0001
    assert out[-2].startswith("=== ") and out[-2].split("/")[1] != ""  # an evaluation from the value head
    engine = Engine(player, "x", io.StringIO(), io.StringIO())
    assert engine.analyst.choose(Position(), []) in Position().legal_moves()


def test_go_gives_the_chosen_move_the_evaluation_hint_gives_it():
    """NBoard's eval, in ``=== move/eval`` as in a ``search`` line, is the move's from the side to
    move's view: a GUI shows both beside the move, so one move must get one number."""
    from othello.states import last_actions
    from othello_learn.players.network import best_move

    rec = GameRecord.from_transcript("f5d6")
    net_player = make_player("policy:checkpoints/cpu_rl_warm_long.pt")
    answers = {}
    for player in (net_player, AlphaBetaPlayer(2)):
        out, _ = session(player, [f"set game {format_ggf(rec)}", "go", "hint 20"])
        move, ev = next(line for line in out if line.startswith("=== "))[4:].split("/")[:2]
        hints = {line.split()[1]: line.split()[2] for line in out if line.startswith("search ")}
        assert ev == hints[move], player.name
        answers[player.name] = parse_square(move), float(ev)
    # The network's: minus the value of the position the move leads to, in discs (64 a full win).
    sq, ev = answers[net_player.name]
    child_value = best_move(net_player.net, rec.final.play(sq), last_actions(rec.moves + [sq]))[2]
    assert ev == pytest.approx(-64 * child_value, abs=0.006)
    root_value = best_move(net_player.net, rec.final, last_actions(rec.moves))[2]
    assert abs(ev - 64 * root_value) > 0.1  # the position's own value, which go gave before, differs here


@pytest.mark.parametrize("kind", ["gumbel", "mcts"])
def test_a_search_players_hints_show_its_search_and_agree_with_its_move(kind):
    """A search player's hints were its raw policy: it played another move than the first one,
    with another evaluation. Now one search per position: its move first with the evaluation go
    gives it, then by visits; a visited move is valued by its mean backed-up value, an
    unvisited one by the network as a policy player values it."""
    import numpy as np

    rec = GameRecord.from_transcript("f5d6c3d3c4")
    player = make_player(f"{kind}:checkpoints/cpu_rl_warm_long.pt:16")
    out, _ = session(player, [f"set game {format_ggf(rec)}", "hint 20", "go"])
    hints = [line.split(maxsplit=5) for line in out if line.startswith("search ")]
    move, ev = next(line for line in out if line.startswith("=== "))[4:].split("/")[:2]
    assert len(hints) == len(rec.final.legal_moves()) and hints[0][1:3] == [move, ev]
    visits = [int(h[5].split()[1]) for h in hints]
    assert visits[1:] == sorted(visits[1:], reverse=True) and sum(visits) >= 15 and all("search" in h[5] for h in hints)
    if kind == "mcts":
        assert visits[0] == max(visits)  # PUCT plays its most visited move
    # the values are the search's: one fresh search, seeded alike, gives the same
    from othello.states import last_actions

    pos = rec.final
    chosen, n, q = player.analyse(pos.player, pos.opponent, pos.black_to_move, np.random.default_rng(0),
                                  history=last_actions(rec.moves)[None])
    assert square_name(chosen).upper() == move
    for h in hints:
        sq = parse_square(h[1])
        if n[sq]:
            assert float(h[2]) == pytest.approx(64 * q[sq], abs=0.006)
    policy_hints = dict(line.split()[1:3] for line in session(make_player("policy:checkpoints/cpu_rl_warm_long.pt"),
                                                             [f"set game {format_ggf(rec)}", "hint 20"])[0]
                        if line.startswith("search "))
    assert 0 in visits and all(policy_hints[h[1]] == h[2] for h, k in zip(hints, visits) if k == 0)


def test_a_search_players_move_that_ends_the_game_shows_its_exact_result():
    """The search backs up a finished game's sign (x 64: 64.00 for a win by 32); its hint gives the
    exact disc difference, as a policy player's and the solver's do."""
    t = ("f5f4c3c4c5g6g5d6e3b3h7g4g3b4c6h2g2b7d7e2c7d3f6g7a2d8f3b5g8b2a4h5a1h3f1g1c2d2e1b8h1f7h4c1a8h8a5a6d1"
         "f8h6c8f2e6e8b1e7a3")  # a7 ends the game (won by 32 by the side to move), b6 does not
    rec = GameRecord.from_transcript(t)
    out, _ = session(make_player("gumbel:checkpoints/cpu_rl_warm_long.pt:8"), [f"set game {format_ggf(rec)}", "hint 2"])
    hints = {line.split()[1]: line.split()[2] for line in out if line.startswith("search ")}
    assert hints["A7"] == "32.00" and "visits" in next(line for line in out if line.startswith("search A7"))
    # the search's own view of it: visited, a win (+1 for the side to move), not its disc difference
    import numpy as np

    from othello.states import last_actions

    pos = rec.final
    _, visits, q = make_player("gumbel:checkpoints/cpu_rl_warm_long.pt:8").analyse(
        pos.player, pos.opponent, pos.black_to_move, np.random.default_rng(0), history=last_actions(rec.moves)[None])
    assert visits[parse_square("a7")] > 0 and q[parse_square("a7")] == 1.0


def test_each_hint_says_whether_its_eval_is_a_disc_count_or_a_value_x_64():
    """A value head's expected result (-1 lost .. +1 won) shows x 64 on NBoard's disc scale beside
    exact disc differences: each hint's text says which its figure is, and a value's x 64 reads back."""
    t = ("f5f4c3c4c5g6g5d6e3b3h7g4g3b4c6h2g2b7d7e2c7d3f6g7a2d8f3b5g8b2a4h5a1h3f1g1c2d2e1b8h1f7h4c1a8h8a5a6d1"
         "f8h6c8f2e6e8b1e7a3")  # a7 ends the game (won by 32 by the side to move), b6 does not
    end = f"set game {format_ggf(GameRecord.from_transcript(t))}"
    for spec in ("policy:checkpoints/cpu_rl_warm_long.pt", "gumbel:checkpoints/cpu_rl_warm_long.pt:8"):
        out, _ = session(make_player(spec), [end, "hint 2"])
        said = {line.split()[1]: (float(line.split()[2]), line.split(None, 5)[5]) for line in out
                if line.startswith("search ")}
        assert said["A7"] == (32.0, said["A7"][1]) and said["A7"][1].endswith(", exact disc difference"), spec
        ev, text = said["B6"]
        value = float(text.split(" (-1 lost .. +1 won)")[0].split()[-1])  # "..., eval = 64 x the net's value +0.1 (...)"
        assert ", eval = 64 x " in text and -1 <= value <= 1 and abs(64 * value - ev) < 0.04, (spec, text)
    out, _ = session(make_player("endgame:10:alphabeta:1"), [end, "hint 2"])
    assert all(line.endswith("exact disc difference") for line in out if line.startswith("search "))
    out, _ = session(AlphaBetaPlayer(2), ["hint 1", end, "hint 1"])  # the start: a heuristic; the end: seen
    hints = [line for line in out if line.startswith("search ")]
    assert hints[0].endswith("alphabeta depth 2, heuristic / 100") and hints[1].endswith(", exact disc difference")


def test_one_search_per_position_and_moves_not_per_board():
    """The cached search is keyed by the moves too: a transposition reaches the same board with
    other last moves, which the handcrafted planes read, so its hint is searched afresh."""
    import numpy as np

    from othello.states import last_actions
    from othello_learn.frontends.analysis import Analyst

    player = make_player("mcts:checkpoints/best_value.pt:8")  # handcrafted planes: they read the last moves
    analyst = Analyst(player)
    calls = []
    real = player.analyse
    player.analyse = lambda *a, **k: calls.append(k["history"].tolist()) or real(*a, **k)
    first, second = (GameRecord.from_transcript(t) for t in ("f5d6c3d3c4f4", "f5d6c4d3c3f4"))
    assert first.final == second.final
    for rec in (first, first, second):
        pos = rec.final
        hints = analyst.hints(pos, rec.moves, 20)
        assert analyst.choose(pos, rec.moves) == hints[0][0]  # go plays the hint ranked first
    assert calls == [last_actions(first.moves)[None].tolist(), last_actions(second.moves)[None].tolist()]
    fresh = player.analyse(second.final.player, second.final.opponent, second.final.black_to_move,
                           np.random.default_rng(0), history=last_actions(second.moves)[None])
    assert analyst.searched(second.final, second.moves)[1].tolist() == fresh[1].tolist()


def test_a_search_player_without_a_value_head_gives_no_evaluation():
    """Its search values every position 0 (a finished game its sign): shown, they read as evaluations."""
    rec = GameRecord.from_transcript("f5d6")
    out, _ = session(make_player("mcts:checkpoints/cpu_raw.pt:8"), [f"set game {format_ggf(rec)}", "hint 3", "go"])
    go = next(line for line in out if line.startswith("=== "))
    assert go.split("/")[1] == ""  # go's field empty, as for any player without an evaluation
    assert all(line.split()[2] == "0.00" for line in out if line.startswith("search "))


def test_an_endgame_player_in_its_range_gives_exact_results_from_go_hint_and_analyze():
    from test_formats import random_game

    from othello_learn.search.endgame import solve

    rec = GameRecord(moves=random_game(4, stop_at=54))
    pos = rec.final
    assert pos.legal_moves() and 64 - bin(pos.player | pos.opponent).count("1") <= 10
    value, best = solve(pos.player, pos.opponent)  # checked against plain minimax in test_endgame
    out, _ = session(make_player("endgame:10:alphabeta:1"), [f"set game {format_ggf(rec)}", "go", "hint 20", "analyze"])
    move, ev = next(line for line in out if line.startswith("=== "))[4:].split("/")[:2]
    hints = [line.split() for line in out if line.startswith("search ")]
    assert parse_square(move) in best and float(ev) == value == float(hints[0][2])
    assert {h[1]: h[2] for h in hints}[move] == ev and len(hints) == len(pos.legal_moves())
    assert {h[4] for h in hints} == {str(64 - bin(pos.player | pos.opponent).count("1"))}  # a solve's depth: the end
    assert f"analysis {len(rec.moves)} {value:.2f}" in out


def test_beyond_its_range_an_endgame_player_is_analysed_as_its_alphabeta():
    """``endgame:E:alphabeta:D`` plays alpha-beta's moves while more than E squares are empty:
    go, hint (every move ranked, depth D) and analyze give what alphabeta:D alone gives."""
    from test_formats import random_game

    rec = GameRecord(moves=random_game(4, stop_at=40))  # 24 empties
    answers = []
    for player in (make_player("endgame:12:alphabeta:2"), AlphaBetaPlayer(2)):
        out, _ = session(player, [f"set game {format_ggf(rec)}", "go", "hint 20", "analyze"])
        answers.append([line.rsplit("/", 1)[0] if line.startswith("=== ") else line for line in out])  # no time
    assert answers[0] == answers[1]
    hints = [line.split() for line in answers[0] if line.startswith("search ")]
    assert len(hints) == len(rec.final.legal_moves()) and {h[4] for h in hints} == {"2"}
    assert answers[0][answers[0].index("status Thinking") + 1].count("/") == 1  # === move/eval


def test_the_network_behind_an_endgame_player_gives_hints_and_evaluations():
    """``endgame:E:SPEC`` plays SPEC's moves before its solves: the engine ranks them with
    SPEC's network, as ``othello-play``'s hints do."""
    player = make_player("endgame:4:policy:checkpoints/cpu_rl_warm_long.pt")
    out, _ = session(player, ["hint 3", "go"])
    assert sum(line.startswith("search ") and "policy " in line for line in out) == 3
    answer = [line for line in out if line.startswith("=== ")]
    assert len(answer) == 1 and answer[0].split("/")[1] != ""  # an evaluation from the value head


def test_a_player_that_ranks_nothing_hints_its_own_move_and_alphabeta_its_depth():
    out, _ = session(make_player("greedy"), ["hint 3", "go"])
    hints = [line.split() for line in out if line.startswith("search ")]
    played = [line for line in out if line.startswith("=== ")][0][4:].split("/")[0]
    assert len(hints) == 1 and hints[0][1] == played and "no evaluation" in " ".join(hints[0])
    games = [format_ggf(GameRecord.from_transcript(t)) for t in ("f5", "f5d6", "f5f6e6f4", "f5d6c3d3c4", "c4c3")]
    out, _ = session(make_player("random"), [line for g in games for line in (f"set game {g}", "hint 1", "go")])
    hinted = [line.split()[1] for line in out if line.startswith("search ")]
    played = [line[4:].split("/")[0] for line in out if line.startswith("=== ")]
    assert len(played) == 5 and hinted == played  # a random player's hint is the move it then plays
    out, _ = session(AlphaBetaPlayer(2), ["hint 2"])
    assert [line.split()[4] for line in out if line.startswith("search ")] == ["2", "2"]


def test_the_engine_needs_no_torch_for_players_without_a_network():
    """alphabeta, greedy, random: the engine starts without importing torch (seconds at start-up)."""
    code = ("import sys, io; from othello_learn.frontends.nboard import serve; from othello_learn.players.specs "
            "import make_player; serve(make_player('alphabeta:2'), 't', io.StringIO('hint 2\\ngo\\n'), io.StringIO(), "
            "io.StringIO()); assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# -- external players behind the engine, and a go that cannot answer

FAKE_GTP = f"{sys.executable} {REPO / 'tests' / 'fake_engines' / 'gtp_engine.py'}"

# An NBoard engine that writes each game it is given to a file and plays the lowest legal square.
FAKE_NBOARD = """
import sys
sys.path.insert(0, {repo!r})
from othello.formats import parse_ggf_game
from othello.notation import square_name
log = open({log!r}, "a")
pos = None
for line in sys.stdin:
    if line.startswith("set game "):
        log.write(line[9:]); log.flush()
        pos = parse_ggf_game(line[9:].strip(), "game").final
    elif line.startswith("ping"):
        print("pong " + line.split()[1], flush=True)
    elif line.strip() == "go":
        print("=== " + square_name(pos.legal_moves()[0]).upper(), flush=True)
    elif line.strip() == "quit":
        break
"""


def test_a_gtp_player_behind_the_engine_is_told_the_game_from_the_start():
    gtp = make_player(f"gtp:timeout=20:{FAKE_GTP}")
    try:
        rec = GameRecord.from_transcript("f5d6c3")
        out, err = session(gtp, [f"set game {format_ggf(rec)}", "hint 2", "go", "move " + "d3", "go", "ping 1"])
    finally:
        gtp.close()
    assert err == ""
    played = [line[4:].split("/")[0] for line in out if line.startswith("=== ")]
    pos = rec.final
    assert parse_square(played[0]) == pos.legal_moves()[0]  # the fake's lowest legal square: it replayed f5d6c3
    assert parse_square(played[1]) == pos.play("d3").legal_moves()[0] and out[-1] == "pong 1"


def test_an_nboard_player_behind_the_engine_gets_the_set_up_start_and_the_moves(tmp_path):
    script, log = tmp_path / "fake_nboard.py", tmp_path / "games.txt"
    script.write_text(FAKE_NBOARD.format(repo=str(REPO), log=str(log)))
    start = Position(Position().opponent, Position().player, False)  # the standard board, white to move: set up
    rec = GameRecord(moves=[parse_square("f4")], start=start)
    nb = make_player(f"nboard:timeout=20:{sys.executable} {script}")
    try:
        out, err = session(nb, [f"set game {format_ggf(rec)}", "go"])
    finally:
        nb.close()
    assert err == "" and any(line.startswith("=== ") for line in out)
    from othello.formats import parse_ggf_game

    told = parse_ggf_game(log.read_text().splitlines()[-1], "told")
    assert told.start == start and told.moves == rec.moves  # the history, not a bare board


def broken_player(error=RuntimeError):
    from othello_learn.players.base import RandomPlayer

    class Broken(RandomPlayer):
        def select(self, *a, **k):
            raise error("the engine fell over")

    return Broken()


def test_a_go_that_cannot_answer_says_so_in_a_status_line_and_ends_the_session():
    """The protocol has no error answer, and a GUI waits for === forever: the engine stops."""
    from othello_learn.files import UserError
    from othello_learn.frontends.nboard import NoMove

    out, err = io.StringIO(), io.StringIO()
    rest = io.StringIO("go\nping 1\n")
    with pytest.raises(NoMove, match="go: RuntimeError: the engine fell over; no move") as e:
        serve(broken_player(), "t", rest, out, err)
    assert isinstance(e.value, UserError)  # one line, exit 2 from the command
    lines = out.getvalue().splitlines()
    assert lines == ["status Thinking", "status go failed: RuntimeError: the engine fell over"]
    assert rest.read() == "ping 1\n"  # nothing after it is read


@pytest.mark.parametrize("error", [RuntimeError, ValueError])
def test_a_hint_that_fails_still_ends_with_an_empty_status(error):
    """A ValueError (what a player's bad input raises) is caught apart from the rest: it too ends the hint."""
    out, err = session(broken_player(error), ["hint 2", "analyze", "ping 1"])
    assert out == ["status Analyzing", "status", "status Analyzing", "status", "pong 1"]
    assert err.count("the engine fell over") == 1 and "position unchanged" not in err


@pytest.mark.parametrize("error", [IllegalMoveError, RuntimeError])
def test_a_hint_that_fails_says_why_in_one_line_as_go_does(error):
    """A player's illegal move (an external engine's, say) brings the board after its message:
    the hint's stderr line is the message's first line, the one go's status line quotes."""
    import numpy as np

    from othello_learn.frontends.nboard import NoMove
    from othello_learn.players.base import RandomPlayer

    class Cheat(RandomPlayer):
        name = "cheat"

        def select(self, states, rng, moves=None):
            if error is RuntimeError:
                raise RuntimeError("the engine fell over\n  its traceback")
            return np.zeros(len(states), np.int64)  # a1: not a legal move

    out, err = session(Cheat(), ["hint 1", "ping 1"])
    assert out == ["status Analyzing", "status", "pong 1"]
    first = ("player 'cheat' played a1, which is illegal, here (legal: d3, c4, f5, e6):"
             if error is IllegalMoveError else "RuntimeError: the engine fell over")
    assert err == f"nboard: hint: {first}\n"
    gone = io.StringIO()
    with pytest.raises(NoMove):
        serve(Cheat(), "t", io.StringIO("go\n"), gone, io.StringIO())
    assert gone.getvalue().splitlines()[-1] == "status go failed: " + (
        f"IllegalMoveError: {first}" if error is IllegalMoveError else first)


def test_an_external_player_that_cannot_start_is_one_line_exit_2():
    r = subprocess.run([sys.executable, "selfplay/nboard.py", "--player", f"gtp:timeout=5:{sys.executable} -c pass"],
                       cwd=REPO, input="", capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and "--player: engine" in r.stderr and "does not answer" in r.stderr


def test_a_forced_pass_is_valued_as_any_move_minus_the_position_it_leads_to():
    """Black (b1) must pass, white plays c1 and black has nothing: the pass loses 0-64."""
    game = f"set game (;GM[Othello]TY[8]BO[8 O*{'-' * 62} *];)"
    out, _ = session(AlphaBetaPlayer(2), [game, "hint 3", "go"])
    assert [line for line in out if line.startswith("search ")] == ["search PA -64.00 0 2 forced pass"]
    assert [line.rsplit("/", 1)[0] for line in out if line.startswith("=== ")] == ["=== PA/-64.00"]  # go: hint's eval
    out, _ = session(make_player("random"), [game, "hint 3", "go"])  # no evaluation: 0.00, said so, as for its moves
    assert [line for line in out if line.startswith("search ")] == ["search PA 0.00 0 1 forced pass (no evaluation)"]
    assert [line.rsplit("/", 1)[0] for line in out if line.startswith("=== ")] == ["=== PA/"]  # go: no eval field
    failing = Engine(AlphaBetaPlayer(2), "x", io.StringIO(), io.StringIO())  # no evaluation: PA all the same
    failing.analyst.root_eval = lambda *a: 1 / 0
    for line in (game, "go"):
        failing.handle(line)
    assert [x.rsplit("/", 1)[0] for x in failing.out.getvalue().splitlines() if x.startswith("=== ")] == ["=== PA/"]
    assert "no evaluation of the forced pass (ZeroDivisionError" in failing.err.getvalue()
    from othello.states import last_actions
    from othello_learn.players.network import best_move

    net_player = make_player("policy:checkpoints/cpu_rl_warm_long.pt")
    out, _ = session(net_player, [game, "hint 3"])
    ev = float(next(line for line in out if line.startswith("search PA ")).split()[2])
    pos = parse_ggf_final(game)
    after = best_move(net_player.net, pos.play(PASS), last_actions([PASS]))[2]
    assert ev == pytest.approx(-64 * after, abs=0.006) and abs(after) > 0.01


def parse_ggf_final(line: str) -> Position:
    from othello.formats import parse_ggf_game

    return parse_ggf_game(line[len("set game "):], "game").final


def test_move_infers_a_forced_pass_as_set_game_does():
    """Black (b1) must pass: the GUI sends white's c1, as a GGF game may write it."""
    setup = f"set game (;GM[Othello]TY[8]BO[8 O*{'-' * 62} *];)"
    engine = Engine(AlphaBetaPlayer(1), "x", io.StringIO(), io.StringIO())
    for line in (setup, "move c1/-64.00/0.1"):
        engine.handle(line)
    via_set = Engine(AlphaBetaPlayer(1), "x", io.StringIO(), io.StringIO())
    via_set.handle(setup[:-2] + "W[c1];)")
    assert engine.err.getvalue() == "" and engine.game.moves == via_set.game.moves == [PASS, parse_square("c1")]
    assert engine.game.position == via_set.game.position and engine.game.position.is_over()
    engine.handle("move d1")  # still refused when not legal: named with its ply, the game unchanged
    assert engine.err.getvalue() == "nboard: move: game, ply 3 (d1): d1 is not legal here (the game is over) (position unchanged)\n"
    assert engine.game.moves == via_set.game.moves
    engine.handle(setup)
    engine.handle("move g7")
    assert "ply 1 (g7): g7 is not legal here (legal: c1) (position unchanged)" in engine.err.getvalue() and engine.game.moves == []


def test_a_network_values_moves_that_end_the_game_or_force_a_pass_as_the_search_does():
    """A hint's evaluation is minus the position the move leads to, and that position is valued as
    ``tree.evaluate`` values it: a finished game by its result (the value head never saw one; it
    read a win by 12 as -5.8 discs), a forced pass as minus the position after the pass."""
    from test_formats import random_game

    from othello.states import last_actions
    from othello_learn.players.network import best_move

    net_player = make_player("policy:checkpoints/cpu_rl_warm_long.pt")
    seen = set()
    for seed in range(300):
        moves = random_game(seed)
        for k in range(40, len(moves)):
            rec = GameRecord(moves=moves[:k])
            pos = rec.final
            kinds = {sq: "over" if pos.play(sq).is_over() else "pass" if pos.play(sq).must_pass() else None
                     for sq in pos.legal_moves()}
            if not set(kinds.values()) - {None} - seen:
                continue
            out, _ = session(net_player, [f"set game {format_ggf(rec)}", "hint 64"])
            hints = {parse_square(line.split()[1]): float(line.split()[2]) for line in out if line.startswith("search ")}
            assert hints.keys() == kinds.keys()
            for sq, kind in kinds.items():
                child = pos.play(sq)
                if kind == "over":  # the mover's discs minus the other's, empties to the winner (FFO)
                    mine, theirs = bin(child.opponent).count("1"), bin(child.player).count("1")
                    want = (mine - theirs) + (64 - mine - theirs) * ((mine > theirs) - (mine < theirs))
                else:  # best_move's value of a forced pass is minus the value after it
                    want = -64 * best_move(net_player.net, child, last_actions(rec.moves + [sq]))[2]
                assert hints[sq] == pytest.approx(want, abs=0.006), (seed, k, kind)
                seen.add(kind or "other")
        if {"over", "pass"} <= seen:
            return
    raise AssertionError(f"only {seen} found")


def _exact(pos):
    """A position's exact value for its side to move, by brute force over ``Position`` (no solver
    code): what each kind of hint must agree with, near the end, in discs (empties to the winner)."""
    if pos.is_over():
        return pos.score() if pos.black_to_move else -pos.score()
    return max(-_exact(pos.play(m)) for m in (pos.legal_moves() or [PASS]))


def test_every_kind_of_hint_values_a_move_that_ends_the_game_or_forces_a_pass_for_the_mover():
    """Each hint is the move's value from the side to move's view after playing it, whatever
    ranks the moves: a solve, alpha-beta, a network's value head or a search. Here a move that
    ends the game (a7, a win by 32, beside b6), one after which the opponent must pass (h1, +10)
    and one that loses after the opponent's pass (a7, -2), two or three squares from the end,
    where the solve and a deep enough alpha-beta are exact and a network's figure for a finished
    game is its exact result too; a search's for a move it visited is its mean backed-up value x
    64, which near the end is the result's sign (+-64), checked for its sign."""
    from test_formats import random_game

    from othello.states import last_actions
    from othello_learn.frontends.analysis import Analyst
    from othello_learn.players.network import GumbelPlayer, best_move

    t = ("f5f4c3c4c5g6g5d6e3b3h7g4g3b4c6h2g2b7d7e2c7d3f6g7a2d8f3b5g8b2a4h5a1h3f1g1c2d2e1b8h1f7h4c1a8h8a5a6d1"
         "f8h6c8f2e6e8b1e7a3")
    games = [GameRecord.from_transcript(t).moves, random_game(5)[:58], random_game(1)[:57]]
    policy = _history_player()
    search = GumbelPlayer(policy.net, simulations=48, device="cpu")
    seen = set()
    for moves in games:
        pos = GameRecord(moves=moves).final
        empties = 64 - bin(pos.player | pos.opponent).count("1")
        exact = {sq: -_exact(pos.play(sq)) for sq in pos.legal_moves()}
        over = {sq for sq in exact if pos.play(sq).is_over()}
        passes = {sq for sq in exact if pos.play(sq).must_pass()}
        seen |= {("over" if sq in over else "pass", exact[sq] > 0) for sq in over | passes}

        def hints(player):
            analyst = Analyst(player)
            return analyst, {sq: ev for sq, ev, _ in analyst.hints(pos, moves, 64)}

        for spec in (f"endgame:{empties}:alphabeta:1", f"alphabeta:{empties}"):  # both exact here
            assert hints(make_player(spec))[1] == pytest.approx(exact, abs=1e-9), spec
        _, ab1 = hints(AlphaBetaPlayer(1))  # depth 1 sees the end only where the move ends the game
        assert all(ab1[sq] == exact[sq] for sq in over)
        _, net = hints(policy)
        for sq in exact:
            want = exact[sq] if sq in over else -64 * best_move(policy.net, pos.play(sq), last_actions(moves + [sq]))[2]
            assert net[sq] == pytest.approx(want, abs=0.006), (square_name(sq), net[sq], want)
        analyst, searched = hints(search)
        _, visits, q = analyst.searched(pos, moves)
        for sq in exact:
            if sq in over:
                assert searched[sq] == exact[sq]
            else:
                assert visits[sq] >= 8 and searched[sq] == pytest.approx(64 * q[sq], abs=1e-9)
                if sq in passes:  # the opponent's pass, then the end: the result's sign dominates
                    assert (searched[sq] > 32) == (exact[sq] > 0) and abs(searched[sq]) > 32, \
                        (square_name(sq), searched[sq])
    assert seen == {("over", True), ("pass", True), ("pass", False)}  # a win by 32, +10, -2


def _history_player():
    """A policy player whose net (handcrafted planes, value head) reads the last four moves."""
    import torch

    from othello_learn.models.nets import NetConfig, build_network
    from othello_learn.players.network import PolicyPlayer

    torch.manual_seed(0)
    net = build_network(NetConfig(arch="resnet", encoder="handcrafted", blocks=1, width=8, value_head=True)).eval()
    return PolicyPlayer(net, "cpu")


def test_a_net_that_reads_the_last_moves_is_given_each_positions_own():
    """A hint's evaluation is minus best_move's value of the child with the hinted move last (of a
    child that must pass: plus the value after the pass, the pass last); analyze values position i
    with the game's first i moves; and a choice asked with other moves is made afresh, not
    answered from the last one."""
    from test_formats import random_game

    from othello.states import last_actions
    from othello_learn.frontends.analysis import Analyst
    from othello_learn.players.network import best_move

    player = _history_player()
    net = player.net
    moves = random_game(0)[:56]  # here one move leaves the opponent to pass
    rec = GameRecord(moves=moves)
    pos = rec.final
    children = {sq: pos.play(sq) for sq in pos.legal_moves()}
    assert any(c.must_pass() and not c.is_over() for c in children.values())
    out, _ = session(player, [f"set game {format_ggf(rec)}", "hint 64", "analyze"])
    hints = {parse_square(line.split()[1]): float(line.split()[2]) for line in out if line.startswith("search ")}
    assert hints.keys() == children.keys()
    for sq, child in children.items():
        want = -child.score() if child.is_over() else -64 * best_move(net, child, last_actions(moves + [sq]))[2]
        assert hints[sq] == pytest.approx(want, abs=0.006), sq
    analysis = {int(line.split()[1]): float(line.split()[2]) for line in out if line.startswith("analysis ")}
    positions = rec.positions()
    assert len(analysis) > 40
    for i, ev in analysis.items():
        assert ev == pytest.approx(64 * best_move(net, positions[i], last_actions(moves[:i]))[2], abs=0.006), i

    analyst, at12 = Analyst(player), positions[12]
    chosen = [analyst.choose(at12, hist, start) for hist, start in ((moves[:12], Position()), ([], None))]
    assert chosen == [best_move(net, at12, last_actions(hist))[0] for hist in (moves[:12], [])]
    assert chosen[0] != chosen[1], "the history must change the choice for the test to mean anything"



def test_a_hints_policy_is_the_nets_at_the_position_with_its_own_last_moves():
    """Beside each hint stands the net's probability of the move, and the hints come best first
    by it: the net asked at the position with the game's last moves, as ``best_move`` asks it,
    not with none (a net whose planes read them gives other probabilities then)."""
    from test_formats import random_game

    from othello.states import last_actions
    from othello_learn.frontends.analysis import Analyst
    from othello_learn.players.network import best_move

    player = _history_player()
    moves = random_game(0)[:12]
    pos = GameRecord(moves=moves).final
    probs, blank = (best_move(player.net, pos, hist)[1] for hist in (last_actions(moves), []))
    order = sorted(pos.legal_moves(), key=lambda sq: -probs[sq])
    assert order != sorted(pos.legal_moves(), key=lambda sq: -blank[sq]), "the history must change the order"
    hints = Analyst(player).hints(pos, moves, 64)
    assert [sq for sq, _, _ in hints] == order
    assert [text.split(",")[0] for _, _, text in hints] == [f"policy {probs[sq]:.3f}" for sq, _, _ in hints]

def test_an_endgame_player_solves_from_exactly_its_empties():
    from test_formats import random_game

    from othello_learn.frontends.analysis import Analyst
    from othello_learn.search.endgame import solve

    rec = GameRecord(moves=random_game(4, stop_at=54))
    pos = rec.final
    empties = 64 - bin(pos.player | pos.opponent).count("1")
    value, _ = solve(pos.player, pos.opponent)
    at = Analyst(make_player(f"endgame:{empties}:alphabeta:1"))
    assert at.exact(pos) and at.depth(pos) == empties and at.root_eval(pos, rec.moves) == value
    short = Analyst(make_player(f"endgame:{empties - 1}:alphabeta:1"))
    assert not short.exact(pos) and short.depth(pos) == 1


def test_an_illegal_choice_is_never_handed_to_a_gui():
    import numpy as np

    from othello_learn.frontends.analysis import Analyst
    from othello_learn.players.base import Player

    class Cheat(Player):
        name = "cheat"

        def select(self, states, rng, moves=None):
            return np.zeros(len(states), np.int64)  # a1: empty at the start, and not a legal move

    with pytest.raises(IllegalMoveError, match=r"'cheat' played a1, which is illegal, here \(legal: d3, c4, f5, e6\)"):
        Analyst(Cheat()).choose(Position(), [])
