"""Batched MCTS against a plain object-per-node PUCT search, and its edge cases."""

import importlib.util
import math
import random

import numpy as np
import pytest
import torch

import reference_engine as ref
from othello import bitboard as bb
from othello.states import States
from othello_learn.models.fastpath import BF16, FP32
from othello_learn.models.nets import masked
from othello.states import PASS
from othello_learn.search.mcts import BatchedMCTS, Evaluator, MCTSConfig


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
        prior, value = ev(t(bb.as_int64(p)), t(bb.as_int64(o)), torch.tensor([hist]), torch.tensor([black]))
        self.prior = prior[0].tolist()
        legal = bb.legal_moves(p, o)
        self.legal = [bool(legal >> s & 1) for s in range(64)] + [legal == 0 and bb.legal_moves(o, p) != 0]
        self.terminal = not any(self.legal)
        d = bb.final_disc_difference(p, o)
        self.exact = float((d > 0) - (d < 0))
        self.value = self.exact if self.terminal else float(value[0])
        if self.legal[PASS]:  # a forced pass: the value of the position after it, negated
            after = ev(t(bb.as_int64(o)), t(bb.as_int64(p)), torch.tensor([[PASS] + hist[:3]]),
                       torch.tensor([not black]))
            self.value = -float(after[1][0])

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


def _states(positions):
    """torch ``States`` of (player, opponent, history, black_to_move) tuples."""
    return States(torch.tensor([bb.as_int64(p) for p, *_ in positions]),
                  torch.tensor([bb.as_int64(o) for _, o, *_ in positions]),
                  torch.tensor([b for *_, b in positions]), torch.tensor([h for *_, h, _ in positions]))


def _tree(ev, positions, sims, reuse=False):
    cfg = MCTSConfig(simulations=sims, dirichlet_weight=0.0, reuse_tree=reuse)
    t = BatchedMCTS(ev, len(positions), cfg)
    g = torch.arange(len(positions))
    t.set_roots(g, _states(positions))
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
    p = torch.tensor([bb.as_int64(x[0]) for x in positions])
    o = torch.tensor([bb.as_int64(x[1]) for x in positions])
    h, b = torch.full((16, 4), -1), torch.tensor([x[3] for x in positions])
    for n in (1, 7):
        for x, y in zip(exact(p[:n], o[:n], h[:n], b[:n]), fast(p[:n], o[:n], h[:n], b[:n])):
            assert torch.equal(x, y)
    (pe, ve), (pf, vf) = exact(p, o, h, b), fast(p, o, h, b)
    assert not torch.equal(ve, vf), "the batch of 16 ran in bf16"
    assert torch.allclose(ve, vf, atol=0.05) and torch.allclose(pe, pf, atol=0.05)
    assert Evaluator(net, "cpu", precision="32").precision == FP32


def _trained_looking(net):
    """``net`` with batch-norm statistics and affine weights away from their fresh 0/1
    (folding fresh ones is almost the identity and would prove little)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                for t, low, high in ((m.running_mean, -1, 1), (m.running_var, 0.3, 3), (m.weight, 0.5, 1.5),
                                     (m.bias, -0.5, 0.5)):
                    t.copy_(torch.rand(t.shape, generator=g) * (high - low) + low)
    return net


def _arrays(positions):
    p = torch.tensor([bb.as_int64(x[0]) for x in positions])
    o = torch.tensor([bb.as_int64(x[1]) for x in positions])
    return p, o, torch.full((len(positions), 4), -1), torch.tensor([x[3] for x in positions])


def test_fold_batchnorm_is_an_inference_copy():
    """The folded copy has no batch norm left in a residual net, is in eval mode without
    gradients, and leaves the original's weights, statistics and mode as they were."""
    from othello_learn.models.fastpath import fold_batchnorm
    from othello_learn.models.nets import NetConfig, build_network

    torch.manual_seed(0)
    net = _trained_looking(build_network(NetConfig("resnet", blocks=2, width=8, value_head=True))).train()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    folded = fold_batchnorm(net)
    assert net.training and all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    assert not folded.training and not any(q.requires_grad for q in folded.parameters())


@pytest.mark.parametrize("arch,encoder,value_head", [("resnet", "raw", True), ("resnet", "handcrafted", True),
                                                     ("resnet", "raw", False), ("reference", "handcrafted", False)])
@pytest.mark.parametrize("path", ["folded", "channels_last"])
def test_inference_paths_play_as_the_plain_network(arch, encoder, value_head, path):
    """Every fp32 inference path against the plain network on 48 positions of random games:
    the same move (argmax over the legal squares), values within 1e-4, and move logits within
    1e-4 (absolute and relative). Folding rounds each weight once in fp32 (relative 6e-8) and
    channels_last sums in another order; over a few layers of 9*width-term sums that stays near
    1e-6 at logits of order 1 (measured: under 5e-7), so 1e-4 is a wide margin that still catches
    a wrongly folded layer (whose errors are of the order of the weights)."""
    from othello_learn.models.batch import from_arrays
    from othello_learn.models.nets import NetConfig, build_network

    torch.manual_seed(0)
    net = _trained_looking(build_network(NetConfig(arch, encoder=encoder, blocks=2, depth=3, width=16,
                                                   value_head=value_head)))
    plain = Evaluator(net, "cpu", precision=FP32, path="plain")
    fast = Evaluator(net, "cpu", precision=FP32, path=path)
    assert plain.infer is net and fast.path == path
    p, o, h, b = _arrays(_positions(48, seed=11, max_ply=55))
    with torch.inference_mode():
        want, got = net(from_arrays(p, o, b, h)), fast.infer(from_arrays(p, o, b, h))
    torch.testing.assert_close(got["policy"], want["policy"], atol=1e-4, rtol=1e-4)
    (prior_want, value_want), (prior_got, value_got) = plain(p, o, h, b), fast(p, o, h, b)
    legal = bb.bits(bb.legal_moves(p, o)).bool()
    assert legal.any(1).all()
    assert torch.equal(prior_got[:, :64].masked_fill(~legal, -1).argmax(1),
                       prior_want[:, :64].masked_fill(~legal, -1).argmax(1))
    assert (value_got - value_want).abs().max() <= 1e-4
    assert value_head == ("value" in want) and (value_head or not value_got.any())


def test_inference_path_is_picked_by_detection(monkeypatch):
    """"auto": a CPU with native bf16 runs bf16, one without it fp32, both folded in channels_last
    (never assumed: the detection is asked); the evaluator says which in words."""
    from othello_learn.models import fastpath
    from othello_learn.models.nets import NetConfig, build_network

    net = build_network(NetConfig("resnet", blocks=1, width=8, value_head=True))
    for has, path, precision in ((True, "channels_last", BF16), (False, "channels_last", FP32)):
        monkeypatch.setattr(fastpath, "cpu_has_bf16", lambda has=has: has)
        ev = Evaluator(net, "cpu")
        assert (ev.path, ev.precision) == (path, precision)
        said = {True: "bf16 autocast, batch norms folded, channels_last (cpu)",
                False: "fp32, batch norms folded, channels_last (cpu)"}[has]
        assert ev.describe() == said == fastpath.auto_path("cpu")
    assert fastpath.inference_path("auto", "cuda", BF16) == "folded"
    assert next(net.parameters()).is_contiguous()  # the caller's net is not converted to channels_last
    with pytest.raises(ValueError, match="inference path 'fast': expected auto or one of plain, folded"):
        Evaluator(net, "cpu", path="fast")


@pytest.mark.skipif(not __import__("os").environ.get("OTHELLO_TEST_COMPILE") or
                    __import__("shutil").which("g++") is None,
                    reason="torch.compile takes a minute and a C++ compiler: set OTHELLO_TEST_COMPILE=1")
def test_compiled_path_plays_as_the_plain_network():
    from othello_learn.models.nets import NetConfig, build_network

    torch.manual_seed(0)
    net = _trained_looking(build_network(NetConfig("resnet", blocks=1, width=8, value_head=True)))
    plain, compiled = Evaluator(net, "cpu", precision=FP32, path="plain"), Evaluator(net, "cpu", precision=FP32,
                                                                                     path="compiled")
    for n in (20, 33):  # two batch sizes, one compilation (dynamic shapes)
        p, o, h, b = _arrays(_positions(n, seed=n))
        (pw, vw), (pg, vg) = plain(p, o, h, b), compiled(p, o, h, b)
        torch.testing.assert_close(pg, pw, atol=1e-5, rtol=1e-4)
        assert (vg - vw).abs().max() <= 1e-4


def test_one_precision_setting_for_every_caller(monkeypatch):
    """Evaluator, the self-play learner, training and evaluate.py read precision through
    fastpath.resolve: "auto" follows the CPU's bf16 instructions, the shorthands expand."""
    from othello_learn.models import fastpath

    for has, auto in ((True, BF16), (False, FP32)):
        monkeypatch.setattr(fastpath, "cpu_has_bf16", lambda has=has: has)
        assert fastpath.resolve("auto", "cpu") == fastpath.resolve(None, "cpu") == auto
    assert fastpath.resolve("32", "cpu") == FP32 and fastpath.resolve("bf16", "cuda") == BF16
    assert fastpath.resolve("16-mixed", "cuda") == "16-mixed"
    with pytest.raises(ValueError, match="precision 'fp16': expected auto, 32, bf16 or one of 32-true"):
        fastpath.resolve("fp16", "cpu")  # it ran as fp32 without a word
    assert fastpath.resolve("64", "cpu") == "64-true" and fastpath.resolve("bf16-true", "cpu") == "bf16-true"
    with pytest.raises(ValueError, match="precision '16-true': fp16 weights diverge at once"):
        fastpath.resolve("16-true", "cpu")  # NaN weights after three steps, found only by the checkpoint's load
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="needs NVIDIA's transformer_engine package, which is not installed"):
        fastpath.resolve("transformer-engine", "cuda")  # a ModuleNotFoundError traceback from Lightning
    # accelerator names as Lightning reads them, in any case; one torch does not know is left to
    # the caller's check (it reached torch.device: a traceback for "GPU" or "tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert fastpath.resolve("auto", "GPU") == fastpath.resolve("auto", "Cuda") == BF16
    assert fastpath.resolve("auto", "tpu") == fastpath.resolve("auto", "bogus") == FP32
    # a Mac: Lightning's "auto" and "gpu" train on MPS, which gets fp32, not the CPU's bf16
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(fastpath, "cpu_has_bf16", lambda: True)
    assert fastpath.resolve("auto", "auto") == fastpath.resolve("auto", "gpu") == FP32
    assert fastpath.resolve("auto", "cpu") == BF16


def test_default_device_is_the_gpu_where_torch_sees_one(monkeypatch):
    from othello_learn.models.fastpath import default_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device() == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_device() == "cpu"


def test_a_search_of_no_simulations_is_refused():
    from othello_learn.search.gumbel import GumbelConfig

    for config in (MCTSConfig, GumbelConfig):
        with pytest.raises(ValueError, match="^simulations: must be at least 1, got 0"):
            config(simulations=0)


def test_batched_search_equals_reference(ev):
    positions = _positions(6, seed=3, min_ply=5, max_ply=56)
    t, g = _tree(ev, positions, sims=60)
    t.search(g, noise=False)
    got = t.root_visits(g).long().tolist()
    for i, (p, o, h, b) in enumerate(positions):
        expected = reference_search(Node(p, o, h, b, ev), 60, ev)
        assert got[i] == expected, f"position {i}"
        assert sum(got[i]) == 60


def test_roots_from_numpy_states_search_as_torch_ones(ev):
    """``States.from_positions`` gives numpy states: a search takes them as it takes torch ones."""
    positions = _positions(3, seed=4, min_ply=5, max_ply=40)
    t, g = _tree(ev, positions, sims=20)
    t.search(g, noise=False)
    u = BatchedMCTS(ev, 3, t.cfg)
    u.set_roots(g, _states(positions).numpy())
    u.search(g, noise=False)
    assert torch.equal(u.root_visits(g), t.root_visits(g))


def test_a_finished_game_at_the_root_gets_the_pass_not_a_square(ev):
    """A finished game has no move: its all-zero statistics must not read as a1 (square 0)."""
    from othello_learn.search.gumbel import GumbelConfig, GumbelMCTS

    live = _positions(1, seed=6, min_ply=5, max_ply=30)[0]
    over = (0, bb.BLACK_START | bb.WHITE_START, [-1, -1, -1, -1], True)  # the side to move has no disc
    g = torch.arange(2)
    for search in (BatchedMCTS(ev, 2, MCTSConfig(simulations=8, dirichlet_weight=0.0)),
                   GumbelMCTS(ev, 2, GumbelConfig(simulations=8))):
        search.set_roots(g, _states([live, over]))
        search.search(g, noise=False)
        action = search.choose_action(g)
        assert action[1] == PASS
        assert action[0] != PASS and bb.legal_moves(live[0], live[1]) >> int(action[0]) & 1
        if isinstance(search, GumbelMCTS):  # its policy target there: the pass, not a softmax over nothing (NaN)
            policy = search.improved_policy(g)
            assert torch.isfinite(policy).all() and policy[1].tolist() == [0.0] * 64 + [1.0]
            assert policy[0, PASS] == 0 and float(policy[0].sum()) == pytest.approx(1.0)


def test_a_forced_pass_is_valued_as_the_position_after_it(ev):
    """The value head never trains on forced-pass positions (self-play records none): the
    search reads the position after the pass, where it does, and negates."""
    rng, found = random.Random(3), []
    while len(found) < 2:
        record, _, _ = ref.random_game(rng)
        for board, colour, m in record:
            if m == PASS and ref.legal(board, -colour):
                p, o = ref.to_bitboards(board, colour)
                found.append((p, o, [-1, -1, -1, -1], colour == 1))
                break
    t, g = _tree(ev, found, sims=1)
    t_ = lambda x: torch.tensor([bb.as_int64(x)])  # noqa: E731
    for i, (p, o, hist, black) in enumerate(found):
        _, after = ev(t_(o), t_(p), torch.tensor([[PASS] + hist[:3]]), torch.tensor([not black]))
        assert t.tree.raw_value[i, 0] == pytest.approx(-float(after[0]))
        assert t.tree.prior[i, 0].tolist() == [0.0] * 64 + [1.0]


def test_select_hands_the_rule_only_the_descents_still_going(ev):
    """A step of the batched descent passes the rule each game whose descent goes on, at the
    node of that depth, and no other (descents that ended at an unexpanded action or a
    finished game were handed on to the last step: the rule is most of a search's time beside
    the network); where each descent ends is that of a plain one-game descent."""
    from othello_learn.search import tree as T

    over = (0, bb.BLACK_START | bb.WHITE_START, [-1, -1, -1, -1], True)  # a finished game
    positions = _positions(6, seed=8, min_ply=5, max_ply=40) + _positions(6, seed=9, min_ply=54, max_ply=59) + [over]
    t, g = _tree(ev, positions, sims=24)
    t.search(g, noise=False)
    tree, steps = t.tree, []

    def rule(gi, node, ch, depth):
        steps.append((depth, gi.tolist(), node.tolist()))
        return t._select(gi, node, ch, depth)

    node, action = T.select(tree, g, rule)
    one = lambda b, x, d: int(t._select(torch.tensor([b]), torch.tensor([x]), tree.children[[b], [x]], d))  # noqa: E731
    paths = {}
    for b in range(len(positions)):  # the plain descent, one game at a time
        x, d, path = T.ROOT, 0, []
        while not tree.terminal[b, x]:
            path.append(x)
            a = one(b, x, d)
            if tree.children[b, x, a] == T.UNEXPANDED:
                break
            x, d = int(tree.children[b, x, a]), d + 1
        paths[b] = path
        assert (int(node[b]), int(action[b])) == (x, a if path and not tree.terminal[b, x] else T.NO_ACTION)
    for depth, (d, games, nodes) in enumerate(steps):
        assert d == depth
        assert sorted(zip(games, nodes)) == sorted((b, p[depth]) for b, p in paths.items() if len(p) > depth)
    assert max(len(p) for p in paths.values()) == len(steps) > 3 and paths[len(positions) - 1] == []
    assert any(tree.terminal[b, int(node[b])] for b in range(len(positions) - 1))  # a descent ended at a game's end


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
    t.set_roots(g, _states([(p, o, [-1] * 4, b) for p, o, _, b in positions]))
    before = t.tree.prior[g, 0].clone()
    t._add_noise(g)
    after = t.tree.prior[g, 0]
    assert torch.allclose(after.sum(1), torch.ones(8), atol=1e-5)
    assert (after[~t.tree.legal[g, 0]] == 0).all() and not torch.allclose(before, after)


def _check_tree(tree, games):
    """Every node of the trees of ``games`` is its parent's state stepped by the
    action that links them, with that state's legal actions; nodes past
    ``size`` are free; a node's visits are its children's plus the visits
    that ended at it (at most one when it is not terminal: its expansion)."""
    from othello_learn.search import tree as T

    for b in games.tolist():
        size = int(tree.size[b])
        assert int(tree.parent[b, T.ROOT]) == T.NO_PARENT
        assert (tree.children[b, size:] == T.UNEXPANDED).all() and (tree.visits[b, size:] == 0).all()
        for x in range(size):
            s = tree.state[b:b + 1, x]
            assert torch.equal(tree.legal[b, x], s.legal_actions()[0])
            assert bool(tree.terminal[b, x]) == bool(s.is_over()[0])
            kids = tree.children[b, x]
            for a in (kids != T.UNEXPANDED).nonzero().flatten().tolist():
                c = int(kids[a])
                assert int(tree.parent[b, c]) == x and bool(tree.legal[b, x, a])
                want = s.step(torch.tensor([a]))
                got = tree.state[b:b + 1, c]
                for f in ("player", "opponent", "black_to_move", "history"):
                    assert torch.equal(getattr(got, f), getattr(want, f)), (b, x, a, f)
            through = float(tree.visits[b, x]) - float(tree.visits[b, kids[kids >= 0]].sum())
            assert through >= 0 and (tree.terminal[b, x] or through <= 1 or x == T.ROOT and through == 0)


def test_tree_nodes_are_their_parents_stepped(ev):
    """The tree's structure, against ``States.step`` node by node, before and after reuse."""
    positions = _positions(3, seed=12, min_ply=40, max_ply=58)
    t, g = _tree(ev, positions, sims=24, reuse=True)
    t.search(g, noise=False)
    _check_tree(t.tree, g)
    t.advance(g, t.choose_action(g))
    _check_tree(t.tree, g)


def test_evaluator_gets_the_trees_legal_mask(ev):
    """The mask is computed once per leaf (``States.legal_actions``) and handed over."""
    seen = []

    def spy(p, o, h, b, legal=None):
        seen.append(legal is not None and torch.equal(legal, States(p, o, b, h).legal_actions()))
        return ev(p, o, h, b, legal)

    spy.device = ev.device
    t = BatchedMCTS(spy, 2, MCTSConfig(simulations=5, dirichlet_weight=0.0))
    g = torch.arange(2)
    t.set_roots(g, _states(_positions(2, seed=6)))
    t.search(g, noise=False)
    assert len(seen) == 6 and all(seen)


def test_choose_action():
    from othello_learn.search.tree import choose

    visits = torch.zeros(4, 65)
    visits[0, [3, 9]] = 40.0  # a tie: the tiebreak decides, however small
    visits[1, [3, 9]] = torch.tensor([40.0, 39.0])
    visits[2, PASS] = 7.0  # only the pass was searched
    visits[3, 20] = 1.0
    tiebreak = torch.zeros(4, 64)
    tiebreak[:, 9] = 1e-9
    assert choose(visits, tiebreak=tiebreak).tolist() == [9, 3, PASS, 20]
    assert choose(visits).tolist() == [3, 3, PASS, 20]
    # temperature 1: in proportion to the visits, only where sampled
    many = torch.zeros(4000, 65)
    many[:, 5], many[:, 7] = 3.0, 1.0
    sample = torch.arange(4000) < 3000
    got = choose(many, sample, torch.Generator().manual_seed(0))
    assert (got[3000:] == 5).all() and set(got.tolist()) == {5, 7}
    assert abs(float((got[:3000] == 5).float().mean()) - 0.75) < 0.03


# ---------------------------------------------------------------- mutation-testing additions


def test_fpu_and_noise_off_match_the_reference(ev):
    """A non-zero first-play urgency is the unvisited child's Q from the parent's view (the
    reference's ``fpu``), and ``search(noise=False)`` adds no noise even where the config has a weight."""
    positions = _positions(4, seed=14, min_ply=5, max_ply=50)
    for fpu in (-0.3, 0.2):
        t = BatchedMCTS(ev, len(positions), MCTSConfig(simulations=24, fpu=fpu, dirichlet_weight=0.25, reuse_tree=False),
                        generator=torch.Generator().manual_seed(0))
        g = torch.arange(len(positions))
        t.set_roots(g, _states(positions))
        t.search(g, noise=False)
        got = t.root_visits(g).long().tolist()
        for i, (p, o, h, b) in enumerate(positions):
            assert got[i] == reference_search(Node(p, o, h, b, ev), 24, ev, fpu=fpu), (fpu, i)


def test_dirichlet_noise_has_alpha_scale_over_the_legal_moves(ev):
    """With weight 1 the root prior is the noise itself: Dirichlet(10 / n) over the n legal moves,
    whose components have mean 1 / n and variance (1/n)(1 - 1/n) / (10 + 1) (n * alpha = 10)."""
    pos = _positions(1, seed=15, min_ply=10, max_ply=20)[0]
    n_games = 3000
    t = BatchedMCTS(ev, n_games, MCTSConfig(simulations=1, dirichlet_weight=1.0), generator=torch.Generator().manual_seed(1))
    g = torch.arange(n_games)
    t.set_roots(g, _states([pos] * n_games))
    legal = t.tree.legal[0, 0]
    n = int(legal.sum())
    assert n >= 3
    t._add_noise(g)
    noise = t.tree.prior[:, 0][:, legal].double()
    want_var = (1 / n) * (1 - 1 / n) / (10 + 1)
    assert torch.allclose(noise.mean(0), torch.full((n,), 1 / n, dtype=torch.float64), atol=0.01)
    assert torch.allclose(noise.var(0), torch.full((n,), want_var, dtype=torch.float64), rtol=0.15)


def test_zero_noise_weight_leaves_the_prior_and_random_stream_alone(ev):
    gen = torch.Generator().manual_seed(3)
    t = BatchedMCTS(ev, 2, MCTSConfig(simulations=2, dirichlet_weight=0.0), generator=gen)
    g = torch.arange(2)
    t.set_roots(g, _states(_positions(2, seed=16)))
    before, state = t.tree.prior[g, 0].clone(), gen.get_state()
    t._add_noise(g)
    assert torch.equal(t.tree.prior[g, 0], before) and torch.equal(gen.get_state(), state)


def test_evaluator_prior_of_a_forced_pass_is_the_pass_alone(ev):
    """Called directly (players do), not only through the tree's legal mask: a position with no
    square to play gets prior 1 on the pass, the others a distribution over their legal squares."""
    rng = random.Random(4)
    passing = None
    while passing is None:
        record, _, _ = ref.random_game(rng)
        passing = next(((b, c) for b, c, m in record if m == PASS), None)
    positions = [(*ref.to_bitboards(*passing), [-1] * 4, passing[1] == 1)] + _positions(2, seed=17)
    s = _states(positions)
    prior, _ = ev(s.player, s.opponent, s.history, s.black_to_move)
    assert prior[0].tolist() == [0.0] * 64 + [1.0]
    for i, (p, o, *_) in enumerate(positions[1:], 1):
        legal = torch.tensor([bool(bb.legal_moves(p, o) >> q & 1) for q in range(64)])
        assert float(prior[i, 64]) == 0.0 and (prior[i, :64][~legal] == 0).all()
        assert float(prior[i].sum()) == pytest.approx(1.0, abs=1e-5)


def _subtree_size(tree, b, root):
    """Nodes under (and including) ``root`` in tree ``b``, by walking parent pointers in Python."""
    size = int(tree.size[b])
    parent = tree.parent[b, :size].tolist()
    count = 0
    for x in range(size):
        y = x
        while y != -1 and y != root:
            y = parent[y]
        count += y == root
    return count


def test_reuse_keeps_a_subtree_exactly_when_a_full_search_fits_after_it(ev):
    """advance: a game keeps the chosen child's subtree iff the child was expanded and the
    subtree leaves at least simulations + 1 free nodes (boundary included), counted here from
    the parent pointers, over whole games of a small search whose trees often fill up."""
    from othello_learn.search import tree as T

    sims, n = 4, 8
    positions = _positions(n, seed=18, max_ply=6)
    t, g = _tree(ev, positions, sims=sims, reuse=True)
    C = t.tree.capacity
    counts = set()
    for _ in range(30):
        live = g[~t.tree.terminal[g, T.ROOT]]
        if live.numel() == 0:
            break
        t.search(live, noise=False)
        actions = t.choose_action(live)
        want = []
        for b, a in zip(live.tolist(), actions.tolist()):
            child = int(t.tree.children[b, T.ROOT, a])
            count = _subtree_size(t.tree, b, child) if child != T.UNEXPANDED else None
            counts.add(count)
            want.append(None if count is None or count + sims + 1 > C else count)  # None: a fresh root
        stepped = t.tree.state[live, torch.zeros_like(live)].step(actions)
        fresh = t.advance(live, actions)
        for j, b in enumerate(live.tolist()):
            if want[j] is None:
                assert bool(fresh[j]), b
            else:
                assert not bool(fresh[j]) and int(t.tree.size[b]) == want[j] and C - want[j] >= sims + 1, b
        t.set_roots(live[fresh], stepped[fresh])
    assert {C - sims - 1, C - sims} <= counts  # both sides of the boundary were met
