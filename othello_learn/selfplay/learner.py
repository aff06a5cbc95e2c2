"""Training the network on self-play samples: value MSE + policy cross-entropy
against the search's visit distribution + L2, with a random D4 symmetry per
sample applied on the device (boards, history and the policy target alike).
On the fast path where the hardware has it (bf16 autocast + channels_last,
``othello_learn.models.fastpath``), as supervised training; the weights and the
optimizer stay fp32."""

from __future__ import annotations

import numpy as np
import torch

from othello_learn.models import fastpath
from othello_learn.models.batch import augment, from_arrays
from othello_learn.models.losses import l2_penalty, move_losses

from .selfplay import SelfPlayGames


def to_device_batch(games: SelfPlayGames, idx: np.ndarray, device) -> dict:
    """Samples ``idx`` of ``games`` as a model batch with the self-play targets
    (``policy``: the search's visit distribution, ``outcome``: the game's result)."""
    batch = from_arrays(games.player[idx], games.opponent[idx], games.black_to_move[idx], games.history[idx], device)
    batch["policy"] = torch.from_numpy(games.policy[idx].astype(np.float32)).to(device)
    batch["outcome"] = torch.from_numpy(games.outcome[idx].astype(np.float32)).to(device)
    return batch


def losses(net, batch: dict, l2: float) -> dict:
    """AlphaZero's loss: value and policy weighted alike, no label smoothing, and the
    L2 term written out (plain Adam, no decoupled weight decay)."""
    parts = move_losses(net(batch), batch["policy"], batch["outcome"], value_weight=1.0)
    reg = l2_penalty(net)
    return {"loss": parts["loss"] + l2 * reg, "policy_loss": parts["policy_loss"], "value_loss": parts["value_loss"],
            "l2": reg}


def train_network(net, games: SelfPlayGames, steps: int, batch_size: int = 256, lr: float = 1e-3, l2: float = 1e-4,
                  device="cpu", seed: int = 0, symmetries: bool = True, progress: bool = False,
                  precision: str = "auto") -> dict:
    """``steps`` Adam steps on uniform samples of ``games``; returns mean losses.
    ``precision``: "auto" (the fast path where supported), or a Lightning precision string."""
    if getattr(net, "value_head", None) is None:
        raise ValueError("self-play training needs a network with a value head (arch: resnet, value_head: true)")
    precision = fastpath.resolve(precision, device)
    fastpath.prepare(net, device, precision)
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    totals: dict[str, float] = {}
    from tqdm.auto import trange

    for _ in trange(steps, disable=not progress, desc="training", leave=False):
        idx = rng.integers(0, len(games.player), batch_size)
        batch = to_device_batch(games, idx, device)
        if symmetries:
            batch = augment(batch, generator=gen)
        with fastpath.autocast(device, precision):
            parts = losses(net, batch, l2)
        opt.zero_grad(set_to_none=True)
        parts["loss"].backward()
        opt.step()
        for k, v in parts.items():
            totals[k] = totals.get(k, 0.0) + float(v.detach())
    net.eval()
    return {k: v / max(steps, 1) for k, v in totals.items()}
