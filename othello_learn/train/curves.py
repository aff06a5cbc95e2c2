"""Learning curves of one or more runs logged with ``--logger csv``: validation
accuracy against training positions seen and, where the run logged its
training time (``time/hours``), against wall-clock hours, in one PNG (W&B runs
get these plots in W&B itself). A resumed run writes a new CSV version each
time; all versions are joined, the later one winning a step both logged.

    python train/curves.py runs/cpu_raw_long runs/cpu_hc_long --out results/cpu_long_curves.png
    python train/curves.py runs/cpu_value_fast --metric val/value_loss --out value_loss.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import yaml

from othello.files import run_main


HOURS = "time/hours"


def load_curve(run: Path, metric: str = "val/acc") -> pd.DataFrame:
    """``positions`` seen, ``hours`` of training (NaN where not logged) and ``metric``
    at each validation of a run, over all its CSV versions (one per resume)."""
    logs = sorted((run / "csv").glob("version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[1]))
    if not logs:
        raise FileNotFoundError(f"{run}: no csv/version_*/metrics.csv (was it trained with --logger csv?)")
    frame = pd.concat([pd.read_csv(p) for p in logs], ignore_index=True)
    if metric not in frame:
        raise ValueError(f"{run}: no column {metric!r} in its CSV logs (has {', '.join(frame.columns)})")
    cfg_path = run / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text()) if cfg_path.exists() else {}
    batch = int((cfg.get("data") or {}).get("batch_size", 256))
    hours = frame[HOURS] if HOURS in frame else pd.Series(float("nan"), index=frame.index)
    rows = pd.DataFrame({"step": frame["step"], "hours": hours, metric: frame[metric]})
    rows = rows.dropna(subset=[metric]).drop_duplicates("step", keep="last").sort_values("step")
    return pd.DataFrame({"positions": (rows["step"].to_numpy() + 1) * batch, "hours": rows["hours"].to_numpy(),
                         metric: rows[metric].to_numpy()})


def is_fraction(metric: str) -> bool:
    """Accuracies are logged as fractions and shown in percent; losses are shown as they are."""
    name = metric.rsplit("/", 1)[-1]
    return "acc" in name or "top" in name


def plot(runs: list[Path], out: Path, metric: str = "val/acc") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = {run.name: load_curve(run, metric) for run in runs}
    timed = any(c["hours"].notna().any() for c in curves.values())
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(12 if timed else 7, 4.2), squeeze=False)
    scale, unit = (100, " (%)") if is_fraction(metric) else (1, "")
    for name, curve in curves.items():
        axes[0, 0].plot(curve["positions"] / 1e6, scale * curve[metric], marker="o", ms=3, label=name)
        if timed and curve["hours"].notna().any():
            axes[0, 1].plot(curve["hours"], scale * curve[metric], marker="o", ms=3, label=name)
    axes[0, 0].set_xlabel("training positions seen (millions)")
    if timed:
        axes[0, 1].set_xlabel("training time (hours)")
    for ax in axes[0]:
        ax.set_ylabel(metric + unit)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run folders of train/train.py")
    ap.add_argument("--out", type=Path, required=True, help="PNG to write")
    ap.add_argument("--metric", default="val/acc", help="logged metric to plot (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        print(plot(args.runs, args.out, args.metric))
    except (FileNotFoundError, ValueError) as err:  # returned, not raised: callers (tests) read the status
        print(f"{Path(sys.argv[0]).name}: error: {err}", file=sys.stderr)
        return 2
    return 0


def cli() -> None:
    """The ``othello-curves`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
