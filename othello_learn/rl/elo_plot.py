"""A loop run's Elo plot (OUT/elo.png), drawn from state.json's history after every commit:
the best network's Elo by generation and the gating matches when the run gates, a
--continuous run's --eval-vs match with its intervals when it does not."""

from __future__ import annotations

from pathlib import Path

from othello_learn.plots import pyplot, save_figure
from othello_learn.players.elo import finite_elo


def elo_series(history: list[dict]) -> dict[str, tuple[list, list, list | None]]:
    """What the run's Elo plot draws: label -> (generations, Elo, 95 % error bars or None).

    A --continuous run has no gate, so its best-network curve would be a flat 0: it
    draws only its --eval-vs match, the one measure it has, with each match's interval
    (none on the side of a bound past score 0 or 1, or one an old record lacks), which shows
    how much of the zigzag is noise. A clean sweep is counted as the gate's is
    (``finite_elo``) where the record has its game count (since 2026-11-25), else left out."""
    out = {}
    gated = [h for h in history if h.get("gate_score") is not None]
    if gated or not history:
        promoted = [h for h in history if h["promoted"]]
        out["best network"] = ([0] + [h["generation"] for h in history], [0.0] + [h["elo_best"] for h in history], None)
        out["candidate (gating match)"] = ([h["generation"] for h in gated], [h["elo_candidate"] for h in gated], None)
        out["promoted"] = ([h["generation"] for h in promoted], [h["elo_best"] for h in promoted], None)
    measured = [h for h in history if h.get("eval_elo") is not None or h.get("eval_games")]
    # --eval-vs is resumable: a curve per opponent, in the order the run met them (one line
    # through them all, named after the last, showed a change of opponent as a change of strength)
    for spec in dict.fromkeys(h.get("eval_vs") for h in measured):
        evals = [h for h in measured if h.get("eval_vs") == spec]
        elo = [finite_elo(h.get("eval_elo"), h.get("eval_score"), h.get("eval_games")) for h in evals]
        low, high = ([h.get(f"eval_elo_{side}") for h in evals] for side in ("low", "high"))
        bars = None
        if any(x is not None for x in low + high):
            bars = [[0.0 if lo is None else e - lo for e, lo in zip(elo, low)],
                    [0.0 if hi is None else hi - e for e, hi in zip(elo, high)]]
        out[f"candidate's 1-ply policy vs {spec}"] = ([h["generation"] for h in evals], elo, bars)
    return out


# The --eval-vs curves' colours, one an opponent (the best network's curves have theirs)
EVAL_COLOURS = ("tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:red")


def plot_elo(history: list[dict], path: Path) -> None:
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    styles = {"best network": dict(fmt="o-"), "candidate (gating match)": dict(fmt="x", color="gray"),
              "promoted": dict(fmt="o", color="green")}
    series = elo_series(history)
    fig, ax = plt.subplots(figsize=(8, 4))
    evals = [label for label in series if label not in styles]
    for label, (gens, elo, bars) in series.items():
        if not gens:  # nothing promoted (or gated) yet: no legend entry for points the figure lacks
            continue
        style = styles.get(label) or dict(fmt="s--", color=EVAL_COLOURS[evals.index(label) % len(EVAL_COLOURS)],
                                          capsize=2, elinewidth=0.8)
        ax.errorbar(gens, elo, yerr=bars, label=label, **style)
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xlabel("generation")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no generation 1.5
    ax.set_ylabel("Elo (relative to the initial network)" if "best network" in series
                  else "Elo against the --eval-vs opponent")
    ax.grid(alpha=0.3)
    if series:
        ax.legend()
    else:  # a --continuous run whose Elo is nowhere finite: say why on the figure
        ax.text(0.5, 0.5, _no_elo_why(history), ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def _no_elo_why(history: list[dict]) -> str:
    """Why a --continuous run's plot is empty: no --eval-vs match, or only clean
    sweeps from records without their game count, whose Elo is unbounded."""
    scores = sorted({h["eval_score"] for h in history if h.get("eval_score") is not None})
    if not scores:
        return "no Elo measured: a --continuous run has no gate;\nadd --eval-vs SPEC to measure each candidate"
    return (f"no finite Elo: each --eval-vs match was a clean sweep\n(score {' or '.join(f'{s:g}' for s in scores)}; "
            "its game count, which would bound it, was not recorded)")
