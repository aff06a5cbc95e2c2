"""The exact endgame solver against plain minimax on the reference engine's
boards, its move generator against the bitboard engine, and the
``endgame:E:SPEC`` player."""

from __future__ import annotations

import random

import numpy as np
import pytest

import reference_engine as ref
from othello import bitboard as bb
from othello.notation import parse_square
from othello.states import States
from othello_learn.search import endgame
from othello_learn.players.arena import play_match
from othello_learn.players.base import EndgamePlayer
from othello_learn.search.endgame import solve
from othello_learn.players.base import Player, RandomPlayer
from othello_learn.players.specs import make_player


def _endings(n_games: int, seed: int, max_empties: int):
    """(reference board, colour to move) of positions with a legal move and at
    most ``max_empties`` empty squares, from random games: passes included."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_games):
        record, _, _ = ref.random_game(rng)
        out += [(board, color) for board, color, mv in record
                if mv != 64 and sum(v == 0 for row in board for v in row) <= max_empties]
    return out


def _minimax(board, color) -> int:
    """Perfect-play final disc difference for ``color``, every line searched: no pruning, no ordering."""
    moves = ref.legal(board, color)
    if not moves:
        if not ref.legal(board, -color):
            return color * ref.final_score(board)
        return -_minimax(board, -color)
    return max(-_minimax(ref.apply(board, color, r, c), -color) for r, c in moves)


def test_solve_equals_plain_minimax_on_the_reference_boards():
    ends = _endings(12, seed=3, max_empties=7)
    assert len(ends) > 50
    for board, color in ends[::2]:
        children = {8 * r + c: -_minimax(ref.apply(board, color, r, c), -color) for r, c in ref.legal(board, color)}
        best = max(children.values())
        value, moves = solve(*ref.to_bitboards(board, color))
        assert value == best
        assert moves == sorted(sq for sq, v in children.items() if v == best)
        assert endgame.move_results(*ref.to_bitboards(board, color)) == {sq: int(np.sign(v)) for sq, v in children.items()}


def test_move_value_is_each_move_s_minimax_and_reuses_a_solve(monkeypatch):
    """An engine's move and then its evaluation: the second is free for an optimal move of
    the position just solved, and each move's value equals minimax's, solved or not."""
    for board, color in _endings(6, seed=5, max_empties=7)[::3]:
        p, o = ref.to_bitboards(board, color)
        children = {8 * r + c: -_minimax(ref.apply(board, color, r, c), -color) for r, c in ref.legal(board, color)}
        assert {sq: endgame.move_value(p, o, sq) for sq in children} == children  # before any solve
        endgame._SOLVED.clear()
        value, best = solve(p, o)
        searched = []
        real = endgame._negamax
        monkeypatch.setattr(endgame, "_negamax", lambda *a: (searched.append(1), real(*a))[1])
        assert [endgame.move_value(p, o, sq) for sq in best] == [value] * len(best) and not searched
        assert endgame.value(p, o) == value and solve(p, o) == (value, best) and not searched
        assert {sq: endgame.move_value(p, o, sq) for sq in children} == children
        monkeypatch.undo()
        endgame._SOLVED.clear()  # each move's value, as hints compute them, is the position's solve
        endgame.solved_from_moves(p, o, {sq: endgame.move_value(p, o, sq) for sq in children})
        illegal = next(sq for sq in range(65) if sq not in children)  # an occupied or unplayable square, or 64
        with pytest.raises(ValueError, match=f"square {illegal} is not a legal move"):
            endgame.move_value(p, o, illegal)
        searched.clear()
        monkeypatch.setattr(endgame, "_negamax", lambda *a: (searched.append(1), real(*a))[1])
        assert solve(p, o) == (value, best) and not searched
        monkeypatch.undo()


def test_value_equals_plain_minimax_also_at_passes_and_finished_games():
    rng = random.Random(11)
    passes = 0
    for _ in range(40):
        record, final, color = ref.random_game(rng)
        for board, color_, mv in record + [(final, color, None)]:
            if sum(v == 0 for row in board for v in row) <= 5:
                assert endgame.value(*ref.to_bitboards(board, color_)) == _minimax(board, color_)
                passes += mv == 64
    assert passes > 5


def test_move_generator_and_play_equal_the_bitboard_engine():
    rng = random.Random(5)
    for _ in range(6):
        record, _, _ = ref.random_game(rng)
        for board, color, mv in record:
            p, o = ref.to_bitboards(board, color)
            assert endgame._moves(p, o) == bb.legal_moves(p, o)
            if mv != 64:
                assert endgame._play(p, o, 1 << mv) == bb.play(p, o, 1 << mv)


def test_torch_boards_solve_as_python_ints():
    """A torch int64 board with h8 set is negative: the solver reads its 64 bits, not 56 empties."""
    torch = pytest.importorskip("torch")
    ends = [(p, o) for p, o in (ref.to_bitboards(b, c) for b, c in _endings(10, seed=6, max_empties=6))
            if (p | o) >> 63]
    assert ends
    for p, o in ends[:4]:
        tp, to = torch.tensor(bb.as_int64(p)), torch.tensor(bb.as_int64(o))
        assert solve(tp, to) == solve(p, o)
        assert endgame.value(tp, to) == endgame.value(p, o)
        assert endgame.move_results(tp, to) == endgame.move_results(p, o)
        sq = solve(p, o)[1][-1]
        assert endgame.move_value(tp, to, sq) == endgame.move_value(p, o, sq)


def test_solve_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="at most 14 empty squares, this position has 60"):
        solve(bb.BLACK_START, bb.WHITE_START)
    board, color = _endings(4, seed=1, max_empties=4)[0]
    p, o = ref.to_bitboards(board, color)
    with pytest.raises(ValueError, match="legal move"):
        solve(p | o, 0)  # a side that owns every disc has nothing to flip


class Recorder(Player):
    """Random, and keeps what it was asked, to check what the wrapper hands on."""

    uses_moves = True

    def __init__(self):
        self.asked = []

    def select(self, states, rng, moves=None):
        assert len(states.history) == len(states) == len(moves)
        self.asked += [64 - bb.popcount(int(p) | int(o)) for p, o in zip(states.player, states.opponent)]
        return RandomPlayer().select(states, rng)


def test_endgame_player_hands_early_moves_on_and_plays_the_end_perfectly():
    inner = Recorder()
    player = EndgamePlayer(inner, 6)
    assert player.uses_moves
    ends = _endings(6, seed=9, max_empties=12)
    p = np.array([ref.to_bitboards(b, c)[0] for b, c in ends], dtype=np.uint64)
    o = np.array([ref.to_bitboards(b, c)[1] for b, c in ends], dtype=np.uint64)
    left = 64 - bb.popcount(p | o).astype(int)
    assert (left <= 6).any() and (left > 6).any()
    history = np.full((len(p), 4), -1)
    chosen = player.select(States(p, o, np.ones(len(p), bool), history), np.random.default_rng(0),
                           moves=[[] for _ in p])
    assert sorted(inner.asked) == sorted(left[left > 6].tolist())
    for i in np.nonzero(left <= 6)[0]:
        assert chosen[i] in solve(int(p[i]), int(o[i]))[1]
    for i in np.nonzero(left > 6)[0]:
        assert bb.legal_moves(int(p[i]), int(o[i])) >> int(chosen[i]) & 1


def test_endgame_spec_and_a_perfect_end_beats_random_play():
    player = make_player("endgame:8:random")
    assert isinstance(player, EndgamePlayer) and player.empties == 8 and player.name == "endgame:8:random"
    for bad in ("endgame:8", "endgame:x:random", "endgame:15:random", "endgame:8:nosuch"):
        with pytest.raises(ValueError, match="bad player spec|unknown player spec"):
            make_player(bad)
    result = play_match(make_player("endgame:10:random"), make_player("random"), 20, seed=0, progress=False)
    assert result.score > 0.8


# ---------------------------------------------------------------- mutation-testing additions


def test_fourteen_empties_are_in_range_and_fifteen_are_not():
    """The documented limit, at its edge, on positions that solve at once: the side to move owns
    all but b1 (white) and 14 empty squares; its one move, c1, takes white's last disc."""
    board = [[1] * 8 for _ in range(8)]
    board[0][1] = -1  # b1
    empty = [(0, 2)] + [(r, c) for r in (6, 7) for c in range(8)][-13:]  # c1 and the last 13 squares
    for r, c in empty:
        board[r][c] = 0
    assert ref.legal(board, 1) == [(0, 2)] and _minimax(board, 1) == 64
    p, o = ref.to_bitboards(board, 1)
    assert endgame.empties(p, o) == 14
    assert solve(p, o) == (64, [2]) and endgame.value(p, o) == 64
    over = ref.apply(board, 1, 0, 2)  # white has no disc left: over, 13 empties
    over[5][0] = 0  # a6 emptied too: 14 empties, still over
    assert ref.game_over(over) and endgame.value(*ref.to_bitboards(over, -1)) == -ref.final_score(over)
    board[5][0] = 0  # 15 empties
    with pytest.raises(ValueError, match="at most 14 empty squares, this position has 15"):
        solve(*ref.to_bitboards(board, 1))


def test_partial_move_values_are_not_taken_for_a_solve():
    """solved_from_moves keeps a solve only when every legal move was valued: one move's value
    alone must not make ``solve`` answer that move as the best."""
    for board, color in _endings(8, seed=13, max_empties=6):
        children = {8 * r + c: -_minimax(ref.apply(board, color, r, c), -color) for r, c in ref.legal(board, color)}
        if len(set(children.values())) > 1:
            break
    assert len(set(children.values())) > 1
    p, o = ref.to_bitboards(board, color)
    worst = min(children, key=children.get)
    endgame._SOLVED.clear()
    endgame.solved_from_moves(p, o, {worst: children[worst]})
    best = max(children.values())
    assert solve(p, o) == (best, sorted(sq for sq, v in children.items() if v == best))
    endgame._SOLVED.clear()


def test_alphabeta_to_the_end_is_the_exact_result():
    """With the depth past the last empty square every line ends in a finished game: the value
    is WIN_SCALE times the perfect-play disc difference of plain minimax on the reference boards,
    and the best moves are minimax's."""
    from othello_learn.players.base import AlphaBetaPlayer
    from othello_learn.search.alphabeta import WIN_SCALE

    ends = [(b, c) for b, c in _endings(6, seed=17, max_empties=4)]
    assert len(ends) > 10
    for board, color in ends[::2]:
        children = {8 * r + c: -_minimax(ref.apply(board, color, r, c), -color) for r, c in ref.legal(board, color)}
        best = max(children.values())
        value, moves = AlphaBetaPlayer(6).search(*ref.to_bitboards(board, color))
        assert value == WIN_SCALE * best
        assert moves == sorted(sq for sq, v in children.items() if v == best)


def test_alphabeta_evaluation_of_a_hand_scored_position():
    """To move: a1 b1 c1 a2 (4 stable discs, a corner); the opponent: b2 d1. By hand:
    squares 100 - 20 + 10 - 20 - (-50 + 5) = 115; mobility 5 moves (a3 b3 c2 c3 e1) to 0,
    100 * 5 // 7 = 71, weighted 2; corners 1 - 0, weighted 25; stable 4 - 0, weighted 10:
    115 + 142 + 25 + 40 = 322. From the other side: -115 + 2 * (-500 // 7 = -72) - 25 - 40 = -324."""
    from othello_learn.search import alphabeta as ab

    p = sum(1 << parse_square(n) for n in ("a1", "b1", "c1", "a2"))
    o = sum(1 << parse_square(n) for n in ("b2", "d1"))
    assert bb.squares(bb.legal_moves(p, o)) == sorted(parse_square(n) for n in ("a3", "b3", "c2", "c3", "e1"))
    assert bb.legal_moves(o, p) == 0
    assert ab.evaluate(p, o) == 322
    assert ab.evaluate(o, p) == -324
