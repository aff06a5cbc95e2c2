"""Batched MCTS against a plain object-per-node PUCT search, and its edge cases."""

import math
import random

import numpy as np
import pytest
import torch

import reference_engine as ref
from othello import bitboard as bb
from selfplay.mcts import PASS, BatchedMCTS, Evaluator, MCTSConfig
from models.fastpath import BF16, FP32
from models.nets import masked


class FakeNet(torch.nn.Module):
    """Deterministic, cheap, position-dependent priors and values."""

    def __init__(self, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = torch.nn.Parameter(torch.randn(64, generator=g), requires_grad=False)
        self.v = torch.nn.Parameter(torch.randn(64, generator=g), requires_grad=False)

    def forward(self, batch):
        p, o = batch["player"], batch["opponent"]
        shifts = torch.arange(64)
        own = ((p[:, None] >> shifts) & 1).float()
        opp = ((o[:, None] >> shifts) & 1).float()
        logits = self.w + 0.3 * (own @ self.v)[:, None] * self.v - 0.1 * opp.sum(1, keepdim=True)
        legal = ((bb.legal_moves(p, o)[:, None] >> shifts) & 1).bool()
        value = torch.tanh((own.sum(1) - opp.sum(1)) / 10 + 0.1 * (own @ self.w))
        return {"policy": masked(logits, legal), "value": value}


class Node:
    def __init__(self, p, o, hist, black, ev):
        self.p, self.o, self.hist, self.black = p, o, hist, black
        self.children, self.N, self.W = {}, 0, 0.0
        t = lambda x: torch.tensor([x], dtype=torch.long)  # noqa: E731
        prior, value = ev(t(bb._signed(p)), t(bb._signed(o)), torch.tensor([hist]), torch.tensor([black]))
        self.prior = prior[0].tolist()
        legal = bb.legal_moves(p, o)
        self.legal = [bool(legal >> s & 1) for s in range(64)] + [legal == 0 and bb.legal_moves(o, p) != 0]
        self.terminal = not any(self.legal)
        d = bb.final_disc_difference(p, o)
        self.exact = float((d > 0) - (d < 0))
        self.value = self.exact if self.terminal else float(value[0])

    def child(self, a, ev):
        if a == PASS:
            p, o = self.o, self.p
        else:
            p, o = bb.play(self.p, self.o, 1 << a)
        return Node(p, o, [a] + self.hist[:3], not self.black, ev)


def reference_search(root, sims, ev, c=1.5, fpu=0.0):
    for _ in range(sims):
        node, path = root, [root]
        while True:
            if node.terminal:
                value = node.exact
                break
            best, best_a = -math.inf, None
            for a in range(65):
                if not node.legal[a]:
                    continue
                ch = node.children.get(a)
                n = ch.N if ch else 0
                q = ch.W / n if ch and n else fpu
                s = np.float32(q) + np.float32(c) * np.float32(node.prior[a]) * np.float32(math.sqrt(max(node.N, 1))) / np.float32(1 + n)
                if s > best:
                    best, best_a = s, a
            if best_a not in node.children:
                node.children[best_a] = node.child(best_a, ev)
                path.append(node.children[best_a])
                value = path[-1].value
                break
            node = node.children[best_a]
            path.append(node)
        val = -value
        for n in reversed(path):
            n.N += 1
            n.W += val
            val = -val
    return [root.children[a].N if a in root.children else 0 for a in range(65)]


def _positions(n, seed, min_ply=0, max_ply=50):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        record, _, _ = ref.random_game(rng)
        moves = [(b, c, m) for b, c, m in record if m != PASS]
        i = rng.randrange(min(min_ply, len(moves) - 1), min(max_ply, len(moves)))
        board, color, _ = moves[i]
        p, o = ref.to_bitboards(board, color)
        out.append((p, o, [-1, -1, -1, -1], color == 1))
    return out


def _tree(ev, positions, sims, reuse=False):
    cfg = MCTSConfig(simulations=sims, dirichlet_weight=0.0, reuse_tree=reuse)
    t = BatchedMCTS(ev, len(positions), cfg)
    g = torch.arange(len(positions))
    t.set_roots(g, torch.tensor([bb._signed(p) for p, *_ in positions]), torch.tensor([bb._signed(o) for _, o, *_ in positions]),
                torch.tensor([h for *_, h, _ in positions]), torch.tensor([b for *_, b in positions]))
    return t, g


@pytest.fixture(scope="module")
def ev():
    return Evaluator(FakeNet(), "cpu", precision=FP32)  # the reference evaluates one position at a time


def test_evaluator_fast_path_spares_small_batches():
    """bf16 autocast for batches of at least min_fast_batch; smaller ones stay
    exactly fp32 (a lone position is faster in fp32 on the CPU)."""
    net = FakeNet()
    exact = Evaluator(net, "cpu", precision=FP32)
    fast = Evaluator(net, "cpu", precision=BF16, min_fast_batch=8)
    positions = _positions(16, seed=8, max_ply=40)
    p = torch.tensor([bb._signed(x[0]) for x in positions])
    o = torch.tensor([bb._signed(x[1]) for x in positions])
    h, b = torch.full((16, 4), -1), torch.tensor([x[3] for x in positions])
    for n in (1, 7):
        for x, y in zip(exact(p[:n], o[:n], h[:n], b[:n]), fast(p[:n], o[:n], h[:n], b[:n])):
            assert torch.equal(x, y)
    (pe, ve), (pf, vf) = exact(p, o, h, b), fast(p, o, h, b)
    assert not torch.equal(ve, vf), "the batch of 16 ran in bf16"
    assert torch.allclose(ve, vf, atol=0.05) and torch.allclose(pe, pf, atol=0.05)
    assert Evaluator(net, "cpu", autocast=False).precision == FP32


def test_batched_search_equals_reference(ev):
    positions = _positions(6, seed=3, min_ply=5, max_ply=56)
    t, g = _tree(ev, positions, sims=60)
    t.search(g, noise=False)
    got = t.root_visits(g).long().tolist()
    for i, (p, o, h, b) in enumerate(positions):
        expected = reference_search(Node(p, o, h, b, ev), 60, ev)
        assert got[i] == expected, f"position {i}"
        assert sum(got[i]) == 60


def test_tree_reuse_continues_the_same_search(ev):
    positions = _positions(4, seed=5, min_ply=10, max_ply=40)
    t, g = _tree(ev, positions, sims=40, reuse=True)
    t.search(g, noise=False)
    visits = t.root_visits(g)
    actions = visits.argmax(1)
    fresh = t.advance(g, actions)
    assert not fresh.any()
    t.search(g, noise=False)
    got = t.root_visits(g).long().tolist()
    for i, (p, o, h, b) in enumerate(positions):
        root = Node(p, o, h, b, ev)
        reference_search(root, 40, ev)
        child = root.children[int(actions[i])]
        kept = child.N
        assert kept > 1, "the chosen child had a subtree to keep"
        assert got[i] == reference_search(child, 40, ev)  # counts include the kept subtree
        assert sum(got[i]) == kept - 1 + 40


def test_last_move_backs_up_the_exact_result(ev):
    rng = random.Random(9)
    found = []
    while len(found) < 5:
        record, board, color = ref.random_game(rng)
        for rb, rc, m in record:
            empties = sum(v == 0 for row in rb for v in row)
            if m != PASS and empties == 1:
                p, o = ref.to_bitboards(rb, rc)
                found.append((p, o, [-1] * 4, rc == 1, rc * ref.final_score(board)))
    t, g = _tree(ev, [f[:4] for f in found], sims=8)
    t.search(g, noise=False)
    for i, f in enumerate(found):
        assert float(t.root_value(g)[i]) == pytest.approx(float(np.sign(f[4])))


def test_forced_pass_and_noise(ev):
    rng = random.Random(4)
    passing = None
    while passing is None:
        record, _, _ = ref.random_game(rng)
        passing = next(((b, c) for b, c, m in record if m == PASS), None)
    p, o = ref.to_bitboards(*passing)
    t, g = _tree(ev, [(p, o, [-1] * 4, passing[1] == 1)], sims=10)
    t.search(g, noise=False)
    v = t.root_visits(g)[0]
    assert v[PASS] == 10 and v[:64].sum() == 0

    positions = _positions(8, seed=1, max_ply=30)
    cfg = MCTSConfig(simulations=1, dirichlet_weight=0.25)
    t = BatchedMCTS(ev, 8, cfg, generator=torch.Generator().manual_seed(0))
    g = torch.arange(8)
    t.set_roots(g, torch.tensor([bb._signed(x[0]) for x in positions]), torch.tensor([bb._signed(x[1]) for x in positions]),
                torch.full((8, 4), -1), torch.tensor([x[3] for x in positions]))
    before = t.prior[g, 0].clone()
    t._add_noise(g)
    after = t.prior[g, 0]
    assert torch.allclose(after.sum(1), torch.ones(8), atol=1e-5)
    assert (after[~t.legal[g, 0]] == 0).all() and not torch.allclose(before, after)
