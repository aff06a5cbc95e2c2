"""Move notation: ``a1``..``h8`` squares, ``f5d6c3...`` transcripts, WTHOR bytes.

Column letter first, then row number; row 1 is the top of the board. Square
index = ``8 * (row - 1) + column`` with column a = 0, matching ``bitboard``.
"""

from __future__ import annotations

import operator
import re

import numpy as np

PASS = 64  # a pass, where a move index is expected ("no move" is -1)

_SQUARE_RE = re.compile(r"([a-h])([1-8])")


def square_name(square: int) -> str:
    """0..63 -> ``'a1'``..``'h8'``; ``PASS`` -> ``'pass'``."""
    square = operator.index(square)  # a name or a float is no index: TypeError, not a comparison's
    if square == PASS:
        return "pass"
    if not 0 <= square < 64:
        raise ValueError(f"square index must be 0..63, got {square}")
    return "abcdefgh"[square % 8] + str(square // 8 + 1)


def move_name(square: int) -> str:
    """A move as GGF writes it (NBoard the same in capitals): ``'f5'``, or ``'PA'`` for a pass."""
    return "PA" if square == PASS else square_name(square)


PASS_WORDS = ("pa", "ps", "pass", "--")  # GGF and NBoard write PA, transcripts --; all read alike


def parse_square(name: str) -> int:
    """``'f5'`` (either case) -> 37; ``'pass'``, ``'pa'``, ``'ps'`` or ``'--'`` -> ``PASS``."""
    if not isinstance(name, str):
        raise TypeError(f"parse_square takes a square's name such as 'f5', not {name!r}")
    text = name.strip().lower()
    if text in PASS_WORDS:
        return PASS
    m = _SQUARE_RE.fullmatch(text)
    if not m:
        raise ValueError(f"not a square: {name!r} (expected a1..h8)")
    return 8 * (int(m.group(2)) - 1) + "abcdefgh".index(m.group(1))


def parse_transcript(text: str) -> list[int]:
    """``'f5d6c3'``, ``'F5 d6 -- c3'``, ``'f5pad6'`` (spaces, case and passes allowed) ->
    square indices and ``PASS``es as written."""
    compact = re.sub(r"\s+", "", text.lower())
    tokens = re.findall(r"[a-h][1-8]|pass|pa|ps|--|.", compact)
    bad = [t for t in tokens if t not in PASS_WORDS and not _SQUARE_RE.fullmatch(t)]
    if bad:
        raise ValueError(f"transcript has {bad[0]!r} where a move (a1..h8) was expected: {text!r}")
    return [parse_square(t) for t in tokens]


def format_transcript(moves, passes: bool = False) -> str:
    """Square indices -> ``'f5d6c3'``. Passes are left out (every reader here infers
    them, as for WTHOR's records) unless ``passes``, then written ``'--'``; "no move"
    (-1) is always left out."""
    return "".join("--" if m == PASS else square_name(int(m)) for m in moves
                   if m != -1 and (m != PASS or passes))


def square_to_wthor(square):
    """Square index(es) -> WTHOR move byte(s) ``10 * row + column`` (1-based)."""
    sq = np.asarray(square)
    out = 10 * (sq // 8 + 1) + sq % 8 + 1
    return out if out.ndim else int(out)


def wthor_to_square(byte):
    """WTHOR move byte(s) -> square index(es); -1 where the byte is no square."""
    b = np.asarray(byte).astype(np.int64)
    row, col = b // 10, b % 10
    ok = (row >= 1) & (row <= 8) & (col >= 1) & (col <= 8)
    out = np.where(ok, 8 * (row - 1) + col - 1, -1)
    return out if out.ndim else int(out)
