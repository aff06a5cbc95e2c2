"""The batched game state, checked against the plain reference engine over random games."""

import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import reference_engine as ref
from othello import Position
from othello.states import ACTIONS, NO_MOVE, PASS, States, last_actions


def _ref_actions(board, color) -> set[int]:
    moves = {8 * r + c for r, c in ref.legal(board, color)}
    if not moves and not ref.game_over(board):
        moves = {PASS}
    return moves


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_random_games_match_reference(backend, seed):
    """Step 4 reference games together: the legal actions, boards, colours,
    history, end and outcome agree at every ply (passes included; the outcome of a
    game still going is the board's count, which numpy's uint8 popcount wrapped)."""
    rng = random.Random(seed)
    games = [ref.random_game(rng) for _ in range(4)]
    s = States.initial(4, like=np if backend == "numpy" else torch.zeros(0))
    longest = max(len(rec) for rec, _, _ in games)
    history = [[NO_MOVE] * 4 for _ in games]
    for ply in range(longest + 1):
        live = [i for i, (rec, _, _) in enumerate(games) if ply < len(rec)]
        legal, over, outcome = s.legal_actions(), s.is_over(), s.outcome()
        for i, (rec, final, final_color) in enumerate(games):
            board, color = (rec[ply][0], rec[ply][1]) if ply < len(rec) else (final, final_color)
            p, o = ref.to_bitboards(board, color)
            assert int(s.player[i]) & (2**64 - 1) == p and int(s.opponent[i]) & (2**64 - 1) == o
            assert bool(s.black_to_move[i]) == (color == 1)
            assert set(np.flatnonzero(np.asarray(legal[i])).tolist()) == _ref_actions(board, color)
            assert [int(x) for x in s.history[i]] == history[i]
            assert bool(over[i]) == ref.game_over(board)
            on_board = sum(v for row in board for v in row)  # black 1, white -1
            assert int(outcome[i]) == (ref.final_score(board) if ref.game_over(board) else on_board)
        if not live:
            break
        sub = s[np.array(live) if backend == "numpy" else torch.tensor(live)]
        actions = [games[i][0][ply][2] for i in live]
        stepped = sub.step(np.array(actions) if backend == "numpy" else torch.tensor(actions))
        for field in ("player", "opponent", "black_to_move", "history"):
            getattr(s, field)[np.array(live) if backend == "numpy" else torch.tensor(live)] = getattr(stepped, field)
        for i, a in zip(live, actions):
            history[i] = [a] + history[i][:3]


def test_illegal_actions_are_refused_with_the_game_named():
    s = States.initial(3)
    with pytest.raises(ValueError, match="game 1: action 0 is not legal"):
        s.step(np.array([37, 0, 19]))
    with pytest.raises(ValueError, match="game 0: action 64"):  # no pass while a move exists
        s.step(np.array([PASS, 37, 37]))
    with pytest.raises(ValueError, match="game 2"):
        s.to("cpu").step(torch.tensor([37, 37, 99]))


def test_round_trips_and_the_one_position_api():
    pos = Position.from_transcript("f5d6c3d3c4")
    s = States.from_positions([pos, Position()])
    assert len(s) == 2 and s.position(0) == pos and s.position(1) == Position()
    t = s.to("cpu")
    assert t.is_torch and t.legal_actions().shape == (2, ACTIONS)
    back = t.numpy()
    assert back.position(0) == pos and back.player.dtype == np.uint64
    np.testing.assert_array_equal(t.legal_actions().numpy(), s.legal_actions())
    assert s[1:].position(0) == Position()


def test_initial_takes_the_torch_module_as_its_docstring_says():
    s = States.initial(3, like=torch)
    assert s.is_torch and s.player.device.type == "cpu" and len(s) == 3
    assert s.position(0) == Position() and States.initial(1, like=torch, device="cpu").position(0) == Position()


def test_a_position_built_from_array_scalars_is_the_same_position():
    """A dataset record's numpy uint64 fields, or a torch int64 with h8 set (negative), make the
    same Position as Python ints: equal, hashed alike, and every method works."""
    pos = Position.from_transcript("f5d6c3")
    s = States.from_positions([Position(pos.player | (1 << 63), pos.opponent, False),
                               Position(pos.opponent, pos.player | (1 << 63), True)])
    for i in range(2):
        want = s.position(i)
        for built in (Position(s.player[i], s.opponent[i], s.black_to_move[i]),
                      Position(s.to("cpu").player[i], s.to("cpu").opponent[i], s.to("cpu").black_to_move[i])):
            assert built == want and hash(built) == hash(want) and type(built.player) is int
            assert built.legal_moves() == want.legal_moves() and str(built) == str(want)
    assert int(s.to("cpu").player[0]) < 0 and int(s.to("cpu").opponent[1]) < 0  # the torch boards are negative


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_step_where_and_put_touch_only_the_chosen_games(backend):
    s = States.initial(3) if backend == "numpy" else States.initial(3).to("cpu")
    where = np.array([True, False, True]) if backend == "numpy" else torch.tensor([True, False, True])
    actions = np.array([37, 0, 19]) if backend == "numpy" else torch.tensor([37, 0, 19])
    t = s.step_where(where, actions)
    assert s.position(0) == Position() and s.position(2) == Position()  # a copy: s is unchanged
    assert t.position(0) == Position().play("f5") and t.position(1) == Position() and t.position(2) == Position().play("d3")
    assert [int(x) for x in t.history[0]] == [37, NO_MOVE, NO_MOVE, NO_MOVE]
    s.put(np.array([1]) if backend == "numpy" else torch.tensor([1]), t[2:3])
    assert s.position(1) == Position().play("d3") and s.position(0) == Position()


def test_last_actions_is_the_history_step_keeps():
    """One game's history row from its actions equals what the batched ``step`` kept,
    over random games with passes."""
    from othello.states import last_actions

    rng = np.random.default_rng(7)
    states = States.initial(16)
    played = [[] for _ in range(16)]
    for _ in range(70):
        live = ~states.is_over()
        if not live.any():
            break
        legal = states.legal_actions()
        actions = np.array([rng.choice(np.nonzero(row)[0]) if ok else 0 for row, ok in zip(legal, live)])
        states = states.step_where(live, actions)
        for g in np.nonzero(live)[0]:
            played[g].append(int(actions[g]))
    assert last_actions([]).tolist() == [-1, -1, -1, -1]
    for g in range(16):
        assert last_actions(played[g]).tolist() == states.history[g].tolist()


def test_histories_of_the_wrong_shape_are_refused():
    with pytest.raises(ValueError, match=r"histories must be \[1, 4\]"):
        States.from_positions([Position()], histories=[[1, 2]])


def _game_with_a_pass(seed=0):
    """A random game's moves from the start, with at least one forced pass, passes explicit."""
    rng = random.Random(seed)
    while True:
        pos, moves = Position(), []
        while not pos.is_over():
            legal = pos.legal_moves()
            moves.append(rng.choice(legal) if legal else PASS)
            pos = pos.play(moves[-1])
        if PASS in moves:
            return moves, pos


def test_a_game_keeps_its_moves_positions_and_history_and_takes_moves_back():
    """``othello.Game``, what the three front-ends keep: passes inferred as ``Position.replay``
    infers them, an illegal move leaves the game as it was, undo is a truncation, and the
    current position is a one-game ``States`` with the last actions as the history."""
    from othello.game import Game, IllegalMoveError

    moves, final = _game_with_a_pass()
    game = Game()
    added = game.extend([m for m in moves if m != PASS])  # the passes left out, as a transcript writes them
    assert added == game.moves == moves and game.position == final and game.from_standard_start
    assert game.positions == _positions(moves)
    s = game.states()
    assert len(s) == 1 and s.position(0) == final and s.history[0].tolist() == last_actions(moves).tolist()
    record = game.record(black="a", white="b")
    assert record.moves == moves and record.result == final.score() and record.black == "a"
    with pytest.raises(IllegalMoveError):
        game.extend([0])  # the game is over
    assert game.moves == moves and len(game.positions) == len(moves) + 1
    taken = game.truncate(3)
    assert taken == moves[3:] and game.moves == moves[:3] and game.position == _positions(moves)[3]
    assert game.record().result is None  # not over: no result
    with pytest.raises(IllegalMoveError):
        game.play(PASS)  # a pass only where it is the rule
    assert game.moves == moves[:3]
    set_up = Game(_positions(moves)[5], moves[5:9])
    assert not set_up.from_standard_start and set_up.position == _positions(moves)[9]
    assert set_up.states().history[0].tolist() == last_actions(moves[5:9]).tolist()


def _positions(moves):
    out = [Position()]
    for m in moves:
        out.append(out[-1].play(m))
    return out
