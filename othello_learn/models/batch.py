"""The one model batch: a dict of tensors every network's ``forward`` takes.

    player, opponent   [N] int64 bitboards of the side to move and the other side
    history            [N, 4] int64, the last four actions (64 = pass, -1 = none)
    black_to_move      [N] bool
    legal              [N, 64] bool, optional: the legal squares when the caller
                       already has them (search does); the network computes them otherwise
    move, ply, result  [N] targets of supervised training (records)
    policy, outcome    [N, 64] / [N] targets of self-play training

Built here only, from dataset records, from ``othello.States`` or from plain
arrays, so the key names and dtypes cannot drift between training, evaluation,
search and the players.
"""

from __future__ import annotations

import numpy as np
import torch

from othello.symmetry import SQUARE_MAP, START_PRESERVING, transform_each, transform_square_each
from othello.states import HISTORY, NO_MOVE

SYMMETRY_GROUPS = {"all": tuple(range(8)), "start": START_PRESERVING, "none": (0,)}


def _tensor(a, dtype, device=None) -> torch.Tensor:
    if not isinstance(a, torch.Tensor):
        a = np.ascontiguousarray(np.asarray(a, dtype=dtype))
        a = torch.from_numpy(a.view(np.int64) if dtype == np.uint64 else a)  # boards: int64 bit patterns
    return a.to(device) if device is not None else a


def from_arrays(player, opponent, black_to_move, history=None, device=None, legal=None) -> dict[str, torch.Tensor]:
    """A batch from boards (numpy uint64/int64 or torch int64), colours and histories
    (None: no history known, all -1), moved to ``device`` (None: where they are)."""
    if isinstance(player, torch.Tensor):
        n, hist_device = player.shape[0], player.device
    else:
        n, hist_device = len(player), None
    if history is None:
        history = torch.full((n, HISTORY), NO_MOVE, dtype=torch.long, device=hist_device)
    batch = {
        "player": _tensor(player, np.uint64, device),
        "opponent": _tensor(opponent, np.uint64, device),
        "history": _tensor(history, np.int64, device).long(),
        "black_to_move": _tensor(black_to_move, np.bool_, device),
    }
    if legal is not None:
        batch["legal"] = _tensor(legal, np.bool_, device)[:, :64]
    return batch


def from_states(states, device=None, legal=None) -> dict[str, torch.Tensor]:
    """A batch from an ``othello.States`` (numpy or torch). ``legal``: the [N, 64] or
    [N, 65] (with the pass) action mask when the caller has it."""
    return from_arrays(states.player, states.opponent, states.black_to_move, states.history, device, legal)


def from_records(rec: np.ndarray) -> dict[str, torch.Tensor]:
    """``POSITION_DTYPE`` records (dataset rows) -> a batch with the supervised targets.
    Every field is copied (``astype``): ``np.ascontiguousarray`` of one record's field
    keeps the record's 28-byte stride, which torch refuses (an evaluation whose last
    batch held one position crashed)."""
    return {
        "player": torch.from_numpy(rec["player"].astype(np.uint64).view(np.int64)),
        "opponent": torch.from_numpy(rec["opponent"].astype(np.uint64).view(np.int64)),
        "history": torch.from_numpy(rec["history"].astype(np.int64)),
        "black_to_move": torch.from_numpy(rec["black_to_move"].astype(bool)),
        "move": torch.from_numpy(rec["move"].astype(np.int64)),
        "ply": torch.from_numpy(rec["ply"].astype(np.int64)),
        "result": torch.from_numpy(rec["result"].astype(np.float32)),
    }


def augment(batch: dict, group=tuple(range(8)), generator: torch.Generator | None = None,
            shard: tuple[int, int] = (0, 1)) -> dict:
    """A random symmetry from ``group`` per sample, on whatever device the batch is
    (``transform_batch``). ``shard``: (rank, world) of DDP, whose ranks draw alike (one seed):
    each draws the global batch's symmetries and takes its own share, so no two ranks turn
    their samples alike."""
    if len(group) == 1 and group[0] == 0:
        return batch
    n = batch["player"].shape[0]
    device = batch["player"].device
    rank, world = shard
    choice = torch.randint(len(group), (n * world,), device=device, generator=generator)[rank * n : (rank + 1) * n]
    return transform_batch(batch, torch.as_tensor(group, device=device)[choice])


def transform_batch(batch: dict, ks: torch.Tensor) -> dict:
    """``batch`` with sample i turned by symmetry ``ks[i]``: the boards, the history, and
    what else is per square: ``move`` (a square; kept where the sample is unchanged, see
    below), ``policy`` (a distribution over the 64 squares) and ``legal`` (a 65th, pass,
    column of either is kept as it is)."""
    device = batch["player"].device
    out = dict(batch)
    out["player"] = transform_each(batch["player"], ks)
    out["opponent"] = transform_each(batch["opponent"], ks)
    out["history"] = transform_square_each(batch["history"], ks)
    if "move" in batch:
        # A sample the symmetry leaves unchanged (above all the start position: every WTHOR
        # game is recorded from f5) keeps its recorded move. Its images would be the same
        # input with an equivalent move as the label, teaching the net to pick among them
        # at random where the records follow one convention.
        same = ((out["player"] == batch["player"]) & (out["opponent"] == batch["opponent"])
                & (out["history"] == batch["history"]).all(-1))
        out["move"] = torch.where(same, batch["move"], transform_square_each(batch["move"], ks))
    image = torch.as_tensor(SQUARE_MAP, device=device)[ks]  # [n, 64]: square -> its image
    for key in ("policy", "legal"):
        if key in batch:
            # the squares move with the board; a 65th column (the pass) stays as it is
            # (scatter_ over the whole row would leave it zero)
            squares = batch[key][:, :64]
            out[key] = torch.cat([torch.zeros_like(squares).scatter_(1, image, squares), batch[key][:, 64:]], 1)
    return out
