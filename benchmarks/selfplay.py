"""Benchmark: self-play throughput (games per hour, network evaluations per
second) of the batched MCTS with a given network size and simulation count.

    python benchmarks/selfplay.py --games 512 --simulations 100 --blocks 10 --width 64   # the GPU target
    python benchmarks/selfplay.py --games 32 --simulations 32 --blocks 4 --width 64      # CPU scale

Games are complete self-play games from the start (resignation off, so the
figure is not flattered by short games); the network has random weights
(the speed does not depend on them). ``--arch reference`` times the issue's
10x64 conv net (no value head: value 0), ``resnet`` a residual net with one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from models.nets import build_network  # noqa: E402
from selfplay.mcts import Evaluator, MCTSConfig  # noqa: E402
from selfplay.selfplay import SelfPlayConfig, play_games  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--games", type=int, default=64)
    ap.add_argument("--simulations", type=int, default=32)
    ap.add_argument("--arch", default="reference", choices=["reference", "resnet"])
    ap.add_argument("--blocks", type=int, default=10, help="depth (reference) or residual blocks (resnet)")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--encoder", default="raw")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    net = build_network(args.arch, encoder=args.encoder, depth=args.blocks, blocks=args.blocks, width=args.width,
                        value_head=True).to(args.device).eval()
    ev = Evaluator(net, args.device)
    play_games(ev, min(8, args.games), MCTSConfig(simulations=2), SelfPlayConfig(resign_threshold=None), progress=False)
    ev.calls = ev.positions = 0
    if args.device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    games = play_games(ev, args.games, MCTSConfig(simulations=args.simulations), SelfPlayConfig(resign_threshold=None))
    if args.device == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t
    name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"device {name}; {args.arch} {args.blocks}x{args.width} {args.encoder}; {args.simulations} simulations/move; "
          f"{args.games} games at once")
    print(f"{len(games.winner)} games, {len(games.player):,} searched positions in {dt:.1f} s: "
          f"{len(games.winner) / dt * 3600:,.0f} games/hour, {ev.positions / dt:,.0f} network evaluations/s "
          f"in {ev.calls:,} batched calls (mean batch {ev.positions / max(ev.calls, 1):.0f})")


if __name__ == "__main__":
    main()
