"""Network players for the arena: ``policy:CKPT`` (the network alone, argmax
over legal moves), ``mcts:CKPT:SIMS`` (PUCT search with the network,
no root noise, the most-visited move) and ``gumbel:CKPT:SIMS`` (Gumbel
search without noise: the sequential-halving winner). Both evaluate all the games waiting on
them in one batch."""

from __future__ import annotations

import numpy as np
import torch

from models.nets import load_network

from .gumbel import GumbelConfig, GumbelMCTS
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


@torch.inference_mode()
def best_move(net, position, history=None):
    """The net's choice in one position, without the batch plumbing: ``(square,
    probabilities, value)``. ``probabilities`` is a float64 [64] array over the
    legal squares (all zero when the side to move must pass, and ``square`` is
    then ``PASS``); ``value`` is the value head's estimate in [-1, 1] for the
    side to move, or None for a policy-only net. ``history`` (the last moves,
    most recent first, 64 = pass) feeds the nets whose planes use it."""
    from othello.notation import PASS

    if position.is_over():
        raise ValueError("the game is over: there is no move to choose")
    hist = np.full((1, 4), -1, dtype=np.int64)
    if history is not None:
        recent = list(history)[:4]
        hist[0, : len(recent)] = recent
    device = next(net.parameters()).device
    out = net.eval()(to_batch([position.player], [position.opponent], [position.black_to_move], hist, device))
    value = float(out["value"][0]) if "value" in out else None
    legal = position.legal_moves()
    probs = np.zeros(64)
    if not legal:
        return PASS, probs, value
    logits = out["policy"][0].float().cpu()
    p = torch.softmax(logits[legal], 0).double().numpy()  # over the legal squares only
    probs[legal] = p
    return int(legal[int(p.argmax())]), probs, value


class GumbelPlayer(Player):
    uses_history = True

    def __init__(self, net, simulations: int = 100, device=None, max_considered: int = 16):
        self.device = torch.device(device) if device else default_device()
        self.evaluator = Evaluator(net.to(self.device), self.device)
        self.config = GumbelConfig(simulations=simulations, max_considered=max_considered)
        self.name = f"gumbel:{simulations}:{max_considered}"

    def select(self, player, opponent, black_to_move, rng, history=None):
        b = to_batch(player, opponent, black_to_move, history, self.device)
        n = len(player)
        tree = GumbelMCTS(self.evaluator, n, self.config)
        games = torch.arange(n, device=self.device)
        tree.set_roots(games, b["player"], b["opponent"], b["history"], b["black_to_move"])
        # No noise at evaluation; a jitter far below any score gap only breaks exact ties at random.
        jitter = torch.from_numpy(rng.random((n, 65))).to(self.device) * 1e-9
        tree.search(games, gumbel=jitter)
        return tree.chosen_action(games).cpu().numpy().astype(np.int64)


def search_player(search: str, net, simulations: int, device=None) -> Player:
    """The arena player of a self-play search ("puct" or "gumbel"), without noise: for gating."""
    return (GumbelPlayer if search == "gumbel" else MCTSPlayer)(net, simulations, device)


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


def _gumbel(args):
    if len(args) not in (1, 2, 3):
        raise ValueError("expected gumbel:CHECKPOINT[:SIMULATIONS[:CONSIDERED]]")
    sims = int(args[1]) if len(args) >= 2 else 100
    k = int(args[2]) if len(args) == 3 else 16
    if sims < 1 or k < 1:
        raise ValueError("simulations and considered actions must be >= 1")
    return GumbelPlayer(load_network(args[0]), sims, max_considered=k)


register_player("gumbel", _gumbel)
