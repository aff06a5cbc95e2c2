"""Gumbel AlphaZero search (Danihelka et al., ICLR 2022, "Policy improvement
by planning with Gumbel"), batched over games on the PUCT search's trees.

Why: PUCT with few simulations does not improve the policy it starts from
(the visit counts of 16-32 simulations mostly echo the prior plus noise), and
its Dirichlet noise can make the played move worse than the prior's. Gumbel
search samples k root actions without replacement by Gumbel-top-k, splits the
simulation budget over them by sequential halving, and plays the winner: a
policy improvement guaranteed in expectation even with 2 simulations. Its
training target is the improved policy softmax(logits + sigma(completed Q)),
which uses the values of every visited action, not their visit counts.

One tree structure, two selection rules: ``GumbelMCTS`` is a
``BatchedMCTS`` whose ``_select`` is the sequential-halving rule at the root
and the paper's deterministic rule argmax(pi'(a) - N(a) / (1 + sum N)) below
it. Gumbel arithmetic runs in float64 (tensors of [games, 65]: cheap) so that
near ties resolve the same way as an independent reference.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch

from othello.states import ACTIONS

from othello_learn.search import tree as T
from othello_learn.search.mcts import BatchedMCTS, Evaluator, MCTSConfig
from othello_learn.search.output import PolicyOutput
from othello_learn.settings import Setting

TARGET_Q = ("rescaled", "absolute")  # GumbelConfig.target_q
LOW_LOGIT = -1e9  # floor of g + logits + sigma, so a zero prior still ranks among the considered


@dataclass
class GumbelConfig(MCTSConfig):
    """Gumbel search's settings (Danihelka et al. 2022), with the paper's and mctx's defaults
    (c_visit 50, c_scale 0.1): at the 16-100 simulations a CPU affords, its improved policy is a
    better training target than visit counts (docs/results/search.md#gumbel-against-puct-at-equal-simulations)."""

    # k = min(this, legal actions) root actions sampled by Gumbel-top-k; 0: auto (``considered``).
    max_considered: int = 0
    c_visit: float = 50.0  # sigma(q) = (c_visit + max_b N(b)) * c_scale * q, q rescaled to [0, 1]
    c_scale: float = 0.1
    gumbel_scale: float = 1.0  # scale of the root noise when searching with noise (self-play)
    # How the improved policy (the training target, not the search's own ranking) reads Q: "rescaled",
    # min-max over the node's legal moves and its mixed value as in the paper and mctx; "absolute",
    # (Q + 1) / 2: the values' own [-1, 1] mapped onto the [0, 1] that rescaled Q spans (mctx's
    # rescale_values=False takes Q as it is, so its sigma spreads twice as far as ours). Why: rescaled,
    # moves whose values differ by 0.01 still end ~6 logits apart at 32 simulations, and a loop that
    # trains on its own targets compounds that into an over-confident prior; absolute spreads the
    # target in proportion to the values' differences. Measured (docs/results/selfplay.md#softer-policy-targets):
    # absolute slows the sharpening without stopping it and costs the 1-ply policy; calibrating the net
    # after the run mends the search player as well. Hence the default.
    target_q: str = "rescaled"
    reuse_tree: bool = False  # sequential halving counts from an empty root: no reuse

    @property
    def search_class(self) -> type:
        return GumbelMCTS

    @property
    def label(self) -> str:
        return f"gumbel:{self.simulations}:{self.considered}"

    @property
    def considered(self) -> int:
        """k for the root: ``max_considered``, or when 0, simulations / 4 between 2
        and 16. Why: with k = 16 at 16 simulations every move gets one visit
        (a 1-ply search) and lost to PUCT 0.425; k = 4 won 0.620, k = 8 0.530
        (docs/results/search.md#gumbel-against-puct-at-equal-simulations); 16 is the paper's k at larger budgets."""
        return self.max_considered or min(16, max(2, self.simulations // 4))


def halving_schedule(k: int, simulations: int) -> tuple[list[int], list[int]]:
    """Sequential halving of ``simulations`` over ``k`` actions, as two lists
    indexed by simulation: the visit count the action visited then has
    (every remaining action is visited once per round, so a round is the
    actions still at that count), and where a phase starts, how many of the
    remaining actions it keeps (0 elsewhere). A phase gives each remaining
    action max(1, n / (ceil(log2 k) * remaining)) visits, then the best
    half is kept (never fewer than 2); phases go on until the budget is spent."""
    if k <= 1:
        return list(range(simulations)), [0] * simulations
    log2k = math.ceil(math.log2(k))
    level: list[int] = []
    keep: list[int] = []
    visits, m = 0, k
    while len(level) < simulations:
        extra = max(1, int(simulations / (log2k * m)))
        keep += [m if level else 0] + [0] * (m * extra - 1)
        for _ in range(extra):
            level += [visits] * m
            visits += 1
        m = max(2, m // 2)
    return level[:simulations], keep[:simulations]


def sample_gumbel(shape, generator=None, device=None) -> torch.Tensor:
    """Standard Gumbel noise, float64: -log(E) for E ~ Exp(1)."""
    e = torch.empty(shape, dtype=torch.float64, device=device).exponential_(generator=generator)
    return -torch.log(e.clamp_min(1e-300))


class GumbelMCTS(BatchedMCTS):
    """Gumbel search trees for ``batch`` games, searched together."""

    def __init__(self, evaluator: Evaluator, batch: int, config: GumbelConfig = GumbelConfig(), generator=None):
        if not isinstance(config, GumbelConfig):
            config = GumbelConfig(**dataclasses.asdict(config))
        Setting(str, choices=TARGET_Q).check(config.target_q, "target_q")  # a ValueError
        super().__init__(evaluator, batch, dataclasses.replace(config, reuse_tree=False), generator)
        self.gumbel = torch.zeros(batch, ACTIONS, dtype=torch.float64, device=self.device)
        self.remaining = torch.zeros(batch, ACTIONS, dtype=torch.bool, device=self.device)  # root actions still in
        self.k = config.considered
        level, keep = zip(*(halving_schedule(k, config.simulations) for k in range(self.k + 1)))
        self.level = torch.tensor(level, dtype=torch.float64, device=self.device).view(self.k + 1, -1)
        self.keep = torch.tensor(keep, dtype=torch.long, device=self.device).view(self.k + 1, -1)

    # ---------------------------------------------------------------- search
    @torch.inference_mode()
    def search(self, games: torch.Tensor, noise: bool = True, gumbel: torch.Tensor | None = None) -> None:
        """Search ``games`` from their (fresh) roots. The root Gumbel noise is
        ``gumbel`` ([n, 65]) when given, sampled when ``noise``, else zero."""
        if games.numel() == 0:
            return
        if gumbel is not None:
            self.gumbel[games] = gumbel.to(self.device, torch.float64)
        elif noise and self.cfg.gumbel_scale > 0:
            self.gumbel[games] = self.cfg.gumbel_scale * sample_gumbel((games.numel(), ACTIONS), self.gen, self.device)
        else:
            self.gumbel[games] = 0.0
        # Gumbel-top-k: the k root actions of highest g + logits, sampled without replacement.
        legal, logits, _, _ = self._stats(games, torch.full_like(games, T.ROOT))
        k = legal.sum(1).clamp(max=self.k)
        self.remaining[games] = _top(self.gumbel[games] + logits, legal, k)
        for _ in range(self.cfg.simulations):
            T.simulate(self.tree, self.ev, games, self._select)

    def _stats(self, g: torch.Tensor, node: torch.Tensor, ch: torch.Tensor | None = None, rescale: bool = True):
        """Per child of (g, node): legal mask, prior logits, visit counts and
        sigma(completed Q), from the node's side to move's view; Q min-max
        rescaled to [0, 1] over the 65 slots, every unvisited one holding the mixed value, or
        (Q + 1) / 2 without ``rescale``. sigma is finite everywhere and means something on the
        legal moves only (logits are -inf elsewhere).

        The range is mctx's: an Othello position has at most 33 legal moves, so some of the 65
        slots are always unvisited and the mixed value is in it even when every legal move has
        been visited (else two near-tied moves of a decided position, Q -0.999999 and -0.999998,
        were stretched ten logits apart). Written for few tensor operations: at every selection
        of every simulation it was half of a search's time beside the network."""
        tree = self.tree
        if ch is None:
            ch = tree.children[g, node]
        legal = tree.legal[g, node]
        n, w = T.child_stats(tree, g, ch)
        n = n.double()
        visited = n > 0
        q = w.double() / n.clamp(min=1)
        p = tree.prior[g, node].double().clamp_min(1e-30)
        logits = torch.where(legal, p.log(), -math.inf)
        # The mixed value: the network's value mixed with the prior-weighted Q of the visited
        # actions (the prior's normalisation cancels in the weighted mean).
        total = n.sum(1)
        p_visited = torch.where(visited, p, 0.0)
        mass = p_visited.sum(1)
        weighted_q = (p_visited * q).sum(1) / torch.where(total > 0, mass, 1.0)
        mixed = (tree.raw_value[g, node].double() + total * weighted_q) / (total + 1)
        completed = torch.where(visited, q, mixed[:, None])
        if rescale:
            lo, hi = completed.amin(1, keepdim=True), completed.amax(1, keepdim=True)
            completed = (completed - lo) / (hi - lo).clamp_min(1e-8)
        else:
            completed = (completed + 1) / 2
        sigma = (self.cfg.c_visit + n.amax(1, keepdim=True)) * self.cfg.c_scale * completed
        return legal, logits, n, sigma

    def _select(self, g, node, ch, depth):
        legal, logits, n, sigma = self._stats(g, node, ch)
        if depth == 0:  # sequential halving among the Gumbel-top-k
            k = legal.sum(1).clamp(max=self.k)
            i = n.sum(1).long().clamp(max=self.cfg.simulations - 1)
            score = (self.gumbel[g] + logits + sigma).clamp_min(LOW_LOGIT)
            keep = self.keep[k, i]
            halve = keep > 0
            if halve.any():  # a new phase: keep the best of the remaining actions
                h = g[halve]
                self.remaining[h] = _top(score[halve], self.remaining[h], keep[halve])
            target = self.level[k, i]
            score = score.masked_fill((n != target[:, None]) | ~self.remaining[g] | ~legal, -math.inf)
        else:
            improved = torch.softmax(logits + sigma, 1)
            score = (improved - n / (1 + n.sum(1, keepdim=True))).masked_fill(~legal, -math.inf)
        return score.argmax(1)

    # --------------------------------------------------------------- results
    def improved_policy(self, games: torch.Tensor) -> torch.Tensor:
        """[n, 65] the root's improved policy softmax(logits + sigma(completed Q)): the policy
        target, with Q read as ``target_q`` says. A finished game has no legal action (a softmax
        over nothing is NaN): its policy is all on ``PASS``, the move ``choose_action`` gives it."""
        root = torch.full_like(games, T.ROOT)
        legal, logits, n, sigma = self._stats(games, root, rescale=self.cfg.target_q == "rescaled")
        return T.pass_at_finished(self.tree, games, torch.softmax(logits + sigma, 1).float())

    @torch.inference_mode()
    def run(self, games: torch.Tensor, explore: bool, sample: torch.Tensor | None = None,
            rng: np.random.Generator | None = None) -> PolicyOutput:
        """``BatchedMCTS.run`` for Gumbel: the move is the sequential-halving winner and the target the
        improved policy. ``explore`` samples the root's Gumbel noise, which samples the move, so ``sample``
        does not apply; without it the noise is zero, or with ``rng`` a jitter (1e-9) far below any score
        gap, which breaks only exact ties, at random."""
        jitter = None
        if not explore and rng is not None:
            jitter = torch.from_numpy(rng.random((games.numel(), ACTIONS))).to(self.device) * 1e-9
        self.search(games, noise=explore, gumbel=jitter)
        visits, q = self._root_stats(games)
        return PolicyOutput(self.choose_action(games), self.improved_policy(games), self.root_value(games), visits, q)

    def chosen_action(self, games: torch.Tensor) -> torch.Tensor:
        """The sequential-halving winner: among the most visited root actions,
        the highest g + logits + sigma (with zero noise: the search's argmax)."""
        legal, logits, n, sigma = self._stats(games, torch.full_like(games, T.ROOT))
        score = (self.gumbel[games] + logits + sigma).clamp_min(LOW_LOGIT)
        most = n == n.max(1, keepdim=True).values
        return score.masked_fill(~most | ~legal, -math.inf).argmax(1)

    def choose_action(self, games: torch.Tensor, sample: torch.Tensor | None = None, generator=None,
                      tiebreak: torch.Tensor | None = None) -> torch.Tensor:
        """The move to play: the sequential-halving winner. ``sample``,
        ``generator`` and ``tiebreak`` do not apply: the root's Gumbel noise
        (``search(noise=True)`` or its ``gumbel``) already samples the move. ``PASS`` for a
        finished game."""
        return T.finished_to_pass(self.tree, games, self.chosen_action(games))


def _top(score: torch.Tensor, allowed: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Mask of the ``k`` (per row) highest-scoring allowed actions; ties to the lower index."""
    order = torch.sort(score.masked_fill(~allowed, -math.inf), dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(score.shape[1], device=score.device).expand_as(order))
    return allowed & (rank < k[:, None])
