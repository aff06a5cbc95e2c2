"""WTHOR reading, writing, replay and the dataset builder."""

import json
import random
import subprocess
import sys

import numpy as np
import pytest

import reference_engine as ref
from othello import PASS
from othello_learn.cli import run_main
from othello_learn.data import dataset, wtb
from othello_learn.data.replay import replay
from othello_learn.data.wthor import main as _wthor_main

REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


def wthor_main(argv):
    """The command as a user runs it: errors become one line and exit status 2."""
    return run_main(_wthor_main, argv)


def _random_games(n, seed):
    rng = random.Random(seed)
    games = []
    for i in range(n):
        # a few games stop early, as resigned or timed-out records do
        record, board, color = ref.random_game(rng, stop_after=rng.choice([None, None, None, 20]))
        games.append((record, board, color))
    return games


def _moves(record):
    return [m for _, _, m in record if m != PASS]


def _black_score(board):
    b = sum(v == 1 for row in board for v in row)
    return (64 + ref.final_score(board)) // 2 if ref.game_over(board) else b


@pytest.fixture(scope="module")
def games():
    return _random_games(200, seed=7)  # with the plain engine: ~3 s a worker


@pytest.fixture
def wthor_dir(tmp_path, games):
    d = tmp_path / "wthor"
    d.mkdir()
    half = len(games) // 2
    for year, part in ((2001, games[:half]), (2002, games[half:])):
        recs = wtb.make_games([_moves(r) for r, _, _ in part], [_black_score(b) for _, b, _ in part],
                              tournament=1, black=1, white=2)
        wtb.write_wtb(d / f"WTH_{year}.wtb", recs, year)
    wtb.write_names(d / "WTHOR.JOU", ["???", "Alice Black", "Bob White"])
    wtb.write_names(d / "WTHOR.TRN", ["???", "Synthetic Open"])
    return d


def test_wtb_round_trip(tmp_path, games):
    recs = wtb.make_games([_moves(r) for r, _, _ in games[:10]], [33] * 10, tournament=5, black=6, white=7)
    wtb.write_wtb(tmp_path / "WTH_1999.wtb", recs, 1999, depth=20)
    back = wtb.read_wtb(tmp_path / "WTH_1999.wtb")
    assert back.year == 1999 and back.depth == 20 and np.array_equal(back.games, recs)
    wtb.write_names(tmp_path / "WTHOR.JOU", ["Ünal Ça", "x" * 40])
    assert wtb.read_names(tmp_path / "WTHOR.JOU") == ["Ünal Ça", "x" * 19]


def test_replay_matches_reference(games):
    recs = wtb.make_games([_moves(r) for r, _, _ in games], [_black_score(b) for _, b, _ in games])
    r = replay(recs["moves"], recs["black_score"])
    assert (r.error_ply == -1).all()
    expected = []
    for g, (record, board, _) in enumerate(games):
        history = [-1] * 4
        final = ref.final_score(board) if ref.game_over(board) else 2 * _black_score(board) - 64
        ply = 0
        for rboard, color, move in record:
            if move != PASS:
                p, o = ref.to_bitboards(rboard, color)
                expected.append((p, o, g, move, ply, tuple(history), color == 1, color * final))
                ply += 1
            history = [move] + history[:3]
    pos = r.positions
    assert len(pos) == len(expected)
    got = list(zip(pos["player"].tolist(), pos["opponent"].tolist(), pos["game"].tolist(), pos["move"].tolist(),
                   pos["ply"].tolist(), map(tuple, pos["history"].tolist()), pos["black_to_move"].tolist(),
                   pos["result"].tolist()))
    assert got == expected
    assert any(64 in e[5] for e in expected), "the sample should contain passes"
    assert r.finished.sum() < len(games), "the sample should contain unfinished records"


def test_build_and_load(wthor_dir, tmp_path, games, capsys):
    out = tmp_path / "ds"
    assert wthor_main(["--wthor-dir", str(wthor_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2001" in printed and "total" in printed
    summary = json.loads((out / "summary.json").read_text())
    n_pos = sum(len(_moves(r)) for r, _, _ in games)
    half = len(games) // 2  # 2001's games, then 2002's
    assert summary["years"]["2001"]["games"] == half
    assert summary["years"]["2001"]["positions"] + summary["years"]["2002"]["positions"] == n_pos
    assert summary["total"]["skipped_games"] == 0
    ds = dataset.WthorDataset(out)
    assert len(ds) == n_pos and ds.positions.dtype.itemsize <= 32
    assert isinstance(ds.positions, np.memmap)
    g = ds.games
    assert list(g["black"].unique()) == ["Alice Black"] and list(g["tournament"].unique()) == ["Synthetic Open"]
    y2002 = ds.positions[slice(*summary["years"]["2002"]["position_range"])]
    assert (y2002["game"] >= half).all() and len(y2002) == summary["years"]["2002"]["positions"]
    first = g.loc[half, "first_position"]
    assert ds.positions[first]["game"] == half and ds.positions[first]["ply"] == 0
    assert len(ds.split("train", {"train": (2001, 2001)})) == summary["years"]["2001"]["positions"]
    with pytest.raises(ValueError, match="no year 2000"):  # it returned the years it had, without a word
        ds.split("train", {"train": (2000, 2001)})


def test_years_filter(wthor_dir, tmp_path):
    out = tmp_path / "ds"
    assert wthor_main(["--wthor-dir", str(wthor_dir), "--out", str(out), "--years", "2002", "--quiet"]) == 0
    assert list(json.loads((out / "summary.json").read_text())["years"]) == ["2002"]
    assert dataset.parse_years("1977-1979, 2016") == {1977, 1978, 1979, 2016}
    with pytest.raises(ValueError):
        dataset.parse_years("2016-2015")


def test_illegal_game_is_skipped_and_reported(wthor_dir, tmp_path, capsys, games):
    path = wthor_dir / "WTH_2001.wtb"
    w = wtb.read_wtb(path)
    w.games["moves"][3, 10] = 11  # a1 cannot be legal at ply 11
    w.games["moves"][5, 0] = 99  # no such square
    wtb.write_wtb(path, w.games, 2001)
    out = tmp_path / "ds"
    assert wthor_main(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "WTH_2001.wtb: game 3 (counted from 0" in err and "illegal move a1 as move 11" in err
    assert "WTH_2001.wtb: game 5" in err and "byte 99" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["years"]["2001"]["skipped_games"] == 2 and summary["years"]["2001"]["games"] == len(games) // 2
    assert {(s["game"], s["ply"]) for s in summary["skipped"]} == {(3, 11), (5, 1)}
    ds = dataset.WthorDataset(out)
    assert not np.isin(ds.positions["game"], [3, 5]).any()
    assert (ds.positions["game"] == 4).sum() > 0
    assert ds.games.loc[3, "error"].startswith("illegal move a1")


@pytest.mark.parametrize("damage", ["truncate", "count", "header"])
def test_malformed_file_stops_and_leaves_nothing(wthor_dir, tmp_path, damage, capsys):
    path = wthor_dir / "WTH_2002.wtb"
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) - 30]
    elif damage == "count":
        data[4] += 1
    else:
        data = data[:10]
    path.write_bytes(bytes(data))
    out = tmp_path / "ds"
    assert wthor_main(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 2
    assert "WTH_2002.wtb" in capsys.readouterr().err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["wthor"], "no temporary folder is left behind"


def test_existing_output_survives_a_failed_build(wthor_dir, tmp_path):
    out = tmp_path / "ds"
    assert wthor_main(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 0
    before = (out / "positions.npy").read_bytes()
    (wthor_dir / "WTH_2002.wtb").write_bytes(b"\0" * 20)
    assert wthor_main(["--wthor-dir", str(wthor_dir), "--out", str(out), "--quiet"]) == 2
    assert (out / "positions.npy").read_bytes() == before


def test_missing_folder_is_a_clear_error(tmp_path, capsys):
    assert wthor_main(["--wthor-dir", str(tmp_path / "nope"), "--out", str(tmp_path / "ds"), "--quiet"]) == 2
    assert "nope" in capsys.readouterr().err


def test_real_wthor_counts_match_the_shared_readme(shared_wthor, tmp_path):
    """The script, run as a user runs it, on the real 2015-2016 files."""
    out = tmp_path / "ds"
    proc = subprocess.run([sys.executable, str(REPO / "data_tools" / "wthor.py"), "--wthor-dir", str(shared_wthor),
                           "--out", str(out), "--years", "2015-2016"], capture_output=True, text=True, check=True)
    assert "120,466" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["years"]["2016"] == {"games": 2013, "positions": 120466, "skipped_games": 0, "warned_games": 0,
                                        "position_range": [115235, 115235 + 120466]}
    assert summary["years"]["2015"]["positions"] == 115235
    ds = dataset.WthorDataset(out)
    assert ds.games["black"].str.len().gt(0).mean() > 0.99
    # A sample of real games, replayed by the reference engine from their positions.
    pos = ds.positions
    for g in range(0, 3939, 197):
        recs = pos[pos["game"] == g]
        board, color = ref.start_board(), 1
        for r in recs:
            if not ref.legal(board, color):
                color = -color
            assert (int(r["player"]), int(r["opponent"])) == ref.to_bitboards(board, color)
            board = ref.apply(board, color, r["move"] // 8, r["move"] % 8)
            color = -color


def test_all_real_years_match_the_shared_readme(shared_wthor, tmp_path):
    result = dataset.build(shared_wthor, progress=False)
    years = result.summary["years"]

    def total(lo, hi, key):
        return sum(v[key] for y, v in years.items() if lo <= int(y) <= hi)

    assert (total(1977, 2014, "games"), total(1977, 2014, "positions")) == (115509, 6912964)
    assert (total(2015, 2015, "games"), total(2015, 2015, "positions")) == (1926, 115235)
    assert (total(2016, 2016, "games"), total(2016, 2016, "positions")) == (2013, 120466)
    assert (total(2017, 2018, "games"), total(2017, 2018, "positions")) == (4878, 291596)
    assert result.summary["total"]["skipped_games"] == 0
    g = result.games
    finished = g[g["finished"]]
    assert (finished["result"] == 2 * finished["black_score"].astype(int) - 64).all(), "replayed scores agree with WTHOR's"


def test_download_fetches_zipped_years(tmp_path, monkeypatch, games):
    """--download, against a stand-in for the FFO's site (no network in tests)."""
    import io
    import zipfile

    import othello_learn.data.wthor as cli

    served = []

    def fake_urlopen(url, timeout):
        served.append(url)
        year = int(url.rsplit("_", 1)[1][:4])
        raw = tmp_path / f"src_{year}.wtb"
        wtb.write_wtb(raw, wtb.make_games([_moves(r) for r, _, _ in games[:5]], [32] * 5), year)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.write(raw, f"WTH_{year}.wtb")
        return io.BytesIO(buf.getvalue())

    monkeypatch.setattr(cli.urllib.request, "urlopen", fake_urlopen)
    target = tmp_path / "dl"
    out = tmp_path / "ds"
    assert cli.main(["--download", "--wthor-dir", str(target), "--years", "2001-2002", "--out", str(out), "--quiet"]) == 0
    assert served == [cli.DOWNLOAD_URL.format(year=y) for y in (2001, 2002)]
    assert json.loads((out / "summary.json").read_text())["total"]["games"] == 10
    assert cli.main(["--download", "--wthor-dir", str(target), "--years", "2001-2002", "--out", str(out), "--quiet"]) == 0
    assert len(served) == 2, "files already there are not fetched again"


# ---------------------------------------------------------------- mutation-testing additions


def test_replay_infers_a_pass_only_where_the_reference_has_one():
    """Three records: a reference game with a pass (kept whole); one opening with e3, legal for
    white but not for black, who has moves (no pass: illegal at ply 0); and the pass game with
    the move after its pass replaced by an empty square the reference says the other side cannot
    play either (illegal there). Bad games report their ply and byte and keep no positions."""
    from othello.notation import square_to_wthor

    rng = random.Random(0)
    wrong = None
    while wrong is None:
        record, board, _ = ref.random_game(rng)
        plies = [i for i, (_, _, m) in enumerate(record) if m == PASS and i + 1 < len(record)]
        if not plies:
            continue
        pass_board, pass_color, _ = record[plies[0]]
        assert not ref.legal(pass_board, pass_color)
        playable = {8 * r + c for r, c in ref.legal(pass_board, -pass_color)}
        wrong = next((s for s in range(64) if pass_board[s // 8][s % 8] == 0 and s not in playable), None)
    moves = _moves(record)
    at = sum(m != PASS for _, _, m in record[:plies[0]])  # index in ``moves`` of the move after the pass
    e3 = 8 * 2 + 4
    assert (2, 4) in ref.legal(ref.start_board(), -1) and (2, 4) not in ref.legal(ref.start_board(), 1)
    rows = [moves, [e3] + moves[1:], moves[:at] + [wrong] + moves[at + 1:]]
    data = np.zeros((3, 60), np.uint8)
    for g, row in enumerate(rows):
        data[g, :len(row)] = square_to_wthor(np.array(row))
    r = replay(data)
    assert r.error_ply.tolist() == [-1, 0, at]
    assert r.error_move.tolist() == [0, square_to_wthor(e3), square_to_wthor(wrong)]
    assert r.n_moves.tolist() == [len(moves), 0, 0]
    assert set(r.positions["game"].tolist()) == {0} and len(r.positions) == len(moves)
    assert bool(r.finished[0]) == ref.game_over(board) and not r.finished[1:].any()


def _header_bytes(n_games=0, n_records=0, year=2001, board_size=8, depth=22, kind=0):
    h = np.zeros(1, dtype=wtb.HEADER_DTYPE)
    h[0] = (20, 1, 1, 1, n_games, n_records, year, board_size, kind, depth, 0)
    return h.tobytes()


def test_wtb_header_checks_at_their_boundaries(tmp_path):
    """16 bytes is the header: 15 is a clear error, not numpy's; depth 60 (a game solved
    from its start) is valid and 61 is not; a board size other than 0 or 8 is refused."""
    game = wtb.make_games([[37, 43]], [33]).tobytes()
    path = tmp_path / "WTH_2001.wtb"
    path.write_bytes(_header_bytes(1)[:15])
    with pytest.raises(wtb.WthorFormatError, match="WTH_2001.wtb: 15 bytes is shorter than the 16-byte"):
        wtb.read_wtb(path)
    path.write_bytes(_header_bytes(1, depth=60) + game)
    assert wtb.read_wtb(path).depth == 60
    path.write_bytes(_header_bytes(1, depth=61) + game)
    with pytest.raises(wtb.WthorFormatError, match="depth 61"):
        wtb.read_wtb(path)
    for size in (6, 10):
        path.write_bytes(_header_bytes(1, board_size=size) + game)
        with pytest.raises(wtb.WthorFormatError, match=f"board size {size} is not 8x8"):
            wtb.read_wtb(path)
    path.write_bytes(_header_bytes(1, board_size=0) + game)
    assert wtb.read_wtb(path).games["moves"][0, :2].tolist() == [56, 64]


def test_name_tables_stop_at_the_nul_and_check_their_size(tmp_path):
    """A name ends at its first NUL byte, whatever follows it in the 20-byte record; a file
    longer than its header's count says is an error, as a shorter one is."""
    path = tmp_path / "WTHOR.JOU"
    records = b"Alice\0junk left over".ljust(20, b"\0") + b"Bob".ljust(20, b"\0")
    path.write_bytes(_header_bytes(n_records=2) + records)
    assert wtb.read_names(path) == ["Alice", "Bob"]
    path.write_bytes(_header_bytes(n_records=2) + records + b"\0" * 20)
    with pytest.raises(wtb.WthorFormatError, match="header says 2 records of 20 bytes"):
        wtb.read_names(path)


def test_make_games_stores_a_given_theoretical_score():
    recs = wtb.make_games([[37], [37, 43]], [40, 20], theoretical=[36, 28])
    assert recs["theoretical_score"].tolist() == [36, 28] and recs["black_score"].tolist() == [40, 20]
    assert wtb.make_games([[37]], [40])["theoretical_score"].tolist() == [40]


def test_the_table_names_each_split_by_the_years_the_build_holds():
    """A build of 2013-2014 printed "train 1977-2014" for its two years."""
    from othello_learn.data.wthor import format_table

    year = {"games": 2, "positions": 120, "skipped_games": 0}
    table = format_table({"years": {"1977": year, "1990": year, "2013": year, "2014": year, "2016": year},
                          "total": {"games": 10, "positions": 600, "skipped_games": 0}})
    rows = [line.split("  ")[0].strip() for line in table.splitlines()]
    assert "train 1977-2014 (4 years)" in rows and "test 2016" in rows and not any(r.startswith("val") for r in rows)
    table = format_table({"years": {"2013": year, "2014": year},
                          "total": {"games": 4, "positions": 240, "skipped_games": 0}})
    assert "train 2013-2014" in [line.split("  ")[0].strip() for line in table.splitlines()]


def test_a_wtb_of_solitaires_is_refused_not_replayed_as_games(tmp_path):
    """Header byte 13 is the file's kind, 1 for WTHOR's solitaires (positions to solve, not games
    from the start): it was not read, so such a file was replayed as games into the dataset."""
    game = wtb.make_games([[37, 43]], [33]).tobytes()
    path = tmp_path / "WTH_2001.wtb"
    path.write_bytes(_header_bytes(1, kind=1) + game)
    with pytest.raises(wtb.WthorFormatError, match="WTH_2001.wtb: header type 1 is not 0 \\(games\\); a solitaire"):
        wtb.read_wtb(path)
    path.write_bytes(_header_bytes(1, kind=0) + game)
    assert len(wtb.read_wtb(path).games) == 1
