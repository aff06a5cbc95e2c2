"""Batched PUCT Monte Carlo tree search over many games at once.

The trees of B games live in tensors of shape [B, capacity, ...] (in the
spirit of DeepMind's mctx, not a Python object per node). Every simulation
descends all B trees together, expands one leaf per game, evaluates the B
leaves in ONE network call and backs the values up together; the Python
loops run over simulations and tree depth, never over games or nodes.

The tree itself and the select / expand / backup steps are ``othello_learn.search.tree``
(shared with the Gumbel search); this module holds the network wrapper
(``Evaluator``), PUCT's selection rule, Dirichlet root noise and tree reuse.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from othello import bitboard as bb
from othello_learn.models.batch import from_arrays
from othello.states import States

from othello_learn.search import tree as T
from othello_learn.search.output import PolicyOutput
from othello_learn.settings import Setting


@dataclass
class MCTSConfig:
    """One search's settings, shared by PUCT (this class) and Gumbel (``GumbelConfig``), so
    self-play, the arena's players and gating build their searches from one description.
    The defaults are AlphaZero's where they transfer (c_puct, noise weight); the noise's alpha
    scales with the legal moves (10 / moves, KataGo's form) since Othello's branching varies."""

    simulations: int = 100
    c_puct: float = 1.5
    dirichlet_alpha_scale: float = 10.0  # root noise alpha = scale / number of legal moves
    dirichlet_weight: float = 0.25  # 0 disables the noise (arena play)
    fpu: float = 0.0  # Q of an unvisited child, from the parent's view
    reuse_tree: bool = True

    def __post_init__(self):
        # no simulation picks no move: the search answered a1 at the start (a ValueError)
        Setting(int, low=1).check(self.simulations, "simulations")

    @property
    def search_class(self) -> type:
        """The search these settings are for (``make_search`` builds it)."""
        return BatchedMCTS

    @property
    def label(self) -> str:
        """The search as a player spec names it, for the arena's tables."""
        return f"mcts:{self.simulations}"


class Evaluator:
    """Wraps a network: compact states -> (prior over 65 actions, value).

    Values are from the view of the side to move, in [-1, 1]. A network
    without a value head gets value 0 (the search is then guided by priors
    alone), which keeps policy-only checkpoints usable.

    The network is most of self-play's time, so it runs on the fast numeric
    path of ``othello_learn.models.fastpath`` by default: bf16 autocast (plus channels_last
    on a CPU with bf16 instructions), fp32 elsewhere. Batches smaller than
    ``min_fast_batch`` stay fp32 on the CPU, where the format conversions
    cost more than bf16 saves (docs/results/speed.md#the-fast-path-in-self-play).

    ``path`` (``fastpath.INFERENCE_PATHS``; "auto" picks by the device and precision, and
    ``describe()`` says which) runs an inference-only copy of the net with its batch norms
    folded into the convolutions, taken here: the same values to fp32 rounding (tested),
    fewer operations. ``net`` stays the caller's object, put in eval mode and otherwise
    unchanged; a net trained after this evaluator was made is not what it evaluates.
    """

    def __init__(self, net, device=None, precision: str = "auto", min_fast_batch: int = 8, path: str = "auto"):
        from othello_learn.models import fastpath

        self.net = net.eval()
        self.device = torch.device(device) if device is not None else next(net.parameters()).device
        self.precision = precision = fastpath.resolve(precision, self.device)
        self.min_fast_batch = min_fast_batch if self.device.type == "cpu" else 0
        self.path = fastpath.inference_path(path, self.device, precision)
        self.infer = fastpath.inference_copy(self.net, self.path)
        self._autocast = lambda: fastpath.autocast(self.device, precision)
        self.calls = 0
        self.positions = 0

    @torch.inference_mode()
    def __call__(self, player, opponent, history, black_to_move, legal=None):
        """``legal``: the [n, 65] action mask when the caller has it (the network then uses it
        instead of recomputing it)."""
        batch = from_arrays(player, opponent, black_to_move, history, legal=legal)
        if player.shape[0] >= self.min_fast_batch:
            with self._autocast():
                out = self.infer(batch)
        else:
            out = self.infer(batch)
        self.calls += 1
        self.positions += player.shape[0]
        prior = torch.softmax(out["policy"].float(), -1)
        # No square to play, a finished game included: its pass prior of 1 is no legal pass, but
        # tree.evaluate masks every prior with the legal actions (none at a finished game), and
        # each row summing to 1 is what a caller that renormalises (a player that tempers the
        # priors) needs: an all-zero row would be 0 / 0 there.
        must_pass = (bb.legal_moves(player, opponent) == 0) if legal is None else ~legal[:, :64].any(1)
        prior = torch.cat([prior * ~must_pass[:, None], must_pass[:, None].float()], 1)
        value = out["value"].float() if "value" in out else torch.zeros(player.shape[0], device=player.device)
        return prior, value

    def describe(self) -> str:
        """How the network runs, in words: the path picked and its numbers."""
        from othello_learn.models import fastpath

        return f"{fastpath.describe(self.path, self.precision)} ({self.device.type})"  # as fastpath.auto_path


def tree_capacity(config: MCTSConfig) -> int:
    """Nodes each game's tree is given: reuse keeps a subtree, so room is left for one more full
    search on top of it."""
    return config.simulations * (2 if config.reuse_tree else 1) + 2


class BatchedMCTS:
    """PUCT search trees for ``batch`` games, searched together: a ``Tree``
    plus the PUCT selection rule, root noise and tree reuse. Subclasses swap
    the rule by overriding ``_select`` (``GumbelMCTS``)."""

    def __init__(self, evaluator: Evaluator, batch: int, config: MCTSConfig = MCTSConfig(), generator=None):
        self.ev, self.cfg, self.B = evaluator, config, batch
        self.device = evaluator.device
        self.gen = generator
        self.C = tree_capacity(config)
        self.tree = T.new_tree(batch, self.C, self.device)

    # ----------------------------------------------------------------- roots
    def set_roots(self, games: torch.Tensor, states: States) -> None:
        """Start fresh trees for ``games`` (indices) at ``states`` (``States``, one per game; numpy
        ones, from ``States.from_positions`` say, are moved to the search's device)."""
        T.set_roots(self.tree, self.ev, games, states)

    def _add_noise(self, g: torch.Tensor) -> None:
        if self.cfg.dirichlet_weight <= 0 or g.numel() == 0:
            return
        legal = self.tree.legal[g, T.ROOT]
        n = legal.sum(1, keepdim=True).clamp(min=1).float()
        alpha = (self.cfg.dirichlet_alpha_scale / n).expand_as(legal).contiguous()
        noise = torch._standard_gamma(alpha, generator=self.gen) * legal  # Dirichlet = normalised gammas
        noise = noise / noise.sum(1, keepdim=True).clamp(min=1e-12)
        w = self.cfg.dirichlet_weight
        self.tree.prior[g, T.ROOT] = (1 - w) * self.tree.prior[g, T.ROOT] + w * noise

    # ---------------------------------------------------------------- search
    @torch.inference_mode()
    def search(self, games: torch.Tensor, noise: bool = True) -> None:
        """Run the configured number of simulations on the trees of ``games``."""
        if games.numel() == 0:
            return
        if noise:
            self._add_noise(games)
        for _ in range(self.cfg.simulations):
            T.simulate(self.tree, self.ev, games, self._select)

    def _select(self, g: torch.Tensor, node: torch.Tensor, ch: torch.Tensor, depth: int) -> torch.Tensor:
        """The action to descend at (g, node), whose children are ``ch``; ``depth`` 0 is the root."""
        return puct_select(self.tree, g, node, ch, self.cfg.c_puct, self.cfg.fpu)

    @torch.inference_mode()
    def run(self, games: torch.Tensor, explore: bool, sample: torch.Tensor | None = None,
            rng: np.random.Generator | None = None) -> PolicyOutput:
        """Search ``games`` from their roots and give the move and the policy target: the one call
        self-play and the players make, whichever the search (``GumbelMCTS.run`` is Gumbel's).

        ``explore``: root noise (self-play; here Dirichlet noise, as ``dirichlet_weight`` says); without
        it the search plays its best move (a player). ``sample`` [n] bool: the games whose move is drawn
        in proportion to the root visits (temperature 1: self-play's first plies), the others play the
        most visited. ``rng`` (numpy): exact ties broken as a player breaks them, here to the highest
        prior and then at random; None: to the lowest square, as self-play's games always were."""
        self.search(games, noise=explore)
        visits, q = self._root_stats(games)
        tiebreak = None
        if rng is not None:
            jitter = torch.from_numpy(rng.random((games.numel(), T.PASS))).to(self.device) * 1e-6
            tiebreak = self.tree.prior[games, T.ROOT, :T.PASS] + jitter
        action = T.finished_to_pass(self.tree, games, T.choose(visits, sample, self.gen, tiebreak))
        weights = T.pass_at_finished(self.tree, games, visits / visits.sum(1, keepdim=True).clamp(min=1))
        return PolicyOutput(action, weights, self.root_value(games), visits, q)

    # --------------------------------------------------------------- results
    def _root_stats(self, games: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[n, 65] the root actions' visit counts and mean values (the root's side to move's view;
        NaN where unvisited)."""
        visits, value_sum = T.child_stats(self.tree, games, self.tree.children[games, T.ROOT])
        return visits, torch.where(visits > 0, value_sum / visits.clamp(min=1), torch.full_like(visits, float("nan")))

    def root_visits(self, games: torch.Tensor) -> torch.Tensor:
        """[n, 65] visit counts of the root's children."""
        return T.root_visits(self.tree, games)

    def root_value(self, games: torch.Tensor) -> torch.Tensor:
        """Mean backed-up value of the roots, from the side to move's view."""
        return T.root_value(self.tree, games)

    def choose_action(self, games: torch.Tensor, sample: torch.Tensor | None = None, generator=None,
                      tiebreak: torch.Tensor | None = None) -> torch.Tensor:
        """The move to play at the roots of ``games`` after a search (``tree.choose``
        on the root visits; draws from ``generator``, default the search's); ``PASS`` for a
        finished game, which has no move (``T.finished_to_pass``)."""
        action = T.choose(self.root_visits(games), sample, generator if generator is not None else self.gen, tiebreak)
        return T.finished_to_pass(self.tree, games, action)

    # ----------------------------------------------------------- tree reuse
    @torch.inference_mode()
    def advance(self, games: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Make the chosen children the new roots, keeping their subtrees.

        Returns a mask of the games that could not reuse (child never
        expanded, or too big to leave room for another search): those need
        ``set_roots``."""
        if not self.cfg.reuse_tree:
            return torch.ones(games.numel(), dtype=torch.bool, device=self.device)
        return T.reroot(self.tree, games, actions, room=self.cfg.simulations + 1)


def make_search(evaluator: Evaluator, batch: int, config: MCTSConfig, generator=None) -> BatchedMCTS:
    """The search ``config`` asks for: PUCT for an ``MCTSConfig``, Gumbel for a ``GumbelConfig`` (its
    ``search_class``). The one way callers build a search, so none of them names a search's class."""
    return config.search_class(evaluator, batch, config, generator)


def puct_select(tree: T.Tree, g: torch.Tensor, node: torch.Tensor, ch: torch.Tensor, c_puct: float,
                fpu: float) -> torch.Tensor:
    """PUCT: argmax over the legal actions of Q + c_puct * P * sqrt(N_parent) / (1 + N),
    an unvisited child's Q being ``fpu`` (ties to the lowest action)."""
    n_child, w = T.child_stats(tree, g, ch)
    q = torch.where(n_child > 0, w / n_child.clamp(min=1), fpu)
    n_parent = tree.visits[g, node].clamp(min=1)
    score = q + c_puct * tree.prior[g, node] * n_parent.sqrt()[:, None] / (1 + n_child)
    score = score.masked_fill(~tree.legal[g, node], float("-inf"))
    return score.argmax(1)
