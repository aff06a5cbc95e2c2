"""Distil an ensemble into one net online, over the experts' positions (and optionally
the player's own), instead of over a fixed set of relabelled positions.

Why: the tenth session distilled the ``tta:`` ensemble of three fine-tunes (+44 Elo as
a 1-ply player) from 333 k of the player's own positions, labelled once; the student took
in a fifth of the changes and played worse. Knowledge distillation usually needs the
teacher over the whole input distribution, many times. Here every batch is labelled
afresh: each teacher sees the batch under its own random symmetry, and the mean of their
probabilities, mapped back, is an unbiased sample of the 24-pass ``tta:`` ensemble's
policy. The cross-entropy is linear in its target, so the expected gradient is the one
towards the full ensemble at 3 forward passes instead of 24. The schedule runs on the
clock (cosine over --minutes). Research script, not tested."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import argparse, math, time
import numpy as np, pandas as pd, torch
from othello.symmetry import SQUARE_MAP
from othello_learn.models import fastpath
from othello_learn.models.batch import augment, from_arrays, transform_batch
from othello_learn.models.losses import policy_loss, value_loss
from othello_learn.models.nets import load_network, save_network

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--init", default="checkpoints/best_selfplay.pt", help="the student's start")
ap.add_argument("--teachers", required=True, help="comma-separated checkpoints")
ap.add_argument("--own", nargs="*", default=[], help="dagger_label.py files: the player's own positions (labels unused)")
ap.add_argument("--own-frac", type=float, default=0.0, help="share of each batch from --own")
ap.add_argument("--expert-ce", type=float, default=0.0, help="weight of the experts' move beside the teacher (expert rows)")
ap.add_argument("--out", required=True)
ap.add_argument("--minutes", type=float, default=60.0)
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--lr", type=float, default=3e-4, help="peak (after 2 %% warm-up), then cosine to 0")
ap.add_argument("--wd", type=float, default=1e-4)
ap.add_argument("--vw", type=float, default=0.5, help="value weight on the experts' results")
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()
if bool(a.own) != (a.own_frac > 0):
    ap.error("--own and --own-frac go together (the own positions' share of each batch)")
torch.manual_seed(a.seed)

pos = np.load("data/wthor/positions.npy", mmap_mode="r")
games = pd.read_csv("data/wthor/games.csv", usecols=["year"])
rows = np.nonzero(games["year"].to_numpy()[pos["game"]] <= 2014)[0]
OWN = {k: np.concatenate([np.load(f)[k] for f in a.own]) for k in ("player", "opponent", "black", "history")} if a.own else None
n_own = int(round(a.batch * a.own_frac)) if OWN else 0
n_exp = a.batch - n_own
print(f"expert positions {len(rows)}, own {0 if OWN is None else len(OWN['player'])}; a batch: {n_exp} + {n_own}", flush=True)

dev = torch.device("cpu")
prec = fastpath.auto_precision(dev)
net = load_network(a.init)
fastpath.prepare(net, dev, prec)
teachers = [load_network(p).eval() for p in a.teachers.split(",")]
for t in teachers:
    fastpath.prepare(t, dev, prec)
back = torch.as_tensor(np.asarray(SQUARE_MAP), dtype=torch.int64)  # (8, 64): square s under k


def teacher_probs(b):
    total = 0
    for t in teachers:
        ks = torch.randint(8, (b["player"].shape[0],), generator=gen)
        probs = torch.softmax(t(transform_batch(b, ks))["policy"].float(), -1)
        total = total + torch.gather(probs, 1, back[ks])
    return total / len(teachers)


net.train()
opt = torch.optim.AdamW(net.parameters(), lr=a.lr, weight_decay=a.wd)
rng = np.random.default_rng(a.seed); gen = torch.Generator().manual_seed(a.seed)
t0 = time.time(); budget = a.minutes * 60; step = 0; tot = {}
while True:
    frac = (time.time() - t0) / budget
    if frac >= 1:
        break
    lr = a.lr * min(1.0, frac / 0.02) * 0.5 * (1 + math.cos(math.pi * frac))
    for g in opt.param_groups:
        g["lr"] = lr
    e = pos[np.sort(rows[rng.integers(0, len(rows), n_exp)])]
    pl, op, bl, hi = e["player"], e["opponent"], e["black_to_move"], e["history"].astype(np.int64)
    if n_own:
        i = rng.integers(0, len(OWN["player"]), n_own)
        pl, op = np.r_[pl, OWN["player"][i]], np.r_[op, OWN["opponent"][i]]
        bl, hi = np.r_[bl, OWN["black"][i]], np.r_[hi, OWN["history"][i].astype(np.int64)]
    b = from_arrays(pl, op, bl, hi, dev)
    with torch.no_grad(), fastpath.autocast(dev, prec):
        target = teacher_probs(b)
    expert = torch.nn.functional.one_hot(torch.from_numpy(e["move"].astype(np.int64)), 64).float()
    target[:n_exp] = (1 - a.expert_ce) * target[:n_exp] + a.expert_ce * expert
    b["policy"] = target
    b = augment(b, generator=gen)
    with fastpath.autocast(dev, prec):
        out = net(b)
        kd = policy_loss(out["policy"], b["policy"])
        loss = kd
        if "value" in out:
            v = value_loss(out["value"][:n_exp], torch.from_numpy(np.sign(e["result"]).astype(np.float32)))
            loss = loss + a.vw * v * n_exp / a.batch
            tot["val"] = tot.get("val", 0) + float(v.detach())
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step(); step += 1
    tot["kd"] = tot.get("kd", 0) + float(kd.detach())
    if step % 200 == 0:
        print(step, f"{time.time() - t0:.0f}s lr {lr:.2e}", {k: round(v / 200, 4) for k, v in tot.items()}, flush=True)
        tot = {}
net.eval()
save_network(net.float().to(memory_format=torch.contiguous_format), a.out)
print("saved", a.out, "after", step, "steps")
