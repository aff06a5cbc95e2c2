"""Relabel positions (a ``dagger_label.py`` file) with an ensemble's policy: the mean over
checkpoints of each one's move probabilities averaged over the board's 8 symmetries
(the ``tta:A,B,...`` player of ``ensemble_player.py``). ``pi01`` becomes that mean and
``move`` its argmax; every other field is kept, so ``finetune.py --lab`` reads the
result (less the search's root Q of its own move, `q_move`/`q_own`, which no longer
describe `move`). Why: the ensemble plays better than its members as a 1-ply player, and
distilling it into one net is a target of the net's own kind (a mean of same-size nets),
unlike a search's corrections."""
import argparse
import sys as _sys
import time
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
import numpy as np
import torch

from othello_learn.files import atomic_path
from othello_learn.models import fastpath
from othello_learn.models.batch import from_arrays
from othello_learn.models.nets import load_network
from othello_learn.train.evaluate import predict

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--lab", required=True, help="a dagger_label.py .npz")
ap.add_argument("--nets", required=True, help="comma-separated checkpoints")
ap.add_argument("--part", default="0/1", help="I/N: label the I-th of N slices")
ap.add_argument("--batch", type=int, default=4096)
ap.add_argument("--out", required=True)
a = ap.parse_args()

src = dict(np.load(a.lab))
i, n = map(int, a.part.split("/"))
lo, hi = len(src["player"]) * i // n, len(src["player"]) * (i + 1) // n
src = {k: v[lo:hi] for k, v in src.items()}
dev = torch.device("cpu")
prec = fastpath.auto_precision(dev)
nets = [load_network(p).eval() for p in a.nets.split(",")]
for net in nets:
    fastpath.prepare(net, dev, prec)
N = len(src["player"])
pi = np.empty((N, 64), np.float16)
t0 = time.time()
with torch.inference_mode(), fastpath.autocast(dev, prec):
    for s in range(0, N, a.batch):
        e = min(N, s + a.batch)
        b = from_arrays(src["player"][s:e], src["opponent"][s:e], src["black"][s:e],
                        src["history"][s:e].astype(np.int64), dev)
        pi[s:e] = (sum(predict(net, b, 8) for net in nets) / len(nets)).float().numpy()
        if s // a.batch % 20 == 0:
            print(f"{e}/{N} {e / (time.time() - t0):.0f}/s", flush=True)
src["pi01"] = pi
src["move"] = pi.astype(np.float32).argmax(1).astype(np.int8)
# q_move / q_own are the search's root Q of ITS move and of the net's own: read beside the new `move`, agreement.py's
# "where the search leads" lines and finetune.py --lab-min-gap would mix the ensemble's move with the search's gap.
for k in ("q_move", "q_own"):
    src.pop(k, None)
with atomic_path(a.out if a.out.endswith(".npz") else a.out + ".npz") as tmp, open(tmp, "wb") as f:  # never half-written
    np.savez(f, **src)
print("changed from the net's own argmax:", float((src["move"] != src["own"]).mean()), flush=True)
