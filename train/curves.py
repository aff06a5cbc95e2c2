"""Learning curves of one or more runs logged with ``--logger csv``: validation
accuracy against training positions seen, in one PNG (W&B runs get these
plots in W&B itself).

    python train/curves.py runs/cpu_raw_long runs/cpu_hc_long --out results/cpu_long_curves.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import yaml


def load_curve(run: Path, metric: str = "val/acc") -> pd.DataFrame:
    """``positions`` seen and ``metric`` at each validation of a run's latest CSV log."""
    logs = sorted((run / "csv").glob("version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[1]))
    if not logs:
        raise FileNotFoundError(f"{run}: no csv/version_*/metrics.csv (was it trained with --logger csv?)")
    frame = pd.read_csv(logs[-1])
    if metric not in frame:
        raise ValueError(f"{logs[-1]}: no column {metric!r} (has {', '.join(frame.columns)})")
    cfg_path = run / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text()) if cfg_path.exists() else {}
    batch = int((cfg.get("data") or {}).get("batch_size", 256))
    curve = frame[["step", metric]].dropna().drop_duplicates("step", keep="last")
    return pd.DataFrame({"positions": (curve["step"] + 1) * batch, metric: curve[metric]})


def plot(runs: list[Path], out: Path, metric: str = "val/acc") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for run in runs:
        curve = load_curve(run, metric)
        ax.plot(curve["positions"] / 1e6, 100 * curve[metric], marker="o", ms=3, label=run.name)
    ax.set_xlabel("training positions seen (millions)")
    ax.set_ylabel(f"{metric} (%)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run folders of train/train.py")
    ap.add_argument("--out", type=Path, required=True, help="PNG to write")
    ap.add_argument("--metric", default="val/acc")
    args = ap.parse_args(argv)
    try:
        print(plot(args.runs, args.out, args.metric))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
