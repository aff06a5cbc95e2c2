"""The element-wise mean of networks of one architecture (e.g. consecutive
generations of a self-play run): the floating-point weights and BatchNorm
statistics are averaged, the rest taken from the first. Written through the
package's own checkpoint writer (temporary file, then rename).

    python experiments/average_nets.py --out avg.pt runs/rl_hc/nets/gen_00{13..21}.pt
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from othello_learn.models.nets import load_network, save_network  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("nets", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    nets = [load_network(p) for p in args.nets]
    states = [n.state_dict() for n in nets]
    mean = {k: (sum(s[k] for s in states) / len(states) if v.is_floating_point() else v) for k, v in states[0].items()}
    nets[0].load_state_dict(mean)
    save_network(nets[0], args.out, averaged=[str(p) for p in args.nets])


if __name__ == "__main__":
    with torch.no_grad():
        main()
