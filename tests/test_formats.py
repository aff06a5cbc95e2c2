"""GGF, transcripts and OBF: hand-made records, random engine games, real WTHOR games when built."""

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from othello import Position
from othello.formats import (
    FormatError,
    GameRecord,
    format_ggf,
    format_obf,
    parse_ggf,
    parse_ggf_game,
    parse_obf,
    play_with_passes,
    read_transcript,
)
from othello.notation import PASS, format_transcript, parse_square

REPO = Path(__file__).resolve().parents[1]
START_BO = "BO[8 ---------------------------O*------*O--------------------------- *]"


def random_game(seed: int, stop_at: int | None = None) -> list[int]:
    """Uniform random legal moves (passes explicit) to the end, or ``stop_at`` plies."""
    rng = np.random.default_rng(seed)
    pos, moves = Position(), []
    while not pos.is_over() and (stop_at is None or len(moves) < stop_at):
        legal = pos.legal_moves() or [PASS]
        m = int(legal[rng.integers(len(legal))])
        moves.append(m)
        pos = pos.play(m)
    return moves


def replay(moves, start=None):
    pos = start or Position()
    for m in moves:
        pos = pos.play(m)
    return pos


def test_hand_made_ggf_with_passes_times_and_tags():
    text = ("(;GM[Othello]PC[GGS/os]DT[2003.01.02_03:04:05.UTC]PB[alice]PW[bob]RB[2100.5]RW[1900]"
            "TI[15:00//02:00]TY[8]RE[+2.000]" + START_BO + "B[f5//1.5]W[D6/-0.50/2]B[c3];)")
    (g,) = parse_ggf(text)
    assert g.moves == [parse_square("f5"), parse_square("d6"), parse_square("c3")]
    assert (g.black, g.white, g.black_rating, g.white_rating) == ("alice", "bob", "2100.5", "1900")
    assert g.result == 2.0 and g.time_control == "15:00//02:00" and g.place == "GGS/os"
    assert g.times == [1.5, 2.0, None] and g.evals == [None, -0.5, None]
    assert g.final == Position.from_transcript("f5d6c3")
    again = parse_ggf_game(format_ggf(g))
    assert again == g
    assert "B[f5//1.5]W[d6/-0.5/2]B[c3]" in format_ggf(g)


def test_ggf_explicit_and_missing_passes_agree():
    moves = next(m for s in range(2000) if PASS in (m := random_game(s)))
    rec = GameRecord(moves=moves)
    text = format_ggf(rec)
    assert "[PA]" in text
    assert parse_ggf_game(text).moves == moves
    # A writer that leaves passes out: the pass is inferred from the colours.
    stripped = GameRecord(moves=moves)
    no_pass = text.replace("W[PA]", "").replace("B[PA]", "")
    assert parse_ggf_game(no_pass).moves == stripped.moves
    # "pass" spelled out is read too.
    assert parse_ggf_game(text.replace("[PA]", "[pass]")).moves == moves


def test_play_with_passes_writes_the_missing_passes():
    """What the external engines are told: a game whose passes were left out gets them back."""
    moves = next(m for s in range(2000) if PASS in (m := random_game(s)))
    for written in (moves, [m for m in moves if m != PASS]):
        assert play_with_passes(Position(), written) == (moves, replay(moves))
    with pytest.raises(FormatError, match=r"the game, ply 2 \(a1\)"):
        play_with_passes(Position(), [parse_square("f5"), parse_square("a1")], "the game")


def test_replay_names_an_illegal_moves_ply_among_the_moves_given():
    """``Position.replay``'s error carries the move's 1-based index among the moves given (an
    inferred pass is not counted) in its ``ply``, its message (what ``from_transcript`` shows)
    and, as ``reason``, the rule alone: ``play_with_passes`` words its own line from the two."""
    from othello.game import IllegalMoveError
    from othello.notation import format_transcript

    moves = next(m for s in range(2000) if PASS in (m := random_game(s))[:-3] and m[m.index(PASS) + 1] != PASS)
    first = moves.index(PASS)
    bad = moves[:first] + [moves[first + 1], parse_square("d4")]  # passes left out; d4 is never empty again
    with pytest.raises(IllegalMoveError) as e:
        Position().replay(bad)
    assert e.value.ply == len(bad) == first + 2 and not e.value.reason.startswith("move")
    assert str(e.value) == f"move {len(bad)} (d4): {e.value.reason}"
    with pytest.raises(IllegalMoveError, match=rf"^move {len(bad)} \(d4\): "):
        Position.from_transcript(format_transcript(bad))
    with pytest.raises(IllegalMoveError) as e:  # no square at all: naming it failed with a plain ValueError
        Position().replay([parse_square("f5"), 99])
    assert (str(e.value), e.value.ply, e.value.reason) == ("move 2 (99): no such square: 99", 2, "no such square: 99")
    with pytest.raises(IllegalMoveError) as e:  # a pass is named as one, not as square 64
        Position().replay([parse_square("f5"), PASS])
    assert str(e.value).startswith("move 2 (pass): ") and e.value.ply == 2


def test_play_with_passes_reads_moves_from_any_iterable():
    """The moves may come as an iterator (a generator of squares): replayed once, and an
    illegal one still named by its square, not a TypeError from indexing the used-up iterator."""
    moves = next(m for s in range(2000) if PASS in (m := random_game(s)))
    assert play_with_passes(Position(), iter([m for m in moves if m != PASS])) == (moves, replay(moves))
    with pytest.raises(FormatError, match=r"^game, ply 2 \(a1\): "):
        play_with_passes(Position(), iter([parse_square("f5"), parse_square("a1")]))

def test_ggf_other_start_position():
    moves = random_game(7)
    mid = replay(moves[:20])
    rec = GameRecord(moves=moves[20:], start=mid, black="x", white="y")
    text = format_ggf(rec)
    back = parse_ggf_game(text)
    assert back.start == mid and back.moves == moves[20:] and back.final == replay(moves)
    # A white-to-move start is written with 'O' as the side to move.
    if not mid.black_to_move:
        assert text.split("BO[8 ")[1].split("]")[0].endswith(" O")


@pytest.mark.parametrize("bad, where", [
    ("(;GM[Othello]TY[8]" + START_BO + "B[f5]W[f5];)", "ply 2"),        # occupied square
    ("(;GM[Othello]TY[8]" + START_BO + "B[f5]B[d6];)", "ply 2"),        # black twice, white can move
    ("(;GM[Othello]TY[8]" + START_BO + "B[f5]W[z9];)", "ply 2"),        # not a move
    ("(;GM[Othello]TY[10]B[f5];)", "TY[10]"),
    ("(;GM[Othello]TY[s10r20]B[f5];)", "TY[s10r20]: only 8x8"),
    ("(;GM[Othello]TY[8a]B[f5];)", "TY[8a]: anti Othello"),             # its RE would read as the opposite
    ("(;GM[Othello]TY[s8r20a]B[f5];)", "anti Othello"),
    ("(;GM[Othello]TY[8A]B[f5];)", "TY[8A]: anti Othello"),
    ("(;GM[Chess]TY[8]B[f5];)", "GM[Chess]"),
    ("(;GM[Othello]TY[8]BO[8 ---- *]B[f5];)", "64 squares"),
    ("(;GM[Othello]TY[8]B[f5]", "never ends"),
    ("(;GM[Othello]TY[8]" + START_BO + "B[f5/nan/];)", "ply 1: bad number 'nan'"),  # float() reads it; no
    ("(;GM[Othello]TY[8]" + START_BO + "B[f5//inf];)", "ply 1: bad number 'inf'"),  # writer could write it
    ("(;GM[Othello]TY[8]" + START_BO + "B[f5]W[d6/1e400/];)", "ply 2: bad number '1e400'"),
    ("(;GM[Othello]TY[8]" + START_BO + "B[f5/abc/];)", "ply 1: bad number 'abc'"),
])
def test_ggf_errors_name_the_place(bad, where):
    with pytest.raises(FormatError, match=None) as e:
        parse_ggf(bad, what="games.ggf")
    assert where in str(e.value) and "games.ggf" in str(e.value)


def test_a_record_must_say_it_is_othello_and_a_random_start_needs_its_board():
    """``(;)`` and ``(;B[f5];)`` were read as games from the start, and a random start (``TY[8r20]``)
    without its BO was replayed from the standard one. What real files hold still reads: Edax's
    lower-case GM without TY or BO, NBoard's game with no move yet."""
    for bad, msg in (("(;)", "no GM[Othello]"), ("(;B[f5];)", "no GM[Othello]"),
                     ("(;PB[x]TY[8]" + START_BO + ";)", "no GM[Othello]"),
                     ("(;GM[Othello]TY[8r20]B[f5];)", "TY[8r20] starts from a random board, but there is no BO"),
                     ("(;GM[Othello]TY[8kr20]B[f5];)", "TY[8kr20] starts from a random board")):  # r not first
        with pytest.raises(FormatError, match=re.escape(f"x.ggf: {msg}")):
            parse_ggf_game(bad, "x.ggf")
    edax = parse_ggf_game("(;GM[othello]PC[Edax]PB[edax]PW[me]RE[+0.000]B[f5]W[d6];)")
    assert edax.start == Position() and edax.final == Position.from_transcript("f5d6")
    nboard = parse_ggf_game("(;GM[Othello]PC[NBoard]DT[2014-02-21 20:52:27 GMT]PB[a]PW[b]RE[?]TI[15:00]TY[8]"
                            + START_BO + ";)")
    assert nboard.moves == [] and nboard.start == Position()
    assert parse_ggf_game("(;GM[Othello]TY[8r20]" + START_BO + "B[f5];)").tags["TY"] == "8r20"


def test_an_error_names_the_ply_as_written_when_the_record_left_a_pass_out():
    """Black has no move after a3: a record that leaves the pass out writes white's next move as
    its 9th; the error named ply 10, counting the pass the parser put back."""
    head = "(;GM[Othello]TY[8]" + START_BO + "".join(
        f"{'BW'[i % 2]}[{m}]" for i, m in enumerate(["c4", "c3", "e6", "b4", "a4", "a5", "c2", "a3"]))
    assert parse_ggf_game(head + "W[d2];)").moves[8:] == [PASS, parse_square("d2")]
    with pytest.raises(FormatError, match=re.escape("g.ggf, ply 9 (h8): ")):
        parse_ggf_game(head + "W[h8];)", "g.ggf")
    with pytest.raises(FormatError, match=re.escape("g.ggf, ply 10 (h8): ")):
        parse_ggf_game(head + "W[d2]B[h8];)", "g.ggf")


def test_a_result_beyond_64_discs_and_a_negative_time_are_refused():
    """RE[999] and B[f5//-5] were read as they came: a disc difference no game has and a clock
    that ran backwards. Edax's RE[-127.000] (its "no score", for a game not played out) is no
    result, written back as it came; a komi game's result is the disc difference less the komi."""
    g = "(;GM[Othello]TY[8]" + START_BO
    for bad, msg in ((g + "RE[999]B[f5];)", "x.ggf: RE[999]: black's disc difference is between -64 and +64"),
                     (g + "RE[-65.000:r];)", "x.ggf: RE[-65.000:r]: black's disc difference"),
                     (g + "B[f5]W[d6//-5];)", "x.ggf, ply 2: negative time '-5' in move 'd6//-5'"),
                     ("(;GM[Othello]TY[8k]RE[+130]" + START_BO + ";)",
                      "x.ggf: RE[+130]: black's disc difference less the komi is between -128 and +128")):
        with pytest.raises(FormatError, match="^" + re.escape(msg)):
            parse_ggf_game(bad, "x.ggf")
    assert [parse_ggf_game(g + f"RE[{r}];)").result for r in ("+64.000", "-64.000:t", "0")] == [64, -64, 0]
    with pytest.raises(FormatError, match=re.escape("negative time '-0.5'")):  # not only whole seconds
        parse_ggf_game(g + "B[f5//-0.5];)")
    assert parse_ggf_game(g + "B[f5//0]W[d6/-3.5/];)").times == [0, None]  # evals may be negative
    assert parse_ggf_game("(;GM[Othello]TY[8k]RE[+70.5]" + START_BO + ";)").result == 70.5
    edax = parse_ggf_game("(;GM[othello]PC[Edax]PB[a]PW[b]RE[-127.000]" + START_BO + "B[f5];)")
    assert edax.result is None and "RE[-127.000]" in format_ggf(edax)
    # RE is not held to the board: Edax writes it from the first mover's side (here white, who wins 64-0)
    white_first = parse_ggf_game(f"(;GM[othello]PC[Edax]RE[+64.000]BO[8 O*{'-' * 62} O]W[c1];)")
    assert white_first.final.score() == -64 and white_first.result == 64


def test_a_move_or_pass_after_the_end_is_refused_as_such():
    """White's c1 takes black's last disc. What follows was refused, but a W[PA] or W[d1] there as
    "... but black is to move", when nobody is; a pass after the end is refused too (no writer
    puts one there), saying the game is over whichever colour it is tagged with."""
    game = f"(;GM[Othello]TY[8]BO[8 O*{'-' * 62} O]W[c1]"
    assert parse_ggf_game(game + ";)").final.is_over()
    for tail in ("B[PA]", "W[PA]", "B[PA]W[PA]", "W[d1]", "B[d1]"):
        with pytest.raises(FormatError, match=re.escape(f"x.ggf, ply 2: {tail[:5]} after the end of the game "
                                                         "(neither side has a move), where nothing can follow")):
            parse_ggf_game(game + tail + ";)", "x.ggf")
    over = f"(;GM[Othello]TY[8]BO[8 *{'-' * 63} O]"  # a board over before its first move
    for tail in ("W[PA]", "B[a2]"):
        with pytest.raises(FormatError, match=re.escape(f"x.ggf, ply 1: {tail} after the end of the game")):
            parse_ggf_game(over + tail + ";)", "x.ggf")


def test_several_games_per_file_and_stray_text():
    a, b = GameRecord(moves=random_game(1)), GameRecord(moves=random_game(2))
    assert parse_ggf(format_ggf(a) + "\n" + format_ggf(b) + "\n") == [a, b]
    with pytest.raises(FormatError, match="outside any game"):
        parse_ggf(format_ggf(a) + " junk")


def test_a_truncated_archive_names_the_game_that_never_ends_and_quotes_it():
    """The message quoted what was left once the whole games were taken out: the archive's
    leading game counts ('1 \\n2 \\n3 ...'), and named no game."""
    line = "2 " + format_ggf(GameRecord(moves=random_game(1))) + "\n"
    text = (line * 5)[:-30]
    with pytest.raises(FormatError) as e:
        parse_ggf(text, "archive.ggf")
    assert str(e.value).startswith("archive.ggf game 5 (line 5): starts with '(;' but never ends with ';)': '(;GM[")


def test_errors_quote_a_value_on_one_line_and_the_last_result_given_is_kept():
    """A value with a newline made a two-line error; RE and TY given twice kept the first one's
    marker, so the record said +12 and wrote back -64."""
    for bad in ("(;GM[Go\nfoo];)", "(;GM[Othello]TY[1\n0];)", "(;GM[Othello]BO[8\n---- x];)"):
        with pytest.raises(FormatError) as e:
            parse_ggf(bad)
        assert "\n" not in str(e.value) and "\\n" in str(e.value)
    for text, result, tags in (("(;GM[Othello]TY[s8]TY[8]RE[-64.000:r]RE[+12.000]B[f5];)", 12.0, {}),
                               ("(;GM[Othello]TY[8]TY[s8]RE[+12.000]RE[-64.000:r]B[f5];)", -64.0,
                                {"TY": "s8", "RE": "-64.000:r"})):
        rec = parse_ggf_game(text)
        assert (rec.result, rec.tags) == (result, tags)
        assert parse_ggf_game(format_ggf(rec)) == rec
    # the last TY decides the komi and the random start, as it decides the tag
    assert parse_ggf_game("(;GM[Othello]TY[8r20]TY[8]B[f5];)").final == Position.from_transcript("f5")
    with pytest.raises(FormatError, match="between -64 and"):
        parse_ggf_game("(;GM[Othello]TY[8k]TY[8]RE[+100];)")


def test_a_ggs_archive_line_with_its_game_count_and_a_board_in_rows():
    """GGS's archives write the board in rows and begin each line with its match's game count
    (2 for a synchro match's pair of games)."""
    rows = "-------- -------- -------- ---O*--- ---*O--- -------- -------- --------"
    game = f"(;GM[Othello]PC[GGS/os]TY[8]BO[8 {rows} *]B[f5//4.09]W[d6];)"
    text = f"1 {game}\n2 {game}{game.replace('d6', 'f6')}\n"
    games = parse_ggf(text)
    assert [g.final for g in games] == [Position.from_transcript(t) for t in ("f5d6", "f5d6", "f5f6")]
    assert games[0].start == Position() and games[0].times[0] == 4.09
    with pytest.raises(FormatError, match="outside any game: '1x'"):
        parse_ggf(f"1x {game}")
    # a synchro match's games are typed "s8" (with flags: "s8r20", a random start of 20 discs), and
    # property names may come in lower case (Edax reads them so)
    synchro = parse_ggf(f"2 {game.replace('TY[8]', 'TY[s8r20]')}{game.replace('TY[8]', 'TY[s8]').lower()}\n")
    assert [g.final for g in synchro] == [Position.from_transcript("f5d6")] * 2
    assert synchro[0].tags["TY"] == "s8r20" and synchro[1].tags["TY"] == "s8"
    assert parse_ggf(game.replace("TY[8]", "TY[S8R20]"))[0].final == Position.from_transcript("f5d6")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 60), st.booleans())
def test_random_games_round_trip(seed, cut, explicit):
    """Any legal game, from any of its positions: GGF and transcripts give back
    the same moves and the same final board as the engine."""
    moves = random_game(seed)
    cut = min(cut, len(moves))
    start = replay(moves[:cut])
    rec = GameRecord(moves=moves[cut:], start=start, result=float(replay(moves).score()))
    assert parse_ggf_game(format_ggf(rec)) == rec
    text = format_transcript(moves, passes=explicit)
    back, final = read_transcript(text)
    assert back == moves and final == replay(moves)
    assert read_transcript(format_transcript(moves[cut:], explicit), start)[0] == moves[cut:]


def test_transcript_pass_spellings_and_errors():
    moves = next(m for s in range(2000) if PASS in (m := random_game(s)))
    for word in ("pa", "PA", "--", "pass", "ps"):
        text = "".join(word if m == PASS else "abcdefgh"[m % 8] + str(m // 8 + 1) for m in moves)
        assert read_transcript(text)[0] == moves
    with pytest.raises(FormatError, match="ply 1"):
        read_transcript("pa")                      # a pass with a legal move
    with pytest.raises(FormatError, match="ply 2"):
        read_transcript("f5f5")
    with pytest.raises(FormatError, match="'z'"):
        read_transcript("f5z9")


def test_obf_round_trip_and_edax_lines():
    line = ("--XXXXX--OOOXX-O-OOOXXOX-OXOXOXXOXXXOXXX--XOXOXX-XXXOOO--OOOOO-- X; G8:+18; H1:+12; H2:-6;")
    (p,) = parse_obf("% a comment\n\n" + line + "\n")
    assert p.position.black_to_move
    assert p.scores() == {parse_square("g8"): 18, parse_square("h1"): 12, parse_square("h2"): -6}
    assert format_obf(p.position, p.comment) == line.replace("; G8", "; G8")
    for seed in range(20):
        moves = random_game(seed, stop_at=seed * 3)
        pos = replay(moves)
        (q,) = parse_obf(format_obf(pos))
        assert q.position == pos
    with pytest.raises(FormatError, match="line 2"):
        parse_obf(line + "\n" + "-" * 63 + " X;\n", what="t.obf")
    with pytest.raises(FormatError, match="square a1"):
        parse_obf("Z" + "-" * 63 + " O;")
    # Scores: free text (no ':') is not one; a field with ':' must be; a pass may be scored; ±64 are the limits.
    (q,) = parse_obf(line.split(";")[0] + "; h7:+64; g8:-64;")
    assert q.scores() == {parse_square("h7"): 64, parse_square("g8"): -64}
    (q,) = parse_obf(line.replace("H2:-6;", "FFO #40; pa:-6;"))
    assert q.scores() == {parse_square("g8"): 18, parse_square("h1"): 12, PASS: -6}
    for bad, match in (("h7:abc;", "'h7:abc' is not a score"), ("zz:+3;", "'zz:+3' is not a score"),
                       ("h7:-6; H7:-8;", "H7 is scored twice"),
                       ("h7:+180;", "'h7:+180': a disc difference is between -64 and +64"),
                       ("h7:+65;", "'h7:+65': a disc difference"), ("h7:-65;", "'h7:-65': a disc difference")):
        with pytest.raises(FormatError, match=re.escape(f"t.obf line 1: {match}")):
            parse_obf(line.split(";")[0] + "; " + bad, what="t.obf")


@pytest.fixture(scope="module")
def synthetic_dataset(tmp_path_factory):
    """A dataset built by the WTHOR command from files our own writer made: 60 random
    games of the plain reference engine, a few stopped early as resigned records are."""
    import random

    import reference_engine as ref
    from othello_learn.cli import run_main
    from othello_learn.data import wtb
    from othello_learn.data.wthor import main as wthor_main

    rng = random.Random(3)
    games = [ref.random_game(rng, stop_after=rng.choice([None, None, 20])) for _ in range(60)]
    src = tmp_path_factory.mktemp("wthor_src")
    moves = [[m for _, _, m in record if m != PASS] for record, _, _ in games]
    black = [(64 + ref.final_score(b)) // 2 if ref.game_over(b) else sum(v == 1 for row in b for v in row)
             for _, b, _ in games]
    wtb.write_wtb(src / "WTH_2001.wtb", wtb.make_games(moves, black, tournament=1, black=1, white=2), 2001)
    wtb.write_names(src / "WTHOR.JOU", ["???", "Alice Black", "Bob White"])
    wtb.write_names(src / "WTHOR.TRN", ["???", "Synthetic Open"])
    out = tmp_path_factory.mktemp("wthor_out")
    assert run_main(wthor_main, ["--wthor-dir", str(src), "--out", str(out), "--quiet"]) == 0
    return out


def test_built_games_round_trip(synthetic_dataset):
    """On a clean checkout (no data/wthor): the same checks on a dataset built from synthetic files."""
    _check_games_round_trip(synthetic_dataset, 40)


def test_real_wthor_games_round_trip():
    """Games rebuilt from the built dataset's move records replay to the stored
    boards and survive GGF and transcripts (skipped when data/wthor is missing)."""
    data = REPO / "data" / "wthor"
    if not (data / "positions.npy").exists():
        pytest.skip("data/wthor is not built")
    _check_games_round_trip(data, 25)


def _check_games_round_trip(data, n):
    import pandas as pd

    games = pd.read_csv(data / "games.csv")
    recs = np.load(data / "positions.npy", mmap_mode="r")
    ok = games[games["error"].isna() & games["finished"]]
    assert len(ok) >= min(n, 10)
    pick = ok.iloc[np.unique(np.linspace(0, len(ok) - 1, n).astype(int))]
    for _, g in pick.iterrows():
        r = recs[int(g["first_position"]): int(g["first_position"]) + int(g["moves"])]
        assert (r["game"] == g["game"]).all()
        moves, final = read_transcript(format_transcript(r["move"].tolist()), what=f"game {g['game']}")
        pos = Position()
        for m in moves:  # every recorded board is on the replayed path
            if m != PASS:
                assert (pos.player, pos.opponent) in {(int(a), int(b)) for a, b in zip(r["player"], r["opponent"])}
            pos = pos.play(m)
        assert final.score() == g["result"]
        rec = GameRecord(moves=moves, black=g["black"], white=g["white"], result=float(g["result"]))
        assert parse_ggf_game(format_ggf(rec)) == rec


def test_ggf_files_split_at_game_ends_outside_tag_values():
    """A player named 'smiley ;) guy' (or with an escaped ']') cut the game in two."""
    rec = GameRecord.from_transcript("f5d6c3", black="smiley ;) guy", white="a]b\\c;)")
    games = parse_ggf(format_ggf(rec) + "\n" + format_ggf(rec) + "\n")
    assert len(games) == 2 and all((g.black, g.white, g.moves) == (rec.black, rec.white, rec.moves) for g in games)
    with pytest.raises(FormatError, match="never ends"):
        parse_ggf("(;GM[Othello]PB[unclosed;)")


# ---------------------------------------------------------------- mutation-testing additions


def test_ggf_result_markers_side_and_two_decimal_numbers():
    """Hand-made records: RE[-64:r] (a resignation) is -64 for black and written back as it came;
    an RE that is no number is kept as a tag; BO's side to move may be a lower-case 'o' (white);
    evals and times keep their two decimals through a round trip."""
    moves = "B[f5/-1.25/4.09]W[d6/0.33/12.5]"
    text = "(;GM[Othello]TY[8]RE[-64:r]" + START_BO + moves + ";)"
    g = parse_ggf_game(text)
    assert g.result == -64.0 and g.tags["RE"] == "-64:r"
    assert g.evals == [-1.25, 0.33] and g.times == [4.09, 12.5]
    assert "RE[-64:r]" in format_ggf(g) and moves in format_ggf(g)
    odd = parse_ggf_game("(;GM[Othello]TY[8]RE[abandoned]" + START_BO + ";)")
    assert odd.result is None and odd.tags["RE"] == "abandoned" and "RE[abandoned]" in format_ggf(odd)
    nan = parse_ggf_game("(;GM[Othello]TY[8]RE[nan]" + START_BO + "B[f5/-0.001/0.004];)")
    assert nan.result is None and "RE[nan]" in format_ggf(nan)
    assert "B[f5/0/0]" in format_ggf(nan)  # rounded to two decimals, and never "-0"
    white = parse_ggf_game("(;GM[Othello]TY[8]" + START_BO[:-2] + "o]W[e3];)")
    assert not white.start.black_to_move and white.moves == [parse_square("e3")]


def test_obf_side_letters_and_comment_lines():
    """Edax's letters for the side to move: X, * or B black, O or W white, either case;
    '#' lines are comments as '%' lines are."""
    cells = "-" * 27 + "OX------XO" + "-" * 27
    sides = {"X": True, "*": True, "b": True, "B": True, "x": True, "O": False, "o": False, "W": False, "w": False}
    got = [q.position.black_to_move for q in parse_obf("\n".join(f"{cells} {s};" for s in sides))]
    assert got == list(sides.values())
    assert parse_obf(f"# a comment\n% another\n{cells} X;\n")[0].position == Position()


def test_a_record_cut_short_before_the_next_one_is_an_error_not_one_merged_game():
    """A record cut short in a value (``PB[hum``) swallowed the next whole game as that value:
    the two read as one game with the broken record's tags (``othello-play --start`` resumed it).
    A record that has not ended where the next opens, at a line's start or as ``(;GM[`` on the
    same line, is an error naming both lines; a name holding ``(;`` is written escaped and reads back."""
    whole = format_ggf(GameRecord.from_transcript("f5d6c3", black="a", white="b"))
    for text, lines in (("(;GM[Othello]PC[club]PB[hum\n" + whole + "\n", "\\(line 1\\): .* opens \\(line 2\\)"),
                        ("(;GM[Othello]PC[club]PB[hum" + whole, "\\(line 1\\): .* opens \\(line 1\\)"),
                        ("1 " + whole + "\n2 (;GM[Othello]PC[club]PB\n3 " + whole + "\n",  # GGS's game counts
                         "game 2 \\(line 2\\): .* opens \\(line 3\\)"),
                        ("(;GM[Othello]PC[club]PB[hum\n" + whole + "\n" + whole + "\n", "\\(line 1\\): .* opens \\(line 2\\)")):
        with pytest.raises(FormatError, match="^saved.ggf .*" + lines + ": '\\(;GM\\[Othello\\]PC\\[club\\]PB"):
            parse_ggf(text, "saved.ggf")
    rec = GameRecord.from_transcript("f5d6", black="x(;GM[y", white="a\n(;b")
    assert parse_ggf(format_ggf(rec) + "\n" + format_ggf(rec) + "\n") == [rec, rec]
    assert parse_ggf("(;GM[Othello]C[a (; b]B[f5];)")[0].moves == [parse_square("f5")]  # "(;" mid-value still reads


def test_play_start_refuses_a_cut_record_merged_with_the_next(tmp_path):
    from othello_learn.frontends.terminal import saved_game

    path = tmp_path / "game.ggf"
    path.write_text("(;GM[Othello]PC[club]PB[hum\n" + format_ggf(GameRecord.from_transcript("f5d6")) + "\n")
    with pytest.raises(FormatError, match=f"^{re.escape(str(path))} game 1 \\(line 1\\): does not end"):
        saved_game(path)
