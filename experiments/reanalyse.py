"""Relabel self-play positions with a fresh, noise-free Gumbel search of a net:
improved policy at c_scale 0.1 and 1.0, the search's chosen move, root value."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import argparse, glob, time, dataclasses
import numpy as np, torch
from othello_learn.files import atomic_path
from othello.states import States
from othello_learn.models.nets import load_network
from othello_learn.search.gumbel import GumbelConfig
from othello_learn.search.mcts import Evaluator, make_search
from othello_learn.rl.selfplay import SelfPlayGames
ap = argparse.ArgumentParser()
ap.add_argument("--net", default="checkpoints/best_value.pt")
ap.add_argument("--games", nargs="+")
ap.add_argument("--n", type=int, default=100000)
ap.add_argument("--sims", type=int, default=64)
ap.add_argument("--k", type=int, default=16)
ap.add_argument("--batch", type=int, default=1024)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--out", required=True)
a = ap.parse_args()
g = SelfPlayGames.concat([SelfPlayGames.load(f) for f in sorted(set(sum((glob.glob(x) for x in a.games), [])))])
rng = np.random.default_rng(a.seed)
idx = np.sort(rng.choice(len(g.player), min(a.n, len(g.player)), replace=False))
ev = Evaluator(load_network(a.net), "cpu")
cfg = GumbelConfig(simulations=a.sims, max_considered=a.k)
S = make_search(ev, a.batch, cfg)
hi = dataclasses.replace(S.cfg, c_scale=1.0)
out = {k: [] for k in ("pi01", "pi1", "move", "value")}
t0 = time.time()
for s in range(0, len(idx), a.batch):
    i = idx[s:s + a.batch]; n = len(i)
    st = States(player=torch.from_numpy(g.player[i].view(np.int64)), opponent=torch.from_numpy(g.opponent[i].view(np.int64)),
                black_to_move=torch.from_numpy(g.black_to_move[i]), history=torch.from_numpy(g.history[i].astype(np.int64)))
    gi = torch.arange(n)
    S.set_roots(gi, st); o = S.run(gi, explore=False)
    out["pi01"].append(o.action_weights[:, :64].half().numpy())
    out["move"].append(o.action.numpy().astype(np.int8))
    out["value"].append(o.value.half().numpy())
    lo = S.cfg; S.cfg = hi
    out["pi1"].append(S.improved_policy(gi)[:, :64].half().numpy()); S.cfg = lo
    if (s // a.batch) % 10 == 0:
        print(s + n, f"{time.time()-t0:.0f}s", flush=True)
with atomic_path(a.out if a.out.endswith(".npz") else a.out + ".npz") as tmp, open(tmp, "wb") as f:  # np.savez's name; never half-written
    np.savez(f, player=g.player[idx], opponent=g.opponent[idx], black=g.black_to_move[idx], history=g.history[idx],
             ply=g.ply[idx], **{k: np.concatenate(v) for k, v in out.items()})
print("saved", a.out, f"{time.time()-t0:.0f}s")
