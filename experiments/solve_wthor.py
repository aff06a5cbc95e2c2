"""Exactly solved WTHOR training positions (<= 11 empty squares, plies 49..57):
player, opponent, side, history, the mask of optimal squares and the final disc
difference. Usage: python experiments/solve_wthor.py WORKER MINUTES OUT.npz"""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))  # a checkout without pip install -e .
import sys, numpy as np, pandas as pd, time
from othello_learn.search.endgame import solve
from othello import bitboard as bb
from othello_learn.files import atomic_path
wid, minutes, dest = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
p=np.load('data/wthor/positions.npy', mmap_mode='r')
years = pd.read_csv("data/wthor/games.csv", usecols=["year"])["year"].to_numpy()
rng=np.random.default_rng(100+wid)
ply = p['ply']
cand = np.nonzero((ply >= 49) & (ply <= 57))[0]
cand = cand[years[p['game'][cand]] <= 2014]
rng.shuffle(cand)
out = {k: [] for k in ("player","opponent","black","history","best","value")}
t0=time.time(); n=0


def save():  # the whole file each time, written to a temporary file and renamed: a kill mid-write keeps the last one
    with atomic_path(dest if dest.endswith(".npz") else dest + ".npz") as tmp, open(tmp, "wb") as f:
        np.savez(f, player=np.array(out["player"],np.uint64), opponent=np.array(out["opponent"],np.uint64),
                 black=np.array(out["black"]), history=np.array(out["history"],np.int8), best=np.array(out["best"]), value=np.array(out["value"]))


saved = 0
for r in cand:
    e = p[r]; P, O = int(e['player']), int(e['opponent'])
    E = 64 - bin(P|O).count("1")
    if E > 11 or bb.legal_moves(P, O) == 0: continue
    v,best=solve(P,O)
    m = np.zeros(64, bool); m[best] = True
    out["player"].append(P); out["opponent"].append(O); out["black"].append(bool(e['black_to_move'])); out["history"].append(e['history'].copy())
    out["best"].append(m); out["value"].append(v)
    n += 1
    if n % 2000 == 0 or time.time()-t0 > minutes*60:
        save(); saved = n
        print(n, f"{time.time()-t0:.0f}s", flush=True)
        if time.time()-t0 > minutes*60: break
if saved < n:  # the candidates ran out between two saves
    save(); print(n, f"{time.time()-t0:.0f}s", flush=True)
