"""Training the network on self-play samples: value MSE + policy cross-entropy
against the search's visit distribution + L2, with a random D4 symmetry per
sample applied on the device (boards, history and the policy target alike)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from data_tools.datamodule import augment

from .selfplay import SelfPlayGames


def to_device_batch(games: SelfPlayGames, idx: np.ndarray, device) -> dict:
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
    return {
        "player": t(games.player[idx].view(np.int64)),
        "opponent": t(games.opponent[idx].view(np.int64)),
        "history": t(games.history[idx].astype(np.int64)),
        "black_to_move": t(games.black_to_move[idx]),
        "policy": t(games.policy[idx].astype(np.float32)),
        "outcome": t(games.outcome[idx].astype(np.float32)),
    }


def losses(net, batch: dict, l2: float) -> dict:
    out = net(batch)
    logp = torch.log_softmax(out["policy"].float(), -1)
    policy = -(batch["policy"] * logp).sum(-1).mean()
    value = F.mse_loss(out["value"].float(), batch["outcome"])
    reg = sum((p ** 2).sum() for n, p in net.named_parameters() if p.ndim > 1)
    return {"loss": policy + value + l2 * reg, "policy_loss": policy, "value_loss": value, "l2": reg}


def train_network(net, games: SelfPlayGames, steps: int, batch_size: int = 256, lr: float = 1e-3, l2: float = 1e-4,
                  device="cpu", seed: int = 0, symmetries: bool = True, progress: bool = False) -> dict:
    """``steps`` Adam steps on uniform samples of ``games``; returns mean losses."""
    if getattr(net, "value_head", None) is None:
        raise ValueError("self-play training needs a network with a value head (arch: resnet, value_head: true)")
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
        parts = losses(net, batch, l2)
        opt.zero_grad(set_to_none=True)
        parts["loss"].backward()
        opt.step()
        for k, v in parts.items():
            totals[k] = totals.get(k, 0.0) + float(v.detach())
    net.eval()
    return {k: v / max(steps, 1) for k, v in totals.items()}
