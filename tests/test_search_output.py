"""Both searches answer through one ``PolicyOutput``, built from a config by one factory, so that no
caller outside ``othello_learn/search`` branches on (or builds) a search by its type."""

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from othello import bitboard as bb
from othello.states import ACTIONS, PASS
from othello_learn.models.fastpath import FP32
from othello_learn.search.gumbel import GumbelConfig
from othello_learn.search.mcts import Evaluator, MCTSConfig, make_search
from othello_learn.search.output import PolicyOutput
from test_mcts import FakeNet, _positions, _states

REPO = Path(__file__).resolve().parents[1]
SEARCH_TYPES = {"BatchedMCTS", "GumbelMCTS", "MCTSConfig", "GumbelConfig"}


@pytest.mark.parametrize("explore", [True, False], ids=["explore", "play"])
@pytest.mark.parametrize("config", [MCTSConfig(simulations=8), GumbelConfig(simulations=8)], ids=["puct", "gumbel"])
def test_both_searches_give_a_policy_output_of_the_documented_shapes(config, explore):
    over = (0, bb.BLACK_START | bb.WHITE_START, [-1, -1, -1, -1], True)  # finished: the side to move has no disc
    positions = _positions(3, seed=4, min_ply=5, max_ply=40) + [over]
    n = len(positions)
    ev = Evaluator(FakeNet(), "cpu", precision=FP32)
    search = make_search(ev, n + 2, config, generator=torch.Generator().manual_seed(0))
    games = torch.arange(1, n + 1)  # not the first n trees: the output is in the order of ``games``
    search.set_roots(games, _states(positions))
    out = search.run(games, explore=explore, sample=torch.tensor([True, False, True, False]),
                     rng=np.random.default_rng(0))

    assert type(out) is PolicyOutput
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.action = out.action
    assert out.action.shape == (n,) and out.action.dtype == torch.int64
    assert out.value.shape == (n,) and out.value.dtype == torch.float32
    for x in (out.action_weights, out.visits, out.q):
        assert x.shape == (n, ACTIONS) and x.dtype == torch.float32
    legal = _states(positions).legal_actions()
    assert torch.allclose(out.action_weights.sum(1), torch.ones(n))
    live = legal[:-1]
    assert (out.action_weights[:-1][~live] == 0).all() and (out.visits[:-1][~live] == 0).all()
    assert legal[torch.arange(n - 1), out.action[:-1]].all()  # a legal move where there is one
    assert out.visits[:-1].sum(1).tolist() == [config.simulations] * (n - 1)
    assert torch.isnan(out.q).eq(out.visits == 0).all()
    assert (out.q[out.visits > 0].abs() <= 1).all() and (out.value.abs() <= 1).all()
    # a finished game: the pass, its target all on the pass, nothing visited
    assert out.action[-1] == PASS and out.action_weights[-1].tolist() == [0.0] * PASS + [1.0]
    assert out.visits[-1].sum() == 0


def _modules():
    """Every Python file of the package and the scripts beside it, but the search's own."""
    for folder in ("othello_learn", "benchmarks", "experiments", "data_tools", "train", "selfplay"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if (REPO / "othello_learn" / "search") not in path.parents:
                yield path


def _names(node) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute))}


def test_no_caller_branches_on_or_builds_a_search_by_its_type():
    """Callers build a search with ``make_search`` and read its ``run``; an ``isinstance`` (or ``type(x)
    is``) on a search or its config, or a search class called, outside ``othello_learn/search`` is a
    caller that knows which search it has."""
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in ("isinstance", "issubclass") and len(node.args) == 2 \
                        and _names(node.args[1]) & SEARCH_TYPES:
                    found.append(f"{where}: {node.func.id} on a search type")
                elif node.func.id in ("BatchedMCTS", "GumbelMCTS"):
                    found.append(f"{where}: {node.func.id}(...) instead of make_search")
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq))
                                                     for op in node.ops):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == "type"
                       for s in sides) and any(_names(s) & SEARCH_TYPES for s in sides):
                    found.append(f"{where}: type() compared with a search type")
    assert found == []
