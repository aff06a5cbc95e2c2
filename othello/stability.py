"""Stable discs: the discs that no sequence of moves can ever flip.

The definition is the usual conservative one (it misses some stable discs, it
never claims an unstable one): a disc is safe along an axis (horizontal,
vertical, a1-h8 diagonal, a8-h1 diagonal) when its line on that axis is full,
or it lies on the board's edge for that axis, or a neighbour on that axis is a
stable disc of its colour; a disc is stable when it is safe along all four
axes. Starting from the empty set, the corners come out first and stability
then spreads; the loop stops at the fixpoint.

Like ``bitboard``, the functions take a Python ``int``, a numpy ``uint64``
array or a torch ``int64`` tensor (CPU or GPU), of any shape. The four axes
are carried as an extra dimension so that one array operation serves all of
them: on small batches the number of operations, not their size, is the cost.
"""

from __future__ import annotations

import numpy as np

from .bitboard import DIRECTIONS, FULL, as_int64, is_torch, shift

# Per axis: the shift between neighbours and the masks of the two shifts
# (towards h8, towards a1), taken from the engine's directions:
# horizontal (east, west), vertical (south, north), a1-h8 (south-east,
# north-west), a8-h1 (south-west, north-east).
_PAIRS = ((0, 1), (2, 3), (4, 7), (5, 6))
SHIFTS = tuple(DIRECTIONS[a][0] for a, _ in _PAIRS)
_LEFT_MASKS = tuple(DIRECTIONS[a][2] for a, _ in _PAIRS)
_RIGHT_MASKS = tuple(DIRECTIONS[b][2] for _, b in _PAIRS)
# Squares with a neighbour off the board along the axis: the complement of
# those that receive a bit from both sides.
EDGES = tuple(
    FULL ^ (shift(FULL, s, True, ml) & shift(FULL, s, False, mr))
    for s, ml, mr in zip(SHIFTS, _LEFT_MASKS, _RIGHT_MASKS)
)


def _doubled(mask: int, s: int, left: bool, times: int) -> int:
    """Mask of ``times`` successive masked shifts by ``s`` done as one shift."""
    out = mask
    for i in range(1, times):
        out &= shift(mask, s * i, left, FULL)
    return out


# Spreading by 1, 2 and 4 steps along each axis: three doubling steps reach
# the whole of any line.
_SPREAD = tuple(
    (
        [s * k for s in SHIFTS],
        [_doubled(m, s, True, k) for s, m in zip(SHIFTS, _LEFT_MASKS)],
        [_doubled(m, s, False, k) for s, m in zip(SHIFTS, _RIGHT_MASKS)],
    )
    for k in (1, 2, 4)
)

# The axes are the leading dimension of size 4, as columns (4, 1) of these
# tables: one array operation then serves all four, over long contiguous rows.
_torch_cache: dict = {}


def _tables(like):
    """The constant tables as (4, 1) arrays that combine with ``like``."""
    if not is_torch(like):
        return _NP_TABLES
    key = like.device
    if key not in _torch_cache:
        import torch

        def t(values):
            return torch.tensor([[as_int64(v)] for v in values], dtype=torch.int64, device=key)

        _torch_cache[key] = (t(EDGES), [tuple(t(v) for v in step) for step in _SPREAD])
    return _torch_cache[key]


def _np(values):
    return np.array(values, dtype=np.uint64)[:, None]


_NP_TABLES = (_np(EDGES), [tuple(_np(v) for v in step) for step in _SPREAD])


def _full_lines_int(occupied: int) -> list[int]:
    """``_full_lines_stacked`` for one Python int, axis by axis."""
    out = []
    for a in range(4):
        x = FULL ^ occupied
        for shifts, left, right in _SPREAD:
            x |= ((x << shifts[a]) & left[a]) | ((x >> shifts[a]) & right[a])
        out.append(FULL ^ x)
    return out


def _stable_int(player: int, opponent: int) -> int:
    """``stable_discs`` for one Python int: the same steps, axis by axis, as
    plain int operations (numpy's per-call overhead would be most of the cost,
    and a search calls this at every leaf)."""
    base = [f | e for f, e in zip(_full_lines_int(player | opponent), EDGES)]
    shifts, left, right = _SPREAD[0]
    stable = 0
    while True:
        new = player
        for a in range(4):
            s = shifts[a]
            new &= base[a] | ((stable << s) & left[a]) | ((stable >> s) & right[a])
        if new == stable:
            return stable
        stable = new


def _scalar_wrapper(fn, x, *rest):
    """numpy scalars go through the array code as 0-d arrays."""
    out = fn(*(np.asarray(v, dtype=np.uint64) for v in (x, *rest)))
    return tuple(v[()] for v in out) if isinstance(out, tuple) else out[()]


def _full_lines_stacked(occupied):
    """(4, M) for M flat boards: per axis, the squares whose line is full.

    The empty squares are spread along each axis by 1, 2 and then 4 steps;
    what they do not reach is full. Comparing against a table of the 46 line
    masks takes fewer operations, but its (M, 46) temporaries made it several
    times slower on the hundreds of thousands of boards of a batch's look-ahead.
    """
    x = ~occupied[None, :]
    for shifts, left, right in _tables(occupied)[1]:
        x = x | ((x << shifts) & left) | ((x >> shifts) & right)
    return ~x


def full_lines(occupied):
    """Four boards (horizontal, vertical, a1-h8, a8-h1) of squares on full lines.

    A full line can never receive a move again, so no disc on it can be
    flipped along that axis.
    """
    if isinstance(occupied, int):
        return tuple(_full_lines_int(occupied))
    if isinstance(occupied, np.generic):
        return _scalar_wrapper(full_lines, occupied)
    f = _full_lines_stacked(occupied.reshape(-1))
    return tuple(f[a].reshape(occupied.shape) for a in range(4))


def _and4(x):
    return (x[0] & x[1]) & (x[2] & x[3])


def _nonzero(x):
    if is_torch(x):
        return x.nonzero().squeeze(-1)
    return np.flatnonzero(x)


def stable_discs(player, opponent):
    """Board of the ``player`` discs that can never be flipped (see module doc).

    Whole-batch iteration, each step a handful of array operations for all
    boards and all axes. A board that does not change in a step has reached
    its fixpoint, so each step works only on the boards that changed in the
    previous one: in a look-ahead batch most boards settle in a step or two
    while a few endgame boards take a dozen. At most 64 steps, as every step
    that continues adds a disc to some board.
    """
    if isinstance(player, int):
        return _stable_int(player, opponent)
    if isinstance(player, np.generic):
        return _scalar_wrapper(stable_discs, player, opponent)
    edges, spread = _tables(player)
    shifts, left, right = spread[0]
    shape = player.shape
    player = player.reshape(-1)
    base = _full_lines_stacked(player | opponent.reshape(-1)) | edges  # safe whatever the neighbours
    stable = player & _and4(base)  # the first step, from the empty set
    active = _nonzero(stable)  # a board with nothing stable yet is already settled
    s, p, b = stable[active], player[active], base[:, active]
    for _ in range(64):
        if active.shape[0] == 0:
            break
        x = s[None, :]
        new = p & _and4(b | ((x << shifts) & left) | ((x >> shifts) & right))
        stable[active] = new
        keep = _nonzero(new != s)
        active, s, p, b = active[keep], new[keep], p[keep], b[:, keep]
    return stable.reshape(shape)
