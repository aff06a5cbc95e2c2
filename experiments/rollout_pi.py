"""Rollout policy improvement for the 1-ply policy (Tesauro & Galperin 1996's
Monte-Carlo rollouts, here deterministic): positions come from the learner's
own greedy self-play from random openings; at each, the learner's top-k moves
are each played out to the end by the learner on both sides, greedily, and the
move whose game ends best (win/draw/loss; with --margin, then the disc difference;
ties to the prior) becomes the target. One Adam step a batch, expert positions mixed in to
anchor what the rollouts do not see. Research script, not tested."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import argparse, copy, json, time
import numpy as np, pandas as pd, torch
from othello.states import States
from othello_learn.models import fastpath
from othello_learn.models.batch import augment, from_arrays
from othello_learn.models.nets import load_network, save_network
from othello_learn.players.arena import play_match
from othello_learn.players.network import PolicyPlayer

ap = argparse.ArgumentParser()
ap.add_argument("--init", default="checkpoints/best_value.pt")
ap.add_argument("--out", required=True)
ap.add_argument("--iters", type=int, default=1000)
ap.add_argument("--positions", type=int, default=256)
ap.add_argument("--k", type=int, default=4, help="moves tried a position (the prior's top k)")
ap.add_argument("--lr", type=float, default=5e-5)
ap.add_argument("--expert", type=int, default=128, help="expert positions in each step")
ap.add_argument("--only-changed", action="store_true", help="train only where the rollout target differs from the argmax")
ap.add_argument("--margin", action="store_true", help="break win/draw/loss ties by the disc difference")
ap.add_argument("--open-max", type=int, default=8)
ap.add_argument("--rollout-net", default="learner", choices=["learner", "init"])
ap.add_argument("--eval-every", type=int, default=25)
ap.add_argument("--eval-games", type=int, default=200)
ap.add_argument("--eval-seed", type=int, default=9)
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()

torch.manual_seed(a.seed)
rng = np.random.default_rng(a.seed)
gen = torch.Generator().manual_seed(a.seed)
dev = torch.device("cpu")
prec = fastpath.auto_precision(dev)
init = load_network(a.init)
for p in init.parameters():
    p.requires_grad_(False)
learner = copy.deepcopy(init)
for p in learner.parameters():
    p.requires_grad_(True)
fastpath.prepare(learner, dev, prec)
learner.eval()
opt = torch.optim.Adam(learner.parameters(), lr=a.lr)
pos = np.load("data/wthor/positions.npy", mmap_mode="r")
years = pd.read_csv("data/wthor/games.csv", usecols=["year"])["year"].to_numpy()
train_rows = np.nonzero(years[pos["game"]] <= 2014)[0]


@torch.inference_mode()
def logits_of(net, s: States, idx):
    with fastpath.autocast(dev, prec):
        out = net(from_arrays(s.player[idx], s.opponent[idx], s.black_to_move[idx], s.history[idx], dev))["policy"]
    return out.float()


def greedy_step(net, s: States):
    """Every unfinished game one greedy ply further (a pass where forced)."""
    over = s.is_over()
    legal = s.legal_actions()
    act = np.full(len(s), -1, np.int64)
    act[~over & legal[:, 64]] = 64
    mv = np.nonzero(~over & ~legal[:, 64])[0]
    if len(mv):
        act[mv] = logits_of(net, s, mv).argmax(-1).numpy()
    return s.step_where(~over, act), over


def positions(net, n):
    """n positions of greedy self-play after a random opening, at a uniform random ply, with >= 2 moves."""
    s = States.initial(n)
    opening = rng.integers(0, a.open_max + 1, n)
    stop = rng.integers(opening, 58)
    keep = np.zeros(n, bool)
    got = States.initial(n)
    ply = 0
    while True:
        over = s.is_over()
        legal = s.legal_actions()
        ready = ~keep & ~over & (ply >= stop) & (legal[:, :64].sum(1) >= 2)
        if ready.any():
            got.put(ready, s[ready]); keep |= ready
        if (over | keep).all():
            break
        act = np.full(n, -1, np.int64)
        act[~over & legal[:, 64]] = 64
        rnd = np.nonzero(~over & ~legal[:, 64] & (ply < opening))[0]
        for i in rnd:
            act[i] = rng.choice(np.nonzero(legal[i, :64])[0])
        g = np.nonzero(~over & ~keep & ~legal[:, 64] & (ply >= opening))[0]
        if len(g):
            act[g] = logits_of(net, s, g).argmax(-1).numpy()
        s = s.step_where(~over & ~keep, act)
        ply += 1
    return got[keep]


def label(net, s: States):
    """The rollout target of each position and whether it differs from the argmax."""
    n = len(s)
    lg = logits_of(net, s, np.arange(n))
    k = min(a.k, 64)
    top = lg.topk(k, -1).indices.numpy()                 # [n, k]
    valid = np.take_along_axis(s.legal_actions()[:, :64], top, 1)
    rows = np.repeat(np.arange(n), k)
    roots = s[rows]
    moves = top.reshape(-1)
    ok = valid.reshape(-1)
    moves_safe = np.where(ok, moves, top[:, :1].repeat(k, 1).reshape(-1))
    r = roots.step(moves_safe, check=False)
    while not r.is_over().all():
        r, _ = greedy_step(net, r)
    diff = r.outcome()                                    # black's
    mover_black = roots.black_to_move
    d = np.where(mover_black, diff, -diff).astype(np.float64)
    score = np.sign(d) * 1000 + (d if a.margin else 0) - np.tile(np.arange(k), n) * 1e-3  # ties to the prior's order
    score[~ok] = -1e9
    best = score.reshape(n, k).argmax(1)
    target = top[np.arange(n), best]
    return target, best != 0, d.reshape(n, k)


def evaluate():
    net = copy.deepcopy(learner).float().to(memory_format=torch.contiguous_format).eval()
    r = play_match(PolicyPlayer(net, dev), PolicyPlayer(init, dev), a.eval_games, seed=a.eval_seed, progress=False)
    return float(r.outcomes.mean()), net


t0 = time.time()
log = open(a.out + ".jsonl", "a")
stats = []
for it in range(1, a.iters + 1):
    rnet = learner if a.rollout_net == "learner" else init
    s = positions(rnet, a.positions)
    target, changed, d = label(rnet, s)
    sel = np.nonzero(changed)[0] if a.only_changed else np.arange(len(s))
    b = from_arrays(s.player[sel], s.opponent[sel], s.black_to_move[sel], s.history[sel], dev)
    b["move"] = torch.from_numpy(target[sel])
    if a.expert:
        e = pos[np.sort(train_rows[rng.integers(0, len(train_rows), a.expert)])]
        eb = from_arrays(e["player"], e["opponent"], e["black_to_move"], e["history"].astype(np.int64), dev)
        eb["move"] = torch.from_numpy(e["move"].astype(np.int64))
        b = {key: torch.cat([b[key], eb[key]]) for key in b}
    b = augment(b, generator=gen)
    with fastpath.autocast(dev, prec):
        out = learner(b)
    loss = torch.nn.functional.cross_entropy(out["policy"].float(), b["move"])
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    stats.append((len(s), changed.mean(), loss.item()))
    if it % 10 == 0:
        m = np.array(stats[-10:]).mean(0)
        print(f"it {it} {time.time()-t0:.0f}s positions {m[0]:.0f} changed {m[1]:.3f} loss {m[2]:.3f}", flush=True)
    if it % a.eval_every == 0:
        sc, net = evaluate()
        path = f"{a.out}_iter{it:04d}.pt"
        save_network(net, path, iteration=it)
        row = {"iter": it, "seconds": round(time.time() - t0), "eval": sc}
        print("EVAL", row, flush=True)
        log.write(json.dumps(row) + "\n"); log.flush()
