"""Batched PUCT Monte Carlo tree search over many games at once.

The trees of B games live in tensors of shape [B, capacity, ...] (in the
spirit of DeepMind's mctx, not a Python object per node). Every simulation
descends all B trees together, expands one leaf per game, evaluates the B
leaves in ONE network call and backs the values up together; the Python
loops run over simulations and tree depth, never over games or nodes.

Actions are the 64 squares plus 64 = pass, which is the only action (prior 1)
where the side to move has no legal move; a finished game is a terminal node
that backs up its exact result (+1 win, 0 draw, -1 loss). Node values are
stored from the view of the player who moved into the node, so a parent's
Q(s, a) reads its child's mean directly and the sign alternates on the way up
(a pass is a ply, so this holds through passes too).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from othello import bitboard as bb

PASS = 64
ACTIONS = 65


@dataclass
class MCTSConfig:
    simulations: int = 100
    c_puct: float = 1.5
    dirichlet_alpha_scale: float = 10.0  # root noise alpha = scale / number of legal moves
    dirichlet_weight: float = 0.25  # 0 disables the noise (arena play)
    fpu: float = 0.0  # Q of an unvisited child, from the parent's view
    reuse_tree: bool = True


class Evaluator:
    """Wraps a network: compact states -> (prior over 65 actions, value).

    Values are from the view of the side to move, in [-1, 1]. A network
    without a value head gets value 0 (the search is then guided by priors
    alone), which keeps policy-only checkpoints usable.

    The network is most of self-play's time, so it runs on the fast numeric
    path of ``models.fastpath`` by default: bf16 autocast (plus channels_last
    on a CPU with bf16 instructions), fp32 elsewhere. Batches smaller than
    ``min_fast_batch`` stay fp32 on the CPU, where the format conversions
    cost more than bf16 saves (RESULTS.md, self-play fast path).
    """

    def __init__(self, net, device=None, autocast: bool | None = None, precision: str | None = None,
                 min_fast_batch: int = 8):
        from models import fastpath

        self.net = net.eval()
        self.device = torch.device(device) if device is not None else next(net.parameters()).device
        if precision is None:
            if autocast is None:  # CUDA: bf16 autocast, as always; CPU: bf16 only with the instructions
                precision = fastpath.BF16 if self.device.type == "cuda" else fastpath.auto_precision(self.device)
            else:
                precision = fastpath.BF16 if autocast else fastpath.FP32
        self.precision = precision
        self.min_fast_batch = min_fast_batch if self.device.type == "cpu" else 0
        fastpath.prepare(self.net, self.device, precision)
        self._autocast = lambda: fastpath.autocast(self.device, precision)
        self.calls = 0
        self.positions = 0

    @torch.inference_mode()
    def __call__(self, player, opponent, history, black_to_move, legal=None):
        """``legal``: the [n, 65] action mask when the caller has it (saves recomputing it)."""
        batch = {"player": player, "opponent": opponent, "history": history.long(), "black_to_move": black_to_move}
        if player.shape[0] >= self.min_fast_batch:
            with self._autocast():
                out = self.net(batch)
        else:
            out = self.net(batch)
        self.calls += 1
        self.positions += player.shape[0]
        prior = torch.softmax(out["policy"].float(), -1)
        must_pass = (bb.legal_moves(player, opponent) == 0) if legal is None else ~legal[:, :64].any(1)
        prior = torch.cat([prior * ~must_pass[:, None], must_pass[:, None].float()], 1)
        value = out["value"].float() if "value" in out else torch.zeros(player.shape[0], device=player.device)
        return prior, value


def _legal_actions(player, opponent):
    """[n, 65] bool: legal squares, or only the pass when there is none.
    (Finished games have no action at all.)"""
    legal = bb.legal_moves(player, opponent)
    shifts = torch.arange(64, device=player.device)
    squares = ((legal.unsqueeze(-1) >> shifts) & 1).bool()
    can_pass = (legal == 0) & (bb.legal_moves(opponent, player) != 0)
    return torch.cat([squares, can_pass[:, None]], 1)


class BatchedMCTS:
    """Search trees for ``batch`` games; a tree per game, searched together."""

    def __init__(self, evaluator: Evaluator, batch: int, config: MCTSConfig = MCTSConfig(), generator=None):
        self.ev, self.cfg, self.B = evaluator, config, batch
        self.device = evaluator.device
        self.gen = generator
        # Reuse keeps a subtree; room is left for one more full search on top.
        self.C = config.simulations * (2 if config.reuse_tree else 1) + 2
        B, C, d = batch, self.C, self.device
        z = lambda *s, dt=torch.float32: torch.zeros(*s, dtype=dt, device=d)  # noqa: E731
        self.player, self.opponent = z(B, C, dt=torch.long), z(B, C, dt=torch.long)
        self.history = torch.full((B, C, 4), -1, dtype=torch.long, device=d)
        self.black = z(B, C, dt=torch.bool)
        self.legal = z(B, C, ACTIONS, dt=torch.bool)
        self.prior = z(B, C, ACTIONS)
        self.children = torch.full((B, C, ACTIONS), -1, dtype=torch.long, device=d)
        self.parent = torch.full((B, C), -1, dtype=torch.long, device=d)
        self.visits, self.value_sum = z(B, C), z(B, C)
        self.terminal, self.terminal_value = z(B, C, dt=torch.bool), z(B, C)
        self.raw_value = z(B, C)  # the network's (or the exact) value, side to move's view
        self.size = torch.zeros(B, dtype=torch.long, device=d)  # nodes in use per tree
        self.max_depth = 0
        self.rows = torch.arange(B, device=d)

    # ----------------------------------------------------------------- roots
    def set_roots(self, games: torch.Tensor, player, opponent, history, black_to_move) -> None:
        """Start fresh trees for ``games`` (indices) at the given positions."""
        if games.numel() == 0:
            return
        g = games
        for t, v in ((self.children, -1), (self.parent, -1), (self.visits, 0), (self.value_sum, 0),
                     (self.terminal, False), (self.prior, 0), (self.legal, False)):
            t[g] = v
        self.player[g, 0], self.opponent[g, 0] = player, opponent
        self.history[g, 0], self.black[g, 0] = history.long(), black_to_move
        self.size[g] = 1
        self._expand(g, torch.zeros_like(g))

    def _expand(self, g: torch.Tensor, node: torch.Tensor) -> torch.Tensor:
        """Evaluate nodes (g, node); set their priors, legality and terminal
        status. Returns their value from the view of their side to move."""
        p, o = self.player[g, node], self.opponent[g, node]
        legal = _legal_actions(p, o)
        prior, value = self.ev(p, o, self.history[g, node], self.black[g, node], legal)
        over = ~legal.any(1)
        exact = torch.sign(bb.final_disc_difference(p, o).float())
        value = torch.where(over, exact, value)
        self.legal[g, node] = legal
        self.prior[g, node] = prior * legal
        self.terminal[g, node] = over
        self.terminal_value[g, node] = exact
        self.raw_value[g, node] = value
        return value

    def _add_noise(self, g: torch.Tensor) -> None:
        if self.cfg.dirichlet_weight <= 0 or g.numel() == 0:
            return
        legal = self.legal[g, 0]
        n = legal.sum(1, keepdim=True).clamp(min=1).float()
        alpha = (self.cfg.dirichlet_alpha_scale / n).expand_as(legal).contiguous()
        noise = torch._standard_gamma(alpha, generator=self.gen) * legal  # Dirichlet = normalised gammas
        noise = noise / noise.sum(1, keepdim=True).clamp(min=1e-12)
        w = self.cfg.dirichlet_weight
        self.prior[g, 0] = (1 - w) * self.prior[g, 0] + w * noise

    # ---------------------------------------------------------------- search
    @torch.inference_mode()
    def search(self, games: torch.Tensor, noise: bool = True) -> None:
        """Run the configured number of simulations on the trees of ``games``."""
        if games.numel() == 0:
            return
        if noise:
            self._add_noise(games)
        for _ in range(self.cfg.simulations):
            self._simulate(games)

    def _simulate(self, g: torch.Tensor) -> None:
        n = g.numel()
        node = torch.zeros(n, dtype=torch.long, device=self.device)
        action = torch.full((n,), -1, dtype=torch.long, device=self.device)
        descending = torch.ones(n, dtype=torch.bool, device=self.device)
        depth = 0
        while True:
            # Terminal nodes end the descent where they are.
            descending &= ~self.terminal[g, node]
            if not descending.any():
                break
            ch = self.children[g, node]  # [n, 65]
            a = self._select(g, node, ch, depth)
            nxt = ch.gather(1, a[:, None]).squeeze(1)
            leaf = descending & (nxt < 0)
            action = torch.where(leaf, a, action)
            descending &= ~leaf
            node = torch.where(descending, nxt, node)
            depth += 1
            if not descending.any():
                break
        self.max_depth = max(self.max_depth, depth + 1)

        # Expand the new leaves: one node per game, evaluated in one batch.
        value = torch.zeros(n, device=self.device)
        expanding = action >= 0
        e = expanding.nonzero().squeeze(1)
        if e.numel():
            ge, parent, a = g[e], node[e], action[e]
            new = self.size[ge]
            p, o = self.player[ge, parent], self.opponent[ge, parent]
            move = torch.where(a < 64, torch.ones_like(a) << a.clamp(max=63), torch.zeros_like(a))
            cp, co = bb.play(p, o, move)  # a pass (move 0) flips nothing: roles just swap
            self.player[ge, new], self.opponent[ge, new] = cp, co
            self.history[ge, new] = torch.cat([a[:, None], self.history[ge, parent, :3]], 1)
            self.black[ge, new] = ~self.black[ge, parent]
            self.parent[ge, new] = parent
            self.children[ge, parent, a] = new
            self.size[ge] += 1
            value[e] = self._expand(ge, new)
            node = node.clone()
            node[e] = new
        t = ~expanding
        if t.any():
            value[t] = self.terminal_value[g[t], node[t]]

        # Back up: the value is the leaf's side to move's; nodes store the mover's.
        val = -value
        x = node
        alive = torch.ones(n, dtype=torch.bool, device=self.device)
        while alive.any():
            gi, xi = g[alive], x[alive]
            self.visits[gi, xi] += 1
            self.value_sum[gi, xi] += val[alive]
            x = torch.where(alive, self.parent[g, x.clamp(min=0)], x)
            val = -val
            alive = alive & (x >= 0)

    def _select(self, g: torch.Tensor, node: torch.Tensor, ch: torch.Tensor, depth: int) -> torch.Tensor:
        """The action to descend at (g, node), whose children are ``ch``: PUCT.
        (Subclasses swap the rule; ``depth`` 0 is the root.)"""
        visited = ch >= 0
        ch0 = ch.clamp(min=0)
        n_child = torch.where(visited, self.visits[g[:, None], ch0], 0.0)
        q = torch.where(n_child > 0, self.value_sum[g[:, None], ch0] / n_child.clamp(min=1), self.cfg.fpu)
        n_parent = self.visits[g, node].clamp(min=1)
        score = q + self.cfg.c_puct * self.prior[g, node] * n_parent.sqrt()[:, None] / (1 + n_child)
        score = score.masked_fill(~self.legal[g, node], float("-inf"))
        return score.argmax(1)

    # --------------------------------------------------------------- results
    def root_visits(self, games: torch.Tensor) -> torch.Tensor:
        """[n, 65] visit counts of the root's children."""
        ch = self.children[games, 0]
        return torch.where(ch >= 0, self.visits[games[:, None], ch.clamp(min=0)], 0.0)

    def root_value(self, games: torch.Tensor) -> torch.Tensor:
        """Mean backed-up value of the roots, from the side to move's view."""
        return -self.value_sum[games, 0] / self.visits[games, 0].clamp(min=1)

    # ----------------------------------------------------------- tree reuse
    @torch.inference_mode()
    def advance(self, games: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Make the chosen children the new roots, keeping their subtrees.

        Returns a mask of the games that could not reuse (child never
        expanded, or too big to leave room for another search): those need
        ``set_roots``."""
        g = games
        new_root = self.children[g, 0].gather(1, actions[:, None]).squeeze(1)
        ok = new_root >= 0
        if not self.cfg.reuse_tree or not ok.any():
            return torch.ones_like(ok)
        idx = torch.arange(self.C, device=self.device)
        keep = idx[None, :] == new_root[:, None]
        par = self.parent[g]
        for _ in range(self.max_depth + 1):  # mark descendants, one level a round
            keep = keep | (keep.gather(1, par.clamp(min=0)) & (par >= 0))
        keep &= ok[:, None]
        count = keep.sum(1)
        ok &= count + self.cfg.simulations + 1 <= self.C
        keep &= ok[:, None]
        remap = torch.where(keep, keep.long().cumsum(1) - 1, -1)  # old index -> new index

        r = g[ok]
        if r.numel():
            src = keep[ok]
            order = torch.argsort((~src).long(), dim=1, stable=True)  # kept nodes first, in order
            k = remap[ok]
            for name in ("player", "opponent", "history", "black", "legal", "prior", "visits", "value_sum",
                         "terminal", "terminal_value", "raw_value"):
                t = getattr(self, name)
                t[r] = t[r[:, None], order]
            ch = self.children[r[:, None], order]
            self.children[r] = torch.where(ch >= 0, k.gather(1, ch.clamp(min=0).flatten(1)).view_as(ch), -1)
            pa = self.parent[r[:, None], order]
            self.parent[r] = torch.where(pa >= 0, k.gather(1, pa.clamp(min=0)), -1)
            self.parent[r, 0] = -1
            n_keep = count[ok]
            dead = idx[None, :] >= n_keep[:, None]  # clear the freed tail
            self.children[r] = self.children[r].masked_fill(dead[..., None], -1)
            self.visits[r] = self.visits[r].masked_fill(dead, 0)
            self.value_sum[r] = self.value_sum[r].masked_fill(dead, 0)
            self.size[r] = n_keep
        return ~ok
