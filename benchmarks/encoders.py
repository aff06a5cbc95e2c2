"""Benchmark: time per call of the input encoders, raw and handcrafted.

    python benchmarks/encoders.py [--wthor-dir DIR] [--repeats 200,50,10] [--devices cpu,cuda]

Positions are the expert positions of one WTHOR year (the distribution the
predictor trains on), or, without the files, every position of random games.
Each repeat encodes a different batch, so a batch of one is not always the
same position; the figure is the median over the repeats. CUDA is timed with
synchronisation, when a GPU is there.
"""

from __future__ import annotations

import functools
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from othello_learn.cli import ArgumentParser, run_main  # noqa: E402
from othello_learn.files import UserError  # noqa: E402
from othello.notation import PASS  # noqa: E402
from othello.states import States  # noqa: E402
from othello_learn.models.batch import from_arrays  # noqa: E402
from othello_learn.models.encoders import ENCODERS  # noqa: E402
from othello_learn.models.fastpath import usable_device  # noqa: E402

BATCH_SIZES = (1, 256, 4096)


def wthor_positions(wthor_dir: Path | None, year: int):
    from othello_learn.data.dataset import find_wtb_files
    from othello_learn.data.replay import replay
    from othello_learn.data.wtb import read_wtb

    files = dict(find_wtb_files(wthor_dir, {year})) if wthor_dir and Path(wthor_dir).is_dir() else {}
    if year not in files:
        return None
    pos = replay(read_wtb(files[year]).games["moves"]).positions
    return pos["player"], pos["opponent"], pos["history"].astype(np.int64), pos["black_to_move"]


def random_game_positions(n_games: int, seed: int = 0):
    """Every position with a move to play of ``n_games`` random games, played
    side by side with ``othello.States`` (finished games drop out)."""
    rng = np.random.default_rng(seed)
    s = States.initial(n_games)
    out = []
    while len(s):
        s = s[~s.is_over()]
        legal = s.legal_actions()
        has = legal[:, :PASS].any(1)
        out.append((s.player[has], s.opponent[has], s.history[has], s.black_to_move[has]))
        s = s.step(np.argmax(legal * rng.random(legal.shape), axis=1), check=False)  # PASS where it is all there is
    return tuple(np.concatenate(x) for x in zip(*out))


def machine() -> str:
    cpu = platform.machine()
    if Path("/proc/cpuinfo").exists():
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), cpu)
    load = " load average %.2f %.2f %.2f," % os.getloadavg() if hasattr(os, "getloadavg") else ""
    return (f"machine: {cpu}, {len(os.sched_getaffinity(0))} cores,{load} Python {platform.python_version()}, "
            f"torch {torch.__version__} ({torch.get_num_threads()} threads), numpy {np.__version__}")


def time_encoder(fn, batches, device: str) -> float:
    cuda = device.startswith("cuda")
    fn(batches[0])  # warm-up (tables, allocator, kernels), then the repeats
    times = []
    for batch in batches[1:]:
        if cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn(batch)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wthor-dir", type=Path, default=None, help="default: ../shared/data/wthor when it exists")
    ap.add_argument("--year", type=int, default=2016, help="the year whose positions are encoded (default: %(default)s)")
    ap.add_argument("--repeats", default="200,50,10", help="timed repeats at each batch size 1, 256, 4096: three positive counts (default: %(default)s)")
    ap.add_argument("--devices", default=None,
                    help="default: cpu,cpu:torch and cuda when available; cpu:torch runs the bitboard work with "
                         "torch ops on CPU (the GPU code path) instead of numpy")
    args = ap.parse_args(argv)
    try:
        repeats = [int(r) for r in args.repeats.split(",")]
    except ValueError:
        repeats = []
    if len(repeats) != len(BATCH_SIZES) or min(repeats) < 1:
        raise UserError(f"--repeats {args.repeats}: expected {len(BATCH_SIZES)} positive counts, one per batch size "
                        f"{', '.join(map(str, BATCH_SIZES))}, as in 200,50,10")

    given = args.wthor_dir is not None
    if not given:
        from othello_learn.data.wthor import default_wthor_dir

        args.wthor_dir = default_wthor_dir()
    data = wthor_positions(args.wthor_dir, args.year)
    source = f"WTHOR {args.year} expert positions"
    if data is None and given:  # asked for, so not quietly replaced by random games
        raise UserError(f"--wthor-dir {args.wthor_dir}: no WTHOR file for {args.year} there")
    if data is None:
        data = random_game_positions(3000)
        source = "positions of 3,000 random games"
    n = len(data[0])
    order = np.random.default_rng(0).permutation(n)
    player, opponent, history, black = (x[order] for x in data)
    devices = args.devices.split(",") if args.devices else ["cpu", "cpu:torch"] + (
        ["cuda"] if torch.cuda.is_available() else [])
    for name in devices:  # before the timing, not a traceback after the first device's
        device, _, backend = name.partition(":")
        if backend not in ("", "torch"):
            raise UserError(f"--devices {args.devices}: {name!r}: the backend after ':' can only be torch (cpu:torch)")
        usable_device(device, "--devices")

    print(machine())
    print(f"positions: {source} ({n:,}); median over repeats of the time per call, each repeat a different batch")
    print(f"{'device':<9} {'batch':>6} {'repeats':>7} {'raw':>12} {'handcrafted':>14} {'ratio':>7} {'hc/position':>12}")
    for name in devices:
        device, _, backend = name.partition(":")
        raw, hc = (functools.partial(ENCODERS[e][0], backend=backend or None) for e in ("raw", "handcrafted"))
        for size, reps in zip(BATCH_SIZES, repeats):
            batches = []
            for r in range(reps + 1):
                idx = (np.arange(size) + r * size) % n
                batches.append(from_arrays(player[idx], opponent[idx], black[idx], history[idx], device))
            t_raw = time_encoder(raw, batches, device)
            t_hc = time_encoder(hc, batches, device)
            print(f"{name:<9} {size:>6} {reps:>7} {t_raw * 1e3:>9.3f} ms {t_hc * 1e3:>11.3f} ms "
                  f"{t_hc / t_raw:>6.0f}x {t_hc / size * 1e6:>9.1f} us")


if __name__ == "__main__":
    sys.exit(run_main(main))
