"""The bitboard engine against the 8x8 reference, perft and properties."""

import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import reference_engine as ref
from othello import bitboard as bb
from othello.game import Position
from othello.notation import format_transcript
from othello.perft import perft

PERFT = [1, 4, 12, 56, 244, 1396, 8200, 55092, 390216]


@pytest.mark.parametrize("depth", range(len(PERFT)))
def test_perft_matches_published_counts(depth):
    assert perft(depth) == PERFT[depth]


def test_perft_counts_a_forced_pass_as_one_ply_and_a_finished_game_as_a_leaf():
    """The published counts above never meet a pass or a finished game. By hand: black (to
    move) has b1, white a1: black must pass (1 child), white's only move is c1 (1), then
    black has no disc: the game is over, one leaf at every depth beyond. A full board is a
    leaf at any depth."""
    black_b1, white_a1 = 1 << 1, 1 << 0
    assert [perft(d, black_b1, white_a1) for d in range(6)] == [1, 1, 1, 1, 1, 1]
    full = (1 << 64) - 1
    assert [perft(d, full ^ 1, 0) for d in range(4)] == [1, 1, 1, 1]


def _ref_perft(board, color, depth, seen):
    """Leaf count by the reference engine, one position at a time: a pass is a ply, a
    finished game a leaf (``seen`` counts both, to show the trees have them)."""
    if depth == 0:
        return 1
    if ref.game_over(board):
        seen["ended early"] += 1
        return 1
    moves = ref.legal(board, color)
    if not moves:
        seen["passes"] += 1
        return _ref_perft(board, -color, depth - 1, seen)
    return sum(_ref_perft(ref.apply(board, color, r, c), -color, depth - 1, seen) for r, c in moves)


def test_perft_of_late_positions_matches_the_reference_engine_through_passes():
    rng = random.Random(11)
    late = []
    while len(late) < 6:
        record, _, _ = ref.random_game(rng)
        late += [(b, c) for b, c, mv in record if sum(v == 0 for row in b for v in row) == 6][:1]
    seen = {"ended early": 0, "passes": 0}
    counts = [(perft(8, *ref.to_bitboards(b, c)), _ref_perft(b, c, 8, seen)) for b, c in late]
    assert all(mine == theirs for mine, theirs in counts), counts
    assert seen["ended early"] > 0 and seen["passes"] > 0, seen


def test_perft_cli(capsys):
    from othello.__main__ import main

    main(["perft", "6"])
    assert capsys.readouterr().out.strip() == "8200"
    for depth in ("12", "-1"):  # breadth-first: a depth past memory is refused, not started
        with pytest.raises(SystemExit) as e:
            main(["perft", depth])
        assert e.value.code == 2 and f"depth {depth}: must be 0..11" in capsys.readouterr().err


def test_perft_cli_read_in_part_ends_quietly():
    """`python -m othello perft 8 --all | head -1` raised BrokenPipeError with a traceback."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    cmd = f"{sys.executable} -m othello perft 9 --all | head -1"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # each line written as printed: the pipe breaks mid-run
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[1], env=env)
    assert r.stdout.split("\t")[:2] == ["1", "4"] and r.stderr == "" and r.returncode == 141


def _random_positions(n_games: int, seed: int):
    """Every position of ``n_games`` random games, as reference boards."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_games):
        record, board, color = ref.random_game(rng)
        out.extend((b, c) for b, c, _ in record)
        out.append((board, color))
    return out


@pytest.fixture(scope="module")
def reference_positions():
    return _random_positions(150, seed=1)  # about 9,000 positions, passes and early ends among them


def test_random_games_cover_passes_and_early_ends():
    rng = random.Random(2)
    passes = early = 0
    for _ in range(300):
        record, board, _ = ref.random_game(rng)
        passes += any(m == 64 for _, _, m in record)
        early += sum(v == 0 for row in board for v in row) > 0
        if passes and early:
            break
    assert passes > 0 and early > 0


def _expected(board, color):
    p, o = ref.to_bitboards(board, color)
    legal = sum(1 << (8 * r + c) for r, c in ref.legal(board, color))
    return p, o, legal


def test_batched_numpy_matches_reference(reference_positions):
    p = np.array([ref.to_bitboards(b, c)[0] for b, c in reference_positions], dtype=np.uint64)
    o = np.array([ref.to_bitboards(b, c)[1] for b, c in reference_positions], dtype=np.uint64)
    legal = bb.legal_moves(p, o)
    for i, (board, color) in enumerate(reference_positions):
        assert int(legal[i]) == _expected(board, color)[2]
    # play every legal move of every position at once and compare children
    rows, sqs = np.nonzero((legal[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1))
    mv = np.uint64(1) << sqs.astype(np.uint64)
    np_, no = bb.play(p[rows], o[rows], mv)
    for k in range(0, len(rows), 7):  # a deterministic sample keeps the reference affordable
        board, color = reference_positions[rows[k]]
        child = ref.apply(board, color, sqs[k] // 8, sqs[k] % 8)
        assert (int(np_[k]), int(no[k])) == ref.to_bitboards(child, -color)
    terminal = bb.is_terminal(p, o)
    score = bb.final_disc_difference(p, o)
    for i, (board, color) in enumerate(reference_positions):
        assert bool(terminal[i]) == ref.game_over(board)
        if terminal[i]:
            assert int(score[i]) == color * ref.final_score(board)


def test_torch_matches_numpy(reference_positions):
    p = np.array([ref.to_bitboards(b, c)[0] for b, c in reference_positions], dtype=np.uint64)
    o = np.array([ref.to_bitboards(b, c)[1] for b, c in reference_positions], dtype=np.uint64)
    tp, to = torch.from_numpy(p.view(np.int64)), torch.from_numpy(o.view(np.int64))
    assert np.array_equal(bb.legal_moves(tp, to).numpy().view(np.uint64), bb.legal_moves(p, o))
    assert np.array_equal(bb.popcount(tp).numpy(), bb.popcount(p).astype(np.int64))
    assert np.array_equal(bb.is_terminal(tp, to).numpy(), bb.is_terminal(p, o))
    assert np.array_equal(bb.final_disc_difference(tp, to).numpy(), bb.final_disc_difference(p, o))
    legal = bb.legal_moves(p, o)
    low = legal & (~legal + np.uint64(1))  # lowest legal move of each position (0 if none)
    a = bb.play(tp, to, torch.from_numpy(low.view(np.int64)))
    b = bb.play(p, o, low)
    assert all(np.array_equal(x.numpy().view(np.uint64), y) for x, y in zip(a, b))


def test_legal_moves_and_flips_on_any_board_match_the_reference_on_every_kind():
    """Boards no game reaches (long lines of one colour, full edges, h8's sign bit set): where a
    fill that jumps two squares at a time could wrap around an edge or drag a sign bit in."""
    rng = random.Random(5)
    boards = [[[rng.choice((1, -1, 0, 0)) if d else rng.choice((1, -1, 1, -1, 0)) for _ in range(8)]
               for _ in range(8)] for d in [True] * 150 + [False] * 150]
    player, opponent, legal, flipped = [], [], [], []
    for b in boards:
        p, o = ref.to_bitboards(b, 1)
        player.append(p)
        opponent.append(o)
        legal.append(sum(1 << (8 * r + c) for r, c in ref.legal(b, 1)))
        flipped.append([sum(1 << (8 * rr + cc) for rr, cc in ref.flipped(b, 1, sq // 8, sq % 8)) for sq in range(64)])
    p, o = np.array(player, np.uint64), np.array(opponent, np.uint64)
    tp, to = torch.from_numpy(p.view(np.int64)), torch.from_numpy(o.view(np.int64))
    kinds = {"numpy": (p, o, lambda x: x), "torch": (tp, to, lambda x: x.numpy().view(np.uint64))}
    for name, (kp, ko, back) in kinds.items():
        assert back(bb.legal_moves(kp, ko)).tolist() == legal, name
        for sq in range(64):
            move = np.full(len(boards), np.uint64(1) << np.uint64(sq))
            km = move if name == "numpy" else torch.from_numpy(move.view(np.int64))
            got = back(bb.flips(kp, ko, km)).tolist()
            want = [f[sq] if not (player[i] | opponent[i]) >> sq & 1 else got[i] for i, f in enumerate(flipped)]
            assert got == want, (name, sq)  # an occupied square: the caller's check (the docstring)
    for i in range(0, len(boards), 10):  # Python ints
        empty = [sq for sq in range(64) if not (player[i] | opponent[i]) >> sq & 1]
        assert bb.legal_moves(player[i], opponent[i]) == legal[i]
        assert [bb.flips(player[i], opponent[i], 1 << sq) for sq in empty] == [flipped[i][sq] for sq in empty]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cut=st.integers(0, 60))
def test_single_position_api_follows_reference_game(seed, cut):
    """Random games (passes and early ends included) replayed move by move."""
    from othello import PASS, Position

    record, board, color = ref.random_game(random.Random(seed), stop_after=cut)
    pos = Position()
    for rboard, rcolor, move in record:
        assert (pos.black, pos.white) == ref.to_bitboards(rboard, 1)
        assert pos.black_to_move == (rcolor == 1)
        assert pos.legal_moves() == sorted(8 * r + c for r, c in ref.legal(rboard, rcolor))
        assert pos.must_pass() == (move == PASS)
        pos = pos.play(move)
    assert (pos.black, pos.white) == ref.to_bitboards(board, 1)
    assert pos.is_over() == ref.game_over(board)
    if pos.is_over():
        assert pos.score() == ref.final_score(board)


def test_illegal_moves_are_refused():
    from othello import PASS, IllegalMoveError, Position

    pos = Position()
    for bad in ("a1", "d4", PASS, 99):
        with pytest.raises(IllegalMoveError):
            pos.play(bad)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=6))
def test_bits_unpacks_every_square_in_numpy_and_torch(boards):
    want = np.array([[(b >> s) & 1 for s in range(64)] for b in boards], dtype=bool)
    a = np.array(boards, dtype=np.uint64)
    assert np.array_equal(bb.bits(a), want)
    assert np.array_equal(bb.bits(a.reshape(len(boards), 1)), want[:, None])
    t = torch.from_numpy(a.view(np.int64))
    assert torch.equal(bb.bits(t), torch.from_numpy(want))


def test_signed_numpy_boards_are_refused_with_the_cure():
    """int64 arrays (a torch tensor's .numpy()) hold the right bits but meet the masks as
    overflowing Python ints: a TypeError that says to view them as uint64, not an OverflowError."""
    p, o = np.array([bb.BLACK_START]), np.array([bb.WHITE_START])
    with pytest.raises(TypeError, match="uint64"):
        bb.legal_moves(p, o)
    assert bb.legal_moves(p.view(np.uint64), o.view(np.uint64))[0] == bb.legal_moves(bb.BLACK_START, bb.WHITE_START)


def test_misuse_is_an_error_not_an_answer():
    """A float square was truncated (37.7 played f5), a board holding both colours on one square
    was taken, a name where an index belongs failed inside a comparison."""
    from othello.notation import parse_square, square_name

    with pytest.raises(ValueError, match="a square holds both colours: a1"):
        Position(1, 1)
    for bad in (37.7, None):
        with pytest.raises(TypeError):
            Position().play(bad)
    assert Position().play(np.int64(37)) == Position().play("f5")  # array integers are indices
    with pytest.raises(TypeError):
        square_name("f5")
    with pytest.raises(TypeError, match="parse_square takes a square's name such as 'f5', not 5"):
        parse_square(5)


# ---------------------------------------------------------------- mutation-testing additions


def test_final_disc_difference_one_position_api_matches_reference(reference_positions):
    """The int path (what ``Position.score`` uses) for every finished position, from both sides
    (winner and loser with empties left), and a draw with empties: nobody gets them. A numpy
    array's element (a uint64 scalar) reads as the int does (it was an AttributeError)."""
    finished = [(b, c) for b, c in reference_positions if bb.is_terminal(*ref.to_bitboards(b, c))]
    assert len(finished) == 150 and all(ref.game_over(b) for b, _ in finished)  # one per game
    assert any(sum(v == 0 for row in b for v in row) for b, _ in finished)  # empties left somewhere
    for board, color in finished:
        p, o = ref.to_bitboards(board, color)
        assert bb.final_disc_difference(p, o) == color * ref.final_score(board)
        assert bb.final_disc_difference(o, p) == -color * ref.final_score(board)
        assert bb.final_disc_difference(np.uint64(p), np.uint64(o)) == color * ref.final_score(board)  # an element
        assert bb.disc_difference(np.uint64(o), np.uint64(p)) == -bb.disc_difference(p, o)
    board = [[0] * 8 for _ in range(8)]
    board[0][0], board[7][7] = 1, -1  # a1 black, h8 white: over, 1-1 with 62 empties
    assert ref.game_over(board) and ref.final_score(board) == 0
    p, o = ref.to_bitboards(board, 1)
    assert bb.final_disc_difference(p, o) == 0 and Position(p, o, True).score() == 0
    for kind in (np.array([p], np.uint64), torch.tensor([p])):
        assert int(bb.final_disc_difference(kind, kind * 0 + o)[0]) == 0


def test_signed_is_twos_complement_at_the_edge():
    """h8 alone is the one board whose int64 reading is exactly -2**63."""
    for v in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 63) + 1, bb.FULL):
        assert bb.as_int64(v) == int(np.array([v], np.uint64).view(np.int64)[0])
    t = torch.tensor([bb.const(1 << 63, torch.zeros(1, dtype=torch.long))])
    assert t.numpy().view(np.uint64)[0] == 1 << 63


def test_every_square_is_legal_or_refused_as_the_reference_says():
    """Each square (occupied ones too: they can bracket discs) and the pass, in every position
    of a few reference games, including finished ones: legal exactly when the reference says so,
    and then the child is the reference's."""
    from othello import PASS, IllegalMoveError

    rng = random.Random(5)
    seen_over = 0
    for _ in range(4):
        record, final, final_color = ref.random_game(rng)
        for board, color in [(b, c) for b, c, _ in record] + [(final, final_color)]:
            pos = Position(*ref.to_bitboards(board, color), color == 1)
            seen_over += pos.is_over()
            legal = {8 * r + c for r, c in ref.legal(board, color)}
            for sq in range(64):
                if sq in legal:
                    child = ref.apply(board, color, sq // 8, sq % 8)
                    assert pos.play(sq) == Position(*ref.to_bitboards(child, -color), color != 1)
                else:
                    with pytest.raises(IllegalMoveError):
                        pos.play(sq)
            if not legal and not ref.game_over(board):
                assert pos.must_pass() and pos.play(PASS) == Position(pos.opponent, pos.player, not pos.black_to_move)
            else:
                assert not pos.must_pass()
                with pytest.raises(IllegalMoveError):
                    pos.play(PASS)
    assert seen_over == 4


def test_transcript_without_passes_infers_them():
    """A reference game with a pass, written without it, replays to the reference's final board."""
    rng = random.Random(0)
    while True:
        record, final, _ = ref.random_game(rng)
        if any(m == 64 for _, _, m in record):
            break
    text = format_transcript([m for _, _, m in record if m != 64])
    pos = Position.from_transcript(text)
    assert (pos.black, pos.white) == ref.to_bitboards(final, 1)


def test_score_of_a_game_in_progress_is_black_minus_white():
    """After f5 black has 4 discs, white 1, and white is to move: +3 for black."""
    pos = Position().play("f5")
    assert not pos.black_to_move and pos.score() == 3
    board = ref.apply(ref.apply(ref.start_board(), 1, 4, 5), -1, 3, 5)  # f5, then white f4 flips e4
    b, w = (sum(v == k for row in board for v in row) for k in (1, -1))
    assert (b, w) == (3, 3) and pos.play("f4").score() == 0
    board = ref.apply(board, 1, 2, 4)  # black e3
    b, w = (sum(v == k for row in board for v in row) for k in (1, -1))
    assert pos.play("f4").play("e3").score() == b - w != 0


def test_board_text_of_the_start():
    """Hand-written: black's four legal moves marked, X black, O white."""
    assert str(Position()).splitlines() == [
        "  a b c d e f g h",
        "1 . . . . . . . .",
        "2 . . . . . . . .",
        "3 . . . * . . . .",
        "4 . . * O X . . .",
        "5 . . . X O * . .",
        "6 . . . . * . . .",
        "7 . . . . . . . .",
        "8 . . . . . . . .",
        "black (X=black, O=white, *=legal) to move",
    ]
