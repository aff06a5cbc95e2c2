"""Players and the arena: baselines against slow obvious versions, the match's
bookkeeping, openings, the Elo interval and the command line."""

from __future__ import annotations

import ast
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import reference_engine as ref
from othello import bitboard as bb
from othello_learn.cli import run_main
from othello_learn.files import UserError
from othello.game import IllegalMoveError, Position
from othello.notation import parse_transcript
from othello.notation import PASS
from othello.states import States, last_actions
from othello.symmetry import transform
from othello_learn.search import alphabeta as ab
from othello_learn.players import specs as registry
from othello_learn.players import arena
from othello_learn.players.base import AlphaBetaPlayer
from othello_learn.players.arena import main as arena_main
from othello_learn.players.arena import play_match
from othello_learn.players.elo import MatchResult, elo_from_score
from othello_learn.players.openings import opening_states, random_openings
from othello_learn.players.base import GreedyPlayer, Player, RandomPlayer, flip_counts
from othello_learn.players.specs import make_player, register_player

REPO = Path(__file__).resolve().parents[1]


def _positions(n_games: int, seed: int, every: int = 1) -> list[tuple[int, int]]:
    """(player, opponent) of positions with a legal move, from random games of
    the reference engine: openings, middle games and endings with passes."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_games):
        record, _, _ = ref.random_game(rng)
        out += [ref.to_bitboards(board, color) for board, color, mv in record[::every] if mv != 64]
    return out


@pytest.fixture(scope="module")
def positions():
    return _positions(6, seed=1)


def _batch(pos):
    p = np.array([x for x, _ in pos], dtype=np.uint64)
    o = np.array([y for _, y in pos], dtype=np.uint64)
    return States(p, o, np.ones(len(pos), dtype=bool), np.full((len(pos), 4), -1, dtype=np.int64))


def _canonical(black: int, white: int, black_to_move: bool):
    return min((transform(black, k), transform(white, k)) for k in range(8)) + (black_to_move,)


# --------------------------------------------------------------------------
# Baseline players


def test_random_player_is_legal_and_covers_every_move():
    s = _batch([(bb.BLACK_START, bb.WHITE_START)] * 400)
    moves = RandomPlayer().select(s, np.random.default_rng(0))
    assert moves.dtype == np.int64 and moves.shape == (400,)
    counts = np.bincount(moves, minlength=64)
    legal = Position().legal_moves()
    assert set(np.nonzero(counts)[0]) == set(legal)
    assert counts[legal].min() > 60  # 100 expected each


def test_greedy_picks_a_max_flip_move(positions):
    moves = GreedyPlayer().select(_batch(positions), np.random.default_rng(0))
    for (pp, oo), mv in zip(positions, moves):
        # The obvious per-square loop, on the reference engine's board.
        board = [[1 if pp >> (8 * r + c) & 1 else -1 if oo >> (8 * r + c) & 1 else 0 for c in range(8)]
                 for r in range(8)]
        flipped = {8 * r + c: len(ref.flipped(board, 1, r, c)) for r in range(8) for c in range(8)}
        assert flipped[int(mv)] > 0
        assert flipped[int(mv)] == max(flipped.values())


def test_greedy_breaks_ties_at_random():
    s = _batch([(bb.BLACK_START, bb.WHITE_START)] * 200)  # four moves, one flip each
    moves = GreedyPlayer().select(s, np.random.default_rng(0))
    assert set(moves.tolist()) == set(Position().legal_moves())


def _slow_stable(player: int, opponent: int) -> int:
    """The conservative stability rule by fixpoint over single squares: a disc
    is stable when, on each axis, its line is full, it is on the edge, or a
    neighbour on the axis is a stable disc of its colour."""
    axes = ((0, 1), (1, 0), (1, 1), (1, -1))
    occupied = player | opponent

    def on(r, c):
        return 0 <= r < 8 and 0 <= c < 8

    def full_line(r, c, dr, dc):
        for sign in (1, -1):
            rr, cc = r + sign * dr, c + sign * dc
            while on(rr, cc):
                if not occupied >> (8 * rr + cc) & 1:
                    return False
                rr, cc = rr + sign * dr, cc + sign * dc
        return True

    stable, changed = 0, True
    while changed:
        changed = False
        for sq in range(64):
            if not player >> sq & 1 or stable >> sq & 1:
                continue
            r, c = divmod(sq, 8)
            if all(full_line(r, c, dr, dc) or any(not on(r + s * dr, c + s * dc)
                                                   or stable >> (8 * (r + s * dr) + c + s * dc) & 1 for s in (1, -1))
                   for dr, dc in axes):
                stable |= 1 << sq
                changed = True
    return stable


def test_alphabeta_counts_stable_discs_like_a_slow_version(positions):
    """The evaluation's stability term is othello.stability's, from both sides
    (it replaced an edge-only fallback that was dead code)."""
    late = positions[len(positions) // 2:]
    seen = 0
    for p, o in late:
        mine, theirs = ab.stable_counts(p, o)
        if (p | o) & ab.CORNERS:
            assert (mine, theirs) == (_slow_stable(p, o).bit_count(), _slow_stable(o, p).bit_count())
            seen += mine + theirs
        else:
            assert (mine, theirs) == (0, 0)
    assert seen


def test_evaluation_is_invariant_under_the_board_symmetries(positions):
    for p, o in positions[::3]:
        v = ab.evaluate(p, o)
        assert all(ab.evaluate(transform(p, k), transform(o, k)) == v for k in range(8))


def _value(p: int, o: int) -> int:
    """Static value of a leaf with the conventions of the search: exact at game end."""
    if bb.is_terminal(p, o):
        return ab.terminal_value(p, o)
    return ab.evaluate(p, o)


def test_alphabeta_1_equals_a_one_ply_search(positions):
    player = AlphaBetaPlayer(1)
    for p, o in positions[::4]:
        values = {}
        for sq in Position(p, o).legal_moves():
            cp, co = bb.play(p, o, 1 << sq)
            values[sq] = -_value(cp, co)
        best = max(values.values())
        value, moves = player.search(p, o)
        assert value == best
        assert moves == sorted(sq for sq, v in values.items() if v == best)


def _minimax(p: int, o: int, depth: int) -> int:
    """Plain negamax without pruning: every move searched, a forced pass uses
    no depth, a finished game is scored exactly."""
    moves = bb.legal_moves(p, o)
    if not moves:
        if not bb.legal_moves(o, p):
            return ab.terminal_value(p, o)
        if depth == 0:
            return ab.evaluate(p, o)
        return -_minimax(o, p, depth)
    if depth == 0:
        return ab.evaluate(p, o)
    return max(-_minimax(*bb.play(p, o, 1 << sq), depth - 1) for sq in bb.squares(moves))


@pytest.mark.parametrize("depth,every", [(2, 3), (3, 15)])
def test_alphabeta_equals_plain_minimax(positions, depth, every):
    """Pruning and move ordering must not change the value, nor the set of
    best moves (the root searches ties exactly so it can pick among them)."""
    player = AlphaBetaPlayer(depth)
    for p, o in positions[::every]:
        children = {sq: -_minimax(*bb.play(p, o, 1 << sq), depth - 1) for sq in bb.squares(bb.legal_moves(p, o))}
        best = max(children.values())
        value, moves = player.search(p, o)
        assert value == best
        assert moves == sorted(sq for sq, v in children.items() if v == best)


def test_alphabeta_scores_finished_games_exactly():
    # Few empties: depth 6 reaches the end of every line, so the value is the
    # perfect-play disc difference, a multiple of WIN_SCALE.
    ends = [pos for pos in _positions(4, seed=7) if 64 - bb.popcount(pos[0] | pos[1]) <= 5]
    assert ends
    for p, o in ends[:6]:
        value, _ = AlphaBetaPlayer(6).search(p, o)
        assert value % ab.WIN_SCALE == 0
        assert value == _minimax(p, o, 6)


def test_alphabeta_breaks_ties_at_random():
    s = _batch([(bb.BLACK_START, bb.WHITE_START)] * 40)  # the four first moves are symmetric
    moves = AlphaBetaPlayer(2).select(s, np.random.default_rng(0))
    assert set(moves.tolist()) == set(Position().legal_moves())


# --------------------------------------------------------------------------
# Registry


def test_make_player_specs():
    assert isinstance(make_player("random"), RandomPlayer)
    assert isinstance(make_player("greedy"), GreedyPlayer)
    ab = make_player("alphabeta:4")
    assert isinstance(ab, AlphaBetaPlayer) and ab.depth == 4 and ab.name == "alphabeta:4"
    for bad in ("nosuch", "alphabeta:x", "alphabeta:0", "random:1", "alphabeta:1:2"):
        with pytest.raises(ValueError, match="known kinds are alphabeta, endgame, greedy" if bad == "nosuch" else "bad player spec"):
            make_player(bad)


@pytest.mark.parametrize("spec,why", [
    ("alphabeta:99", "alpha-beta depth: must be at most 8, got 99"), ("alphabeta:9", "at most 8, got 9"),
    ("alphabeta:0", "alpha-beta depth: must be at least 1, got 0"), ("alphabeta:-1", "at least 1, got -1"),
    ("alphabeta:", "integer"), ("alphabeta:2.5", "integer"), ("nosuch:3", "known kinds"),
    ("policy:{missing}", "no such file"), ("policy:{garbage}", "{garbage}"), ("mcts:{garbage}:4", "{garbage}"),
    ("mcts:{missing}", "no such file"), ("policy", "expected policy:CHECKPOINT"),
    ("mcts:{missing}:abc", "simulations: expected an integer, got 'abc'"),
    ("gumbel:{missing}:0", "simulations: must be at least 1, got 0"),
    ("mcts:{missing}:100001", "simulations: must be at most 100000, got 100001"),  # a tree allocated whole: a traceback
    ("gumbel:{missing}:99999999999999999999", "simulations: must be at most 100000"),
    ("gumbel:{missing}:8:-1", "considered actions (0: automatic): must be at least 0, got -1"),
    ("endgame:15:random", "endgame empties: must be at most 14, got 15"),
    # K: 2..min(N, 64), checked before the checkpoint is read (it is missing here)
    ("gumbel:{missing}:8:1", "considered moves must be 0 (automatic) or 2..8"),
    ("gumbel:{missing}:8:9", "considered moves must be 0 (automatic) or 2..8"),
    ("gumbel:{missing}:100:99", "considered moves must be 0 (automatic) or 2..64"),
    ("gumbel:{missing}:1:2", "considered moves must be 0 (automatic) with 1 simulation, got 2"),
])
def test_bad_specs_are_user_errors_naming_the_spec(tmp_path, spec, why):
    """A spec that can build no player is a one-line error naming it (exit 2
    under run_main), never a match that cannot finish nor a traceback."""
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x80\x02 this is not a checkpoint")
    names = {"missing": tmp_path / "missing.pt", "garbage": garbage}
    spec, why = spec.format(**names), why.format(**names)
    with pytest.raises(registry.PlayerSpecError) as e:
        make_player(spec)
    assert isinstance(e.value, UserError) and isinstance(e.value, ValueError)
    msg = str(e.value)
    assert repr(spec) in msg and why in msg and "\n" not in msg


def test_registered_kinds_get_their_arguments():
    seen = []

    def factory(args):
        seen.append(args)
        return RandomPlayer()

    register_player("test-kind", factory)
    try:
        player = make_player("test-kind:ckpt.pt:200")
    finally:
        del registry.PLAYER_FACTORIES["test-kind"]
    assert seen == [["ckpt.pt", "200"]] and player.name == "test-kind:ckpt.pt:200"


def test_spec_edges_whitespace_nested_errors_and_bad_registrations():
    """Blanks around a spec are not part of it; ``endgame:E`` without SPEC says what it expects;
    a wrapped spec's unknown kind is reported as itself (not re-wrapped); a kind with ':' or a
    factory string that is not exactly 'module:attribute' is refused when registered."""
    ab = make_player("  alphabeta:2 \n")
    assert isinstance(ab, AlphaBetaPlayer) and ab.depth == 2 and ab.name == "alphabeta:2"
    for spec in ("endgame:10", "endgame:10:", "endgame:10: "):  # an empty SPEC was "unknown player spec ''"
        with pytest.raises(registry.PlayerSpecError,
                           match=rf"^bad player spec '{spec}': expected endgame:EMPTIES:SPEC"):
            make_player(spec)
    with pytest.raises(registry.PlayerSpecError, match=r"^unknown player spec 'nosuch:2': known kinds"):
        make_player("endgame:4:nosuch:2")
    for kind, factory in (("a:b", RandomPlayer), ("", RandomPlayer), ("spec-test", "mod:a:b"), ("spec-test", "mod")):
        with pytest.raises(ValueError):
            register_player(kind, factory)
    assert "a" not in registry.PLAYER_FACTORIES and "spec-test" not in registry.PLAYER_FACTORIES


def test_make_program_closes_the_interactive_player_it_refuses():
    closed = []

    class Interactive(RandomPlayer):
        interactive = True

        def close(self):
            closed.append(self.name)

    register_player("spec-asks", lambda args: Interactive())
    try:
        with pytest.raises(registry.PlayerSpecError, match="a human cannot play here"):
            registry.make_program("spec-asks:1")
    finally:
        del registry.PLAYER_FACTORIES["spec-asks"]
    assert closed == ["spec-asks:1"]


def test_kinds_named_by_module_are_imported_on_first_use(tmp_path, monkeypatch):
    (tmp_path / "extra_players_for_test.py").write_text(
        "from othello_learn.players.base import RandomPlayer\n"
        "def build(args):\n"
        "    return RandomPlayer()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    register_player("extra", "extra_players_for_test:build")
    try:
        assert "extra_players_for_test" not in sys.modules
        assert make_player("extra").name == "extra"
        assert "extra_players_for_test" in sys.modules
    finally:
        registry.PLAYER_FACTORIES.pop("extra", None)
        sys.modules.pop("extra_players_for_test", None)
    with pytest.raises(ValueError, match="module:attribute"):
        register_player("extra", "no_colon_here")


def test_registry_and_player_modules_import_one_way():
    """The registry imports a player module only when its kind is built, and
    no player module imports the registry: no cycle, and ``random`` needs no torch."""
    code = (
        "import sys\n"
        "import othello_learn.players.specs as r\n"
        "lazy = ('torch', 'othello_learn.players.network', 'othello_learn.players.external',\n"
        "        'othello_learn.frontends.terminal')\n"
        "assert not any(m in sys.modules for m in lazy)\n"
        "r.make_player('random'); r.make_player('alphabeta:1')\n"
        "assert 'torch' not in sys.modules\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    for module in ("players/base", "search/alphabeta", "players/network", "players/external", "players/openings",
                   "players/elo"):
        tree = ast.parse((REPO / "othello_learn" / f"{module}.py").read_text())
        imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in imported if m.endswith("specs")}, module
    for kind in list(registry.PLAYER_FACTORIES):  # every built-in kind names a factory that exists
        assert callable(registry._resolve(kind)), kind


# --------------------------------------------------------------------------
# The match


class Recorder(RandomPlayer):
    """Random, and remembers which colour it was asked to play, call by call."""

    def __init__(self, name):
        self.name, self.calls, self.resets = name, [], 0

    def reset(self):
        self.resets += 1

    def select(self, states, rng, moves=None):
        self.calls.append(states.black_to_move.copy())
        return super().select(states, rng)


def test_random_match_bookkeeping_and_alternating_colours():
    a, b = Recorder("a"), Recorder("b")
    r = play_match(a, b, 11, seed=3, progress=False)
    assert r.games == 11 and r.wins + r.draws + r.losses == 11
    assert r.score == pytest.approx((r.wins + r.draws / 2) / 11)
    assert r.a_black.tolist() == [i % 2 == 0 for i in range(11)]
    assert np.all((r.outcomes == 1) == (r.disc_diffs > 0)) and np.all((r.outcomes == 0) == (r.disc_diffs < 0))
    col = r.by_colour()
    assert col["black"]["games"] == 6 and col["white"]["games"] == 5
    assert sum(col[c]["wins"] for c in col) == r.wins and sum(col[c]["losses"] for c in col) == r.losses
    # After 4 opening plies black is to move: A's first batch is exactly its six black games,
    assert a.calls[0].tolist() == [True] * 6
    assert b.calls[0].tolist() == [True] * 5  # and B's first, its five black games, in the same step
    assert a.resets == b.resets == 1
    # Every game reaches its end: 60 moves at most each, so at most ~120 batched calls.
    total_a = sum(len(c) for c in a.calls)
    total_b = sum(len(c) for c in b.calls)
    assert 11 * 20 <= total_a + total_b <= 11 * 60
    # Same seed, same match.
    again = play_match(Recorder("a"), Recorder("b"), 11, seed=3, progress=False)
    assert np.array_equal(again.disc_diffs, r.disc_diffs)


def test_openings_are_distinct_up_to_symmetry_and_played_with_both_colours():
    r = play_match(RandomPlayer(), RandomPlayer(), 40, seed=5, opening_plies=4, progress=False)
    assert r.distinct_openings == 20
    keys = []
    for g in range(0, 40, 2):
        assert r.openings[g] == r.openings[g + 1]
        assert r.a_black[g] and not r.a_black[g + 1]
        assert len(parse_transcript(r.openings[g])) == 4
        pos = Position.from_transcript(r.openings[g])
        keys.append(_canonical(pos.black, pos.white, pos.black_to_move))
    assert len(set(keys)) == 20


def test_large_matches_take_longer_openings_so_deterministic_players_do_not_repeat_games(capsys):
    from othello_learn.players.arena import default_opening_plies

    assert default_opening_plies(120) == 4 and default_opening_plies(122) == 6
    r = play_match(GreedyPlayer(), GreedyPlayer(), 130, seed=1, progress=False)
    assert "distinct openings" not in capsys.readouterr().err  # every pair has its own
    assert r.distinct_openings == 65 == len(set(r.openings))
    assert all(len(parse_transcript(o)) == 6 for o in r.openings)
    # below the limit the 4-ply openings stay, as before
    assert all(len(parse_transcript(o)) == 4 for o in play_match(GreedyPlayer(), RandomPlayer(), 8, progress=False).openings)


def test_random_openings_find_every_class():
    """All 4-ply positions up to symmetry, counted by brute force."""
    classes = set()

    def walk(pos, plies):
        if plies == 0:
            classes.add(_canonical(pos.black, pos.white, pos.black_to_move))
            return
        for sq in pos.legal_moves():
            walk(pos.play(sq), plies - 1)

    walk(Position(), 4)
    found = random_openings(10_000, 4, np.random.default_rng(0))
    assert len(found) == len(classes)
    assert {_canonical(op.black, op.white, op.black_to_move) for op in found} == classes


def test_openings_are_the_seeds_and_reach_their_positions_by_their_moves():
    """Each seed draws its own openings; each opening is ``plies`` moves from the start with
    the discs they put down (4 + plies), so a game random play ended before its last ply
    (seed 1 at 55 plies has one) is not among them."""
    first = [op.actions for op in random_openings(4, 4, np.random.default_rng(0))]
    assert first != [op.actions for op in random_openings(4, 4, np.random.default_rng(1))]
    ops = random_openings(1024, 55, np.random.default_rng(1))
    assert len(ops) > 1000 and all(len(op.moves) == 55 for op in ops)
    black = np.array([op.black for op in ops], np.uint64)
    white = np.array([op.white for op in ops], np.uint64)
    assert (bb.popcount(black | white) == 59).all() and not (black & white).any()


class HistoryRecorder(RandomPlayer):
    """Random, and keeps the history and move lists the arena hands it."""

    uses_moves = True

    def __init__(self):
        self.seen = []

    def select(self, states, rng, moves=None):
        self.seen.append((states.history.tolist(), moves))
        return super().select(states, rng)


def test_a_pass_in_the_opening_reaches_the_history_and_move_lists(monkeypatch):
    """A forced pass in a random opening is an action like any other: the
    history planes and external engines (which infer colours from the move
    list) must see it, as they see passes played later."""
    ops = [op for op in random_openings(1000, 11, np.random.default_rng(0)) if PASS in op.actions[-4:]]
    assert ops, "no 11-ply opening with a recent pass: pick another seed"
    op = ops[0]
    assert len(op.moves) == 11 and op.actions.count(PASS) == 1
    pos = Position.from_transcript(op.transcript)  # the transcript leaves the pass out; replay infers it
    assert (pos.black, pos.white, pos.black_to_move) == (op.black, op.white, op.black_to_move)
    s = opening_states([op])
    assert s.history[0].tolist() == op.actions[::-1][:4]
    assert s.position(0).black == op.black and s.position(0).white == op.white

    monkeypatch.setattr(arena, "random_openings", lambda count, plies, rng: [op])
    player = HistoryRecorder()
    r = play_match(player, player, 2, opening_plies=11, progress=False)
    # The first step asks it once as A and once as B, one game each.
    assert [seen for seen in player.seen[:2]] == [([op.actions[::-1][:4]], [op.actions])] * 2
    assert r.openings == [op.transcript] * 2


def test_every_player_is_asked_with_the_games_states_and_only_an_engine_with_their_moves():
    """``Player.select`` takes a ``States`` batch, history included, whatever the player (no flag
    asks for it); the whole games' moves go only to a player that ``uses_moves``, the others get None."""
    asked = []

    class Plain(RandomPlayer):
        def select(self, states, rng, moves=None):
            asked.append((self.name, isinstance(states, States), states.history.copy(), moves))
            return super().select(states, rng)

    class Engine(Plain):
        uses_moves = True

    a, b = Plain(), Engine()
    a.name, b.name = "plain", "engine"
    r = play_match(a, b, 2, seed=3, opening_plies=2, progress=False)
    games = [parse_transcript(t) for t in r.transcripts]
    assert {name for name, *_ in asked} == {"plain", "engine"}
    for name, is_states, history, moves in asked:
        assert is_states and history.shape[1] == 4
        if name == "plain":
            assert moves is None
            continue
        assert len(moves) == len(history)
        for game, row in zip(moves, history):  # each game's moves so far, its history their last four
            assert row.tolist() == last_actions(game).tolist()
            assert [m for m in game if m != PASS] in [g[: len([m for m in game if m != PASS])] for g in games]


def _replayed(transcript: str):
    """The slow engine's final board after ``transcript`` (passes inferred), each move checked legal."""
    board, colour = ref.start_board(), 1
    for sq in parse_transcript(transcript):
        if not ref.legal(board, colour):
            colour = -colour
        assert divmod(sq, 8) in ref.legal(board, colour), transcript
        board, colour = ref.apply(board, colour, *divmod(sq, 8)), -colour
    return board


def test_every_game_replays_on_the_reference_engine_to_its_recorded_score():
    """An odd number of games: the last one has an opening of its own too. Each game starts
    from its pair's opening and replays legally on the slow engine to a finished board; A's
    disc difference is that board's by A's colour, and A scores 1 for a win, 1/2 for a draw
    (game 4 of this seed), 0 for a loss."""
    r = play_match(RandomPlayer(), RandomPlayer(), 5, seed=5, progress=False)
    assert r.distinct_openings == 3 == len(set(r.openings))
    assert r.openings[0] == r.openings[1] and r.openings[2] == r.openings[3]
    for g in range(5):
        assert r.transcripts[g].startswith(r.openings[g])
        board = _replayed(r.transcripts[g])
        assert ref.game_over(board)
        d_a = ref.final_score(board) * (1 if r.a_black[g] else -1)
        assert r.disc_diffs[g] == d_a
        assert r.outcomes[g] == (1.0 if d_a > 0 else 0.5 if d_a == 0 else 0.0)
    assert r.disc_diffs[4] == 0 and r.score == pytest.approx(float(r.outcomes.mean()))


def test_too_few_openings_are_reused_with_a_note(capsys):
    r = play_match(GreedyPlayer(), RandomPlayer(), 4, opening_plies=0, progress=False)
    err = capsys.readouterr().err
    assert err.startswith("note: only 1 distinct opening of") and err.count("\n") == 1  # no source line
    assert "for 2 pairs of games; 1 pair replays one" in err
    assert r.distinct_openings == 1 and r.games == 4


@pytest.mark.parametrize("games, plies, sentence", [
    (4, 1, "only 1 distinct opening of 1 ply exists for 2 pairs of games; 1 pair replays one"),
    (10, 2, "only 3 distinct openings of 2 plies exist for 5 pairs of games; 2 pairs replay one"),
])
def test_the_few_openings_note_agrees_in_number(capsys, games, plies, sentence):
    """Each noun and verb of the note takes its own count's number: one ply (the four first moves
    are one up to symmetry) and many, one opening and several, one pair and several."""
    play_match(GreedyPlayer(), RandomPlayer(), games, opening_plies=plies, progress=False)
    assert capsys.readouterr().err == f"note: {sentence} (more --opening-plies gives more)\n"


def test_alphabeta_beats_random_clearly():
    r = play_match(make_player("alphabeta:2"), make_player("random"), 12, seed=0, progress=False)
    assert r.score >= 0.85, r.summary()
    # And from the other side: the result is A's, whichever A is.
    r = play_match(make_player("random"), make_player("alphabeta:2"), 6, seed=1, progress=False)
    assert r.score <= 0.2, r.summary()


class Occupied(Player):
    name = "bad-player"

    def select(self, states, rng, moves=None):
        return np.full(len(states), 27, dtype=np.int64)  # d4: occupied from the start


class WrongShape(Player):
    name = "wrong-shape"

    def select(self, states, rng, moves=None):
        return np.zeros(len(states) + 1, dtype=np.int64)


class OffBoard(Player):
    name = "off-board"

    def select(self, states, rng, moves=None):
        return np.full(len(states), 64, dtype=np.int64)  # a pass, where moves exist


@pytest.mark.parametrize("bad,pattern", [(Occupied(), r"'bad-player' played d4.*game 0"),
                                         (WrongShape(), r"'wrong-shape' returned"),
                                         (OffBoard(), r"'off-board' played pass, which is illegal")])
def test_illegal_moves_raise(bad, pattern):
    with pytest.raises(IllegalMoveError, match=pattern) as e:
        play_match(bad, RandomPlayer(), 4, progress=False)
    if isinstance(bad, Occupied):
        assert "a b c d e f g h" in str(e.value)  # the position is shown
    with pytest.raises(IllegalMoveError, match=pattern.split()[0]):
        play_match(RandomPlayer(), bad, 4, progress=False)


# --------------------------------------------------------------------------
# Elo


def _result(wins, draws, losses) -> MatchResult:
    out = np.array([1.0] * wins + [0.5] * draws + [0.0] * losses)
    return MatchResult("a", "b", out, np.sign(out - 0.5).astype(np.int64), np.arange(out.size) % 2 == 0)


def test_the_summary_counts_in_words():
    assert "(B): 1 game, 0 openings\nA: 1 win, 0 draws, 0 losses;" in _result(1, 0, 0).summary()
    assert "(B): 6 games, 0 openings\nA: 2 wins, 3 draws, 1 loss;" in _result(2, 3, 1).summary()


def test_elo_interval():
    assert elo_from_score(0.5) == 0 and elo_from_score(0.75) == pytest.approx(190.85, abs=0.01)
    r = _result(30, 10, 20)
    elo, low, high = r.elo()
    assert elo == pytest.approx(elo_from_score(35 / 60))
    assert low < elo < high
    assert 0.8 < (high - elo) / (elo - low) < 1.25  # nearly symmetric near an even score
    # The normal approximation, by hand: per-game variance with draws at 1/2.
    s = 35 / 60
    sd = math.sqrt((30 * (1 - s) ** 2 + 10 * (0.5 - s) ** 2 + 20 * s**2) / 60)
    assert high == pytest.approx(elo_from_score(s + 1.96 * sd / math.sqrt(60)), rel=1e-3)
    # B's view mirrors A's.
    e2, l2, h2 = _result(20, 10, 30).elo()
    assert (e2, l2, h2) == pytest.approx((-elo, -high, -low))
    # More games, narrower interval; draws instead of split wins and losses, narrower too.
    _, low4, high4 = _result(120, 40, 80).elo()
    assert high4 - low4 < high - low
    _, lowd, highd = _result(25, 20, 15).elo()
    _, lowx, highx = _result(35, 0, 25).elo()
    assert highd - lowd < highx - lowx


def test_elo_at_perfect_scores():
    elo, low, high = _result(20, 0, 0).elo()
    assert elo == high == math.inf
    assert low == pytest.approx(elo_from_score(0.025 ** (1 / 20)), rel=1e-3) and 200 < low < 400
    elo, low, high = _result(0, 0, 20).elo()
    assert elo == low == -math.inf and -400 < high < -200
    d = _result(20, 0, 0).to_dict()
    assert d["elo"] is None and d["elo_high"] is None and d["elo_low"] > 0
    # All draws: no measured spread, yet not a certain 0 Elo; as wide as n games split evenly can be.
    elo, low, high = _result(0, 6, 0).elo()
    assert elo == 0 and (low, high) == pytest.approx(_result(3, 0, 3).elo()[1:]) and low < -100


def _paired(pair_outcomes: list[tuple[float, float]]) -> MatchResult:
    """Games 2k and 2k+1 on opening k, A black in the first."""
    out = np.array([x for pair in pair_outcomes for x in pair])
    openings = [f"op{k}" for k in range(len(pair_outcomes)) for _ in range(2)]
    return MatchResult("a", "b", out, np.sign(out - 0.5).astype(np.int64), np.arange(out.size) % 2 == 0,
                       openings=openings, distinct_openings=len(pair_outcomes))


def test_elo_interval_counts_the_opening_pairs_as_units():
    """The pentanomial estimate, by hand: the sd of the pairs' mean scores over the
    number of pairs. Split pairs (a colour's advantage) vary less than games and
    narrow the interval; pairs that agree (a strong opening for A) widen it."""
    pairs = [(1, 0)] * 12 + [(1, 1)] * 5 + [(0.5, 1)] * 3 + [(0, 0)] * 2 + [(0, 0.5)] * 2
    r = _paired(pairs)
    assert r.pair_scores().tolist() == [sum(p) / 2 for p in pairs]
    s = r.score
    means = np.array([sum(p) / 2 for p in pairs])
    pseudo = np.concatenate([means, [0.0, 1.0]])  # one pair lost and one won more, for the spread only
    half = 1.96 * math.sqrt(np.mean((pseudo - s) ** 2)) / math.sqrt(len(pairs))
    elo, low, high = r.elo()
    assert elo == pytest.approx(elo_from_score(s)) and (low, high) == pytest.approx(
        (elo_from_score(s - half), elo_from_score(s + half)), rel=1e-3)
    loose = MatchResult("a", "b", r.outcomes, r.disc_diffs, r.a_black)  # no openings: the games are the units
    assert loose.pair_scores() is None and high - low < loose.elo()[2] - loose.elo()[1]
    agree = _paired([(1, 1)] * 14 + [(0, 0)] * 10)
    games = MatchResult("a", "b", agree.outcomes, agree.disc_diffs, agree.a_black)
    assert agree.elo()[2] - agree.elo()[1] > games.elo()[2] - games.elo()[1]
    d = r.to_dict()
    assert d["elo_interval_units"] == "opening pairs" and d["pairs"] == {"0": 2, "0.25": 2, "0.5": 12, "0.75": 3, "1": 5}
    assert "the opening pairs as units" in r.summary() and "units" not in loose.summary()
    assert loose.to_dict()["pairs"] is None and loose.to_dict()["elo_interval_units"] == "games"


class LowestFlipper(Player):
    """Greedy with the lowest square on ties (``highest``: the highest): deterministic,
    so a replayed opening replays its game."""

    name = "lowest-flipper"

    def __init__(self, highest: bool = False):
        self.highest = highest

    def select(self, states, rng, moves=None):
        counts = flip_counts(states.player, states.opponent)
        return 63 - counts[:, ::-1].argmax(axis=1) if self.highest else counts.argmax(axis=1)


def test_replayed_openings_do_not_narrow_the_elo_interval():
    """Deterministic players on 60 openings replayed tenfold play the same 120 games ten
    times: the match knows no more than its first 120 games, and its interval must say
    so (it was a third as wide, and excluded 0 where the 120 games did not)."""
    once = play_match(LowestFlipper(), LowestFlipper(highest=True), 120, seed=0, opening_plies=4, progress=False)
    tenfold = play_match(LowestFlipper(), LowestFlipper(highest=True), 1200, seed=0, opening_plies=4, progress=False)
    assert tenfold.distinct_openings == 60 and tenfold.score == pytest.approx(once.score)
    (_, low1, high1), (_, low10, high10) = once.elo(), tenfold.elo()
    assert high10 - low10 > 0.9 * (high1 - low1), (once.elo(), tenfold.elo())
    # Likewise games counted one by one (an odd match), and the exact bound of a clean sweep.
    r = _paired([(1, 0.5), (0.5, 0), (1, 1), (0, 0), (1, 0)] * 2)
    r.openings = r.openings[:10] * 2  # five openings, each pair played twice
    units = _paired([(1, 0.5), (0.5, 0), (1, 1), (0, 0), (1, 0)])
    games = [MatchResult("a", "b", x.outcomes[:-1], x.disc_diffs[:-1], x.a_black[:-1], openings=x.openings[:-1])
             for x in (r, units)]
    assert games[0].elo()[2] - games[0].elo()[1] > 0.9 * (games[1].elo()[2] - games[1].elo()[1])
    sweep = _paired([(1, 1)] * 10)
    sweep.openings = sweep.openings[:2] * 10
    assert sweep.elo()[1] == pytest.approx(_paired([(1, 1)]).elo()[1])


def test_elo_interval_of_pairs_that_all_score_alike_is_not_a_certainty():
    """Every pair split one win, one loss: the pairs show no spread, which is no proof of
    equal strength. The pseudo-pairs keep the interval open, and continuous: one pair
    more or less alike moves it a little, not sevenfold (deterministic players split
    most pairs)."""
    few = _paired([(1, 0)] * 10)
    assert few.elo()[0] == 0 and few.elo()[1] < -50 and few.elo()[2] > 50
    split = [(1, 0)] * 99
    widths = [(lambda e: e[2] - e[1])(_paired(split + [last]).elo()) for last in ((0.5, 0.5), (1, 0), (1, 1))]
    assert 5 < min(widths) and max(widths) < 2 * min(widths), widths
    same_colour = _paired([(1, 0)] * 3)
    same_colour.a_black[:] = True
    assert same_colour.pair_scores() is None
    odd = _paired([(1, 0)] * 3)
    odd.openings[1] = "other"
    assert odd.pair_scores() is None


def test_game_rows_give_black_s_view_whoever_a_is():
    """Hand-made: A wins by 10 as black, by 6 as white, loses by 4 as white, draws as black."""
    r = MatchResult("a", "b", np.array([1.0, 1.0, 0.0, 0.5]), np.array([10, 6, -4, 0]),
                    np.array([True, False, False, True]), openings=["f5", "f5", "d3", "d3"],
                    transcripts=["f5d6", "f5f6", "d3c3", "d3e3"])
    rows = r.game_rows()
    assert [(x["black"], x["white"], x["black_disc_diff"], x["winner"]) for x in rows] == [
        ("a", "b", 10, "black"), ("b", "a", -6, "white"), ("b", "a", 4, "black"), ("a", "b", 0, "draw")]
    assert [x["a_colour"] for x in rows] == ["black", "white", "white", "black"]
    assert rows[1]["transcript"] == "f5f6" and rows[2]["opening"] == "d3"


def test_a_match_of_no_games_has_no_score():
    r = _result(0, 0, 0)
    assert r.games == 0 and math.isnan(r.score) and math.isnan(r.disc_diff_mean)
    assert all(math.isnan(x) for x in r.elo())


# --------------------------------------------------------------------------
# Command line


def test_cli_writes_json(tmp_path):
    out = tmp_path / "m" / "r.json"
    proc = subprocess.run(
        [sys.executable, "selfplay/arena.py", "--a", "greedy", "--b", "random", "--games", "6",
         "--json", str(out), "--seed", "2", "--opening-plies", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Elo difference" in proc.stdout and "score" in proc.stdout
    d = json.loads(out.read_text())
    for key in ("games", "wins", "draws", "losses", "score", "elo", "elo_low", "elo_high", "a_spec", "b_spec"):
        assert key in d
    assert d["games"] == 6 and d["wins"] + d["draws"] + d["losses"] == 6
    assert d["a_spec"] == "greedy" and d["b_spec"] == "random" and d["opening_plies"] == 2
    assert d["score"] == pytest.approx((d["wins"] + d["draws"] / 2) / 6)


def _cli(argv, capsys):
    """The arena as its command line runs it, in-process: (exit status, stderr)."""
    capsys.readouterr()
    try:
        code = run_main(arena_main, argv)
    except SystemExit as e:  # argparse's own refusal of a value its ``type`` rejects
        code = e.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("spec,why", [("nosuch", "known kinds"), ("alphabeta:99", "at most 8"),
                                      ("policy:no/such/file.pt", "no such file")])
def test_cli_rejects_bad_specs_in_one_line(tmp_path, capsys, spec, why):
    out = tmp_path / "r.json"
    code, err = _cli(["--a", spec, "--b", "random", "--games", "2", "--json", str(out), "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1 and why in err and repr(spec) in err, err
    assert not out.exists()


@pytest.mark.parametrize("flag,value,why", [
    ("--games", "0", "--games: must be at least 1, got 0"), ("--games", "-4", "--games: must be at least 1, got -4"),
    ("--games", "1000001", "--games: must be at most 1000000, got 1000001 (a match plays its games side by side"),
    ("--games", "x", "--games: expected an integer, got 'x'"),
    ("--opening-plies", "70", "--opening-plies: must be at most 59, got 70 (a game has at most 60 moves)"),
    ("--opening-plies", "60", "at most 59"), ("--opening-plies", "-1", "must be at least 0, got -1"), ("--seed", "-1", "--seed: must be at least 0"),
    ("--import", "no_such_module_here", "--import no_such_module_here"),
    ("--import", "no/such/plugin.py", "--import no/such/plugin.py: no such file"),
])
def test_cli_refuses_bad_numbers_before_any_work(tmp_path, capsys, flag, value, why):
    built = []
    register_player("test-probe", lambda args: built.append(args) or RandomPlayer())
    try:
        out = tmp_path / "r.json"
        argv = ["--a", "test-probe", "--b", "random", "--games", "2", "--json", str(out), "--quiet", flag, value]
        code, err = _cli(argv, capsys)
    finally:
        del registry.PLAYER_FACTORIES["test-probe"]
    assert code == 2 and err.count("\n") == 1 and why in err, err
    assert not built, "no player was built: the settings are checked first"
    assert not out.exists()


def test_a_stop_swallowed_during_the_match_keeps_its_files_and_exits_as_stopped(tmp_path, monkeypatch, capsys):
    """Raised again at the end of the signal block, a SIGTERM that something swallowed during
    the match ended the command before it wrote the finished match's --json and --games-out."""
    import os
    import signal
    import time

    def match_with_a_swallowed_stop(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handler runs here, and its Terminated is swallowed
        except BaseException:
            pass
        return play_match(*args, **kwargs)

    monkeypatch.setattr(arena, "play_match", match_with_a_swallowed_stop)
    out, games = tmp_path / "r.json", tmp_path / "g.csv"
    code = run_main(arena_main, ["--a", "greedy", "--b", "random", "--games", "2", "--json", str(out),
                                 "--games-out", str(games), "--quiet"])
    assert code == 143 and "terminated" in capsys.readouterr().err
    assert json.loads(out.read_text())["games"] == 2 and games.read_text().count("\n") == 3


def test_a_file_that_cannot_be_written_after_the_match_is_said_after_its_summary(tmp_path, capsys, monkeypatch):
    """A full disk at the end of a long match lost its result: the --games-out error came before
    the summary and the --json. Each file is tried, the summary printed, then the error said."""
    import errno

    def full_disk(path, result):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(arena, "write_games", full_disk)
    report = tmp_path / "r.json"
    code = run_main(arena.main, ["--a", "greedy", "--b", "random", "--games", "4", "--quiet", "--opening-plies", "2",
                                 "--games-out", str(tmp_path / "g.ggf"), "--json", str(report)])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no space left on device" in err[0] and "g.ggf" in err[0], err
    assert "Elo difference" in captured.out and json.loads(report.read_text())["games"] == 4


def test_cli_refuses_a_folder_as_json(tmp_path, capsys):
    code, err = _cli(["--a", "random", "--b", "random", "--games", "2", "--json", str(tmp_path), "--quiet"], capsys)
    assert code == 2 and "is a folder" in err


def test_play_match_refuses_an_opening_longer_than_a_game():
    with pytest.raises(ValueError, match="^opening_plies: must be at most 59, got 60"):
        play_match(RandomPlayer(), RandomPlayer(), 2, opening_plies=60, progress=False)


def test_a_search_on_a_network_without_a_value_head_says_so_once(capsys):
    """mcts/gumbel value every leaf 0 without a value head: they play, and a notice says so."""
    from othello_learn.players.network import check_considered

    assert [check_considered(k, 8) for k in (0, 2, 8)] == [0, 2, 8] and check_considered(64, 100) == 64
    for spec in ("mcts:checkpoints/cpu_hc.pt:2", "gumbel:checkpoints/cpu_hc.pt:4:2"):
        make_player(spec)
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"note: {spec}: checkpoints/cpu_hc.pt has no value head")
    make_player("gumbel:checkpoints/cpu_rl_warm_long.pt:4:2")  # a value head: nothing to say
    make_player("policy:checkpoints/cpu_hc.pt")  # no search: nothing to say
    assert capsys.readouterr().err == ""


def _history_positions():
    """(player, opponent, black to move, history) of every position with a move in a random
    game, the history the last four actions, most recent first, as the arena hands it."""
    from othello.states import last_actions

    rng, pos, moves, rows = random.Random(0), Position(), [], []
    while not pos.is_over():
        legal = pos.legal_moves()
        if legal:
            rows.append((pos.player, pos.opponent, pos.black_to_move, last_actions(moves)))
        moves.append(rng.choice(legal) if legal else PASS)
        pos = pos.play(moves[-1])
    p, o, b, h = zip(*rows)
    return np.array(p, np.uint64), np.array(o, np.uint64), np.array(b), np.array(h, np.int64)


def test_network_players_read_the_history_the_arena_hands_them():
    """The handcrafted planes hold the last moves, so they change this net's choice in some
    positions: the policy player plays the argmax of the net's legal logits given the history,
    and a one-simulation PUCT search, which has no visits to tell the moves apart, the same
    move (its ties go to the prior)."""
    import torch

    from othello_learn.models.batch import from_arrays
    from othello_learn.models.nets import NetConfig, build_network
    from othello_learn.players.network import MCTSPlayer, PolicyPlayer

    torch.manual_seed(0)
    net = build_network(NetConfig(arch="resnet", encoder="handcrafted", blocks=1, width=8, value_head=True)).eval()
    p, o, b, h = _history_positions()
    with torch.no_grad():
        want = net(from_arrays(p, o, b, h))["policy"].argmax(-1).numpy()
        blind = net(from_arrays(p, o, b, None))["policy"].argmax(-1).numpy()
    assert (want != blind).sum() >= 5, "the history must matter for the test to mean anything"
    for player in (PolicyPlayer(net, "cpu"), MCTSPlayer(net, 1, "cpu")):
        got = player.select(States(p, o, b, h), np.random.default_rng(0))
        assert got.tolist() == want.tolist(), player.name


def test_a_search_players_tied_visits_go_to_the_prior():
    """Without a value head every Q is 0: of two simulations the first visits the top prior
    and the second it again or another move, so the top prior is among the most visited and,
    on a 1-1 tie (most positions here), wins it by the prior, not at random."""
    import torch

    from othello_learn.models.batch import from_arrays
    from othello_learn.models.nets import NetConfig, build_network
    from othello_learn.players.network import MCTSPlayer

    torch.manual_seed(0)
    net = build_network(NetConfig(arch="resnet", encoder="raw", blocks=1, width=8, value_head=False)).eval()
    p, o, b, h = _history_positions()
    with torch.no_grad():
        want = net(from_arrays(p, o, b, h))["policy"].argmax(-1).numpy()
    for seed in (0, 1):
        got = MCTSPlayer(net, 2, "cpu").select(States(p, o, b, h), np.random.default_rng(seed))
        assert got.tolist() == want.tolist()


def test_search_specs_default_to_100_simulations(tmp_path):
    import torch

    from othello_learn.models.nets import NetConfig, build_network, save_network

    torch.manual_seed(0)
    ckpt = tmp_path / "tiny.pt"
    save_network(build_network(NetConfig(arch="resnet", encoder="raw", blocks=1, width=8, value_head=True)), ckpt)
    assert make_player(f"mcts:{ckpt}").config.simulations == 100
    assert make_player(f"gumbel:{ckpt}").config.simulations == 100
    assert make_player(f"mcts:{ckpt}:7").config.simulations == 7


def test_a_closed_output_does_not_lose_the_files_asked_for(tmp_path):
    """``arena.py ... --json r.json | head -0``: the reader is gone before the summary is printed;
    the match's JSON and games are written first, so only the print is lost (exit 141)."""
    import os

    r, w = os.pipe()
    os.close(r)  # nobody reads: the first print fails
    try:
        proc = subprocess.run([sys.executable, "selfplay/arena.py", "--a", "random", "--b", "greedy", "--games", "2",
                               "--quiet", "--json", str(tmp_path / "r.json"), "--games-out", str(tmp_path / "g.csv")],
                              cwd=REPO, stdout=w, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(w)
    assert proc.returncode == 141 and proc.stderr == b""
    assert json.loads((tmp_path / "r.json").read_text())["games"] == 2
    assert len((tmp_path / "g.csv").read_text().splitlines()) == 3


def test_a_spec_string_or_a_bad_count_is_refused_by_name():
    """play_match("random", "greedy", 2) failed inside with AttributeError: 'str' has no reset."""
    with pytest.raises(TypeError, match=r"play_match's a is a player \(registry.make_player\('random'\) makes one\)"):
        play_match("random", GreedyPlayer(), 2, progress=False)
    for games, seed in ((0, 0), (2, -1)):
        with pytest.raises(ValueError, match="play_match needs games >= 1 and seed >= 0"):
            play_match(RandomPlayer(), GreedyPlayer(), games, seed=seed, progress=False)


def test_the_player_before_the_solves_is_found_through_every_endgame_wrapper():
    from othello_learn.players.base import EndgamePlayer
    from othello_learn.players.base import before_solves, network_of

    ab = AlphaBetaPlayer(2)
    nested = make_player("endgame:10:endgame:6:alphabeta:2")
    assert isinstance(nested.inner, EndgamePlayer) and isinstance(before_solves(nested), AlphaBetaPlayer)
    assert before_solves(EndgamePlayer(EndgamePlayer(ab, 6), 10)) is ab and before_solves(ab) is ab
    assert network_of(nested) is None


def test_openings_of_the_most_plies_leave_a_move_to_play():
    """MAX_OPENING_PLIES (59) random plies can end the game at the last one (17 of 1,000 at
    seed 0 did): such an opening is dropped, as one that ends earlier is."""
    from othello_learn.players.openings import MAX_OPENING_PLIES, opening_states, random_openings

    ops = random_openings(400, MAX_OPENING_PLIES, np.random.default_rng(0))
    assert len(ops) == 400 and not np.asarray(opening_states(ops).is_over()).any()


def test_a_checkpoint_path_holding_a_colon_is_named_with_an_escaped_colon(tmp_path, capsys):
    """``policy:runs/a:b.pt`` split at every ':' and read 'runs/a' as the checkpoint and 'b.pt' as an
    extra argument: such a path could not be named at all. ``\\:`` is a colon inside an argument,
    wrapped in ``endgame:`` too; the player keeps the spec as written, so it reads back the same."""
    import torch

    from othello_learn.models.nets import NetConfig, build_network, save_network
    from othello_learn.players.network import PolicyPlayer

    torch.manual_seed(0)
    folder = tmp_path / "run:2"
    folder.mkdir()
    ckpt = folder / "best:7.pt"
    save_network(build_network(NetConfig(arch="resnet", encoder="raw", blocks=1, width=8, value_head=True)), ckpt)
    escaped = str(ckpt).replace(":", "\\:")
    player = make_player(f"policy:{escaped}")
    assert isinstance(player, PolicyPlayer) and player.name == f"policy:{escaped}"
    assert make_player(f"mcts:{escaped}:7").config.simulations == 7
    assert isinstance(make_player(f"endgame:4:policy:{escaped}").inner, PolicyPlayer)
    assert make_player(f"endgame:4:mcts:{escaped}:3").inner.config.simulations == 3
    assert registry.split_spec(f"mcts:{escaped}:7") == ["mcts", str(ckpt), "7"]
    assert registry.join_spec(["policy", str(ckpt)]) == f"policy:{escaped}"
    with pytest.raises(registry.PlayerSpecError, match="expected policy:CHECKPOINT"):
        make_player(f"policy:{ckpt}")  # unescaped: still two arguments, and the error says what one is
    code, err = _cli(["--a", f"policy:{escaped}", "--b", "random", "--games", "2", "--quiet",
                      "--json", str(tmp_path / "r.json")], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "r.json").read_text())["a"] == f"policy:{escaped}"
    assert "a ':' in a path written '\\:'" in registry.SPEC_KINDS  # every --help listing the kinds says so


def test_the_example_plugin_registers_a_kind_the_arena_plays(tmp_path, capsys):
    """examples/plugin_player.py, the documented --import hook: imported as a file (a console
    script's way, from any folder) or as a module, its corners[:SPEC] kind plays a match, and
    takes a corner whenever one is legal."""
    plugin = REPO / "examples" / "plugin_player.py"
    try:
        out = tmp_path / "r.json"
        code, err = _cli(["--import", str(plugin), "--a", "corners", "--b", "random", "--games", "2", "--quiet",
                          "--json", str(out)], capsys)
        assert code == 0 and json.loads(out.read_text())["games"] == 2, err
        player = make_player("corners:greedy")
        states = States.from_positions([Position.from_transcript(t) for t in
                                        ("f5d6c3d3c4f4f6f3e6e7d7c5b6", "f5", "f5d6c3d3c4f4c5b3c2e6c6b4b5d2e3a6c1b1")])
        chosen = player.select(states, np.random.default_rng(0))
        for i, sq in enumerate(chosen):
            legal = np.nonzero(np.asarray(states.legal_actions())[i, :64])[0]
            corners = [c for c in (0, 7, 56, 63) if c in legal]
            assert sq in legal and (not corners or sq in corners)
        assert any(sq in (0, 7, 56, 63) for sq in chosen)  # the third position has a corner to take
    finally:
        registry.PLAYER_FACTORIES.pop("corners", None)
    proc = subprocess.run([sys.executable, "-m", "othello_learn.players.arena", "--import", "examples.plugin_player",
                           "--a", "corners:greedy", "--b", "random", "--games", "2", "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "corners:greedy (A) vs random (B): 2 games" in proc.stdout, proc.stderr


def test_a_match_in_parts_is_the_same_games_whoever_plays_each_part():
    """The loop deals its gate into parts of --parallel games over Ray actors: each part, played
    alone by fresh players in any order, gives the games the whole match gives it; one part is
    the match as it always was."""
    from othello_learn.players.arena import match_result, plan_match, play_part

    whole = play_match(make_player("alphabeta:1"), make_player("random"), 11, seed=4, progress=False, part_games=3)
    plan = plan_match(11, seed=4, part_games=3)
    assert [p.games for p in plan.parts] == [3, 3, 3, 2] and [p.first for p in plan.parts] == [0, 3, 6, 9]
    alone = {k: play_part(make_player("alphabeta:1"), make_player("random"), plan.parts[k]) for k in (3, 1, 0, 2)}
    split = match_result("a", "b", plan, [alone[k] for k in range(4)])
    assert split.transcripts == whole.transcripts and split.openings == whole.openings
    np.testing.assert_array_equal(split.disc_diffs, whole.disc_diffs)
    np.testing.assert_array_equal(split.a_black, np.arange(11) % 2 == 0)
    one = play_match(make_player("alphabeta:1"), make_player("random"), 11, seed=4, progress=False)
    assert play_match(make_player("alphabeta:1"), make_player("random"), 11, seed=4, progress=False,
                      part_games=11).transcripts == one.transcripts != whole.transcripts
