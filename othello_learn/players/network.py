"""Network players for the arena: ``policy:CKPT`` (the network alone, argmax
over legal moves), ``mcts:CKPT:SIMS`` (PUCT search with the network,
no root noise, the most-visited move) and ``gumbel:CKPT:SIMS`` (Gumbel
search without noise: the sequential-halving winner). All evaluate all the games waiting on
them in one batch."""

from __future__ import annotations

import sys

import numpy as np
import torch

from othello.states import HISTORY, NO_MOVE, PASS, States
from othello_learn.models.batch import from_arrays, from_states
from othello_learn.models.fastpath import default_device
from othello_learn.models.nets import load_network

from othello_learn.search.gumbel import GumbelConfig
from othello_learn.search.mcts import Evaluator, MCTSConfig, make_search
from othello_learn.search.output import PolicyOutput
from othello_learn.players.base import MAX_SIMULATIONS, Player, spec_int


def _states(batch: dict) -> States:
    """The search's game states from a model batch (``othello_learn.models.batch.from_arrays``)."""
    return States(batch["player"], batch["opponent"], batch["black_to_move"], batch["history"])


class PolicyPlayer(Player):
    def __init__(self, net, device=None):
        self.device = torch.device(device or default_device())
        self.net = net.to(self.device).eval()
        self.name = "policy"

    @torch.inference_mode()
    def select(self, states, rng, moves=None):
        logits = self.net(from_states(states, self.device))["policy"]
        return logits.argmax(-1).cpu().numpy().astype(np.int64)


class SearchPlayer(Player):
    """A search with the network, without root noise, over all the games waiting
    on it at once: PUCT plays the most-visited move (ties to the prior, then at
    random), Gumbel the sequential-halving winner."""

    def __init__(self, net, config: MCTSConfig | GumbelConfig, device=None):
        self.device = torch.device(device or default_device())
        self.evaluator = Evaluator(net.to(self.device), self.device)
        self.config = config
        self.name = config.label

    def select(self, states, rng, moves=None):
        out = self._search(states.player, states.opponent, states.black_to_move, rng, states.history)
        return out.action.cpu().numpy().astype(np.int64)

    def _search(self, player, opponent, black_to_move, rng, history=None) -> PolicyOutput:
        n = len(player)
        games = torch.arange(n, device=self.device)
        states = _states(from_arrays(player, opponent, black_to_move, history, self.device))
        search = make_search(self.evaluator, n, self.config)
        search.set_roots(games, states)
        return search.run(games, explore=False, rng=rng)  # no noise at evaluation; exact ties at random

    def analyse(self, player: int, opponent: int, black_to_move: bool, rng, history=None):
        """One position searched as ``select`` searches it: (its move, the root's visits [65] and
        each action's mean backed-up value [65], the side to move's view, NaN where unvisited).
        What an engine's hints show of the search, so that they agree with the move it plays."""
        out = self._search(np.array([player], dtype=np.uint64), np.array([opponent], dtype=np.uint64),
                           np.array([black_to_move]), rng, history)
        return int(out.action[0]), out.visits[0].cpu().numpy(), out.q[0].double().cpu().numpy()


def MCTSPlayer(net, simulations: int = 100, device=None, c_puct: float = 1.5) -> SearchPlayer:
    """``mcts:CKPT:SIMS``: PUCT without root noise and without tree reuse."""
    return SearchPlayer(net, MCTSConfig(simulations=simulations, c_puct=c_puct, dirichlet_weight=0.0,
                                        reuse_tree=False), device)


def GumbelPlayer(net, simulations: int = 100, device=None, max_considered: int = 0) -> SearchPlayer:
    """``gumbel:CKPT:SIMS[:K]``: Gumbel search with zero noise."""
    return SearchPlayer(net, GumbelConfig(simulations=simulations, max_considered=max_considered), device)


@torch.inference_mode()
def best_move(net, position, history=None):
    """The net's choice in one position, without the batch plumbing: ``(square,
    probabilities, value)``. ``probabilities`` is a float64 [64] array over the
    legal squares (all zero when the side to move must pass, and ``square`` is
    then ``PASS``); ``value`` is the value head's estimate in [-1, 1] for the
    side to move (of a forced pass: the negated estimate after it), or None for a
    policy-only net. ``history`` (the last moves, most recent first, 64 = pass) feeds
    the nets whose planes use it. A net in training
    mode is asked in eval mode (batch norm's running statistics) and left in training mode."""
    if position.is_over():
        raise ValueError("the game is over: there is no move to choose")
    hist = np.full((1, HISTORY), NO_MOVE, dtype=np.int64)
    if history is not None:
        recent = list(history)[:HISTORY]
        hist[0, : len(recent)] = recent
    legal = position.legal_moves()
    asked = States.from_positions([position], hist)
    if not legal:  # valued as the position after the pass, as the search does (tree.evaluate says why)
        asked = asked.step(np.array([PASS]))
    device = next(net.parameters()).device
    training = net.training  # a probe from inside a training loop must not switch its net to eval for good
    try:
        out = net.eval()(from_states(asked, device))
    finally:
        net.train(training)
    value = float(out["value"][0]) if "value" in out else None
    probs = np.zeros(64)
    if not legal:
        return PASS, probs, None if value is None else -value
    logits = out["policy"][0].float().cpu()
    p = torch.softmax(logits[legal], 0).double().numpy()  # over the legal squares only
    probs[legal] = p
    return int(legal[int(p.argmax())]), probs, value


def search_player(search: str, net, simulations: int, device=None, considered: int = 0,
                  c_puct: float = 1.5) -> Player:
    """The arena player of a self-play search ("puct" or "gumbel"), without noise: for gating."""
    if search == "gumbel":
        return GumbelPlayer(net, simulations, device, max_considered=considered)
    return MCTSPlayer(net, simulations, device, c_puct=c_puct)


def policy_from_args(args):
    if len(args) != 1:
        raise ValueError("expected policy:CHECKPOINT")
    return PolicyPlayer(load_network(args[0]))


def search_network(kind: str, args: list[str]):
    """The network a ``mcts:`` / ``gumbel:`` spec searches with. Without a value head the
    search values every position it reaches 0 (``Evaluator``), a draw, so only the priors
    guide it: it still plays, and a one-line notice on stderr says so (every command that
    builds players from specs, the arena and play among them, shows it once, at the start)."""
    net = load_network(args[0])
    if getattr(net, "value_head", None) is None:
        print(f"note: {kind}:{':'.join(args)}: {args[0]} has no value head, so the search values every "
              "position it reaches 0 (a draw) and only the policy's priors guide it", file=sys.stderr)
    return net


def mcts_from_args(args):
    if len(args) not in (1, 2):
        raise ValueError("expected mcts:CHECKPOINT[:SIMULATIONS]")
    sims = spec_int(args[1], "simulations", 1, MAX_SIMULATIONS) if len(args) == 2 else 100
    return MCTSPlayer(search_network("mcts", args), sims)


def check_considered(k: int, simulations: int) -> int:
    """Gumbel's K (root moves considered) for N simulations: 0 (automatic) or 2..min(N, 64).
    K = 1 leaves the search nothing to choose (it plays the policy's move, the simulations
    spent for nothing); above N, the moves past the N-th are never visited (K = N's search);
    a position has at most 64 squares to play."""
    top = min(simulations, 64)
    if k == 0 or 2 <= k <= top:
        return k
    if top < 2:
        raise ValueError(f"considered moves must be 0 (automatic) with {simulations} simulation, got {k}")
    raise ValueError(f"considered moves must be 0 (automatic) or 2..{top} (at least 2 to choose between, at most "
                     f"the {simulations} simulations{' and the 64 squares' if top == 64 else ''}), got {k}")


def gumbel_from_args(args):
    if len(args) not in (1, 2, 3):
        raise ValueError("expected gumbel:CHECKPOINT[:SIMULATIONS[:CONSIDERED]]")
    sims = spec_int(args[1], "simulations", 1, MAX_SIMULATIONS) if len(args) >= 2 else 100
    k = spec_int(args[2], "considered actions (0: automatic)", 0) if len(args) == 3 else 0  # GumbelConfig.considered
    check_considered(k, sims)  # before the network is loaded: a bad spec costs nothing
    return GumbelPlayer(search_network("gumbel", args), sims, max_considered=k)
