"""An evaluation's result as people read it: the per-phase table ``othello-eval`` prints and
the PNG it draws (``--plot``); ``evaluate.py`` computes the result."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from othello_learn.plots import pyplot, save_figure


def format_table(result: dict) -> str:
    lines = [f"{'moves':>7}  {'positions':>9}  {'branching':>9}  {'accuracy':>8}  {'symmetric':>9}"]
    for ph in result["phases"]:
        if ph["positions"]:
            lines.append(f"{ph['moves']:>7}  {ph['positions']:>9,}  {ph['branching_factor']:>9.2f}  "
                         f"{100 * ph['accuracy']:>7.2f}%  {100 * ph['symmetric_accuracy']:>8.2f}%")
    lines.append(f"{'all':>7}  {result['positions']:>9,}  {'':>9}  {100 * result['accuracy']:>7.2f}%  "
                 f"{100 * result['symmetric_accuracy']:>8.2f}%   (top-3 {100 * result['top3_accuracy']:.2f}%)")
    if result.get("cross_entropy") is not None:
        lines.append(f"cross-entropy of the moves played: {result['cross_entropy']:.4f} nats")
    if "policy_temperature" in result:
        lines.append(f"policy temperature {result['policy_temperature']:.3f}: cross-entropy "
                     f"{result['cross_entropy_at_temperature']:.4f} nats at it "
                     f"({result['calibration_positions']:,} positions)")
    return "\n".join(lines)


def plot(result: dict, path: Path, title: str) -> None:
    plt = pyplot()
    phases = [ph for ph in result["phases"] if ph["positions"]]
    x = np.arange(len(phases))
    fig, ax = plt.subplots(figsize=(9, 5))
    ax.bar(x, [100 * ph["accuracy"] for ph in phases], color="#3a7d44", label="top-1 accuracy")
    ax.plot(x, [100 * ph["symmetric_accuracy"] for ph in phases], "k.", label="symmetric variant")
    ax.axhline(100 * result["accuracy"], color="#3a7d44", ls="--", lw=1, label=f"overall {100 * result['accuracy']:.1f}%")
    ax.set_xticks(x, [ph["moves"] for ph in phases], rotation=45)
    ax.set_xlabel("moves")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax2 = ax.twinx()
    ax2.plot(x, [ph["branching_factor"] for ph in phases], color="#b5651d", marker="o", label="branching factor")
    ax2.set_ylabel("average legal moves", color="#b5651d")
    ax2.set_ylim(0, max(ph["branching_factor"] for ph in phases) * 1.2)
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(handles, [h.get_label() for h in handles], loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4,
              fontsize=8, frameon=False)
    ax.set_title(title)
    fig.tight_layout()
    save_figure(fig, path)
