"""Fine-tune a residual net on expert positions with an auxiliary ownership head
(KataGo's: who owns each square when the game ends), or without it as the control.

Why: the residual net with a value head beats the reference FCNs by +100 Elo as a
1-ply player at 3 points of accuracy, and more expert training alone buys little;
the multi-task signal is the untested lever. One result a game is a thin signal;
the final board gives 64 targets a position, from the same games. The head (a 1x1
convolution on the trunk, tanh) exists only here and is dropped on save, so the
saved net is an ordinary checkpoint. --own-weight 0 is the control: the same data,
schedule and steps without the head's loss. The schedule runs on the clock
(cosine over --minutes), so two runs side by side get equal compute.
Research script, not tested."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import argparse, math, time
import numpy as np, pandas as pd, torch
from othello import bitboard as bb
from othello_learn.models import fastpath
from othello_learn.models.batch import augment, from_arrays
from othello_learn.models.losses import move_losses
from othello_learn.models.nets import load_network, save_network

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--init", default="checkpoints/best_handcrafted.pt")
ap.add_argument("--out", required=True)
ap.add_argument("--minutes", type=float, default=60.0, help="wall-clock budget; the cosine schedule runs on it")
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--lr", type=float, default=3e-4, help="peak (after 2 %% warm-up), then cosine to 0")
ap.add_argument("--wd", type=float, default=1e-4, help="AdamW weight decay")
ap.add_argument("--vw", type=float, default=0.5, help="value weight, as the supervised recipe")
ap.add_argument("--own-weight", type=float, default=1.0, help="ownership loss weight (mean squared error per square); 0: control")
ap.add_argument("--label-smoothing", type=float, default=0.0)
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()
torch.manual_seed(a.seed)

pos = np.load("data/wthor/positions.npy", mmap_mode="r")
games = pd.read_csv("data/wthor/games.csv", usecols=["year", "finished"])
g = np.asarray(pos["game"])
assert np.all(np.diff(g) >= 0), "positions are sorted by game"

# The final board of each game: its last recorded position with its move played.
last = np.nonzero(np.r_[g[1:] != g[:-1], True])[0]
lp, lo = np.asarray(pos["player"][last]), np.asarray(pos["opponent"][last])
nxt_p, mover = bb.play(lp, lo, bb.bit(np.asarray(pos["move"][last]).astype(np.int64)))  # mover's discs are the second
black_mover = np.asarray(pos["black_to_move"][last])
fin_black = np.full(games.shape[0], 0, np.uint64); fin_white = fin_black.copy(); ok = np.zeros(games.shape[0], bool)
fin_black[g[last]] = np.where(black_mover, mover, nxt_p); fin_white[g[last]] = np.where(black_mover, nxt_p, mover)
ok[g[last]] = bb.is_terminal(nxt_p, mover) & games["finished"].to_numpy()[g[last]]
rows = np.nonzero((games["year"].to_numpy()[g] <= 2014) & ok[g])[0]
print(f"games ending in a final position: {ok.sum()} of {len(ok)}; train positions {len(rows)}", flush=True)

net = load_network(a.init)
dev = torch.device("cpu")
prec = fastpath.auto_precision(dev)
width = net.config.width
head = torch.nn.Conv2d(width, 1, 1)
trunk = {}
net.blocks.register_forward_hook(lambda m, i, o: trunk.__setitem__("h", o))
fastpath.prepare(net, dev, prec); head = head.to(memory_format=torch.channels_last)
net.train()
params = list(net.parameters()) + list(head.parameters())
opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=a.wd)
rng = np.random.default_rng(a.seed); gen = torch.Generator().manual_seed(a.seed)
t0 = time.time(); budget = a.minutes * 60; step = 0; tot = {}
while True:
    frac = (time.time() - t0) / budget
    if frac >= 1: break
    lr = a.lr * min(1.0, frac / 0.02) * 0.5 * (1 + math.cos(math.pi * frac))
    for pg in opt.param_groups: pg["lr"] = lr
    r = np.sort(rows[rng.integers(0, len(rows), a.batch)])
    e = pos[r]
    b = from_arrays(e["player"], e["opponent"], e["black_to_move"], e["history"].astype(np.int64), dev)
    b["move"] = torch.from_numpy(e["move"].astype(np.int64))
    btm = e["black_to_move"]
    own = np.where(btm, fin_black[e["game"]], fin_white[e["game"]]); opp = np.where(btm, fin_white[e["game"]], fin_black[e["game"]])
    b["policy"] = torch.from_numpy(bb.bits(own).astype(np.float32) - bb.bits(opp).astype(np.float32))  # augment maps it as a square map
    b = augment(b, generator=gen)
    with fastpath.autocast(dev, prec):
        out = net(b)
        p = move_losses(out, b["move"], torch.from_numpy(np.sign(e["result"]).astype(np.float32)),
                        value_weight=a.vw, label_smoothing=a.label_smoothing)
        own_pred = torch.tanh(head(trunk["h"]).float().flatten(1))
        own_loss = torch.nn.functional.mse_loss(own_pred, b["policy"])
        loss = p["loss"] + a.own_weight * own_loss
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step(); step += 1
    for k, v in (("pol", p["policy_loss"]), ("val", p["value_loss"]), ("own", own_loss)):
        tot[k] = tot.get(k, 0) + float(v.detach())
    if step % 500 == 0:
        print(step, f"{time.time()-t0:.0f}s lr {lr:.2e}", {k: round(v / 500, 4) for k, v in tot.items()}, flush=True); tot = {}
net.eval()
save_network(net.float().to(memory_format=torch.contiguous_format), a.out)
print("saved", a.out, "after", step, "steps")
