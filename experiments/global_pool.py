"""A global-pooling bias in the residual net's policy head (KataGo's: Wu 2019,
"Accelerating Self-Play Learning in Go", section 3.3), as a research check of issue 9:
is the 1-ply policy short of what the whole board says, not of what a square's
neighbourhood says? The policy head reads each square's trunk features alone (two 1x1
convolutions), so anything global (how mobile each side is, how many squares are left,
which regions are odd) reaches a move's logit only through the 3x3 tower. Here a second
1x1 convolution of the trunk is pooled over the board (mean and max), and a linear map
of that adds a bias to each of the head's 32 channels after its batch norm:

    logits = conv(relu(bn(conv(h)) + W [mean(g), max(g)]))   with g = relu(bn(conv(h)))

W starts at zero, so a net given the bias plays exactly as its source until it trains.
Research script, not tested:

    python experiments/global_pool.py grow checkpoints/best_selfplay.pt sp_gp.pt     # plays as its source
    python experiments/global_pool.py run experiments/finetune.py --init sp_gp.pt ...  # any script, loading it
    python selfplay/arena.py --import experiments.global_pool --a policy:sp_gp.pt ...

The bias's weights are saved beside the network's under ``gp.`` keys; importing this
module teaches ``load_network`` to read them (a plain install refuses such a file:
the weights do not fit the config).
"""
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
import types

import torch
from torch import nn

from othello_learn.models import nets

POOLED = 32  # channels pooled


class GlobalBias(nn.Module):
    def __init__(self, width: int, head_channels: int):
        super().__init__()
        self.pool = nn.Sequential(nn.Conv2d(width, POOLED, 1, bias=False), nn.BatchNorm2d(POOLED), nn.ReLU())
        self.bias = nn.Linear(2 * POOLED, head_channels)
        nn.init.zeros_(self.bias.weight)
        nn.init.zeros_(self.bias.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        g = self.pool(h).flatten(2)
        return self.bias(torch.cat([g.mean(-1), g.amax(-1)], 1))[:, :, None, None]


def _trunk(self, x):
    h = self.blocks(self.stem(x))
    value = self.value_head(h).squeeze(-1) if self.value_head is not None else None
    conv, bn, relu, out = self.policy_head
    p = out(relu(bn(conv(h)) + self.gp(h)))
    return p.flatten(1), value


def attach(net: nets.ResNet) -> nets.ResNet:
    """``net`` with a zero global bias in its policy head (in place)."""
    if not isinstance(net, nets.ResNet):
        raise SystemExit("global_pool: a residual net only")
    head_channels = net.policy_head[0].out_channels
    net.gp = GlobalBias(net.policy_head[0].in_channels, head_channels).to(next(net.parameters()).device)
    net.trunk = types.MethodType(_trunk, net)
    return net


_plain_from_state = nets.network_from_state


def _network_from_state(cfg, state_dict, path):
    """A checkpoint with ``gp.`` weights is a net with the bias; any other loads as before."""
    gp = {k[3:]: v for k, v in state_dict.items() if k.startswith("gp.")}
    if not gp:
        return _plain_from_state(cfg, state_dict, path)
    net = _plain_from_state(cfg, {k: v for k, v in state_dict.items() if not k.startswith("gp.")}, path)
    attach(net).gp.load_state_dict(gp)
    return net.eval()


nets.network_from_state = _network_from_state


def grow(src: str, dst: str) -> None:
    net = attach(nets.load_network(src))
    nets.save_network(net, dst)


if __name__ == "__main__":
    from experiments.grow_or_run import main

    main(__doc__, grow)
