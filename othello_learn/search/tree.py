"""The search tree PUCT and Gumbel share, and the steps of a simulation.

Why one structure: both searches grow the same trees and differ only in how
an action is selected at a node (PUCT's upper bound, or Gumbel's sequential
halving at the root and its deterministic rule below). So the tree is plain
data (a ``Tree`` of tensors, as DeepMind's mctx keeps it) and a simulation is
three module-level functions, ``select`` -> ``expand`` -> ``backup``, taking
the selection rule as an argument. Nothing loops over games or nodes in
Python: B trees are stepped together, and the leaves of one simulation are
evaluated in one network call.

Conventions. Actions are the 64 squares then ``PASS`` (64), which is the only
legal action where the side to move has no square and the opponent has one; a
finished game is a ``terminal`` node with no legal action, which backs up its
exact result (+1 win, 0 draw, -1 loss). ``value_sum`` is from the view of the
player who moved INTO the node, so a parent reads Q(s, a) from its child
directly and the sign alternates on the way up (a pass is a ply too).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from othello import bitboard as bb
from othello.states import ACTIONS, HISTORY, NO_MOVE, PASS, States

ROOT = 0  # index of every tree's root node
NO_PARENT = -1  # parent of a root
UNEXPANDED = -1  # children[b, c, a] of an action whose child node does not exist yet
NO_ACTION = -1  # select's action for a descent that ended on a terminal node (nothing to expand)

__all__ = ["ACTIONS", "PASS", "ROOT", "NO_PARENT", "UNEXPANDED", "NO_ACTION", "Tree", "new_tree", "set_roots",
           "evaluate", "select", "expand", "backup", "simulate", "child_stats", "child_visits", "root_visits",
           "root_value", "choose", "finished_to_pass", "pass_at_finished", "reroot", "node_bytes"]


@dataclass
class Tree:
    """B trees of at most C nodes each (B games, C = capacity), node ROOT first.

    Per node, [B, C]: ``state`` (a ``States`` whose fields are [B, C] boards
    and side to move, [B, C, 4] history), ``parent`` (NO_PARENT at a root),
    ``visits`` and ``value_sum`` (the mover-into-the-node's view), ``terminal``
    and ``terminal_value`` (the exact result for the side to move), and
    ``raw_value`` (the network's value, or the exact one, for the side to move).
    Per action, [B, C, 65]: ``legal`` (``States.legal_actions``), ``prior``
    (zero off the legal actions; root noise is mixed in here) and ``children``
    (node index or UNEXPANDED). Per tree, [B]: ``size``, the nodes in use
    (nodes are appended, so the free ones are ``size..C-1``).
    ``max_depth``: the deepest descent so far, which bounds ``reroot``'s walk.
    """

    state: States
    legal: torch.Tensor
    prior: torch.Tensor
    children: torch.Tensor
    parent: torch.Tensor
    visits: torch.Tensor
    value_sum: torch.Tensor
    terminal: torch.Tensor
    terminal_value: torch.Tensor
    raw_value: torch.Tensor
    size: torch.Tensor
    max_depth: int = 0

    @property
    def capacity(self) -> int:
        return int(self.parent.shape[1])

    @property
    def device(self) -> torch.device:
        return self.parent.device


# Per-node tensors that move together when a subtree is compacted (children and parent are remapped).
_NODE_FIELDS = ("legal", "prior", "visits", "value_sum", "terminal", "terminal_value", "raw_value")


def new_tree(batch: int, capacity: int, device) -> Tree:
    """Empty trees: every node free, every action UNEXPANDED."""
    B, C = batch, capacity
    z = lambda *s, dt=torch.float32: torch.zeros(*s, dtype=dt, device=device)  # noqa: E731
    state = States(z(B, C, dt=torch.long), z(B, C, dt=torch.long), z(B, C, dt=torch.bool),
                   torch.full((B, C, HISTORY), NO_MOVE, dtype=torch.long, device=device))
    return Tree(state=state, legal=z(B, C, ACTIONS, dt=torch.bool), prior=z(B, C, ACTIONS),
                children=torch.full((B, C, ACTIONS), UNEXPANDED, dtype=torch.long, device=device),
                parent=torch.full((B, C), NO_PARENT, dtype=torch.long, device=device),
                visits=z(B, C), value_sum=z(B, C), terminal=z(B, C, dt=torch.bool), terminal_value=z(B, C),
                raw_value=z(B, C), size=torch.zeros(B, dtype=torch.long, device=device))


def node_bytes() -> int:
    """Bytes one node of ``new_tree`` takes (its board, history, 65 actions' legal mask, prior and
    child, and its scalars): a search of B games of C nodes allocates B x C times this."""
    tree = new_tree(1, 1, "cpu")
    tensors = [*vars(tree.state).values(), *vars(tree).values()]
    return sum(t.element_size() * t.numel() for t in tensors if isinstance(t, torch.Tensor))


# --------------------------------------------------------------------- building
def set_roots(tree: Tree, evaluator, games: torch.Tensor, states: States) -> None:
    """Fresh trees for ``games`` (indices), rooted at ``states`` (numpy or torch: moved to the
    tree's device, as ``States.from_positions`` gives numpy ones), evaluated."""
    if games.numel() == 0:
        return
    states = states.to(tree.device)
    g = games
    for t, v in ((tree.children, UNEXPANDED), (tree.parent, NO_PARENT), (tree.visits, 0), (tree.value_sum, 0),
                 (tree.terminal, False), (tree.prior, 0), (tree.legal, False)):
        t[g] = v
    root = torch.full_like(g, ROOT)
    tree.state.put((g, root), States(states.player, states.opponent, states.black_to_move, states.history.long()))
    tree.size[g] = 1
    evaluate(tree, evaluator, g, root)


def evaluate(tree: Tree, evaluator, g: torch.Tensor, node: torch.Tensor) -> torch.Tensor:
    """Set the legal actions, priors and terminal status of nodes (g, node):
    the legal mask is computed once here and handed to the evaluator. Returns
    the nodes' values for their side to move (exact at a finished game).

    A forced pass is valued as the negated value of the position after it: the same
    quantity, since the pass is the only move, but read where the value head was trained
    (self-play records no forced-pass positions, and the head read them off by 0.09 on
    average, of the wrong sign in 4 %)."""
    s = tree.state[g, node]
    legal = s.legal_actions()
    forced = legal[:, PASS] & ~legal[:, :PASS].any(1)
    if forced.any():
        after = s.step_where(forced, torch.full_like(g, PASS))
        prior, value = evaluator(after.player, after.opponent, after.history, after.black_to_move,
                                 torch.where(forced[:, None], after.legal_actions(), legal))
        prior, value = torch.where(forced[:, None], legal.to(prior.dtype), prior), torch.where(forced, -value, value)
    else:
        prior, value = evaluator(s.player, s.opponent, s.history, s.black_to_move, legal)
    over = ~legal.any(1)
    exact = torch.sign(bb.final_disc_difference(s.player, s.opponent).float())
    value = torch.where(over, exact, value)
    tree.legal[g, node] = legal
    tree.prior[g, node] = prior * legal
    tree.terminal[g, node] = over
    tree.terminal_value[g, node] = exact
    tree.raw_value[g, node] = value
    return value


# ------------------------------------------------------------------- simulation
def select(tree: Tree, g: torch.Tensor, rule) -> tuple[torch.Tensor, torch.Tensor]:
    """Descend the trees of ``g`` from the root by ``rule(g, node, children, depth)
    -> action`` until an UNEXPANDED action or a terminal node. Returns the
    node reached and the action to expand there (NO_ACTION at a terminal).

    Each step hands ``rule`` only the descents still going: trees grow to uneven depths
    (a 32-simulation Gumbel search reaches depth 13 in some games and stops at 0-2 in most),
    and the rule is most of a search's time beside the network."""
    n = g.numel()
    node = torch.full((n,), ROOT, dtype=torch.long, device=tree.device)
    action = torch.full((n,), NO_ACTION, dtype=torch.long, device=tree.device)
    going = torch.arange(n, device=tree.device)  # the descents still going, as positions in g
    depth = 0
    while True:
        # Index tensors, not boolean masks, pick the descents: on a GPU, two host syncs a step
        # (three where a descent reaches a finished game), as the masks' any() took before.
        gi, at = g[going], node[going]
        on = ~tree.terminal[gi, at]  # terminal nodes end the descent where they are
        if not bool(on.all()):
            keep = on.nonzero().squeeze(1)
            going, gi, at = going[keep], gi[keep], at[keep]
        if going.numel() == 0:
            break
        ch = tree.children[gi, at]  # [going, 65]
        a = rule(gi, at, ch, depth)
        nxt = ch.gather(1, a[:, None]).squeeze(1)
        leaf = nxt == UNEXPANDED
        action[going] = torch.where(leaf, a, NO_ACTION)
        keep = (~leaf).nonzero().squeeze(1)
        going, nxt = going[keep], nxt[keep]
        node[going] = nxt
        depth += 1
    tree.max_depth = max(tree.max_depth, depth + 1)
    return node, action


def expand(tree: Tree, evaluator, g: torch.Tensor, node: torch.Tensor, action: torch.Tensor):
    """Add the child of ``action`` under ``node`` (one per game, stepped by
    ``States.step``) and evaluate all of them in one call. Where ``action`` is
    NO_ACTION the node is terminal and stays. Returns the leaves and their
    values for their side to move."""
    value = torch.zeros(g.numel(), device=tree.device)
    expanding = action != NO_ACTION
    e = expanding.nonzero().squeeze(1)
    leaf = node
    if e.numel():
        ge, parent, a = g[e], node[e], action[e]
        new = tree.size[ge]
        tree.state.put((ge, new), tree.state[ge, parent].step(a, check=False))  # select only picks legal actions
        tree.parent[ge, new] = parent
        tree.children[ge, parent, a] = new
        tree.size[ge] += 1
        value[e] = evaluate(tree, evaluator, ge, new)
        leaf = node.clone()
        leaf[e] = new
    t = ~expanding
    if t.any():
        value[t] = tree.terminal_value[g[t], node[t]]
    return leaf, value


def backup(tree: Tree, g: torch.Tensor, leaf: torch.Tensor, value: torch.Tensor) -> None:
    """Add a visit and ``value`` (the leaf's side to move's view) along the path
    from each leaf to its root; each node takes the view of its mover."""
    val = -value
    x = leaf
    alive = torch.ones(g.numel(), dtype=torch.bool, device=tree.device)
    while alive.any():
        gi, xi = g[alive], x[alive]
        tree.visits[gi, xi] += 1
        tree.value_sum[gi, xi] += val[alive]
        x = torch.where(alive, tree.parent[g, x.clamp(min=0)], x)
        val = -val
        alive = alive & (x != NO_PARENT)


def simulate(tree: Tree, evaluator, g: torch.Tensor, rule) -> None:
    """One simulation in each tree of ``g``: select, expand, backup."""
    node, action = select(tree, g, rule)
    leaf, value = expand(tree, evaluator, g, node, action)
    backup(tree, g, leaf, value)


# ---------------------------------------------------------------------- summary
def child_stats(tree: Tree, g: torch.Tensor, ch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[n, 65] visit counts and value sums (the view of the node's side to move: Q = W / N) of
    the children ``ch`` (``tree.children[g, node]``) of nodes of ``g``; 0 where UNEXPANDED.
    Gathered along each game's row: every selection reads them, and pairs of [n, 65] indices
    into [B, C] were 3x slower."""
    expanded, slot = ch != UNEXPANDED, ch.clamp(min=0)
    return (torch.where(expanded, tree.visits[g].gather(1, slot), 0.0),
            torch.where(expanded, tree.value_sum[g].gather(1, slot), 0.0))


def child_visits(tree: Tree, g: torch.Tensor, node: torch.Tensor) -> torch.Tensor:
    """[n, 65] visit counts of the children of (g, node); 0 where UNEXPANDED."""
    return child_stats(tree, g, tree.children[g, node])[0]


def root_visits(tree: Tree, games: torch.Tensor) -> torch.Tensor:
    """[n, 65] visit counts of the root's children."""
    return child_visits(tree, games, torch.full_like(games, ROOT))


def root_value(tree: Tree, games: torch.Tensor) -> torch.Tensor:
    """[n] mean backed-up value of the roots, from their side to move's view."""
    return -tree.value_sum[games, ROOT] / tree.visits[games, ROOT].clamp(min=1)


def choose(visits: torch.Tensor, sample: torch.Tensor | None = None, generator=None,
           tiebreak: torch.Tensor | None = None) -> torch.Tensor:
    """The move to play from root visit counts ``visits`` [n, 65]: drawn in
    proportion to them (temperature 1) where ``sample`` [n] is true, else the
    most visited, ties to the highest ``tiebreak`` [n, 64] (exactly, however
    small its scores) and then to the lowest square; the pass where the
    search visited it, as it is then the only legal action.

    Draws are over the 64 squares only: a 64-wide draw keeps the random
    stream, so the self-play games of a seed, as they were."""
    squares = visits[:, :PASS]
    action = squares.argmax(1)
    if tiebreak is not None:
        most = squares == squares.max(1, keepdim=True).values
        action = tiebreak.masked_fill(~most, float("-inf")).argmax(1)
    if sample is not None and sample.any():
        drawn = torch.multinomial(squares.clamp(min=0) + 1e-12 * (squares.sum(1, keepdim=True) == 0), 1,
                                  generator=generator).squeeze(1)
        action = torch.where(sample, drawn, action)
    return torch.where(visits[:, PASS] > 0, PASS, action)


def finished_to_pass(tree: Tree, games: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """``action`` with ``PASS`` at the roots that are finished games: with no legal action an
    argmax over their all-zero statistics read as square 0 (a1), a move that looks real."""
    return torch.where(tree.terminal[games, ROOT], PASS, action)


def pass_at_finished(tree: Tree, games: torch.Tensor, policy: torch.Tensor) -> torch.Tensor:
    """``policy`` [n, 65] with all of its weight on ``PASS`` at the roots that are finished games, the move
    ``finished_to_pass`` gives them: their statistics are all zero (or NaN, a softmax over nothing)."""
    finished = tree.terminal[games, ROOT]
    return torch.where(finished[:, None], (torch.arange(ACTIONS, device=policy.device) == PASS).to(policy.dtype), policy)


# ------------------------------------------------------------------ tree reuse
def reroot(tree: Tree, games: torch.Tensor, actions: torch.Tensor, room: int) -> torch.Tensor:
    """Make the children of ``actions`` the new roots of ``games``, keeping their
    subtrees (compacted to the front). Returns the mask of games that could not
    keep theirs (child UNEXPANDED, or fewer than ``room`` free nodes left after
    it): those need ``set_roots``."""
    g = games
    C = tree.capacity
    new_root = tree.children[g, ROOT].gather(1, actions[:, None]).squeeze(1)
    ok = new_root != UNEXPANDED
    if not ok.any():
        return torch.ones_like(ok)
    idx = torch.arange(C, device=tree.device)
    keep = idx[None, :] == new_root[:, None]
    par = tree.parent[g]
    for _ in range(tree.max_depth + 1):  # mark descendants, one level a round
        keep = keep | (keep.gather(1, par.clamp(min=0)) & (par != NO_PARENT))
    keep &= ok[:, None]
    count = keep.sum(1)
    ok &= count + room <= C
    keep &= ok[:, None]
    remap = torch.where(keep, keep.long().cumsum(1) - 1, -1)  # old index -> new index

    r = g[ok]
    if r.numel():
        src = keep[ok]
        order = torch.argsort((~src).long(), dim=1, stable=True)  # kept nodes first, in order
        k = remap[ok]
        tree.state.put(r, tree.state[r[:, None], order])
        for name in _NODE_FIELDS:
            t = getattr(tree, name)
            t[r] = t[r[:, None], order]
        ch = tree.children[r[:, None], order]
        tree.children[r] = torch.where(ch != UNEXPANDED, k.gather(1, ch.clamp(min=0).flatten(1)).view_as(ch), UNEXPANDED)
        pa = tree.parent[r[:, None], order]
        tree.parent[r] = torch.where(pa != NO_PARENT, k.gather(1, pa.clamp(min=0)), NO_PARENT)
        tree.parent[r, ROOT] = NO_PARENT
        n_keep = count[ok]
        dead = idx[None, :] >= n_keep[:, None]  # clear the freed tail
        tree.children[r] = tree.children[r].masked_fill(dead[..., None], UNEXPANDED)
        tree.visits[r] = tree.visits[r].masked_fill(dead, 0)
        tree.value_sum[r] = tree.value_sum[r].masked_fill(dead, 0)
        tree.size[r] = n_keep
    return ~ok
