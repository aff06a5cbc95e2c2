"""The FFO's WTHOR binary formats: ``.wtb`` game files, ``WTHOR.JOU`` players
and ``WTHOR.TRN`` tournaments. Reading validates sizes and names the file in
every error; writing is atomic (``othello_learn.files.atomic_write``)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from othello_learn.files import UserError, atomic_write

HEADER_SIZE = 16
HEADER_DTYPE = np.dtype(
    [
        ("century", "u1"),
        ("year", "u1"),
        ("month", "u1"),
        ("day", "u1"),
        ("n_games", "<u4"),
        ("n_records", "<u2"),
        ("game_year", "<u2"),
        ("board_size", "u1"),
        ("type", "u1"),
        ("depth", "u1"),
        ("reserved", "u1"),
    ]
)
GAME_DTYPE = np.dtype(
    [
        ("tournament", "<u2"),
        ("black", "<u2"),
        ("white", "<u2"),
        ("black_score", "u1"),  # black's disc count at the end
        ("theoretical_score", "u1"),  # black's score under perfect play from `depth` empties
        ("moves", "u1", (60,)),  # 10 * row + column, 1-based; 0 ends the game
    ]
)
NAME_SIZES = {".jou": 20, ".trn": 26}
assert HEADER_DTYPE.itemsize == HEADER_SIZE and GAME_DTYPE.itemsize == 68


class WthorFormatError(UserError, ValueError):
    """A WTHOR file that cannot be read as its format says; names the file.

    A ``UserError`` so that commands report it in one line (exit status 2)."""


@dataclass
class WtbFile:
    path: Path
    year: int
    depth: int
    games: np.ndarray  # GAME_DTYPE records


def _read_header(path: Path, data: bytes) -> np.void:
    if len(data) < HEADER_SIZE:
        raise WthorFormatError(f"{path}: {len(data)} bytes is shorter than the 16-byte WTHOR header (truncated file?)")
    return np.frombuffer(data, dtype=HEADER_DTYPE, count=1)[0]


def read_wtb(path) -> WtbFile:
    """Read one ``.wtb`` game file, checking its header against its size."""
    path = Path(path)
    data = path.read_bytes()
    h = _read_header(path, data)
    n = int(h["n_games"])
    expected = HEADER_SIZE + GAME_DTYPE.itemsize * n
    if len(data) != expected:
        raise WthorFormatError(
            f"{path}: header says {n} games ({expected} bytes) but the file has {len(data)} bytes"
            + (" (truncated?)" if len(data) < expected else " (trailing data?)")
        )
    if int(h["board_size"]) not in (0, 8):
        raise WthorFormatError(f"{path}: board size {int(h['board_size'])} is not 8x8; only 8x8 games are supported")
    if int(h["type"]) != 0:  # 1: WTHOR's solitaires, positions to solve, not games from the start
        raise WthorFormatError(f"{path}: header type {int(h['type'])} is not 0 (games); "
                               "a solitaire or other file, not a WTHOR game file")
    if int(h["depth"]) > 60:  # empties at which the theoretical score was solved; a game has 60
        raise WthorFormatError(f"{path}: header depth {int(h['depth'])} is not 0..60 (damaged header?)")
    games = np.frombuffer(data, dtype=GAME_DTYPE, count=n, offset=HEADER_SIZE).copy()
    return WtbFile(path=path, year=int(h["game_year"]), depth=int(h["depth"]), games=games)


def _header(n_games: int, n_records: int, year: int, depth: int) -> bytes:
    today = _dt.date.today()
    h = np.zeros(1, dtype=HEADER_DTYPE)
    h[0] = (today.year // 100, today.year % 100, today.month, today.day, n_games, n_records, year, 8, 0, depth, 0)
    return h.tobytes()


def write_wtb(path, games: np.ndarray, year: int, depth: int = 22) -> None:
    """Write game records (``GAME_DTYPE``) as a ``.wtb`` file."""
    games = np.asarray(games, dtype=GAME_DTYPE)
    atomic_write(path, _header(len(games), 0, year, depth) + games.tobytes())


def make_games(move_lists, black_scores=None, tournament=0, black=0, white=0, theoretical=None) -> np.ndarray:
    """Build ``GAME_DTYPE`` records from lists of square indices (for tests and export)."""
    from othello.notation import square_to_wthor

    games = np.zeros(len(move_lists), dtype=GAME_DTYPE)
    for i, moves in enumerate(move_lists):
        if len(moves) > 60:
            raise ValueError(f"game {i}: {len(moves)} moves; a game has at most 60")
        games["moves"][i, : len(moves)] = square_to_wthor(np.asarray(moves, dtype=np.int64)) if len(moves) else []
    games["tournament"], games["black"], games["white"] = tournament, black, white
    if black_scores is not None:
        games["black_score"] = black_scores
    games["theoretical_score"] = games["black_score"] if theoretical is None else theoretical
    return games


def read_names(path) -> list[str]:
    """Read ``WTHOR.JOU`` (players) or ``WTHOR.TRN`` (tournaments): id -> name."""
    path = Path(path)
    size = NAME_SIZES.get(path.suffix.lower())
    if size is None:
        raise WthorFormatError(f"{path}: expected a .JOU or .TRN file")
    data = path.read_bytes()
    h = _read_header(path, data)
    n = int(h["n_records"])
    if len(data) != HEADER_SIZE + n * size:
        raise WthorFormatError(
            f"{path}: header says {n} records of {size} bytes ({HEADER_SIZE + n * size} bytes) "
            f"but the file has {len(data)} bytes"
        )
    raw = np.frombuffer(data, dtype=f"S{size}", count=n, offset=HEADER_SIZE)
    return [r.split(b"\0", 1)[0].decode("latin-1").strip() for r in raw]


def write_names(path, names: list[str]) -> None:
    """Write a ``.JOU`` / ``.TRN`` table (for tests and export)."""
    path = Path(path)
    size = NAME_SIZES[path.suffix.lower()]
    recs = np.array([n.encode("latin-1")[: size - 1] for n in names], dtype=f"S{size}")
    atomic_write(path, _header(0, len(names), 0, 0) + recs.tobytes())
