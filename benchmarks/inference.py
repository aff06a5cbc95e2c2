"""Benchmark: latency of one move prediction (encoding included) with the
reference 10x64 network, raw and handcrafted planes, batch of one position.

    python benchmarks/inference.py [--repeats 300] [--rounds 5] [--threads N] [--depth 10]
    python benchmarks/inference.py --checkpoints checkpoints/best_raw.pt checkpoints/best_handcrafted.pt

With ``--checkpoints``, the shipped networks instead (fp32, as play and the
engine run a single position).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from othello import Position  # noqa: E402
from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.settings import at_least  # noqa: E402
from othello_learn.models.batch import from_arrays  # noqa: E402
from othello_learn.models.nets import SIZE_LIMITS, NetConfig, build_network, load_network  # noqa: E402


def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=at_least(1), default=300, help="timed predictions a round (default: %(default)s)")
    ap.add_argument("--rounds", type=at_least(1), default=5, help="rounds; their medians' spread is reported "
                                                                  "(default: %(default)s)")
    ap.add_argument("--threads", type=at_least(1), default=torch.get_num_threads(),
                    help="torch threads (default: torch's, which follows OMP_NUM_THREADS: %(default)s here)")
    ap.add_argument("--depth", type=at_least(1, most=SIZE_LIMITS["depth"]), default=10,
                    help="the reference net's layers (default: %(default)s)")
    ap.add_argument("--checkpoints", nargs="+", type=Path, help="time these networks instead of the reference nets")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    pos = Position.from_transcript("f5d6c3d3c4f4c5b3c2e6c6b4b5d2e3a6c1b1")
    batch = from_arrays([pos.player], [pos.opponent], [pos.black_to_move], [[8, 9, 41, 33]])
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
               platform.machine()) if os.path.exists("/proc/cpuinfo") else platform.machine()
    if args.checkpoints:
        nets = {str(path): load_network(path) for path in args.checkpoints}
        print(f"{cpu}, {args.threads} threads, torch {torch.__version__}; one position")
    else:
        nets = {encoder: build_network(NetConfig("reference", encoder=encoder, depth=args.depth, width=64))
                for encoder in ("raw", "handcrafted")}
        print(f"{cpu}, {args.threads} threads, torch {torch.__version__}; reference net {args.depth}x64; one position")
    rounds: dict[str, list[float]] = {name: [] for name in nets}
    moves = {}
    with torch.inference_mode():
        for net in nets.values():
            net.eval()
            for _ in range(20):
                net(batch)
        # this machine is noisy: the nets take turns, round by round, in an order reversed every other
        # round (none always first), and the spread of each net's round medians is reported
        for r in range(args.rounds):
            for name in (list(nets) if r % 2 == 0 else list(nets)[::-1]):
                times = []
                for _ in range(args.repeats):
                    t = time.perf_counter()
                    moves[name] = int(nets[name](batch)["policy"].argmax())
                    times.append((time.perf_counter() - t) * 1e3)
                rounds[name].append(statistics.median(times))
    for name, r in rounds.items():
        print(f"{name:>12}: median {statistics.median(r):.3f} ms (round medians {min(r):.3f} .. "
              f"{max(r):.3f} over {args.rounds} rounds of {args.repeats}), move {moves[name]}")

if __name__ == "__main__":
    sys.exit(run_main(main))
