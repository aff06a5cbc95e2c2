"""A search player whose priors come from one net and whose values from another
(arena ``--import experiments.hybrid_player``):

- ``hyb:PRIOR_CKPT,VALUE_CKPT:SIMS[:T]``: Gumbel search (no noise, as ``gumbel:``) with
  PRIOR_CKPT's policy as the priors and VALUE_CKPT's value head at the leaves; with T,
  the priors are softmax(logits / T) (T > 1 flattens them). One checkpoint for both
  (``hyb:A,A:100:1.4``) is a tempered ``gumbel:A:100`` at one network pass a node.

Why: self-play made the Gumbel-100 player weaker (docs/results/engines.md#grhino-ladder)
while its 1-ply policy got a little stronger. Crossing the heads of
the self-play net and its warm start says which of the two self-play changed for the
worse: the priors (the search's breadth) or the values (what it looks for)."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
from othello_learn.models.nets import load_network
from othello_learn.search.mcts import Evaluator
from othello_learn.players.network import GumbelPlayer, check_considered
from othello_learn.players.base import spec_int
from othello_learn.players.specs import register_player


class HybridEvaluator:
    """Both nets see every batch (twice the network time of one, unless they are the same); the prior of
    one, tempered, the value of the other."""

    def __init__(self, prior: Evaluator, value: Evaluator | None, temperature: float = 1.0):
        self.prior, self.value, self.device, self.t = prior, value, prior.device, temperature

    def __call__(self, player, opponent, history, black_to_move, legal=None):
        p, v = self.prior(player, opponent, history, black_to_move, legal)
        if self.value is not None:
            _, v = self.value(player, opponent, history, black_to_move, legal)
        if self.t != 1.0:  # p ** (1/T), renormalised, is softmax(logits / T); a forced pass stays one-hot
            p = p ** (1.0 / self.t)
            p = p / p.sum(-1, keepdim=True)
        return p, v


def _hyb(args):
    if len(args) not in (1, 2, 3) or len(args[0].split(",")) != 2:
        raise ValueError("expected hyb:PRIOR_CKPT,VALUE_CKPT[:SIMULATIONS[:TEMPERATURE]]")
    sims = spec_int(args[1], "simulations", 1) if len(args) >= 2 else 100
    t = float(args[2]) if len(args) == 3 else 1.0
    if not t > 0:
        raise ValueError(f"the prior temperature must be positive, got {args[2]}")
    check_considered(0, sims)
    prior_path, value_path = args[0].split(",")
    player = GumbelPlayer(load_network(prior_path), sims)
    value = None if prior_path == value_path else Evaluator(load_network(value_path).to(player.device), player.device)
    player.evaluator = HybridEvaluator(player.evaluator, value, t)
    player.name = f"hyb:{sims}:{t}"
    return player


register_player("hyb", _hyb)
