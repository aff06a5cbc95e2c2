"""Figures the commands draw (evaluation by phase, training curves, the loop's Elo):
one home for what every plot needs and is easy to get wrong.

Why: a plot comes at the end of long work, so its file name is checked before the
work (``check_plot_path``); it is drawn without a display (the Agg backend, so a
server or a CI job never needs one) and written like every other output, under a
temporary name then renamed (``save_figure``), with the format named explicitly
because the temporary name hides the extension matplotlib would pick it by."""

from __future__ import annotations

from pathlib import Path

from othello_learn.files import UserError, atomic_path, check_output


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend; imported on demand, since most runs draw nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_plot_path(path: Path, flag: str) -> None:
    """A plot's file name checked before the work that draws it: writable, and with
    an extension matplotlib writes (it picks the format by the extension)."""
    check_output(path, flag)
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in kinds:
        got = f"matplotlib cannot write .{suffix} files" if suffix else "no extension to pick the format by"
        raise UserError(f"{flag} {path}: {got}; give a name ending in one of .{', .'.join(sorted(kinds))}")


def save_figure(fig, path: Path, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` atomically in the format its extension names (PNG
    without one), then close it, also on failure."""
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, format=Path(path).suffix.lstrip(".").lower() or "png")
    finally:
        pyplot().close(fig)
    return Path(path)
