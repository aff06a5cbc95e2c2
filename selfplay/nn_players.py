"""Network players for the arena: ``policy:CKPT`` (the network alone, argmax
over legal moves) and ``mcts:CKPT:SIMS`` (PUCT search with the network,
no root noise, the most-visited move). Both evaluate all the games waiting on
them in one batch."""

from __future__ import annotations

import numpy as np
import torch

from models.nets import load_network

from .mcts import BatchedMCTS, Evaluator, MCTSConfig
from .players import Player, register_player


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def to_batch(player, opponent, black_to_move, history, device) -> dict:
    n = len(player)
    hist = np.full((n, 4), -1, dtype=np.int64) if history is None else np.asarray(history, dtype=np.int64)
    return {
        "player": torch.from_numpy(np.asarray(player, dtype=np.uint64).view(np.int64)).to(device),
        "opponent": torch.from_numpy(np.asarray(opponent, dtype=np.uint64).view(np.int64)).to(device),
        "history": torch.from_numpy(hist).to(device),
        "black_to_move": torch.from_numpy(np.asarray(black_to_move, dtype=bool)).to(device),
    }


class PolicyPlayer(Player):
    uses_history = True

    def __init__(self, net, device=None):
        self.device = torch.device(device) if device else default_device()
        self.net = net.to(self.device).eval()
        self.name = "policy"

    @torch.inference_mode()
    def select(self, player, opponent, black_to_move, rng, history=None):
        logits = self.net(to_batch(player, opponent, black_to_move, history, self.device))["policy"]
        return logits.argmax(-1).cpu().numpy().astype(np.int64)


class MCTSPlayer(Player):
    uses_history = True

    def __init__(self, net, simulations: int = 100, device=None, c_puct: float = 1.5):
        self.device = torch.device(device) if device else default_device()
        self.evaluator = Evaluator(net.to(self.device), self.device)
        self.config = MCTSConfig(simulations=simulations, c_puct=c_puct, dirichlet_weight=0.0, reuse_tree=False)
        self.name = f"mcts:{simulations}"

    def select(self, player, opponent, black_to_move, rng, history=None):
        b = to_batch(player, opponent, black_to_move, history, self.device)
        n = len(player)
        tree = BatchedMCTS(self.evaluator, n, self.config)
        games = torch.arange(n, device=self.device)
        tree.set_roots(games, b["player"], b["opponent"], b["history"], b["black_to_move"])
        tree.search(games, noise=False)
        visits = tree.root_visits(games)[:, :64]
        # Ties (rare) go to the network's prior, then to a random draw.
        prior = tree.prior[games, 0, :64]
        jitter = torch.from_numpy(rng.random((n, 64))).to(self.device) * 1e-6
        return (visits + prior * 1e-3 + jitter).argmax(-1).cpu().numpy().astype(np.int64)


def _policy(args):
    if len(args) != 1:
        raise ValueError("expected policy:CHECKPOINT")
    return PolicyPlayer(load_network(args[0]))


def _mcts(args):
    if len(args) not in (1, 2):
        raise ValueError("expected mcts:CHECKPOINT[:SIMULATIONS]")
    sims = int(args[1]) if len(args) == 2 else 100
    if sims < 1:
        raise ValueError("simulations must be >= 1")
    return MCTSPlayer(load_network(args[0]), sims)


register_player("policy", _policy)
register_player("mcts", _mcts)
