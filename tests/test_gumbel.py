"""Batched Gumbel search against a plain single-game Gumbel AlphaZero search
written from the paper (explicit phases and rounds, an object per node)."""

import math
import random

import numpy as np
import pytest
import torch

import reference_engine as ref
from othello import bitboard as bb
from othello_learn.files import UserError
from othello_learn.models.fastpath import FP32
from othello_learn.search.gumbel import GumbelConfig, GumbelMCTS, halving_schedule
from othello.states import PASS
from othello_learn.search.mcts import BatchedMCTS, Evaluator, MCTSConfig, make_search
from test_mcts import FakeNet, Node, _positions, _states

C_VISIT, C_SCALE = 50.0, 0.1


# ------------------------------------------------------------------ reference
def sigma(node, rescale=True):
    """{action: sigma(completed Q)} over the node's legal actions, and the prior logits;
    Q min-max rescaled over all 65 slots as mctx does, or without ``rescale`` read as (Q + 1) / 2."""
    acts = [a for a in range(65) if node.legal[a]]
    logit = {a: math.log(max(node.prior[a], 1e-30)) for a in acts}
    top = max(logit.values())
    z = sum(math.exp(logit[a] - top) for a in acts)
    prob = {a: math.exp(logit[a] - top) / z for a in acts}
    N = {a: node.children[a].N if a in node.children else 0 for a in acts}
    Q = {a: float(node.children[a].W) / N[a] for a in acts if N[a]}
    total = sum(N.values())
    if Q:
        p = {a: max(prob[a], np.finfo(np.float64).tiny) for a in Q}
        weighted = sum(p[a] * Q[a] for a in Q) / sum(p.values())
    else:
        weighted = 0.0
    mixed = (node.value + total * weighted) / (total + 1)
    completed = {a: Q.get(a, mixed) for a in acts}
    every_slot = [Q.get(a, mixed) for a in range(65)]  # mctx: every unvisited slot, illegal too, holds the mixed value
    lo, hi = min(every_slot), max(every_slot)
    scale = (C_VISIT + max(N.values())) * C_SCALE
    if not rescale:
        return {a: scale * (completed[a] + 1) / 2 for a in acts}, logit, N
    return {a: scale * (completed[a] - lo) / max(hi - lo, 1e-8) for a in acts}, logit, N


def simulate(root, first, ev):
    """One simulation through root action ``first``; below the root the
    paper's deterministic rule argmax(pi'(a) - N(a) / (1 + sum N))."""
    node, path, a = root, [root], first
    while True:
        if a not in node.children:
            node.children[a] = node.child(a, ev)
            path.append(node.children[a])
            value = path[-1].value
            break
        node = node.children[a]
        path.append(node)
        if node.terminal:
            value = node.exact
            break
        s, logit, N = sigma(node)
        acts = list(s)
        top = max(logit[b] + s[b] for b in acts)
        z = sum(math.exp(logit[b] + s[b] - top) for b in acts)
        total = sum(N.values())
        score = {b: math.exp(logit[b] + s[b] - top) / z - N[b] / (1 + total) for b in acts}
        a = max(acts, key=lambda b: (score[b], -b))  # ties to the lower index
    val = -value  # nodes hold the value of the player who moved into them
    for n in reversed(path):
        n.N += 1
        n.W = np.float32(n.W + np.float32(val))
        val = -val


def reference_gumbel(root, sims, ev, gumbel, k_max=16, target_rescale=True):
    """Returns (chosen action, root visit counts, improved policy); the search
    always ranks by rescaled Q, the improved policy reads Q as ``target_rescale`` says."""
    def score(a):
        s, logit, _ = sigma(root)
        return max(-1e9, gumbel[a] + logit[a] + s[a])

    acts = [a for a in range(65) if root.legal[a]]
    k = min(k_max, len(acts))
    _, logit, _ = sigma(root)
    remaining = sorted(acts, key=lambda a: -(gumbel[a] + logit[a]))[:k]  # Gumbel-top-k
    done = 0
    while done < sims:
        per_action = 1 if k == 1 else max(1, int(sims / (math.ceil(math.log2(k)) * len(remaining))))
        if k == 1:
            per_action = sims
        for _ in range(per_action):
            todo = list(remaining)
            while todo and done < sims:  # a round: each remaining action once, best first
                a = max(todo, key=lambda b: (score(b), -b))
                simulate(root, a, ev)
                todo.remove(a)
                done += 1
        remaining = sorted(remaining, key=lambda a: -score(a))[:max(2, len(remaining) // 2)]
    s, logit, N = sigma(root)
    most = max(N.values())
    chosen = max((a for a in acts if N[a] == most), key=lambda a: (score(a), -a))
    s, _, _ = sigma(root, target_rescale)
    top = max(logit[a] + s[a] for a in acts)
    z = sum(math.exp(logit[a] + s[a] - top) for a in acts)
    policy = [math.exp(logit[a] + s[a] - top) / z if a in s else 0.0 for a in range(65)]
    return chosen, [N.get(a, 0) for a in range(65)], policy


# ---------------------------------------------------------------------- tests
def _gumbel(n: int, seed: int) -> torch.Tensor:
    """Standard Gumbel noise for n roots, drawn from the seed (a failure reproduces)."""
    u = torch.rand((n, 65), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return -torch.log(-torch.log(u.clamp(1e-300, 1 - 1e-16)))


@pytest.fixture(scope="module")
def ev():
    return Evaluator(FakeNet(), "cpu", precision=FP32)


def _roots(tree, positions):
    g = torch.arange(len(positions))
    tree.set_roots(g, _states(positions))
    return g


@pytest.mark.parametrize("sims,k,seed", [(24, 16, 3), (9, 4, 7), (5, 16, 11), (40, 2, 13)])
def test_batched_gumbel_equals_reference(ev, sims, k, seed):
    positions = _positions(6, seed=seed, min_ply=4, max_ply=54)
    tree = GumbelMCTS(ev, len(positions), GumbelConfig(simulations=sims, max_considered=k))
    g = _roots(tree, positions)
    noise = _gumbel(len(positions), seed)
    tree.search(g, gumbel=noise)
    visits = tree.root_visits(g).long().tolist()
    chosen = tree.chosen_action(g).tolist()
    policy = tree.improved_policy(g)
    for i, (p, o, h, b) in enumerate(positions):
        root = Node(p, o, h, b, ev)
        want_a, want_n, want_pi = reference_gumbel(root, sims, ev, noise[i].tolist(), k)
        assert visits[i] == want_n, f"position {i}"
        assert chosen[i] == want_a, f"position {i}"
        assert policy[i].tolist() == pytest.approx(want_pi, abs=1e-6)
        assert sum(visits[i]) == sims


def test_the_mixed_value_stays_in_the_range_q_is_rescaled_over(ev, sims=12, seed=17):
    """mctx rescales Q over all 65 slots, and its unvisited ones (there are always some) hold
    the mixed value: where every legal move has been visited and the mixed value lies outside
    their Qs, the worst move's sigma is above 0 or the best's below the full (c_visit + max N) *
    c_scale (the range over the legal moves alone pinned both, and stretched two near-tied
    moves of a decided position ten logits apart)."""
    positions = _positions(20, seed=seed, min_ply=54, max_ply=59)  # few legal moves, each visited
    noise = _gumbel(len(positions), seed)
    tree = GumbelMCTS(ev, len(positions), GumbelConfig(simulations=sims, max_considered=16))
    g = _roots(tree, positions)
    tree.search(g, gumbel=noise)
    legal, _, n, sig = tree._stats(g, torch.zeros_like(g))
    policy = tree.improved_policy(g)
    outside = 0
    for i, (p, o, h, b) in enumerate(positions):
        *_, want_pi = reference_gumbel(Node(p, o, h, b, ev), sims, ev, noise[i].tolist())
        assert policy[i].tolist() == pytest.approx(want_pi, abs=1e-6), f"position {i}"
        s, full = sig[i][legal[i]], (C_VISIT + n[i].max()) * C_SCALE
        if len(s) > 1 and bool((n[i][legal[i]] > 0).all()):
            outside += bool(s.min() > 1e-9 or s.max() < full - 1e-9)
    assert outside >= 2, "the sample lacks roots whose mixed value lies outside the visited moves' Qs"


def test_the_absolute_target_changes_the_improved_policy_only(ev, sims=9, k=4, seed=7):
    """target_q="absolute": the same search (visits, move); the improved policy's
    sigma reads (Q + 1) / 2 instead of Q min-max rescaled over the moves."""
    positions = _positions(6, seed=seed, min_ply=4, max_ply=54)
    noise = _gumbel(len(positions), seed)
    trees = {q: GumbelMCTS(ev, len(positions), GumbelConfig(simulations=sims, max_considered=k, target_q=q))
             for q in ("rescaled", "absolute")}
    for tree in trees.values():
        tree.search(_roots(tree, positions), gumbel=noise)
    g = torch.arange(len(positions))
    rescaled, absolute = trees["rescaled"], trees["absolute"]
    assert torch.equal(rescaled.root_visits(g), absolute.root_visits(g))
    assert torch.equal(rescaled.chosen_action(g), absolute.chosen_action(g))
    policy = absolute.improved_policy(g)
    for i, (p, o, h, b) in enumerate(positions):
        *_, want_pi = reference_gumbel(Node(p, o, h, b, ev), sims, ev, noise[i].tolist(), k, target_rescale=False)
        assert policy[i].tolist() == pytest.approx(want_pi, abs=1e-6), f"position {i}"
    assert not torch.allclose(policy, rescaled.improved_policy(g), atol=1e-3)
    with pytest.raises(ValueError, match="^target_q: expected one of rescaled, absolute"):
        GumbelMCTS(ev, 1, GumbelConfig(simulations=4, target_q="sharp"))


def test_zero_noise_is_deterministic_and_pass_is_searched(ev):
    rng = random.Random(4)
    passing = None
    while passing is None:
        record, _, _ = ref.random_game(rng)
        passing = next(((b, c) for b, c, m in record if m == PASS), None)
    p, o = ref.to_bitboards(*passing)
    positions = [(p, o, [-1] * 4, passing[1] == 1)] + _positions(3, seed=2, max_ply=30)
    runs = []
    for _ in range(2):
        tree = GumbelMCTS(ev, 4, GumbelConfig(simulations=8), generator=torch.Generator().manual_seed(0))
        g = _roots(tree, positions)
        tree.search(g, noise=False)
        runs.append((tree.root_visits(g), tree.chosen_action(g), tree.improved_policy(g)))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    visits, chosen, policy = runs[0]
    assert visits[0, PASS] == 8 and chosen[0] == PASS and policy[0, PASS] == pytest.approx(1.0)
    assert torch.allclose(policy.sum(1), torch.ones(4, dtype=policy.dtype))


def test_halving_schedule_spends_the_budget_evenly():
    level, keep = halving_schedule(16, 32)
    assert level == [0] * 16 + [1] * 8 + [2] * 4 + [3] * 4
    assert [(i, m) for i, m in enumerate(keep) if m] == [(16, 8), (24, 4)]
    assert halving_schedule(1, 3) == ([0, 1, 2], [0, 0, 0])
    # k: simulations / 4 within 2..16 unless set
    assert [GumbelConfig(simulations=n).considered for n in (2, 16, 32, 200)] == [2, 4, 8, 16]
    assert GumbelConfig(simulations=16, max_considered=16).considered == 16


def test_make_search_and_improvement_over_the_prior(ev):
    assert type(make_search(ev, 2, MCTSConfig(simulations=4))) is BatchedMCTS
    assert type(make_search(ev, 2, GumbelConfig(simulations=4))) is GumbelMCTS
    # With many simulations the improved policy puts more mass on the best
    # completed Q than the prior does (the point of the target).
    positions = _positions(4, seed=21, min_ply=10, max_ply=40)
    tree = GumbelMCTS(ev, 4, GumbelConfig(simulations=32))
    g = _roots(tree, positions)
    tree.search(g, noise=False)
    legal, logits, n, s = tree._stats(g, torch.zeros_like(g))
    best = torch.where(n > 0, s, -1.0).argmax(1)
    pi = tree.improved_policy(g).double()
    prior = torch.softmax(logits, 1)
    assert (pi.gather(1, best[:, None]) >= prior.gather(1, best[:, None]) - 1e-12).all()


def test_gumbel_self_play_records_the_improved_policy(ev):
    from othello_learn.rl.selfplay import SelfPlayConfig, play_games

    games = play_games(ev, 2, GumbelConfig(simulations=4), SelfPlayConfig(resign_threshold=None), seed=2, progress=False)
    assert len(games.winner) == 2 and (games.length >= 58).all()
    assert not np.array_equal(games.player[games.game == 0][:20], games.player[games.game == 1][:20]), \
        "the root's Gumbel noise varies the games"
    pi = games.policy.astype(np.float64)
    assert np.allclose(pi.sum(1), 1, atol=1e-2)
    p, o = torch.from_numpy(games.player.view(np.int64)), torch.from_numpy(games.opponent.view(np.int64))
    legal = ((bb.legal_moves(p, o)[:, None] >> torch.arange(64)) & 1).bool().numpy()
    assert (pi[~legal] == 0).all()
    # Visit counts of 4 simulations are multiples of 1/4; the improved policy is not.
    assert not np.allclose(pi * 4, np.round(pi * 4), atol=1e-2)


def test_gumbel_player_and_gating_search_in_the_loop(tmp_path, monkeypatch):
    import json

    from othello_learn.models.nets import NetConfig, build_network, save_network
    from othello_learn.rl import loop as rl_loop
    from othello_learn.rl import records as rl_records
    from othello_learn.players.arena import main as arena_main
    from othello_learn.search.gumbel import GumbelConfig
    from othello_learn.search.mcts import MCTSConfig
    from othello_learn.players.network import search_player

    tiny = {"arch": "resnet", "encoder": "raw", "blocks": 1, "width": 8, "value_head": True}
    torch.manual_seed(0)
    net = build_network(NetConfig(**tiny)).eval()
    ckpt = tmp_path / "tiny.pt"
    save_network(net, ckpt)
    out = tmp_path / "m.json"
    assert arena_main(["--a", f"gumbel:{ckpt}:4", "--b", f"mcts:{ckpt}:4", "--games", "2", "--json", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["games"] == 2
    assert isinstance(search_player("gumbel", net, 2).config, GumbelConfig)
    assert isinstance(search_player("puct", net, 2).config, MCTSConfig)

    # A run folder saved before --search existed resumes as PUCT, and refuses gumbel.
    run = tmp_path / "rl"
    seen = []
    for stage in ("self_play", "train", "gate"):
        monkeypatch.setattr(rl_loop, stage, lambda cfg, gen: None)
    monkeypatch.setattr(rl_loop, "commit", lambda cfg, gen, log=None: (seen.append(cfg.search),
                                                                        rl_records.read_state(cfg.out / "state.json"))[1])
    base = ["--init", "random", "--generations", "1", "--games", "2", "--parallel", "2", "--simulations", "2",
            "--arch-blocks", "1", "--arch-width", "8", "--quiet", "--logger", "none", "--out", str(run)]
    assert rl_loop.main(base) == 0 and seen == ["puct"]
    cfg = json.loads((run / "config.json").read_text())
    del cfg["search"]
    (run / "config.json").write_text(json.dumps(cfg))
    assert rl_loop.main(base) == 0 and seen == ["puct", "puct"]
    with pytest.raises(UserError, match="search"):
        rl_loop.main(base + ["--search", "gumbel"])
