"""Offline fine-tuning of a net on search targets: recorded self-play games
(--games, their improved-policy targets), relabelled positions (--lab, from
reanalyse.py: the search's move, its improved policy or half each) and exactly
solved endgames (--end, from solve_wthor.py), mixed with expert positions of the
training years (--expert: the share of each batch). Research script, not tested."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import argparse, glob, time
import numpy as np, pandas as pd, torch
from othello_learn.models import fastpath
from othello_learn.models.batch import augment, from_arrays
from othello_learn.models.losses import move_losses, l2_penalty
from othello_learn.models.nets import load_network, save_network
from othello_learn.rl.selfplay import SelfPlayGames

ap = argparse.ArgumentParser()
ap.add_argument("--init", default="checkpoints/best_value.pt")
ap.add_argument("--games", nargs="*", default=[])
ap.add_argument("--out", required=True)
ap.add_argument("--steps", type=int, default=2000)
ap.add_argument("--batch", type=int, default=512)
ap.add_argument("--lr", type=float, default=1e-4)
ap.add_argument("--l2", type=float, default=0.0)
ap.add_argument("--expert", type=float, default=0.5, help="fraction of each batch from expert games")
ap.add_argument("--vw", type=float, default=1.0)
ap.add_argument("--expert-vw", type=float, default=0.5)
ap.add_argument("--expert-min-result", type=int, default=None,
                help="keep only the expert moves whose mover ended the game with at least this disc difference "
                     "(1: the winners' moves, 0: and draws'): behaviour cloning filtered by the outcome")
ap.add_argument("--max-ply", type=int, default=60, help="with --games: only their positions before this ply")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--end", nargs="*", default=[])
ap.add_argument("--end-frac", type=float, default=0.0)
ap.add_argument("--end-target", default="best", choices=["best", "pi"],
                help="endgame policy target: uniform over the disc-optimal moves, or (pi, from dagger_label.py "
                     "--solve-empties) the labelling net's prior over the moves that keep the perfect-play result")
ap.add_argument("--anchor-self", action="store_true",
                help="the expert part of each batch is labelled by the initial net's own policy (self-distillation: "
                     "keep what it plays) instead of the experts' moves")
ap.add_argument("--freeze-bn", action="store_true",
                help="keep batch norm's running statistics as they are (batches skewed to one phase would move them)")
ap.add_argument("--only", default=None,
                help="train only the parameters whose names start with this (value_head.: refit the value head "
                     "on the experts' results; with --freeze-bn the rest of the net stays exactly as it was)")
ap.add_argument("--lab", nargs="*", default=[])
ap.add_argument("--lab-target", default="move", choices=["move","pi01","mix"])
ap.add_argument("--lab-min-gap", type=float, default=None,
                help="with --lab-target move: keep the net's own argmax as the label unless the search's move "
                     "leads it by this much in root Q (labels from dagger_label.py, which records q_move and q_own)")
a = ap.parse_args()
if a.lab and a.games:
    ap.error("--lab and --games both fill the non-expert, non-endgame part of each batch: give one")
if bool(a.end) != (a.end_frac > 0):
    ap.error("--end and --end-frac go together (the endgame positions' share of each batch)")
_rest = a.batch - int(round(a.batch * a.end_frac)) - int(round(a.batch * a.expert))  # the --lab / --games part
if _rest < 0 or (_rest > 0) != bool(a.lab or a.games):
    ap.error("--expert + --end-frac: below 1 with --lab or --games (they fill the rest of each batch), else exactly 1")
torch.manual_seed(a.seed)
sp = None if not a.games else SelfPlayGames.concat([SelfPlayGames.load(f) for f in sorted(set(sum((glob.glob(g) for g in a.games), [])))])
keep = np.nonzero(sp.ply < a.max_ply)[0] if sp else None
END_KEYS = ("player","opponent","black","history","best","value") + (("pi",) if a.end_target == "pi" else ())
END = {k: np.concatenate([np.load(f)[k] for f in a.end]) for k in END_KEYS} if a.end else None
LAB_KEYS = ("player","opponent","black","history","move","pi01","value") + (("own","q_move","q_own") if a.lab_min_gap is not None else ())
LAB = {k: np.concatenate([np.load(f)[k] for f in a.lab]) for k in LAB_KEYS} if a.lab else None
if LAB and a.lab_min_gap is not None:
    gap = LAB["q_move"].astype(np.float32) - LAB["q_own"].astype(np.float32)
    own = LAB["own"]
    LAB["move"] = np.where(gap >= a.lab_min_gap, LAB["move"], own)
    print(f"labels: the search's move where it leads by >= {a.lab_min_gap} in Q, else the net's own: "
          f"{(LAB['move'] != own).mean():.3f} of positions corrected", flush=True)
if LAB: print("labelled positions", len(LAB["player"]), flush=True)
if END: print("endgame positions", len(END["player"]), flush=True)
pos = np.load("data/wthor/positions.npy", mmap_mode="r")
games = pd.read_csv("data/wthor/games.csv", usecols=["year"])
train_rows = np.nonzero(games["year"].to_numpy()[pos["game"]] <= 2014)[0]
if a.expert_min_result is not None:
    train_rows = train_rows[np.asarray(pos["result"][train_rows]) >= a.expert_min_result]
print("expert train positions", len(train_rows), flush=True)
net = load_network(a.init)
dev = torch.device("cpu")
prec = fastpath.auto_precision(dev)
fastpath.prepare(net, dev, prec)
teacher = None
if a.anchor_self:
    teacher = load_network(a.init); fastpath.prepare(teacher, dev, prec); teacher.eval()
net.train()
if a.freeze_bn:
    for m in net.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.eval()
opt = torch.optim.Adam([p for n, p in net.named_parameters() if a.only is None or n.startswith(a.only)], lr=a.lr)
rng = np.random.default_rng(a.seed); gen = torch.Generator().manual_seed(a.seed)
nd = int(round(a.batch * a.end_frac)); ne = int(round(a.batch * a.expert)); ns = a.batch - ne - nd
t0 = time.time(); tot = {}
for step in range(a.steps):
    lr = a.lr * 0.5 * (1 + np.cos(np.pi * step / a.steps))
    for g in opt.param_groups: g["lr"] = lr
    loss = 0
    with fastpath.autocast(dev, prec):
        if ns:
            if LAB:
                i = rng.integers(0, len(LAB["player"]), ns)
                b = from_arrays(LAB["player"][i], LAB["opponent"][i], LAB["black"][i], LAB["history"][i].astype(np.int64), dev)
                hard = torch.nn.functional.one_hot(torch.from_numpy(LAB["move"][i].astype(np.int64)), 64).float()
                soft = torch.from_numpy(LAB["pi01"][i].astype(np.float32)); soft = soft / soft.sum(1, keepdim=True)
                b["policy"] = hard if a.lab_target == "move" else soft if a.lab_target == "pi01" else 0.5 * (hard + soft)
                b["outcome"] = torch.from_numpy(LAB["value"][i].astype(np.float32))
            else:
                i = keep[rng.integers(0, len(keep), ns)]
                b = from_arrays(sp.player[i], sp.opponent[i], sp.black_to_move[i], sp.history[i], dev)
                b["policy"] = torch.from_numpy(sp.policy[i].astype(np.float32)); b["outcome"] = torch.from_numpy(sp.outcome[i].astype(np.float32))
            b = augment(b, generator=gen)
            p = move_losses(net(b), b["policy"], b["outcome"], value_weight=a.vw)
            loss = loss + p["loss"] * ns / a.batch
            tot["sp_pol"] = tot.get("sp_pol", 0) + float(p["policy_loss"].detach()); tot["sp_val"] = tot.get("sp_val", 0) + float(p["value_loss"].detach())
        if ne:
            r = np.sort(train_rows[rng.integers(0, len(train_rows), ne)])
            e = pos[r]
            b = from_arrays(e["player"], e["opponent"], e["black_to_move"], e["history"].astype(np.int64), dev)
            b["policy"] = torch.nn.functional.one_hot(torch.from_numpy(e["move"].astype(np.int64)), 64).float()
            b["outcome"] = torch.from_numpy(np.sign(e["result"]).astype(np.float32))
            b = augment(b, generator=gen)
            if teacher is not None:
                with torch.no_grad():
                    b["policy"] = torch.softmax(teacher(b)["policy"].float(), -1)
            p = move_losses(net(b), b["policy"], b["outcome"], value_weight=a.expert_vw)
            loss = loss + p["loss"] * ne / a.batch
            tot["ex_pol"] = tot.get("ex_pol", 0) + float(p["policy_loss"].detach()); tot["ex_val"] = tot.get("ex_val", 0) + float(p["value_loss"].detach())
        if nd:
            i = rng.integers(0, len(END["player"]), nd)
            b = from_arrays(END["player"][i], END["opponent"][i], END["black"][i], END["history"][i].astype(np.int64), dev)
            if a.end_target == "pi":
                b["policy"] = torch.from_numpy(END["pi"][i].astype(np.float32))
            else:
                best = torch.from_numpy(END["best"][i].astype(np.float32)); b["policy"] = best / best.sum(1, keepdim=True)
            b["outcome"] = torch.from_numpy(np.sign(END["value"][i]).astype(np.float32))
            b = augment(b, generator=gen)
            p = move_losses(net(b), b["policy"], b["outcome"], value_weight=a.expert_vw)
            loss = loss + p["loss"] * nd / a.batch
            tot["end_pol"] = tot.get("end_pol", 0) + float(p["policy_loss"].detach()); tot["end_val"] = tot.get("end_val", 0) + float(p["value_loss"].detach())
        if a.l2: loss = loss + a.l2 * l2_penalty(net)
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    if (step + 1) % 200 == 0:
        print(step + 1, f"{time.time()-t0:.0f}s", {k: round(v / 200, 4) for k, v in tot.items()}, flush=True); tot = {}
net.eval()
save_network(net.float().to(memory_format=torch.contiguous_format), a.out)
print("saved", a.out)
