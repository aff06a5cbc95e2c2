"""Stable discs and the input encoders against slow, obvious 8x8 versions.

The references below use only ``reference_engine`` (lists of lists) and the
definitions as written in words, square by square; the batched code shares
nothing with them but the bit numbering.
"""

import functools
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import reference_engine as ref
from othello import bitboard as bb
from othello.stability import full_lines, stable_discs
from othello_learn.models import encoders as enc

CELLS = [(r, c) for r in range(8) for c in range(8)]
AXES = [(0, 1), (1, 0), (1, 1), (1, -1)]  # horizontal, vertical, a1-h8, a8-h1


def on_board(r, c):
    return 0 <= r < 8 and 0 <= c < 8


def _line(r, c, dr, dc):
    cells = [(r, c)]
    for s in (1, -1):
        rr, cc = r + s * dr, c + s * dc
        while on_board(rr, cc):
            cells.append((rr, cc))
            rr, cc = rr + s * dr, cc + s * dc
    return cells


LINE = {(r, c, a): _line(r, c, *AXES[a]) for r, c in CELLS for a in range(4)}


def ref_full_lines(board):
    """Per axis, the set of squares whose whole line on that axis is occupied."""
    return [{(r, c) for r, c in CELLS if all(board[x][y] != 0 for x, y in LINE[r, c, a])} for a in range(4)]


def _key(board):
    return tuple(map(tuple, board))


@functools.lru_cache(maxsize=None)
def _ref_stable(key, color):
    board = key
    discs = [(r, c) for r, c in CELLS if board[r][c] == color]
    full = ref_full_lines(board)
    stable = set()
    changed = True
    while changed:  # one disc at a time, until nothing more can be added
        changed = False
        for r, c in discs:
            if (r, c) in stable:
                continue
            ok = True
            for a, (dr, dc) in enumerate(AXES):
                ends = [(r + dr, c + dc), (r - dr, c - dc)]
                if not ((r, c) in full[a] or any(not on_board(*e) or e in stable for e in ends)):
                    ok = False
                    break
            if ok:
                stable.add((r, c))
                changed = True
    return frozenset(stable)


def ref_stable(board, color):
    """The stable discs of ``color``, by the definition in words."""
    return _ref_stable(_key(board), color)


def ref_raw(board, color):
    return np.array([[[board[r][c] == v for c in range(8)] for r in range(8)] for v in (color, -color, 0)], np.float32)


def ref_handcrafted(board, color, history):
    out = np.zeros((42, 8, 8), np.float32)
    out[0:3] = ref_raw(board, color)
    for i, m in enumerate(history):
        if 0 <= m < 64:
            out[3 + i, m // 8, m % 8] = 1
    before = len(ref_stable(board, color))
    for r, c in ref.legal(board, color):
        child = ref.apply(board, color, r, c)
        replies = ref.legal(child, -color)
        opp_before = len(ref_stable(child, -color))
        reply_gain = max(
            (len(ref_stable(ref.apply(child, -color, rr, cc), -color)) - opp_before for rr, cc in replies), default=0
        )
        values = (
            len(replies),
            len(ref_stable(child, color)) - before,
            reply_gain,
            sum(on_board(r + dr, c + dc) and board[r + dr][c + dc] == 0 for dr, dc in ref.DIRECTIONS),
        )
        for base, v in zip((7, 15, 23, 31), values):
            out[base + min(v, 7), r, c] = 1
        out[39, r, c] = 1
    out[40] = 1
    out[41] = float(color == 1)
    return out


def to_set(board_bits: int):
    return {(sq // 8, sq % 8) for sq in range(64) if board_bits >> sq & 1}


# --- positions ------------------------------------------------------------


def game_states(rng, n_games):
    """Every position of random games with its history: (board, color, history)."""
    out = []
    for _ in range(n_games):
        record, board, color = ref.random_game(rng)
        moves = [m for _, _, m in record]
        for i, (b, c, _) in enumerate(record + [(board, color, None)]):
            hist = [moves[i - j] if i - j >= 0 else -1 for j in range(1, 5)]
            out.append((b, c, hist))
    return out


def empties(board):
    return sum(v == 0 for row in board for v in row)


def forces_pass(board, color):
    """Some legal move leaves the opponent without a reply (the game goes on)."""
    return any(
        not ref.legal(child, -color) and ref.legal(child, color)
        for child in (ref.apply(board, color, r, c) for r, c in ref.legal(board, color))
    )


def make_batch(states, device="cpu"):
    pairs = [ref.to_bitboards(b, c) for b, c, _ in states]
    p = np.array([x for x, _ in pairs], dtype=np.uint64).view(np.int64)
    o = np.array([y for _, y in pairs], dtype=np.uint64).view(np.int64)
    return {
        "player": torch.from_numpy(p).to(device),
        "opponent": torch.from_numpy(o).to(device),
        "history": torch.tensor([h for _, _, h in states], dtype=torch.int64, device=device).reshape(-1, 4),
        "black_to_move": torch.tensor([c == 1 for _, c, _ in states], dtype=torch.bool, device=device),
    }


@pytest.fixture(scope="module")
def all_states():
    return game_states(random.Random(7), 40)


@pytest.fixture(scope="module")
def sample(all_states):
    """A sample that is cheap for the references yet covers the cases that matter:
    the opening, forced passes after a move, a side that must pass, late endgames."""
    rng = random.Random(3)
    endgame = [s for s in all_states if empties(s[0]) <= 6]
    middle = [s for s in all_states if 6 < empties(s[0]) <= 30]
    passes = [s for s in middle + endgame if forces_pass(s[0], s[1])]
    must_pass = [s for s in all_states if not ref.legal(s[0], s[1]) and not ref.game_over(s[0])]
    chosen = all_states[:3] + rng.sample(endgame, 12) + passes[:6] + must_pass[:2] + rng.sample(middle, 8)
    assert len(passes) >= 6 and must_pass and any(ref.game_over(s[0]) for s in endgame)
    assert any(64 in h for _, _, h in chosen) and any(-1 in h for _, _, h in chosen)
    return chosen


# --- stability ------------------------------------------------------------


def test_full_lines_match_reference(all_states):
    rng = random.Random(5)
    boards = [b for b, _, _ in all_states[::7]]
    # random occupancies too: full diagonals are rare in games
    boards += [[[rng.random() < 0.9 for _ in range(8)] for _ in range(8)] for _ in range(100)]
    occ = np.array([sum(1 << (8 * r + c) for r, c in CELLS if b[r][c]) for b in boards], dtype=np.uint64)
    got = full_lines(occ)
    got_t = full_lines(torch.from_numpy(occ.view(np.int64)))
    for i, b in enumerate(boards):
        want = ref_full_lines(b)
        for a in range(4):
            assert to_set(int(got[a][i])) == want[a]
            assert int(got_t[a][i]) & bb.FULL == int(got[a][i])
        assert full_lines(int(occ[i])) == tuple(int(g[i]) for g in got)


def test_stable_discs_match_reference(all_states):
    states = all_states[::3]
    pairs = [ref.to_bitboards(b, c) for b, c, _ in states]
    p = np.array([x for x, _ in pairs], dtype=np.uint64)
    o = np.array([y for _, y in pairs], dtype=np.uint64)
    got = stable_discs(p, o)
    for i, (b, c, _) in enumerate(states):
        assert to_set(int(got[i])) == ref_stable(b, c)
    assert stable_discs(bb.FULL, 0) == bb.FULL
    assert stable_discs(0, 0) == 0
    corners = (1 << 0) | (1 << 7) | (1 << 56) | (1 << 63)
    assert stable_discs(corners | (1 << 9), 0) == corners  # b2 is never stable on its own
    assert stable_discs(0b111 | (1 << 8), 1 << 9) == 0b111 | (1 << 8)


def test_stable_discs_identical_for_int_numpy_torch(all_states):
    pairs = [ref.to_bitboards(b, c) for b, c, _ in all_states[::2]]
    p = np.array([x for x, _ in pairs], dtype=np.uint64)
    o = np.array([y for _, y in pairs], dtype=np.uint64)
    got = stable_discs(p, o)
    ints = [stable_discs(x, y) for x, y in pairs]
    assert [int(v) for v in got] == ints
    t = stable_discs(torch.from_numpy(p.view(np.int64)), torch.from_numpy(o.view(np.int64)))
    assert t.dtype == torch.int64 and np.array_equal(t.numpy().view(np.uint64), got)
    m = len(p) // 2 * 2  # any batch shape
    assert np.array_equal(stable_discs(p[:m].reshape(2, -1), o[:m].reshape(2, -1)), got[:m].reshape(2, -1))
    assert isinstance(stable_discs(np.uint64(p[5]), np.uint64(o[5])), np.uint64)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cut=st.integers(0, 58))
def test_stable_discs_never_flip(seed, cut):
    """Stable discs of both colours, at every position of several random
    continuations of a random game, keep their colour to the end."""
    rng = random.Random(seed)
    record, board, color = ref.random_game(rng, stop_after=cut)
    for _ in range(3):
        b, c = board, color
        line = [(b, c)]
        while not ref.game_over(b):
            moves = ref.legal(b, c)
            if moves:
                b = ref.apply(b, c, *moves[rng.randrange(len(moves))])
            c = -c
            line.append((b, c))
        black = np.array([ref.to_bitboards(x, 1) for x, _ in line], dtype=np.uint64)
        s_black = stable_discs(black[:, 0], black[:, 1])
        s_white = stable_discs(black[:, 1], black[:, 0])
        later_black = np.bitwise_and.accumulate(black[::-1, 0])[::-1]  # black at every later ply
        later_white = np.bitwise_and.accumulate(black[::-1, 1])[::-1]
        assert not (s_black & ~later_black).any()
        assert not (s_white & ~later_white).any()


# --- encoders -------------------------------------------------------------


def test_unpack_bit_order():
    boards = torch.tensor([1, 1 << 10, bb.as_int64(1 << 63)])
    planes = enc.unpack(boards)
    assert planes.shape == (3, 8, 8) and planes.dtype == torch.float32
    assert planes[0, 0, 0] == 1 and planes[1, 1, 2] == 1 and planes[2, 7, 7] == 1
    assert planes.sum() == 3
    assert torch.equal(enc.unpack(boards.reshape(3, 1)), planes.reshape(3, 1, 8, 8))


def test_raw_planes_match_reference(all_states):
    states = all_states[::5]
    batch = make_batch(states)
    for backend in ("numpy", "torch"):
        got = enc.raw_planes(batch, backend=backend)
        assert got.shape == (len(states), enc.RAW_PLANES, 8, 8) and got.dtype == torch.float32
        want = np.stack([ref_raw(b, c) for b, c, _ in states])
        assert np.array_equal(got.numpy(), want)
    assert torch.equal(enc.encode("raw", {"player": batch["player"], "opponent": batch["opponent"]}), got)


def test_handcrafted_planes_match_reference(sample):
    batch = make_batch(sample)
    want = np.stack([ref_handcrafted(b, c, h) for b, c, h in sample])
    for backend in ("numpy", "torch"):
        got = enc.handcrafted_planes(batch, backend=backend)
        assert got.shape == (len(sample), enc.HANDCRAFTED_PLANES, 8, 8) and got.dtype == torch.float32
        got = got.numpy()
        for i in range(len(sample)):
            for plane in range(enc.HANDCRAFTED_PLANES):
                assert np.array_equal(got[i, plane], want[i, plane]), (i, plane)
    # the sample exercises every group beyond its first value
    for base in (7, 15, 23, 31):
        assert want[:, base + 1 : base + 8].sum() > 0
    assert want[:, 7].sum() > 0  # a move after which the opponent must pass


def test_handcrafted_backends_agree_on_large_batches(all_states):
    """Many blocks on the numpy path (CPU) against one pass of the torch path
    (what runs on a GPU), and the per-square look-ahead invariants."""
    batch = make_batch(all_states)
    a = enc.encode("handcrafted", batch)
    b = enc.handcrafted_planes(batch, backend="torch")
    assert len(all_states) > 2 * enc._Numpy.chunk
    assert torch.equal(a, b)
    legal = a[:, 39]
    for base in (7, 15, 23, 31):
        assert torch.equal(a[:, base : base + 8].sum(1), legal)  # exactly one value per legal square
    assert torch.equal(a[:, 40], torch.ones_like(legal))
    assert ((a[:, 3:7].sum((2, 3)) <= 1)).all()


def test_encoders_on_edge_batches():
    empty = make_batch([])
    assert enc.encode("handcrafted", empty).shape == (0, 42, 8, 8)
    assert enc.encode("raw", empty).shape == (0, 3, 8, 8)
    start = make_batch([(ref.start_board(), 1, [-1] * 4)])
    for name, (fn, planes) in enc.ENCODERS.items():
        out = enc.encode(name, start)
        assert out.shape == (1, planes, 8, 8) and out.device == start["player"].device
        assert torch.equal(out, fn(start, backend="torch"))
    out = enc.encode("handcrafted", start)
    assert out[0, 39].sum() == 4 and out[0, 41].sum() == 64 and out[0, 3:7].sum() == 0


def test_an_unknown_encoder_name_is_one_error_naming_the_choices():
    with pytest.raises(ValueError, match="'Raw'.*raw, handcrafted"):
        enc.encode("Raw", {})


def test_transform_batch_keeps_the_pass_column_of_65_wide_masks_and_policies():
    """A [N, 65] legal mask or policy (the pass last) turned with the board: the 64
    squares move with their images, the pass entry stays where it is."""
    from othello.symmetry import SQUARE_MAP
    from othello_learn.models.batch import transform_batch

    states = [(ref.start_board(), 1, [-1] * 4)] * 8
    batch = make_batch(states)
    g = torch.Generator().manual_seed(0)
    batch["legal"] = torch.rand(8, 65, generator=g) < 0.5
    batch["policy"] = torch.rand(8, 65, generator=g)
    ks = torch.arange(8)
    out = transform_batch(batch, ks)
    image = torch.as_tensor(SQUARE_MAP)[ks]
    for key in ("legal", "policy"):
        assert out[key].shape == (8, 65)
        assert torch.equal(out[key][:, 64], batch[key][:, 64]), key
        assert torch.equal(torch.gather(out[key], 1, image), batch[key][:, :64]), key


def test_handcrafted_planes_turn_with_the_board(sample):
    """Planes of a turned batch (boards and history by ``transform_batch``) are the
    planes of the batch, turned: every feature, look-ahead ones included, is D4-equivariant."""
    from othello.symmetry import SQUARE_MAP
    from othello_learn.models.batch import transform_batch

    batch = make_batch(sample)
    n = len(sample)
    ks = torch.arange(n) % 8
    planes = enc.encode("handcrafted", batch).reshape(n, -1, 64)
    turned = enc.encode("handcrafted", transform_batch(batch, ks)).reshape(n, -1, 64)
    image = torch.as_tensor(SQUARE_MAP)[ks][:, None, :].expand_as(turned)
    assert torch.equal(torch.gather(turned, 2, image), planes)


def test_stable_discs_are_never_flipped_in_any_continuation(all_states):
    """Exhaustively, on positions with few empties: no continuation flips a disc that
    ``stable_discs`` calls stable (of either colour)."""

    @functools.lru_cache(maxsize=None)
    def flippable(p, o):  # squares flipped in some continuation, p to move
        moves = bb.legal_moves(p, o)
        if not moves:
            return flippable(o, p) if bb.legal_moves(o, p) else 0
        return functools.reduce(
            lambda acc, s: acc | bb.flips(p, o, 1 << s) | flippable(*bb.play(p, o, 1 << s)), bb.squares(moves), 0
        )

    late = [ref.to_bitboards(b, c) for b, c, _ in all_states if empties(b) <= 5]
    assert len(late) > 40
    for p, o in late:
        never = (p | o) & ~flippable(p, o)
        assert stable_discs(p, o) & ~never == 0 and stable_discs(o, p) & ~never == 0
