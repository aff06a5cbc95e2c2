"""The compact (state, expert move) dataset built from WTHOR, on disk and loaded.

Layout of a dataset folder::

    positions.npy   POSITION_DTYPE records (28 bytes each), ordered by year,
                    game, ply; memory-mappable with ``np.load(mmap_mode="r")``
    games.csv       one row per game: year, file, tournament, players, scores,
                    moves, where its positions start, and why it was skipped
    summary.json    counts per year (games, positions, skipped games), the
                    position range of each year, and the skipped games

Planes are never materialised here: encoders compute them from the boards,
and symmetries are applied when batches are made.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from othello.notation import wthor_to_square

from .replay import POSITION_DTYPE, replay
from .wtb import WthorFormatError, read_names, read_wtb

FORMAT_VERSION = 1
# Hlynsson (2017): train 1977-2014, validate 2015, test 2016.
REFERENCE_SPLIT = {"train": (1977, 2014), "val": (2015, 2015), "test": (2016, 2016)}
CHUNK_GAMES = 16384  # games replayed together: big enough to amortise numpy, small enough for cache

_YEAR_RE = re.compile(r"WTH_(\d{4})\.wtb$", re.IGNORECASE)


def parse_years(text: str | int | None) -> set[int] | None:
    """``'1977-2014'``, ``'2015,2016'``, ``2016`` or a mix -> set of years; None -> None (all)."""
    text = None if text is None else str(text)
    if text is None or text.strip().lower() in ("", "all"):
        return None
    years: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d{4})\s*(?:-\s*(\d{4}))?", part)
        if not m:
            raise ValueError(f"bad year range {part!r}: use YYYY, YYYY-YYYY or a comma-separated list")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"bad year range {part!r}: end before start")
        years.update(range(lo, hi + 1))
    return years


def find_wtb_files(wthor_dir, years: set[int] | None = None) -> list[tuple[int, Path]]:
    """``(year, path)`` of the ``WTH_YYYY.wtb`` files in a folder, by year."""
    wthor_dir = Path(wthor_dir)
    if not wthor_dir.is_dir():
        raise FileNotFoundError(f"WTHOR folder not found: {wthor_dir}")
    found = []
    for p in wthor_dir.iterdir():
        m = _YEAR_RE.search(p.name)
        if m and (years is None or int(m.group(1)) in years):
            found.append((int(m.group(1)), p))
    if not found:
        wanted = "" if years is None else f" for years {min(years)}-{max(years)}"
        raise FileNotFoundError(f"no WTH_YYYY.wtb files in {wthor_dir}{wanted}")
    return sorted(found)


def _names(wthor_dir: Path, filename: str) -> list[str]:
    for p in wthor_dir.iterdir():
        if p.name.lower() == filename.lower():
            return read_names(p)
    return []


def _lookup(names: list[str], ids: np.ndarray) -> list[str]:
    return [names[i] if i < len(names) else "" for i in ids.tolist()]


def _progress(total: int, enabled: bool):
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with lightning
        enabled = False
    if not enabled:
        class _Null:
            def update(self, n): pass
            def close(self): pass
        return _Null()
    return tqdm(total=total, unit="game", desc="replaying", file=sys.stderr, smoothing=0.1)


@dataclass
class BuildResult:
    positions: np.ndarray
    games: pd.DataFrame
    summary: dict


def build(wthor_dir, years: set[int] | None = None, progress: bool = True, warn=print) -> BuildResult:
    """Read and replay WTHOR files into positions, a games table and a summary.

    A malformed file raises ``WthorFormatError`` naming it. A game with an
    illegal move is skipped, reported through ``warn`` with its file, index
    and ply, and counted in ``skipped_games``.
    """
    wthor_dir = Path(wthor_dir)
    files = find_wtb_files(wthor_dir, years)
    players = _names(wthor_dir, "WTHOR.JOU")
    tournaments = _names(wthor_dir, "WTHOR.TRN")

    tables, records = [], []
    for year, path in files:
        w = read_wtb(path)
        records.append(w.games)
        tables.append(
            pd.DataFrame(
                {
                    "year": np.full(len(w.games), year, dtype=np.int16),
                    "file": path.name,
                    "index": np.arange(len(w.games), dtype=np.int32),
                    "depth": np.int8(w.depth),
                }
            )
        )
    games_rec = np.concatenate(records)
    games = pd.concat(tables, ignore_index=True)
    n = len(games_rec)

    parts, n_moves, final_black, finished = [], [], [], []
    error_ply, error_move = [], []
    bar = _progress(n, progress)
    for start in range(0, n, CHUNK_GAMES):
        chunk = games_rec[start : start + CHUNK_GAMES]
        r = replay(chunk["moves"], chunk["black_score"])
        r.positions["game"] += start
        parts.append(r.positions)
        n_moves.append(r.n_moves)
        final_black.append(r.final_black)
        finished.append(r.finished)
        error_ply.append(r.error_ply)
        error_move.append(r.error_move)
        bar.update(len(chunk))
    bar.close()
    positions = np.concatenate(parts) if parts else np.zeros(0, POSITION_DTYPE)
    error_ply = np.concatenate(error_ply)
    error_move = np.concatenate(error_move)

    games["tournament_id"] = games_rec["tournament"]
    games["tournament"] = _lookup(tournaments, games_rec["tournament"])
    games["black_id"] = games_rec["black"]
    games["black"] = _lookup(players, games_rec["black"])
    games["white_id"] = games_rec["white"]
    games["white"] = _lookup(players, games_rec["white"])
    games["black_score"] = games_rec["black_score"]
    games["theoretical_score"] = games_rec["theoretical_score"]
    games["moves"] = np.concatenate(n_moves).astype(np.int8)
    games["finished"] = np.concatenate(finished)
    games["result"] = np.concatenate(final_black).astype(np.int8)  # black's final disc difference
    counts = np.bincount(positions["game"], minlength=n) if n else np.zeros(0, np.int64)
    games["first_position"] = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    games["error"] = ""
    games.index.name = "game"

    skipped = []
    for g in np.nonzero(error_ply >= 0)[0].tolist():
        ply, byte = int(error_ply[g]), int(error_move[g])
        sq = int(wthor_to_square(byte))
        what = f"{'abcdefgh'[sq % 8]}{sq // 8 + 1}" if sq >= 0 else f"byte {byte} (no such square)"
        reason = f"illegal move {what} at ply {ply + 1}"
        row = games.loc[g]
        games.loc[g, "error"] = reason
        skipped.append({"file": row["file"], "game": int(row["index"]), "ply": ply + 1, "move": byte, "reason": reason})
        warn(f"warning: {row['file']}: game {int(row['index'])} ({row['black']} vs {row['white']}): {reason}; game skipped")

    per_year = {}
    for year, grp in games.groupby("year", sort=True):
        first = int(grp["first_position"].iloc[0])
        npos = int(counts[grp.index].sum())
        per_year[str(year)] = {
            "games": int(len(grp)),
            "positions": npos,
            "skipped_games": int((grp["error"] != "").sum()),
            "position_range": [first, first + npos],
        }
    summary = {
        "format_version": FORMAT_VERSION,
        "source": str(wthor_dir),
        "position_dtype": POSITION_DTYPE.descr,
        "years": per_year,
        "total": {
            "games": int(n),
            "positions": int(len(positions)),
            "skipped_games": len(skipped),
        },
        "reference_split": {k: list(v) for k, v in REFERENCE_SPLIT.items()},
        "skipped": skipped,
    }
    return BuildResult(positions=positions, games=games, summary=summary)


def write(result: BuildResult, out) -> Path:
    """Write a dataset folder atomically: built beside ``out``, then renamed.

    An existing ``out`` is replaced only once the new one is complete.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        np.save(tmp / "positions.npy", result.positions)
        result.games.to_csv(tmp / "games.csv")
        (tmp / "summary.json").write_text(json.dumps(result.summary, indent=1) + "\n")
        if out.exists():
            old = out.with_name(f".{out.name}.old.{os.getpid()}")
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


class WthorDataset:
    """A built dataset folder: memory-mapped positions, games and year splits."""

    def __init__(self, path, mmap: bool = True):
        self.path = Path(path)
        summary_path = self.path / "summary.json"
        if not summary_path.exists():
            raise FileNotFoundError(f"{self.path} is not a dataset folder (no summary.json); build one with data_tools/wthor.py")
        self.summary = json.loads(summary_path.read_text())
        if self.summary.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: dataset format {self.summary.get('format_version')} is not {FORMAT_VERSION}; rebuild it")
        self.positions = np.load(self.path / "positions.npy", mmap_mode="r" if mmap else None)
        if self.positions.dtype != POSITION_DTYPE:
            raise ValueError(f"{self.path / 'positions.npy'}: unexpected record layout {self.positions.dtype}")
        self._games = None

    @property
    def games(self) -> pd.DataFrame:
        if self._games is None:
            self._games = pd.read_csv(self.path / "games.csv", index_col="game", keep_default_na=False)
        return self._games

    @property
    def years(self) -> list[int]:
        return sorted(int(y) for y in self.summary["years"])

    def year_slice(self, first: int, last: int | None = None) -> slice:
        """Positions of the years ``first..last``: contiguous, since storage is by year."""
        last = first if last is None else last
        ranges = [v["position_range"] for y, v in self.summary["years"].items() if first <= int(y) <= last]
        if not ranges:
            raise ValueError(f"{self.path}: no positions for years {first}-{last} (has {self.years[0]}-{self.years[-1]})")
        return slice(min(r[0] for r in ranges), max(r[1] for r in ranges))

    def split(self, name: str, splits: dict | None = None) -> np.ndarray:
        """Positions of a named split (``train``/``val``/``test`` by default)."""
        lo, hi = (splits or REFERENCE_SPLIT)[name]
        return self.positions[self.year_slice(lo, hi)]

    def __len__(self) -> int:
        return len(self.positions)


__all__ = [
    "BuildResult",
    "FORMAT_VERSION",
    "POSITION_DTYPE",
    "REFERENCE_SPLIT",
    "WthorDataset",
    "WthorFormatError",
    "build",
    "find_wtb_files",
    "parse_years",
    "write",
]
