"""othello_learn.plots: the one place figures are checked, drawn and written."""

import pytest

from othello_learn.files import UserError
from othello_learn.plots import check_plot_path, pyplot, save_figure


def figure():
    fig, ax = pyplot().subplots()
    ax.plot([0, 1], [1, 0])
    return fig


def test_the_format_follows_the_name_and_nothing_else_is_left(tmp_path):
    png, svg = tmp_path / "a.png", tmp_path / "sub" / "b.svg"
    save_figure(figure(), png)
    save_figure(figure(), svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:400]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["a.png", "b.svg"]


def test_a_failed_save_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    out = tmp_path / "a.png"
    out.write_bytes(b"old")
    fig = figure()
    monkeypatch.setattr(fig, "savefig", lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError):
        save_figure(fig, out)
    assert out.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["a.png"]


@pytest.mark.parametrize("name", ["plot", "plot.xyz"])
def test_a_name_matplotlib_cannot_write_is_refused_before_any_work(tmp_path, name):
    with pytest.raises(UserError, match="--plot .*(no extension|cannot write .xyz)"):
        check_plot_path(tmp_path / name, "--plot")


def test_upper_case_or_no_extension_default_dpi_and_the_figure_is_closed(tmp_path):
    """``Curve.PNG`` is a PNG name like ``curve.png``; a name without an extension is written
    as PNG; 120 dots an inch by default (6.4 x 4.8 inches: 768 x 576 pixels); the figure
    is closed once written, so long runs that draw many do not pile them up."""
    import struct

    plt = pyplot()
    check_plot_path(tmp_path / "Curve.PNG", "--plot")
    for name in ("Curve.PNG", "plot"):
        fig = figure()
        fig.set_size_inches(6.4, 4.8)
        save_figure(fig, tmp_path / name)
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (768, 576)
        assert fig.number not in plt.get_fignums()


def test_a_folder_given_as_the_plot_is_refused_and_drawing_needs_no_display(tmp_path):
    import matplotlib

    (tmp_path / "dir.png").mkdir()
    with pytest.raises(UserError, match="is a folder"):
        check_plot_path(tmp_path / "dir.png", "--plot")
    before = matplotlib.get_backend()
    try:
        matplotlib.use("svg")
        pyplot()
        assert matplotlib.get_backend().lower() == "agg"
    finally:
        matplotlib.use(before)
