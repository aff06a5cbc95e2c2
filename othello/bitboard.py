"""Batched bitboard rules of Othello.

A position is a pair of 64-bit boards seen from the side to move: ``player``
(the discs of the side to move) and ``opponent``. Bit ``8 * row + col`` is the
square in row ``row`` (0 = row 1, the top) and column ``col`` (0 = file a), so
bit 0 is a1 and bit 63 is h8.

Every function here takes any of
  * Python ``int`` (one position, the convenient API),
  * ``numpy.ndarray`` of ``uint64`` (N positions at once, any shape),
  * ``torch.Tensor`` of ``int64`` (N positions, on CPU or GPU; the bit
    pattern is the same, read as two's complement),
and returns the same kind. The code only uses ``& | ^ ~ << >>`` so one source
serves all three; the masks below also clear what an arithmetic right shift of
a negative int64 drags in, and what a left shift pushes past bit 63 for ints.
"""

from __future__ import annotations

import numpy as np

FULL = (1 << 64) - 1
FILE_A = 0x0101010101010101
FILE_H = 0x8080808080808080
NOT_A = FULL ^ FILE_A
NOT_H = FULL ^ FILE_H

BLACK_START = (1 << 28) | (1 << 35)  # e4, d5
WHITE_START = (1 << 27) | (1 << 36)  # d4, e5

# (shift, is_left, mask applied after the shift) for the eight directions.
# Left shifts move towards h8 (+1 column, +1 row), right shifts towards a1.
DIRECTIONS = (
    (1, True, NOT_A),  # east
    (1, False, NOT_H & (FULL >> 1)),  # west
    (8, True, FULL),  # south (row + 1)
    (8, False, FULL >> 8),  # north
    (9, True, NOT_A),  # south-east
    (7, True, NOT_H),  # south-west
    (7, False, NOT_A & (FULL >> 7)),  # north-east
    (9, False, NOT_H & (FULL >> 9)),  # north-west
)


def as_int64(v: int) -> int:
    """The int64 a torch board holds for the 64 bits ``v`` (torch has no uint64): h8's bit is the sign."""
    return v - (1 << 64) if v >= (1 << 63) else v


def is_torch(x) -> bool:
    """Whether ``x`` is a torch tensor (the engine's functions take ints, numpy and torch alike)."""
    return type(x).__module__.startswith("torch")


def const(v: int, like):
    """``v`` as a constant that combines with ``like`` bit for bit."""
    return as_int64(v) if is_torch(like) else v


_NUMPY_DIRECTIONS = tuple((np.uint64(s), left, np.uint64(m)) for s, left, m in DIRECTIONS)


def shifters(like):
    """``DIRECTIONS`` with masks of ``like``'s kind (int64 for torch, numpy scalars for numpy,
    which spare numpy converting a Python int at every operation): what ``shift`` takes."""
    if is_torch(like):
        return [(s, left, as_int64(m)) for s, left, m in DIRECTIONS]
    if isinstance(like, (np.ndarray, np.generic)):
        if like.dtype != np.uint64:
            # int64 arrays (what a torch tensor's .numpy() gives) meet the masks as Python ints > 2**63:
            # numpy's answer is an OverflowError that does not say what is wrong
            raise TypeError(f"numpy boards must be uint64, not {like.dtype} (an int64 board's bits: .view(np.uint64))")
        return _NUMPY_DIRECTIONS
    return DIRECTIONS


def shift(x, s, left, m):
    """Every disc of ``x`` moved one step in a direction (``s``, ``left``), masked by ``m``
    so nothing wraps around an edge."""
    return ((x << s) & m) if left else ((x >> s) & m)


# legal_moves and flips are the rules' inner loop: every step, replay, search and solve goes through them.
# Per direction, a run of the opponent's discs grows from its first disc: one step, then two steps
# of two squares at a time over ``pair`` (squares whose neighbour one step back is the opponent's
# too), a Kogge-Stone fill that reaches the sixth disc in four shifts instead of six. The opponent's
# discs are masked once (``(x << s) & m & opponent`` is ``(x << s) & o``). Against the plain loop
# over ``shift``: 1.3-2.4x on ints, numpy and torch alike (benchmarks/engine.py).

def _run(start, o, s, left):
    """The discs of ``o`` (the opponent's, masked for the direction) in a run from next to
    ``start`` in direction (``s``, ``left``): the fill described above."""
    s2 = s + s
    if left:
        pair = o & (o << s)
        x = (start << s) & o
        x |= (x << s) & o
        x |= (x << s2) & pair
        return x | ((x << s2) & pair)
    pair = o & (o >> s)
    x = (start >> s) & o
    x |= (x >> s) & o
    x |= (x >> s2) & pair
    return x | ((x >> s2) & pair)


def legal_moves(player, opponent):
    """Bitboard of the squares where the side to move may play."""
    empty = ~(player | opponent)
    moves = player & 0  # zero of the right kind and shape
    for s, left, m in shifters(player):
        x = _run(player, opponent & m, s, left)
        moves |= ((x << s) if left else (x >> s)) & m & empty
    return moves & const(FULL, player)


def flips(player, opponent, move):
    """Discs flipped when the side to move plays the single-bit board ``move``.

    A move is legal iff its square is empty and this is non-zero; the
    emptiness check is the caller's (an occupied square can bracket discs).
    """
    out = player & 0
    one = isinstance(player, int)
    for s, left, m in shifters(player):
        x = _run(move, opponent & m, s, left)
        capped = ((x << s) if left else (x >> s)) & m & player
        if one:
            if capped:
                out |= x
        else:
            out |= x * (capped != 0)  # the run where a disc of the player's caps it, else nothing
    return out


def play(player, opponent, move):
    """Play the single-bit ``move``; returns the next position (roles swapped).

    The move must be legal (use ``flips`` to check). ``move == 0`` is a pass.
    """
    f = flips(player, opponent, move)
    return opponent & ~f & const(FULL, player), (player | f | move) & const(FULL, player)


def popcount(x):
    """Number of set bits, elementwise."""
    if isinstance(x, int):
        return (x & FULL).bit_count()
    if is_torch(x):
        # SWAR popcount; int64 wrap-around is what we want.
        x = x - ((x >> 1) & 0x5555555555555555)
        x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
        x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
        return ((x * 0x0101010101010101) >> 56) & 0xFF
    return np.bitwise_count(x)


def is_terminal(player, opponent):
    """True where neither side has a legal move (the game is over)."""
    return (legal_moves(player, opponent) == 0) & (legal_moves(opponent, player) == 0)


def final_disc_difference(player, opponent):
    """Disc difference from the side to move's view, empties to the winner.

    This is the FFO's convention for a finished game, which WTHOR records.
    """
    p, o = _signed_counts(player, opponent)
    diff = p - o
    empties = 64 - p - o
    if isinstance(p, int):
        return diff + empties if diff > 0 else diff - empties if diff < 0 else 0
    if is_torch(diff):
        return diff + empties * diff.sign()
    return diff + empties * np.sign(diff)


def disc_difference(player, opponent):
    """The side to move's discs less its opponent's, as they stand (int64 on arrays:
    numpy's popcount is uint8, whose difference wraps, 3 - 6 = 253)."""
    p, o = _signed_counts(player, opponent)
    return p - o


def _signed_counts(player, opponent):
    p, o = popcount(player), popcount(opponent)
    if isinstance(p, int):
        return p, o
    if isinstance(p, (np.ndarray, np.generic)):  # an array, or one of its elements
        return p.astype(np.int64), o.astype(np.int64)
    return p.long(), o.long()


def bit(square):
    """Single-bit board of ``square`` (0..63), elementwise."""
    if isinstance(square, (int, np.integer)):
        return 1 << int(square)
    if is_torch(square):
        return (square.long() * 0 + 1) << square.long()
    return np.left_shift(np.uint64(1), square.astype(np.uint64))


def bits(boards):
    """Boards ``(...)`` -> bool ``(..., 64)``, square ``s`` at index ``s``: the
    form that masks, argmaxes and planes want. numpy or torch in, the same out."""
    if is_torch(boards):
        import torch

        return ((boards.unsqueeze(-1) >> torch.arange(64, device=boards.device)) & 1).bool()
    b = np.ascontiguousarray(boards, dtype=np.uint64)
    as_bytes = b.reshape(-1).astype("<u8", copy=False).view(np.uint8).reshape(*b.shape, 8)
    return np.unpackbits(as_bytes, axis=-1, bitorder="little").astype(bool)


def squares(board: int) -> list[int]:
    """Indices of the set bits of one board, ascending."""
    out = []
    while board:
        low = board & -board
        out.append(low.bit_length() - 1)
        board ^= low
    return out

