"""Functional ensembles as 1-ply players (arena ``--import experiments.ensemble_player``):

- ``ens:A,B,...``: the argmax of the mean move probabilities of several checkpoints;
- ``tta:A[,B,...]``: the same with each checkpoint's probabilities averaged over the 8
  symmetries of the board (``train/evaluate.py --tta 8`` as a player).

Why: weight averages of best_handcrafted's fine-tunes ("model soups") play no
better than their parts. An average of their *outputs* is a different object; if it
plays clearly better than one net, distilling it into one net is a training signal
the self-play sections have not tried. These players measure the ceiling first."""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
import numpy as np
import torch

from othello_learn.models.batch import from_states
from othello_learn.models.nets import load_network
from othello_learn.models.fastpath import default_device
from othello_learn.players.base import Player
from othello_learn.players.specs import register_player
from othello_learn.train.evaluate import predict


class EnsemblePlayer(Player):
    def __init__(self, nets, tta=1):
        self.device = torch.device(default_device())
        self.nets = [n.to(self.device).eval() for n in nets]
        self.tta = tta

    @torch.inference_mode()
    def probs(self, states):
        batch = from_states(states, self.device)
        return sum(predict(n, batch, self.tta) for n in self.nets) / len(self.nets)

    def select(self, states, rng, moves=None):
        return self.probs(states).argmax(-1).cpu().numpy().astype(np.int64)


def _ens(args):
    if len(args) != 1 or not args[0]:
        raise ValueError("expected ens:CKPT,CKPT,...")
    return EnsemblePlayer([load_network(p) for p in args[0].split(",")])


def _tta(args):
    if len(args) != 1 or not args[0]:
        raise ValueError("expected tta:CKPT[,CKPT,...]")
    return EnsemblePlayer([load_network(p) for p in args[0].split(",")], tta=8)


register_player("ens", _ens)
register_player("tta", _tta)
