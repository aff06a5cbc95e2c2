"""How sharp the loop's policy targets are beside the prior they start from:
one Gumbel search (with self-play's root noise) of a net on positions of a
self-play file, and the improved policy read both ways (--policy-target
rescaled and absolute): mean entropies over the legal moves, how often the
target's top move is the prior's, and the mean total variation from the prior.

    python experiments/target_sharpness.py checkpoints/best_handcrafted.pt runs/rl_abs/games/gen_0001.npz 4096
"""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import dataclasses, json, sys
import numpy as np, torch
from othello.states import States
from othello_learn.models.losses import entropy
from othello_learn.models.nets import load_network
from othello_learn.search.gumbel import GumbelConfig
from othello_learn.search.mcts import Evaluator, make_search
from othello_learn.rl.selfplay import SelfPlayGames

net_path, games_path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
sims = int(sys.argv[4]) if len(sys.argv) > 4 else 32
torch.manual_seed(0)
g = SelfPlayGames.load(games_path)
searched = np.flatnonzero(g.policy.astype(np.float32).max(1) < 0.999)  # not the solved endgame's one-hot targets
idx = np.sort(np.random.default_rng(0).choice(searched, min(n, len(searched)), replace=False))
S = make_search(Evaluator(load_network(net_path), "cpu"), len(idx), GumbelConfig(simulations=sims),
                generator=torch.Generator().manual_seed(0))
st = States(player=torch.from_numpy(g.player[idx].view(np.int64)), opponent=torch.from_numpy(g.opponent[idx].view(np.int64)),
            black_to_move=torch.from_numpy(g.black_to_move[idx]), history=torch.from_numpy(g.history[idx].astype(np.int64)))
gi = torch.arange(len(idx))
S.set_roots(gi, st)
S.search(gi, noise=True)
_, logits, _, _ = S._stats(gi, torch.zeros_like(gi))
prior = torch.softmax(logits, 1)
row = {"net": net_path, "games": games_path, "positions": len(idx), "simulations": sims,
       "prior_entropy": float(entropy(prior).mean())}
for q in ("rescaled", "absolute"):
    S.cfg = dataclasses.replace(S.cfg, target_q=q)
    t = S.improved_policy(gi).double()
    row[f"{q}_entropy"] = float(entropy(t).mean())
    row[f"{q}_top_is_prior_top"] = float((t.argmax(1) == prior.argmax(1)).double().mean())
    row[f"{q}_tv_from_prior"] = float(0.5 * (t - prior).abs().sum(1).mean())
print(json.dumps(row, indent=1))
