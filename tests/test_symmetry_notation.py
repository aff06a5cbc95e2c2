"""D4 symmetries and move notation."""

import random

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import reference_engine as ref
from othello import bitboard as bb
from othello import notation, symmetry
from othello.symmetry import INVERSE, SQUARE_MAP, START_PRESERVING, transform, transform_square

COORD_MAPS = [
    lambda r, c: (r, c),
    lambda r, c: (c, 7 - r),
    lambda r, c: (7 - r, 7 - c),
    lambda r, c: (7 - c, r),
    lambda r, c: (7 - r, c),
    lambda r, c: (r, 7 - c),
    lambda r, c: (c, r),
    lambda r, c: (7 - c, 7 - r),
]
boards = st.integers(0, 2**64 - 1)


def test_square_map_matches_coordinates():
    for k, f in enumerate(COORD_MAPS):
        for sq in range(64):
            r, c = f(sq // 8, sq % 8)
            assert SQUARE_MAP[k, sq] == 8 * r + c


@given(boards)
def test_board_transform_matches_square_map(x):
    for k in range(8):
        expected = sum(1 << int(SQUARE_MAP[k, s]) for s in bb.squares(x))
        assert transform(x, k) == expected
        assert transform(transform(x, k), INVERSE[k]) == x


def test_batched_numpy_and_torch_transforms_agree():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True)
    t = torch.from_numpy(x.view(np.int64))
    for k in range(8):
        expected = np.array([transform(int(v), k) for v in x], dtype=np.uint64)
        assert np.array_equal(transform(x, k), expected)
        assert np.array_equal(transform(t, k).numpy().view(np.uint64), expected)


def test_inverse_and_group_closure():
    ids = [tuple(SQUARE_MAP[k]) for k in range(8)]
    assert len(set(ids)) == 8
    for a in range(8):
        assert (SQUARE_MAP[INVERSE[a]][SQUARE_MAP[a]] == np.arange(64)).all()
        for b in range(8):
            assert tuple(SQUARE_MAP[b][SQUARE_MAP[a]]) in ids


def test_exactly_four_symmetries_preserve_the_start():
    keep = [k for k in range(8) if transform(bb.BLACK_START, k) == bb.BLACK_START and transform(bb.WHITE_START, k) == bb.WHITE_START]
    assert tuple(keep) == START_PRESERVING == (0, 2, 6, 7)
    assert [symmetry.NAMES[k] for k in keep] == ["identity", "rot180", "transpose", "anti_transpose"]


@given(seed=st.integers(0, 2**32 - 1), cut=st.integers(0, 60))
def test_move_legal_iff_image_legal_in_image(seed, cut):
    record, board, color = ref.random_game(random.Random(seed), stop_after=cut)
    p, o = ref.to_bitboards(board, color)
    legal = bb.legal_moves(p, o)
    for k in range(8):
        tp, to = transform(p, k), transform(o, k)
        tlegal = bb.legal_moves(tp, to)
        for sq in range(64):
            assert bool(legal >> sq & 1) == bool(tlegal >> int(transform_square(sq, k)) & 1)
        assert tlegal == transform(legal, k)
        for sq in bb.squares(legal)[:3]:  # playing commutes with the symmetry
            child = bb.play(p, o, 1 << sq)
            tchild = bb.play(tp, to, 1 << int(transform_square(sq, k)))
            assert tchild == (transform(child[0], k), transform(child[1], k))


def test_transform_square_keeps_pass_and_none():
    assert transform_square(notation.PASS, 1) == notation.PASS
    assert transform_square(-1, 3) == -1
    arr = np.array([0, 63, 64, -1], dtype=np.int8)
    assert transform_square(arr, 2).tolist() == [63, 0, 64, -1]


def test_square_names():
    assert notation.square_name(0) == "a1" and notation.square_name(63) == "h8"
    assert notation.square_name(37) == "f5"
    assert all(notation.parse_square(notation.square_name(s)) == s for s in range(64))
    assert notation.parse_square("F5") == 37
    with pytest.raises(ValueError):
        notation.parse_square("i9")
    assert notation.move_name(37) == "f5" and notation.move_name(notation.PASS) == "PA"  # GGF's; NBoard's in capitals
    assert all(notation.parse_square(notation.move_name(s)) == s for s in range(65))


def test_transcripts_round_trip_and_replay():
    from othello import Position

    moves = notation.parse_transcript("f5d6 C3d3c4")
    assert notation.format_transcript(moves) == "f5d6c3d3c4"
    with_pass = [37, notation.PASS, 43, -1]
    assert notation.format_transcript(with_pass) == "f5d6"          # readers infer the pass
    assert notation.format_transcript(with_pass, passes=True) == "f5--d6"
    pos = Position.from_transcript("f5d6c3d3c4")
    assert not pos.black_to_move and bb.popcount(pos.black) == 6 and bb.popcount(pos.white) == 3
    with pytest.raises(ValueError, match="z9"):
        notation.parse_transcript("f5z9")


def test_every_pass_word_reads_as_a_pass_and_written_transcripts_read_back():
    """One grammar for moves: GGF's PA, transcripts' --, and the words a person types."""
    from othello.formats import parse_move, parse_transcript_moves

    for word in ("pa", "PA", "ps", "pass", "--"):
        assert notation.parse_square(word) == notation.PASS == parse_move(word)
    assert notation.parse_transcript("f5 PA d6--c3pass") == [37, 64, 43, 64, 18, 64]
    moves = [37, 64, 43, 64]
    assert notation.parse_transcript(notation.format_transcript(moves, passes=True)) == moves
    assert parse_transcript_moves(notation.format_transcript(moves, passes=True)) == moves


def test_wthor_bytes():
    assert notation.square_to_wthor(notation.parse_square("f5")) == 56
    assert notation.wthor_to_square(56) == 37
    all_sq = np.arange(64)
    assert (notation.wthor_to_square(notation.square_to_wthor(all_sq)) == all_sq).all()
    assert notation.wthor_to_square(np.array([0, 9, 90, 19, 11, 88])).tolist() == [-1, -1, -1, -1, 0, 63]


def test_per_element_transforms_match_transform():
    from othello.symmetry import transform_each, transform_square_each

    rng = np.random.default_rng(3)
    x = rng.integers(0, 2**64 - 1, 400, dtype=np.uint64, endpoint=True)
    ks = rng.integers(0, 8, 400)
    sq = rng.integers(-1, 65, (400, 5)).astype(np.int8)
    expected = np.array([transform(int(v), int(k)) for v, k in zip(x, ks)], dtype=np.uint64)
    expected_sq = np.stack([transform_square(s, int(k)) for s, k in zip(sq, ks)])
    assert np.array_equal(transform_each(x, ks), expected)
    assert np.array_equal(transform_square_each(sq, ks), expected_sq)
    t = transform_each(torch.from_numpy(x.view(np.int64)), torch.from_numpy(ks))
    assert np.array_equal(t.numpy().view(np.uint64), expected)
    tsq = transform_square_each(torch.from_numpy(sq), torch.from_numpy(ks))
    assert np.array_equal(tsq.numpy(), expected_sq)


def test_every_wthor_byte_reads_as_its_square_or_as_none():
    """All 256 bytes against the format's own table (10 * row + column, both 1..8): a byte
    with column 0 (10, 20, ..., 80) or 9 (19, ..., 89) is no square, not the next or previous row's end."""
    table = {10 * r + c: 8 * (r - 1) + (c - 1) for r in range(1, 9) for c in range(1, 9)}
    got = notation.wthor_to_square(np.arange(256))
    assert got.tolist() == [table.get(b, -1) for b in range(256)]
    assert [notation.wthor_to_square(b) for b in (10, 20, 80, 19, 89, 18, 88)] == [-1, -1, -1, -1, -1, 7, 63]


def test_square_names_are_read_without_surrounding_whitespace():
    assert notation.parse_square(" f5\n") == 37 and notation.parse_square("\tA1 ") == 0
    assert notation.parse_square(" PA ") == notation.PASS
