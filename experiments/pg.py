"""Policy-gradient self-play for the 1-ply policy (AlphaGo's RL policy network,
Silver et al. 2016): the learner plays sampled games against a pool of its own
frozen past selves (the warm start first), and each of its moves is reinforced
by the game's result less the value head's estimate (actor-critic baseline).
No search: what is trained is exactly the player the 1-ply target measures.
Research script, not tested."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import argparse, copy, json, time
import numpy as np, torch
from othello.states import States
from othello_learn.models import fastpath
from othello_learn.models.batch import augment, from_arrays
from othello_learn.models.nets import load_network, save_network
from othello_learn.players.arena import play_match
from othello_learn.players.network import PolicyPlayer

ap = argparse.ArgumentParser()
ap.add_argument("--init", default="checkpoints/best_value.pt")
ap.add_argument("--out", required=True, help="prefix: OUT_iterNNNN.pt, OUT.jsonl")
ap.add_argument("--iters", type=int, default=1000)
ap.add_argument("--games", type=int, default=256, help="games per iteration")
ap.add_argument("--frac", type=float, default=0.25, help="share of the learner's positions trained on")
ap.add_argument("--lr", type=float, default=2e-5)
ap.add_argument("--temp", type=float, default=1.0)
ap.add_argument("--opp-temp", type=float, default=1.0, help="0: the opponent plays its argmax")
ap.add_argument("--vw", type=float, default=0.5, help="value loss weight")
ap.add_argument("--baseline", default="value", choices=["value", "none"])
ap.add_argument("--kl", type=float, default=0.0, help="weight of KL(pi || pi_init) on trained positions")
ap.add_argument("--open-max", type=int, default=8, help="random opening plies, uniform in 0..this")
ap.add_argument("--snapshot-every", type=int, default=50)
ap.add_argument("--self-frac", type=float, default=0.0, help="share of iterations against the current learner")
ap.add_argument("--eval-every", type=int, default=50)
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
learner = copy.deepcopy(init)
fastpath.prepare(learner, dev, prec)
learner.eval()  # batch-norm statistics stay those of the warm start; gradients still flow
for p in init.parameters():
    p.requires_grad_(False)
pool = [init]
opt = torch.optim.Adam(learner.parameters(), lr=a.lr)


def frozen(net):
    c = copy.deepcopy(net).float().to(memory_format=torch.contiguous_format).eval()
    for p in c.parameters():
        p.requires_grad_(False)
    return c


@torch.inference_mode()
def sample(net, s: States, idx, temp):
    with fastpath.autocast(dev, prec):
        logits = net(from_arrays(s.player[idx], s.opponent[idx], s.black_to_move[idx], s.history[idx], dev))["policy"]
    if temp == 0:
        return logits.float().argmax(-1).numpy()
    logits = logits.float() / temp
    return torch.multinomial(torch.softmax(logits, -1), 1, generator=gen).squeeze(1).numpy()


def play(opponent, n):
    """n sampled games, learner black in the even ones; the learner's positions and moves."""
    s = States.initial(n)
    learner_black = np.arange(n) % 2 == 0
    opening = rng.integers(0, a.open_max + 1, n)
    rec = {k: [] for k in ("player", "opponent", "black", "history", "move", "game")}
    ply = 0
    while True:
        over = s.is_over()
        if over.all():
            break
        legal = s.legal_actions()
        act = np.full(n, -1, np.int64)
        pas = ~over & legal[:, 64]
        act[pas] = 64
        mv = ~over & ~legal[:, 64]
        rnd = mv & (ply < opening)
        for i in np.nonzero(rnd)[0]:
            act[i] = rng.choice(np.nonzero(legal[i, :64])[0])
        mine = mv & ~rnd & (s.black_to_move == learner_black)
        theirs = mv & ~rnd & ~mine
        if mine.any():
            i = np.nonzero(mine)[0]
            act[i] = sample(learner, s, i, a.temp)
            for k, v in (("player", s.player[i]), ("opponent", s.opponent[i]), ("black", s.black_to_move[i]),
                         ("history", s.history[i]), ("move", act[i]), ("game", i)):
                rec[k].append(v)
        if theirs.any():
            i = np.nonzero(theirs)[0]
            act[i] = sample(opponent, s, i, a.opp_temp)
        s = s.step_where(~over, act)
        ply += 1
    diff = s.outcome()  # black's
    z = np.sign(np.where(learner_black, diff, -diff)).astype(np.float32)
    return {k: np.concatenate(v) for k, v in rec.items()}, z


def evaluate(it):
    net = frozen(learner)
    r = play_match(PolicyPlayer(net, dev), PolicyPlayer(init, dev), a.eval_games, seed=a.eval_seed, progress=False)
    return float(r.outcomes.mean())


log = open(a.out + ".jsonl", "a")
t0 = time.time()
hist = []
for it in range(1, a.iters + 1):
    self_play = rng.random() < a.self_frac
    opponent = learner if self_play else pool[rng.integers(len(pool))]
    tp = time.time()
    rec, z = play(opponent, a.games)
    tp = time.time() - tp
    m = len(rec["move"])
    pick = rng.choice(m, max(1, int(m * a.frac)), replace=False)
    b = from_arrays(rec["player"][pick], rec["opponent"][pick], rec["black"][pick], rec["history"][pick], dev)
    b["move"] = torch.from_numpy(rec["move"][pick])
    zt = torch.from_numpy(z[rec["game"][pick]])
    b = augment(b, generator=gen)
    with fastpath.autocast(dev, prec):
        out = learner(b)
        if a.kl:
            with torch.no_grad():
                ref = init(b)["policy"].float()
    logp = torch.log_softmax(out["policy"].float(), -1)
    lp = logp.gather(1, b["move"][:, None]).squeeze(1)
    v = out["value"].float()
    adv = zt - v.detach() if a.baseline == "value" else zt
    loss = -(adv * lp).mean() + a.vw * ((v - zt) ** 2).mean()
    if a.kl:
        p = torch.softmax(logp, -1)
        kl = (p * (logp - torch.log_softmax(ref, -1))).sum(-1).mean()
        loss = loss + a.kl * kl
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    with torch.no_grad():
        ent = -(torch.softmax(logp, -1) * logp).sum(-1).mean()
    hist.append((float(z.mean()), float(((v.detach() - zt) ** 2).mean()), float(ent)))
    if it % a.snapshot_every == 0:
        pool.append(frozen(learner))
    if it % 10 == 0:
        h = np.array(hist[-10:]).mean(0)
        print(f"it {it} {time.time()-t0:.0f}s play {tp:.1f}s positions {len(pick)} win {h[0]:+.3f} vloss {h[1]:.3f} "
              f"entropy {h[2]:.3f} pool {len(pool)}", flush=True)
    if it % a.eval_every == 0:
        sc = evaluate(it)
        path = f"{a.out}_iter{it:04d}.pt"
        save_network(frozen(learner), path, iteration=it)
        row = {"iter": it, "seconds": round(time.time() - t0), "eval": sc, "games": it * a.games}
        print("EVAL", row, flush=True)
        log.write(json.dumps(row) + "\n"); log.flush()
