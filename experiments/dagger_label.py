"""Positions of the 1-ply player's own games, labelled by a small search of
the same net (DAgger's data: the states the learner visits, the expert's
action). Games: the policy's argmax on both sides after a random opening of
--open-min..--open-max plies (the arena's kind of game); every position with
>= 2 legal moves is kept. Or --expert: positions of the WTHOR training years.
Label: a noise-free Gumbel search (--sims, k auto: 8 simulations = the prior's
top 2, 4 visits each, which beats the bare policy by +265 Elo). Output: the
format of reanalyse.py, for finetune.py --lab, plus the net's own argmax.
Or --solve-empties E: only the positions with <= E empty squares, labelled by
the exact solver (every optimal square and the disc difference, as solve_wthor.py;
each move's win/draw/loss; the smallest-correction target pi), for finetune.py --end.
With --expert --solve-empties E --results-only: every expert position of the training years
with <= E empties (--n caps it; --part I/N takes every N-th from the I-th, for parallel
jobs), each move's win/draw/loss only, about 20x cheaper than the exact disc count (2.4 ms a
position on average, ~9 ms at 10 empties): best = the moves that keep the result, value its
sign. Research script, not tested."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import argparse, time
import numpy as np, pandas as pd, torch
from othello import bitboard as bb
from othello_learn.files import atomic_path
from othello.states import States
from othello_learn.models import fastpath
from othello_learn.models.batch import from_arrays
from othello_learn.models.nets import load_network
from othello_learn.search import tree as T
from othello_learn.search.gumbel import GumbelConfig
from othello_learn.search.mcts import Evaluator, make_search

ap = argparse.ArgumentParser()
ap.add_argument("--net", default="checkpoints/best_value.pt")
ap.add_argument("--n", type=int, default=100000, help="positions to label")
ap.add_argument("--sims", type=int, default=8)
ap.add_argument("--k", type=int, default=0)
ap.add_argument("--batch", type=int, default=1024)
ap.add_argument("--open-min", type=int, default=4)
ap.add_argument("--open-max", type=int, default=10)
ap.add_argument("--expert", action="store_true", help="label expert positions of 1977-2014 instead")
ap.add_argument("--solve-empties", type=int, default=0,
                help="keep only positions with at most this many empty squares and solve them exactly")
ap.add_argument("--results-only", action="store_true",
                help="with --solve-empties: only each move's win/draw/loss, not the exact disc difference")
ap.add_argument("--part", default="0/1", help="I/N: with --expert, every N-th candidate position from the I-th")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--out", required=True)
a = ap.parse_args()
if a.results_only and not a.solve_empties:
    ap.error("--results-only labels solved endgames: give --solve-empties E")
if a.part != "0/1" and not a.expert:
    ap.error("--part splits the expert positions: give --expert")
OUT = a.out if a.out.endswith(".npz") else a.out + ".npz"  # np.savez's name, written whole (temporary file, then rename)
rng = np.random.default_rng(a.seed)
dev = torch.device("cpu")
net = load_network(a.net)
prec = fastpath.auto_precision(dev)
fastpath.prepare(net, dev, prec)
net.eval()


@torch.inference_mode()
def argmax_moves(s: States, idx, legal=None):
    """The policy's argmax over the legal squares of s[idx] (``legal``: s's [N, 65] mask, when the caller has it)."""
    with fastpath.autocast(dev, prec):
        lg = net(from_arrays(s.player[idx], s.opponent[idx], s.black_to_move[idx], s.history[idx], dev))["policy"].float()
    legal = torch.from_numpy((s.legal_actions() if legal is None else legal)[idx, :64])
    return lg.masked_fill(~legal, -1e9).argmax(-1).numpy()


def concat(parts):
    """One numpy States from a list of them."""
    return States(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("player", "opponent", "black_to_move", "history")))


def greedy_positions(n_games):
    """All positions with >= 2 legal moves of n_games greedy games after random openings."""
    s = States.initial(n_games)
    opening = rng.integers(a.open_min, a.open_max + 1, n_games)
    got, ply = [], 0
    while True:
        over = s.is_over()
        if over.all():
            break
        legal = s.legal_actions()
        act = np.full(n_games, -1, np.int64)
        act[~over & legal[:, 64]] = 64
        move = ~over & ~legal[:, 64]
        rnd = np.nonzero(move & (ply < opening))[0]
        for i in rnd:
            act[i] = rng.choice(np.nonzero(legal[i, :64])[0])
        g = np.nonzero(move & (ply >= opening))[0]
        if len(g):
            act[g] = argmax_moves(s, g, legal)
            keep = g[legal[g, :64].sum(1) >= 2]
            if a.solve_empties:
                keep = keep[64 - bb.popcount(s.player[keep] | s.opponent[keep]) <= a.solve_empties]
            got.append((s[keep], np.full(len(keep), ply)))
        s = s.step_where(~over, act)
        ply += 1
    return concat([x[0] for x in got]), np.concatenate([x[1] for x in got])


if a.expert:
    pos = np.load("data/wthor/positions.npy", mmap_mode="r")
    years = pd.read_csv("data/wthor/games.csv", usecols=["year"])["year"].to_numpy()
    rows = np.nonzero(years[pos["game"]] <= 2014)[0]
    if a.solve_empties:  # plies 60 - E .. 58; passes make some of them hold more empties: filtered below
        rows = rows[pos["ply"][rows] >= 60 - a.solve_empties]
    part, parts = map(int, a.part.split("/"))
    rows = rows[part::parts]
    e = pos[np.sort(rng.choice(rows, min(a.n, len(rows)), replace=False))]
    S0 = States(e["player"].astype(np.uint64), e["opponent"].astype(np.uint64), e["black_to_move"].astype(bool),
                e["history"].astype(np.int64))
    ok = S0.legal_actions()[:, :64].sum(1) >= 2
    if a.solve_empties:
        ok &= 64 - bb.popcount(S0.player | S0.opponent) <= a.solve_empties
    S0, plies = S0[ok], e["ply"][ok] if "ply" in e.dtype.names else np.zeros(ok.sum(), np.int64)
else:
    parts, total = [], 0
    while total < a.n:
        s, p = greedy_positions(1024)
        parts.append((s, p)); total += len(p)
    S0 = concat([x[0] for x in parts])
    plies = np.concatenate([x[1] for x in parts])
    pick = np.sort(rng.choice(len(plies), a.n, replace=False))
    S0, plies = S0[pick], plies[pick]
print("positions", len(plies), flush=True)

if a.solve_empties:
    from othello_learn.search.endgame import move_results, solve
    n = len(plies)
    best, value, t0 = np.zeros((n, 64), bool), np.zeros(n, np.int8), time.time()
    wdl = np.full((n, 64), -2, np.int8)  # each legal move's result under perfect play (-1/0/1), -2 if illegal
    for j in range(n):
        P, O = int(S0.player[j]), int(S0.opponent[j])
        for q, r in move_results(P, O).items():
            wdl[j, q] = r
        if a.results_only:
            value[j] = wdl[j].max()
            best[j] = wdl[j] == value[j]
        else:
            value[j], sq = solve(P, O)
            best[j, sq] = True
        if j % 50000 == 0:
            print(j, f"{time.time()-t0:.0f}s", flush=True)
    with torch.inference_mode(), fastpath.autocast(dev, prec):
        prior = torch.cat([torch.softmax(net(from_arrays(S0.player[i:i + 4096], S0.opponent[i:i + 4096],
                    S0.black_to_move[i:i + 4096], S0.history[i:i + 4096], dev))["policy"].float().masked_fill(
                    torch.from_numpy(wdl[i:i + 4096] == -2), -1e9), -1) for i in range(0, n, 4096)]).numpy()
    own = prior.argmax(1)
    # The smallest correction: the net's own prior, renormalised over the moves that keep the position's
    # perfect-play result (a win or a draw); in a lost position, over the moves that lose by least.
    top = wdl.max(1)
    keepmask = np.where((top >= 0)[:, None], wdl == top[:, None], best)
    pi = prior * keepmask
    pi /= pi.sum(1, keepdims=True)
    ok = keepmask[np.arange(n), own]
    print("the net's argmax is optimal in", f"{best[np.arange(n), own].mean():.3f}", "of them; keeps the result in",
          f"{ok.mean():.3f} (won {(top > 0).mean():.2f}, drawn {(top == 0).mean():.2f}, lost {(top < 0).mean():.2f})")
    with atomic_path(OUT) as tmp, open(tmp, "wb") as f:
        np.savez(f, player=S0.player, opponent=S0.opponent, black=S0.black_to_move, history=S0.history.astype(np.int8),
                 ply=plies, best=best, value=value, wdl=wdl, pi=pi.astype(np.float16), own=own.astype(np.int8))
    print("saved", a.out, f"{time.time()-t0:.0f}s")
    raise SystemExit

def root_q(gi):
    """[n, 65] mean backed-up value of each root child, from the root's side to move (0 if unvisited)."""
    tree = S.tree
    n, total = (x.double() for x in T.child_stats(tree, gi, tree.children[gi, T.ROOT]))
    return torch.where(n > 0, total / n.clamp(min=1), 0.0).numpy()


ev = Evaluator(net, "cpu")
S = make_search(ev, a.batch, GumbelConfig(simulations=a.sims, max_considered=a.k))
out = {k: [] for k in ("pi01", "move", "value", "own", "q_move", "q_own")}
t0 = time.time()
for s0 in range(0, len(plies), a.batch):
    i = np.arange(s0, min(s0 + a.batch, len(plies))); n = len(i)
    sub = S0[i]
    st = States(player=torch.from_numpy(sub.player.view(np.int64)), opponent=torch.from_numpy(sub.opponent.view(np.int64)),
                black_to_move=torch.from_numpy(sub.black_to_move), history=torch.from_numpy(sub.history.astype(np.int64)))
    gi = torch.arange(n)
    S.set_roots(gi, st); o = S.run(gi, explore=False)
    out["pi01"].append(o.action_weights[:, :64].half().numpy())
    move = o.action.numpy()
    out["move"].append(move.astype(np.int8))
    out["value"].append(o.value.half().numpy())
    own = argmax_moves(sub, np.arange(n))
    out["own"].append(own.astype(np.int8))
    q = root_q(gi)  # the root's mean values of its children, the side to move's view (0 where unvisited)
    out["q_move"].append(q[np.arange(n), move].astype(np.float16))
    out["q_own"].append(q[np.arange(n), own].astype(np.float16))
    if (s0 // a.batch) % 20 == 0:
        print(s0 + n, f"{time.time()-t0:.0f}s", flush=True)
res = {k: np.concatenate(v) for k, v in out.items()}
print("search move differs from the argmax in", f"{(res['move'] != res['own']).mean():.3f}", "of positions")
with atomic_path(OUT) as tmp, open(tmp, "wb") as f:
    np.savez(f, player=S0.player, opponent=S0.opponent, black=S0.black_to_move, history=S0.history.astype(np.int8),
             ply=plies, **res)
print("saved", a.out, f"{time.time()-t0:.0f}s")
