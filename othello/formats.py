"""Othello file formats other programs speak: GGF game records, transcripts, OBF positions.

GGF (the Generic Game Format of the GGS server, also what NBoard sends its
engines) is how games travel between Othello programs; OBF (Edax's one
position per line) is how test positions do. Both are read strictly: a bad
record raises ``FormatError`` naming the record and the ply, never a game that
silently diverges from what was written.

Moves are square indices (``othello.notation``), ``PASS`` (64) for a pass; a
``GameRecord`` always holds its passes explicitly, whatever the input did.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .game import IllegalMoveError, Position
from .notation import PASS, format_transcript, move_name, parse_square, parse_transcript, square_name


class FormatError(ValueError):
    """A record that does not parse or does not replay; the message says where."""


def parse_move(text: str) -> int:
    """``'f5'``/``'F5'`` -> 37; ``'PA'``, ``'pass'``, ``'ps'``, ``'--'`` -> ``PASS``
    (``othello.notation``'s grammar, raising ``FormatError``)."""
    try:
        return parse_square(text)
    except ValueError:
        raise FormatError(f"not a move: {text!r} (expected a1..h8 or a pass: PA, pass, --)") from None


def play_with_passes(pos: Position, moves, what: str = "game"):
    """``pos.replay(moves)`` (passes inferred; returns the moves with every pass explicit and the
    final position), an illegal move a ``FormatError`` naming ``what`` and the ply (1-based)."""
    moves = list(moves)
    try:
        return pos.replay(moves)
    except IllegalMoveError as e:
        raise FormatError(f"{what}, ply {e.ply} ({square_name(moves[e.ply - 1])}): {e.reason}") from None


# --------------------------------------------------------------------------
# Transcripts


def parse_transcript_moves(text: str) -> list[int]:
    """``othello.notation.parse_transcript``, raising ``FormatError``."""
    try:
        return parse_transcript(text)
    except ValueError as e:
        raise FormatError(str(e)) from None


def read_transcript(text: str, start: Position | None = None, what: str = "transcript") -> tuple[list[int], Position]:
    """A transcript replayed from ``start`` (default the standard start): (moves with
    explicit passes, final position). Passes written are checked, missing ones inferred."""
    try:
        moves = parse_transcript_moves(text)
    except FormatError as e:
        raise FormatError(f"{what}: {e}") from None
    return play_with_passes(start or Position(), moves, what)


# --------------------------------------------------------------------------
# Boards as text (GGF's BO and OBF share the idea: 64 cells, then the side to move)

_BLACK_CHARS = "x*b"
_WHITE_CHARS = "ow"
_EMPTY_CHARS = "-."


def board_from_text(cells: str, black_to_move: bool, what: str) -> Position:
    if len(cells) != 64:
        raise FormatError(f"{what}: a board needs 64 squares, got {len(cells)}: {cells!r}")
    black = white = 0
    for i, c in enumerate(cells.lower()):
        if c in _BLACK_CHARS:
            black |= 1 << i
        elif c in _WHITE_CHARS:
            white |= 1 << i
        elif c not in _EMPTY_CHARS:
            raise FormatError(f"{what}: square {square_name(i)} is {c!r} (expected X/*, O or -)")
    p, o = (black, white) if black_to_move else (white, black)
    return Position(p, o, black_to_move)


def board_to_text(pos: Position, black: str = "X", white: str = "O") -> str:
    return "".join(black if pos.black >> i & 1 else white if pos.white >> i & 1 else "-" for i in range(64))


# --------------------------------------------------------------------------
# GGF


@dataclass
class GameRecord:
    """One game: where it starts, every move (passes explicit), and what GGF says about it.

    ``evals`` and ``times`` run parallel to ``moves`` (None where not given);
    ``result`` is black's disc difference as recorded (``RE``), None if unknown. It is
    not checked against the final board: a resignation or a timeout (``RE[-64:r]``)
    rightly differs from it, and Edax writes its RE from the view of the side to move
    at the start (the opposite sign where white moves first), so a real file would be
    refused for a field nothing here reads but the writer.

    ``tags`` keeps other GGF properties so a read-write round trip loses nothing but
    the earlier values of a property given twice (the last one is kept)."""

    moves: list[int] = field(default_factory=list)
    start: Position = field(default_factory=Position)
    black: str = ""
    white: str = ""
    black_rating: str = ""
    white_rating: str = ""
    place: str = ""
    date: str = ""
    time_control: str = ""
    result: float | None = None
    evals: list[float | None] = field(default_factory=list)
    times: list[float | None] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.moves)
        self.evals = list(self.evals) + [None] * (n - len(self.evals))
        self.times = list(self.times) + [None] * (n - len(self.times))

    def positions(self) -> list[Position]:
        """Position before each move, then the final one (len(moves) + 1)."""
        out = [self.start]
        for i, m in enumerate(self.moves):
            try:
                out.append(out[-1].play(m))
            except IllegalMoveError as e:
                raise FormatError(f"ply {i + 1} ({square_name(m)}): {e}") from None
        return out

    @property
    def final(self) -> Position:
        return self.positions()[-1]

    def transcript(self, passes: bool = False) -> str:
        return format_transcript(self.moves, passes)

    @classmethod
    def from_transcript(cls, text: str, start: Position | None = None, **kw) -> "GameRecord":
        moves, _ = read_transcript(text, start)
        return cls(moves=moves, start=start or Position(), **kw)


# Names in any case, as Edax reads them; a name starts after a non-letter, so a long run of letters
# without a "[" is passed over once, not once per letter (a crafted 40 KB game took 12 s).
_GGF_PROP_RE = re.compile(r"(?<![A-Za-z])([A-Za-z]+)\[((?:\\.|[^\]\\])*)\]", re.S)
# GGS's game types: an optional "s" (synchro: a pair of games, colours swapped), the board size, then
# flags: "k" komi, "r<N>" a random start of N discs, "a" anti (fewer discs wins), as GGS writes them
_GGF_TYPE_RE = re.compile(r"(s?)(\d+)((?:[a-z]\d*)*)")
_KNOWN = {"PB": "black", "PW": "white", "RB": "black_rating", "RW": "white_rating",
          "PC": "place", "DT": "date", "TI": "time_control"}


def _unescape(v: str) -> str:
    return re.sub(r"\\(.)", r"\1", v)


def _shown(v: str) -> str:
    """A value as an error quotes it: on one line (a newline in it is written ``\\n``)."""
    return repr(v)[1:-1]


def _escape(v: str) -> str:
    # "(;" escaped too: a value holding it unescaped reads as the next game opening (``parse_ggf``)
    return v.replace("\\", "\\\\").replace("]", "\\]").replace("(;", "\\(;")


def _parse_ggf_move(value: str, what: str) -> tuple[int, float | None, float | None]:
    parts = value.split("/")
    try:
        move = parse_move(parts[0])
    except FormatError as e:
        raise FormatError(f"{what}: {e}") from None

    def num(i):
        if len(parts) <= i or not parts[i].strip():
            return None
        try:
            x = float(parts[i])
        except ValueError:
            x = math.nan
        if not math.isfinite(x):  # float() reads "nan", "inf", "1e400": none can be written back
            raise FormatError(f"{what}: bad number {parts[i]!r} in move {value!r}")
        if i == 2 and x < 0:  # seconds spent on the move: a clock that ran backwards is a damaged record
            raise FormatError(f"{what}: negative time {parts[i]!r} in move {value!r}")
        return x

    return move, num(1), num(2)


def parse_ggf_game(text: str, what: str = "GGF game") -> GameRecord:
    """One ``(;GM[Othello]...;)`` record. Missing passes are inferred (a move
    tagged with the colour that is not to move, when the side to move has
    none); a move for the wrong colour otherwise, an illegal move, or a board
    other than 8x8 is an error naming the ply, counted among the moves the record
    writes (an inferred pass is not one), so that it can be found there. So is
    anything after the end, a pass included: GGS ends a game when neither side can
    move, and NBoard and Edax write a pass only where the game goes on after it, so
    no record of theirs holds one, and a move there says the record is damaged.

    ``GM[Othello]`` is required: it is what says the record is an Othello game at all
    (GGS serves other games in the same format, and GGS, NBoard and Edax all write it),
    so ``(;)`` or a stray ``(;B[f5];)`` is refused rather than read as a game from the
    start. ``BO`` may be left out, as Edax reads it: the standard start, except where
    ``TY`` says the start was random (``r<N>``), which only the board could tell."""
    body = text.strip()
    if not (body.startswith("(;") and body.endswith(";)")):
        raise FormatError(f"{what}: a GGF game starts with '(;' and ends with ';)'")
    inner = body[2:-2]
    leftover = _GGF_PROP_RE.sub("", inner).strip()
    if leftover:
        raise FormatError(f"{what}: unexpected text {leftover[:40]!r}")
    rec = GameRecord()
    raw_moves: list[tuple[bool, str]] = []
    board = None
    othello = komi = False
    random_start = ""  # the TY that says the start position was drawn at random
    for key, value in _GGF_PROP_RE.findall(inner):
        key, value = key.upper(), _unescape(value)
        if key in ("B", "W"):
            raw_moves.append((key == "B", value))
        elif key == "GM":
            if value.strip().lower() != "othello":
                raise FormatError(f"{what}: GM[{_shown(value)}] is not an Othello game")
            othello = True
        elif key == "TY":
            kind = _GGF_TYPE_RE.fullmatch(value.strip().lower())
            if not kind or kind.group(2) != "8":
                raise FormatError(f"{what}: TY[{_shown(value)}]: only 8x8 Othello is supported")
            flags = re.findall(r"[a-z]", kind.group(3))
            if "a" in flags:  # its results would read as their opposite
                raise FormatError(f"{what}: TY[{_shown(value)}]: anti Othello (fewer discs wins) is not supported")
            random_start = _shown(value) if "r" in flags else ""
            komi = "k" in flags
            rec.tags.pop(key, None)  # the last of a tag given twice, as for every tag
            if value.strip() != "8":
                rec.tags[key] = value
        elif key == "BO":
            board = value
        elif key == "RE":
            v = value.strip()
            try:
                rec.result = None if v in ("", "?") else float(v.split(":")[0])
            except ValueError:
                rec.result = None
            if rec.result is not None and not math.isfinite(rec.result):
                rec.result = None  # RE[nan]: no result, kept as written below
            if rec.result == -127:  # Edax's "no score" (-SCORE_INF) for a game not played out: likewise
                rec.result = None
            result_text = value
            rec.tags.pop(key, None)  # an earlier RE's marker is not this one's
            if ":" in v or (v not in ("", "?") and rec.result is None):
                rec.tags[key] = value  # a resignation/timeout marker ("-64:r"): kept as written
        elif key in _KNOWN:
            setattr(rec, _KNOWN[key], value)
        else:
            rec.tags[key] = value
    if not othello:
        raise FormatError(f"{what}: no GM[Othello]: not an Othello game record")
    # Black's disc difference, so within 64 discs either way (a komi game's less the komi, itself
    # within 64): a result past it is a typo or a damaged file, not a score to carry on.
    limit = 128 if komi else 64
    if rec.result is not None and abs(rec.result) > limit:
        less = " less the komi" if komi else ""
        raise FormatError(f"{what}: RE[{_shown(result_text)}]: black's disc difference{less} "
                          f"is between -{limit} and +{limit}")
    if board is None and random_start:
        raise FormatError(f"{what}: TY[{random_start}] starts from a random board, but there is no BO to say which")
    if board is not None:
        parts = board.split()  # the squares in one run, or in rows as GGS's archives and Edax write them
        if len(parts) < 3 or parts[0] != "8" or parts[-1] not in ("*", "O", "o"):
            raise FormatError(f"{what}: BO[{_shown(board)}] is not '8 <64 squares> <* or O>'")
        rec.start = board_from_text("".join(parts[1:-1]), parts[-1] == "*", f"{what} BO")
    pos = rec.start
    for i, (is_black, value) in enumerate(raw_moves):
        # the move's place among the B/W properties written, as Position.replay counts: a pass the
        # record left out (and this parser put back) is no ply its reader could find there
        ply = f"{what}, ply {i + 1}"
        move, ev, tm = _parse_ggf_move(value, ply)
        if pos.is_over():  # whichever colour it is tagged with: nobody is to move
            raise FormatError(f"{ply}: {'B' if is_black else 'W'}[{_shown(value)}] after the end of the game "
                              "(neither side has a move), where nothing can follow")
        if is_black != pos.black_to_move:
            if move != PASS and pos.must_pass():
                pos = pos.play(PASS)
                rec.moves.append(PASS)
                rec.evals.append(None)
                rec.times.append(None)
            else:
                raise FormatError(f"{ply}: {'B' if is_black else 'W'}[{_shown(value)}] but "
                                  f"{'black' if pos.black_to_move else 'white'} is to move")
        try:
            pos = pos.play(move)
        except IllegalMoveError as e:
            raise FormatError(f"{ply} ({square_name(move)}): {e}") from None
        rec.moves.append(move)
        rec.evals.append(ev)
        rec.times.append(tm)
    return rec


# One game: "(;" to the first ";)" outside a tag's [value] (a value may hold ";)" or an
# escaped "\]", as a player's name can).
_GGF_GAME = re.compile(r"\(;(?:\[(?:\\.|[^\\\]])*\]|[^\[])*?;\)", re.S)
# Inside what reads as one game, the next one opening: "(;" at a line's start (after GGS's game
# count) or "(;GM[" anywhere, unescaped. A record cut short, its last value unclosed, otherwise
# swallows the next whole game as that value and is read as one game with the broken one's tags.
_GGF_NEXT_GAME = re.compile(r"\n[ \t\d]*\(;|(?<!\\)\(;\s*GM\[", re.I)


def parse_ggf(text: str, what: str = "GGF") -> list[GameRecord]:
    """Every game of a GGF text (a file may hold many, one per line or not), in one pass:
    a game that never ends is the error, not a start to look past (a text of 20,000
    "(;" took 38 s); so is one that has not ended where the next opens (``_GGF_NEXT_GAME``)."""
    games, outside, at = [], [], 0
    while (start := text.find("(;", at)) >= 0:
        outside.append(text[at:start])
        m = _GGF_GAME.match(text, start)
        if m is None:
            raise FormatError(f"{what} game {len(games) + 1} (line {text.count(chr(10), 0, start) + 1}): "
                              f"starts with '(;' but never ends with ';)': {text[start:start + 40]!r}")
        if nested := _GGF_NEXT_GAME.search(text, start + 2, m.end()):
            opens = text.index("(;", nested.start())
            raise FormatError(f"{what} game {len(games) + 1} (line {text.count(chr(10), 0, start) + 1}): does not end "
                              f"with ';)' before the next game opens (line {text.count(chr(10), 0, opens) + 1}): "
                              f"{text[start:min(nested.start(), start + 40)].rstrip()!r}")
        games.append(parse_ggf_game(m.group(0), f"{what} game {len(games) + 1}"))
        at = m.end()
    rest = "".join(outside + [text[at:]]).strip()
    if rest and not re.fullmatch(r"[\d\s]*", rest):  # GGS's archives begin each line with its match's game count
        raise FormatError(f"{what}: text outside any game: {rest[:40]!r}")
    return games


def _fmt_num(x: float) -> str:
    if x == int(x):
        return str(int(x))
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def format_ggf(rec: GameRecord) -> str:
    """One line: the GGS field order, lower-case moves, ``PA`` for passes, ``/eval/time``
    when known (``//time`` without an eval)."""
    out = ["(;GM[Othello]"]
    for key, attr in (("PC", "place"), ("DT", "date"), ("PB", "black"), ("PW", "white"),
                      ("RB", "black_rating"), ("RW", "white_rating"), ("TI", "time_control")):
        v = getattr(rec, attr)
        if v:
            out.append(f"{key}[{_escape(v)}]")
    out.append(f"TY[{_escape(rec.tags.get('TY', '8'))}]")
    if "RE" in rec.tags:
        out.append(f"RE[{_escape(rec.tags['RE'])}]")
    elif rec.result is not None:
        out.append(f"RE[{rec.result:+.3f}]")
    for k, v in rec.tags.items():
        if k not in ("TY", "RE"):
            out.append(f"{k}[{_escape(v)}]")
    s = rec.start
    out.append(f"BO[8 {board_to_text(s, '*', 'O')} {'*' if s.black_to_move else 'O'}]")
    btm = s.black_to_move
    for m, ev, tm in zip(rec.moves, rec.evals, rec.times):
        text = move_name(m)
        if ev is not None or tm is not None:
            text += "/" + ("" if ev is None else _fmt_num(ev)) + "/" + ("" if tm is None else _fmt_num(tm))
        out.append(f"{'B' if btm else 'W'}[{text}]")
        btm = not btm
    out.append(";)")
    return "".join(out)


# --------------------------------------------------------------------------
# OBF (Edax): "<64 squares X/O/-> <X|O>;[ comment]"


@dataclass
class ObfPosition:
    position: Position
    comment: str = ""  # after the ';' (Edax: the scored moves, "g8:+18; h1:+12;")
    what: str = "OBF line"  # where it was read ("problems.obf line 7"), for errors about it

    def scores(self) -> dict[int, int]:
        """Edax's ``move:score`` pairs in the comment (``;``-separated fields), if any.
        A field with a ``:`` must be one: ``h7:abc``, ``zz:+3`` or a square scored twice
        is a FormatError naming ``what``, not a grade quietly lost; fields without one
        are free text."""
        out: dict[int, int] = {}
        for item in self.comment.split(";"):
            item = item.strip()
            if ":" not in item:
                continue
            move, _, value = (x.strip() for x in item.partition(":"))
            try:
                sq = parse_move(move)
            except FormatError:
                sq = None
            if sq is None or not re.fullmatch(r"[+-]?\d+", value):
                raise FormatError(f"{self.what}: {item!r} is not a score (expected a move and the side to "
                                  "move's disc difference, as in 'g8:+18')")
            if sq in out:
                raise FormatError(f"{self.what}: {move} is scored twice")
            if abs(int(value)) > 64:  # a typo (+180 for +18) would grade every answer against it as wrong
                raise FormatError(f"{self.what}: {item!r}: a disc difference is between -64 and +64")
            out[sq] = int(value)
        return out


def parse_obf_line(line: str, what: str = "OBF line") -> ObfPosition:
    """One position. The side to move is written as a board's discs are, as Edax reads
    both: X, * or B for black, O or W for white (any case)."""
    text = line.strip()
    head, sep, comment = text.partition(";")
    parts = head.split()
    side = parts[1].lower() if len(parts) == 2 else ""
    if len(side) != 1 or side not in _BLACK_CHARS + _WHITE_CHARS:
        raise FormatError(f"{what}: expected '<64 squares of X/O/-> <X or O>[; comment]', got {text[:80]!r}")
    obf = ObfPosition(board_from_text(parts[0], side in _BLACK_CHARS, what), comment.strip(), what)
    obf.scores()  # a malformed score is an error here, naming the line
    return obf


def parse_obf(text: str, what: str = "OBF") -> list[ObfPosition]:
    """Every position of an OBF text; blank lines and lines starting with '%' or '#' are skipped."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip() and line.lstrip()[0] not in "%#":
            out.append(parse_obf_line(line, f"{what} line {n}"))
    return out


def format_obf(pos: Position, comment: str = "") -> str:
    return f"{board_to_text(pos)} {'X' if pos.black_to_move else 'O'};" + (f" {comment}" if comment else "")
