"""Input planes of the move-prediction network, computed from bitboards.

Training batches and self-play positions both arrive as compact bitboard
states (``player``, ``opponent``, ``history``, ``black_to_move``: torch
tensors, side to move first) and go through the same encoder, so the network
sees exactly the same features in both. Everything is batched: no Python loop
over positions or squares; the look-ahead features expand the legal moves
sparsely (``nonzero``) into children and grandchildren.

One source of logic, two array backends: the engine (``othello.bitboard``,
``othello.stability``) is generic over numpy and torch, so on CPU the bitboard
work runs on numpy views of the tensors (a small numpy op costs a fraction of
a torch one, and the op count dominates small batches) and the planes come
back as a tensor sharing the numpy buffer; on any other device it runs in
torch, where the tensors are.

Planes of ``handcrafted_planes`` (bit ``8 * row + col`` -> ``[row, col]``):
0 own discs, 1 opponent discs, 2 empty; 3-6 the last four moves (most recent
first, one-hot; a pass or no move gives an empty plane); then four one-hot
groups of 8 planes, set on the legal squares only, value ``v`` at plane
``base + min(v, 7)``: 7-14 the opponent's mobility after the move, 15-22 the
stable discs the move gains, 23-30 the stable discs the opponent's best reply
gains (0 without a reply), 31-38 the empty neighbours of the move's square;
39 legal moves; 40 ones; 41 ones if black is to move.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from othello import bitboard as bb
from othello.stability import stable_discs

RAW_PLANES = 3
HANDCRAFTED_PLANES = 42
GROUP_BASES = (7, 15, 23, 31)  # mobility, stable gain, reply's stable gain, frontier


def _neighbour_masks() -> list[int]:
    out = []
    for sq in range(64):
        m = 0
        for s, left, mask in bb.shifters(0):
            m |= bb.shift(1 << sq, s, left, mask)
        out.append(m & bb.FULL)
    return out


NEIGHBOURS = _neighbour_masks()


class _Numpy:
    """numpy backend: uint64 boards, viewed from CPU tensors without copying.

    Batches go through in blocks of ``chunk`` positions: the look-ahead of a
    block (some 20,000 grandchildren) stays in the CPU caches, which halves
    the time per position on large batches.
    """

    chunk = 256

    neighbours = np.array(NEIGHBOURS, dtype=np.uint64)
    squares = np.arange(64)
    bases = np.array(GROUP_BASES)[:, None]

    @staticmethod
    def boards(t: torch.Tensor) -> np.ndarray:
        return t.contiguous().numpy().view(np.uint64)

    @staticmethod
    def ints(t: torch.Tensor) -> np.ndarray:
        return t.numpy()

    @staticmethod
    def out(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
        # converted by numpy: a torch op here would wake its thread pool
        return torch.from_numpy(a.astype(np.float32, copy=False))

    if sys.byteorder == "little":

        @staticmethod
        def unpack(x: np.ndarray) -> np.ndarray:
            """(...) boards -> (..., 64) bits; unpackbits is one call."""
            return np.unpackbits(x.view(np.uint8).reshape(*x.shape, 8), axis=-1, bitorder="little")

    else:  # pragma: no cover - big-endian machines

        @staticmethod
        def unpack(x: np.ndarray) -> np.ndarray:
            return ((x[..., None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)

    stack = staticmethod(np.stack)
    concat = staticmethod(np.concatenate)

    @staticmethod
    def nonzero(x):
        return np.nonzero(x)

    @staticmethod
    def count(x):
        return bb.popcount(x).astype(np.int64)

    @staticmethod
    def cap(x, hi):
        return np.minimum(x, hi)

    @staticmethod
    def scatter_max(n, index, values):
        out = np.zeros(n, dtype=values.dtype)
        np.maximum.at(out, index, values)
        return out

    @staticmethod
    def zeros(shape, like):
        return np.zeros(shape, dtype=np.float32)

    @staticmethod
    def tables(like):
        return _Numpy


class _Torch:
    """torch backend: int64 boards (two's complement), on the tensors' device."""

    chunk = None  # a GPU wants the whole batch at once

    _cache: dict = {}

    @staticmethod
    def boards(t: torch.Tensor) -> torch.Tensor:
        return t.long()

    @staticmethod
    def ints(t: torch.Tensor) -> torch.Tensor:
        return t

    @staticmethod
    def out(a: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return a.float()

    @staticmethod
    def unpack(x: torch.Tensor) -> torch.Tensor:
        return (x[..., None] >> _Torch.tables(x).shifts) & 1

    stack = staticmethod(torch.stack)
    concat = staticmethod(torch.cat)

    @staticmethod
    def nonzero(x):
        return torch.nonzero(x, as_tuple=True)

    @staticmethod
    def count(x):
        return bb.popcount(x)

    @staticmethod
    def cap(x, hi):
        return x.clamp(max=hi)

    @staticmethod
    def scatter_max(n, index, values):
        out = values.new_zeros(n)
        return out.scatter_reduce(0, index, values, "amax", include_self=True)

    @staticmethod
    def zeros(shape, like):
        return torch.zeros(shape, dtype=torch.float32, device=like.device)

    @staticmethod
    def tables(like):
        dev = like.device
        if dev not in _Torch._cache:

            class T:
                neighbours = torch.tensor([bb.as_int64(m) for m in NEIGHBOURS], dtype=torch.int64, device=dev)
                squares = torch.arange(64, device=dev)
                shifts = squares
                bases = torch.tensor(GROUP_BASES, device=dev)[:, None]

            _Torch._cache[dev] = T
        return _Torch._cache[dev]


def _backend(t: torch.Tensor, backend: str | None):
    if backend is None:
        backend = "numpy" if t.device.type == "cpu" else "torch"
    return {"numpy": _Numpy, "torch": _Torch}[backend]


def unpack(boards: torch.Tensor) -> torch.Tensor:
    """int64 boards (...) -> float32 bits (..., 8, 8), bit ``8 * row + col`` at ``[row, col]``."""
    xp = _backend(boards, None)
    return xp.out(xp.unpack(xp.boards(boards)), boards).reshape(*boards.shape, 8, 8)


def _raw(xp, p, o):
    return xp.unpack(xp.stack([p, o, ~(p | o)], -1)).reshape(-1, RAW_PLANES, 8, 8)


def raw_planes(batch: dict, backend: str | None = None) -> torch.Tensor:
    """(N, 3, 8, 8) float32: side-to-move discs, opponent discs, empty squares."""
    xp = _backend(batch["player"], backend)
    p, o = xp.boards(batch["player"]), xp.boards(batch["opponent"])
    return xp.out(_raw(xp, p, o), batch["player"])


def _handcrafted(xp, p, o, history, black, out):
    """The whole handcrafted encoding, written once for both backends; fills
    ``out`` (N, 42, 64), zeros on entry."""
    tab = xp.tables(p)
    n = p.shape[0]
    empty = ~(p | o)
    legal = bb.legal_moves(p, o)
    root_bits = xp.unpack(xp.stack([p, o, empty, legal], -1))  # (N, 4, 64)

    # children: every legal move of every position, seen from the opponent
    rows, sqs = xp.nonzero(root_bits[:, 3])
    k = rows.shape[0]
    cp, co = bb.play(p[rows], o[rows], bb.bit(sqs))
    c_legal = bb.legal_moves(cp, co)
    mobility = xp.count(c_legal)

    # grandchildren: every reply of the opponent
    c_rows, r_sqs = xp.nonzero(xp.unpack(c_legal))
    gp, go = bb.play(cp[c_rows], co[c_rows], bb.bit(r_sqs))

    # one stability call for the three levels: mover before (root) and after
    # (child), opponent before (child) and after its reply (grandchild)
    stable = xp.count(stable_discs(xp.concat([p, co, cp, go]), xp.concat([o, cp, co, gp])))
    mover_before, mover_after = stable[:n], stable[n : n + k]
    opp_before, opp_after = stable[n + k : n + 2 * k], stable[n + 2 * k :]
    mover_gain = mover_after - mover_before[rows]
    reply_gain = xp.scatter_max(k, c_rows, opp_after - opp_before[c_rows])
    frontier = xp.count(tab.neighbours[sqs] & empty[rows])

    values = xp.cap(xp.stack([mobility, mover_gain, reply_gain, frontier]), 7)  # (4, K)
    out[:, 0:3] = root_bits[:, :3]
    out[:, 3:7] = history[..., None] == tab.squares
    out[rows[None, :], tab.bases + values, sqs[None, :]] = 1
    out[:, 39] = root_bits[:, 3]
    out[:, 40] = 1
    out[:, 41] = black[:, None]


def handcrafted_planes(batch: dict, backend: str | None = None) -> torch.Tensor:
    """(N, 42, 8, 8) float32 planes: the board, recent moves and one-step
    look-ahead features of every legal move (see the module doc for the layout).

    ``backend`` ("numpy" or "torch") overrides the choice made from the device;
    the tests use it to run the GPU code path on CPU.
    """
    t = batch["player"]
    xp = _backend(t, backend)
    p, o = xp.boards(t), xp.boards(batch["opponent"])
    history, black = xp.ints(batch["history"]), xp.ints(batch["black_to_move"])
    n = p.shape[0]
    out = xp.zeros((n, HANDCRAFTED_PLANES, 64), t)
    step = xp.chunk or max(n, 1)
    for i in range(0, n, step):
        s = slice(i, i + step)
        _handcrafted(xp, p[s], o[s], history[s], black[s], out[s])
    return xp.out(out.reshape(n, HANDCRAFTED_PLANES, 8, 8), t)


ENCODERS = {"raw": (raw_planes, RAW_PLANES), "handcrafted": (handcrafted_planes, HANDCRAFTED_PLANES)}


def encode(name: str, batch: dict) -> torch.Tensor:
    """Planes of encoder ``name`` ("raw" or "handcrafted") for a batch of states."""
    if name not in ENCODERS:
        raise ValueError(f"unknown encoder {name!r}: one of {', '.join(ENCODERS)}")
    fn, _ = ENCODERS[name]
    return fn(batch)
