"""The eight symmetries of the board (the dihedral group D4).

Symmetry ``k`` maps the square at ``(row, col)`` to:

    0 identity        (row, col)          4 flip_vertical    (7-row, col)
    1 rot90           (col, 7-row)        5 flip_horizontal  (row, 7-col)
    2 rot180          (7-row, 7-col)      6 transpose        (col, row)
    3 rot270          (7-col, row)        7 anti_transpose   (7-col, 7-row)

Only four of them map the standard start position to itself (identity,
rot180, transpose, anti_transpose: ``START_PRESERVING``); the other four swap
the colours of the centre, which matters when augmenting opening positions.

Boards are transformed with bit tricks (delta swaps), so the functions accept
the same Python int / numpy uint64 / torch int64 inputs as ``bitboard``.
"""

from __future__ import annotations

import numpy as np

from .bitboard import const, is_torch

NAMES = (
    "identity",
    "rot90",
    "rot180",
    "rot270",
    "flip_vertical",
    "flip_horizontal",
    "transpose",
    "anti_transpose",
)
START_PRESERVING = (0, 2, 6, 7)
INVERSE = (0, 3, 2, 1, 4, 5, 6, 7)


def flip_vertical(x):
    k1, k2, k4 = const(0x00FF00FF00FF00FF, x), const(0x0000FFFF0000FFFF, x), const(0xFFFFFFFF, x)
    x = ((x >> 8) & k1) | ((x & k1) << 8)
    x = ((x >> 16) & k2) | ((x & k2) << 16)
    return ((x >> 32) & k4) | ((x & k4) << 32)


def flip_horizontal(x):
    k1, k2, k4 = const(0x5555555555555555, x), const(0x3333333333333333, x), const(0x0F0F0F0F0F0F0F0F, x)
    x = ((x >> 1) & k1) | ((x & k1) << 1)
    x = ((x >> 2) & k2) | ((x & k2) << 2)
    return ((x >> 4) & k4) | ((x & k4) << 4)


def transpose(x):
    """Reflect in the a1-h8 diagonal: (row, col) -> (col, row)."""
    k1, k2, k4 = const(0x5500550055005500, x), const(0x3333000033330000, x), const(0x0F0F0F0F00000000, x)
    t = k4 & (x ^ (x << 28))
    x = x ^ t ^ (t >> 28)
    t = k2 & (x ^ (x << 14))
    x = x ^ t ^ (t >> 14)
    t = k1 & (x ^ (x << 7))
    return x ^ t ^ (t >> 7)


def transform(x, k: int):
    """Apply symmetry ``k`` (an int, the same for all boards) to boards ``x``."""
    if k == 0:
        return x
    if k == 1:
        return flip_horizontal(transpose(x))
    if k == 2:
        return flip_vertical(flip_horizontal(x))
    if k == 3:
        return flip_vertical(transpose(x))
    if k == 4:
        return flip_vertical(x)
    if k == 5:
        return flip_horizontal(x)
    if k == 6:
        return transpose(x)
    if k == 7:
        return flip_vertical(flip_horizontal(transpose(x)))
    raise ValueError(f"symmetry index must be 0..7, got {k}")


def _square_tables() -> np.ndarray:
    table = np.empty((8, 64), dtype=np.int64)
    for k in range(8):
        for sq in range(64):
            table[k, sq] = transform(1 << sq, k).bit_length() - 1
    return table


# SQUARE_MAP[k, sq] is the image of square ``sq`` under symmetry ``k``.
SQUARE_MAP = _square_tables()


def transform_square(square, k: int):
    """Image of square index(es) under symmetry ``k``; values outside 0..63
    (a pass, or "no move") are returned unchanged."""
    sq = np.asarray(square)
    inside = (sq >= 0) & (sq < 64)
    out = np.where(inside, SQUARE_MAP[k][np.clip(sq, 0, 63)], sq).astype(sq.dtype)
    return out if out.ndim else out.item()


# Each symmetry as (transpose?, flip_horizontal?, flip_vertical?), applied in
# that order: what ``transform`` does, spelled as three independent choices so
# that a batch can carry a different symmetry per element.
DECOMPOSITION = np.array(
    [(0, 0, 0), (1, 1, 0), (0, 1, 1), (1, 0, 1), (0, 0, 1), (0, 1, 0), (1, 0, 0), (1, 1, 1)], dtype=bool
)


def transform_each(x, ks):
    """Apply symmetry ``ks[i]`` to board ``x[i]`` (numpy uint64 or torch int64).

    Three whole-batch transforms and three selects, whatever the mix of ks.
    """
    if is_torch(x):
        import torch

        d = torch.as_tensor(DECOMPOSITION, device=x.device)[ks.long()]
        where = torch.where
    else:
        d = DECOMPOSITION[np.asarray(ks)]
        where = np.where
    x = where(d[:, 0], transpose(x), x)
    x = where(d[:, 1], flip_horizontal(x), x)
    return where(d[:, 2], flip_vertical(x), x)


def transform_square_each(square, ks):
    """Per-element ``transform_square``: squares ``[N, ...]`` under ``ks[N]``;
    values outside 0..63 (pass, none) are kept. numpy or torch."""
    if is_torch(square):
        import torch

        table = torch.as_tensor(SQUARE_MAP, device=square.device)
        k = ks.long().view(-1, *([1] * (square.dim() - 1))).expand_as(square)
        inside = (square >= 0) & (square < 64)
        mapped = table[k, square.long().clamp(0, 63)].to(square.dtype)
        return torch.where(inside, mapped, square)
    sq = np.asarray(square)
    k = np.asarray(ks).reshape(-1, *([1] * (sq.ndim - 1)))
    inside = (sq >= 0) & (sq < 64)
    return np.where(inside, SQUARE_MAP[k, np.clip(sq, 0, 63)], sq).astype(sq.dtype)
