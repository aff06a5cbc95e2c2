"""The compact (state, expert move) dataset built from WTHOR, on disk and loaded.

Layout of a dataset folder::

    positions.npy   POSITION_DTYPE records (28 bytes each), ordered by year,
                    game, ply; memory-mappable with ``np.load(mmap_mode="r")``
    games.csv       one row per game: year, file, tournament, players, scores,
                    moves, where its positions start, and why it was skipped
    summary.json    counts per year (games, positions, skipped games), the
                    position range of each year, the skipped games, and the
                    ``format`` marker that lets a rebuild replace the folder

A build is written in ``.OUT.build.PID`` beside ``OUT`` and swapped in through
``.OUT.old.PID`` (a long OUT cut short there, ``files.short_name``); a run killed part-way leaves those, and the next run puts the
old dataset back and removes them (see ``recover``). Nothing else is ever
replaced or deleted: a folder is only replaced when it is empty or a dataset
this tool wrote.

Planes are never materialised here: encoders compute them from the boards,
and symmetries are applied when batches are made.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from othello_learn.cli import bar_pacing
from othello_learn.files import UserError, is_link_loop, parse_nested, process_exists, short_name
from othello.notation import square_name, wthor_to_square

from .replay import POSITION_DTYPE, replay
from .wtb import WthorFormatError, read_names, read_wtb

FORMAT_VERSION = 1
# In summary.json: the proof that a folder is ours to replace.
FORMAT_MARKER = "othello-learn-dataset/1"
DATASET_FILES = frozenset({"positions.npy", "games.csv", "summary.json"})
# Hlynsson (2017): train 1977-2014, validate 2015, test 2016.
REFERENCE_SPLIT = {"train": (1977, 2014), "val": (2015, 2015), "test": (2016, 2016)}
CHUNK_GAMES = 16384  # games replayed together: big enough to amortise numpy, small enough for cache

WTB_NAME = re.compile(r"WTH_(\d{4})\.wtb", re.IGNORECASE)  # the whole name: not "copy of WTH_1980.wtb"
# Two characters per move, b"" for "no move": rows of these viewed as one string are transcripts.
_SQUARE_NAMES = np.array([square_name(s).encode() for s in range(64)] + [b""], dtype="S2")
_BYTE_SQUARES = wthor_to_square(np.arange(256)).astype(np.int8)  # WTHOR byte -> square, -1 for no square


def parse_years(text: str | int | None) -> set[int] | None:
    """``'1977-2014'``, ``'2015,2016'``, ``2016`` or a mix -> set of years; None or ``'all'`` -> None (all).

    An empty string is refused rather than read as "all": it is what an unset
    shell variable gives, and building every year then is not what was meant."""
    if text is None:
        return None
    text = str(text)
    if not text.strip():
        raise ValueError("no years given (empty); use YYYY, YYYY-YYYY or a comma-separated list")
    if text.strip().lower() == "all":
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


def format_years(years) -> str:
    """``{1977, 1978, 1979, 2016}`` -> ``'1977-1979, 2016'``: short enough for one line."""
    runs: list[list[int]] = []
    for y in sorted(years):
        if runs and y == runs[-1][1] + 1:
            runs[-1][1] = y
        else:
            runs.append([y, y])
    return ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in runs) or "none"


def find_wtb_files(wthor_dir, years: set[int] | None = None, warn=None) -> list[tuple[int, Path]]:
    """``(year, path)`` of the ``WTH_YYYY.wtb`` files in a folder, by year.

    Only the exact WTHOR name counts, so a backup such as ``copy of WTH_1980.wtb``
    is not read as a second 1980 (it is mentioned through ``warn``); two files
    for one year (``WTH_1980.wtb`` and ``wth_1980.WTB``) are an error, since
    either choice could be the wrong one. So is a year asked for that has no
    file, inside a range too: a dataset or an evaluation quietly short of a
    year would be reported as if it covered it."""
    wthor_dir = Path(wthor_dir)
    if is_link_loop(wthor_dir):
        raise UserError(f"WTHOR folder {wthor_dir}: is a symbolic link loop; give the folder itself")
    if not wthor_dir.exists():
        raise UserError(f"WTHOR folder not found: {wthor_dir}")
    if not wthor_dir.is_dir():
        raise UserError(f"{wthor_dir}: is a file; --wthor-dir wants the folder holding the WTH_YYYY.wtb files")
    by_year: dict[int, list[Path]] = {}
    for p in sorted(wthor_dir.iterdir()):
        m = WTB_NAME.fullmatch(p.name)
        if m is None:
            if warn is not None and WTB_NAME.search(p.name):
                warn(f"warning: {p}: ignored, not named WTH_YYYY.wtb")
            continue
        by_year.setdefault(int(m.group(1)), []).append(p)
    if years is not None:
        missing = years - set(by_year)
        if missing:
            raise UserError(f"{wthor_dir}: no WTH_YYYY.wtb file for {format_years(missing)} "
                            f"(the folder has {format_years(by_year)})")
        by_year = {y: paths for y, paths in by_year.items() if y in years}
    for year, paths in sorted(by_year.items()):
        if len(paths) > 1:
            raise UserError(f"{wthor_dir}: two files for {year}: {' and '.join(p.name for p in paths)}; keep one")
        if not paths[0].is_file():
            what = "a folder" if paths[0].is_dir() else "not a regular file"
            raise UserError(f"{paths[0]}: is {what}, not a WTHOR game file")
    if not by_year:
        raise UserError(f"no WTH_YYYY.wtb files in {wthor_dir}")
    return [(year, paths[0]) for year, paths in sorted(by_year.items())]


def _record_errors(games_rec: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Games whose record is damaged before any move is replayed: ``(bad, ply, reasons)``.

    A 0 byte ends a WTHOR game, so moves after it mean a lost move, not an end;
    a black score over 64 would wrap to a negative result in the int8 fields.
    ``ply`` is the 1-based ply of the 0 byte, -1 where the problem is the score."""
    moves = games_rec["moves"]
    zero = moves == 0
    first_zero = np.where(zero.any(1), zero.argmax(1), moves.shape[1])
    gap = (np.maximum.accumulate(zero, axis=1) & ~zero).any(1)
    score = games_rec["black_score"].astype(np.int64)
    bad_score = score > 64
    bad = gap | bad_score
    ply = np.where(gap, first_zero + 1, -1)
    reasons = []
    for g in np.nonzero(bad)[0].tolist():
        why = []
        if gap[g]:
            why.append(f"move byte 0 (end of game) as move {ply[g]} is followed by more moves")
        if bad_score[g]:
            why.append(f"black score {score[g]} is not 0..64")
        reasons.append("; ".join(why))
    return bad, ply, reasons


def _repeats(games_rec: np.ndarray, file_id: np.ndarray, zero_year: np.ndarray) -> np.ndarray:
    """For each game, the row of the game it repeats, or its own row: the same moves, players and
    tournament again in its file, or in a copy of another file whose header year is 0 (such a copy
    passes the year check). The kept one is the first in a file with a real year, else the first.
    The same game in two years' files with real years is kept twice: a replay, not a copy."""
    n = len(games_rec)
    key = np.empty((n, 66), np.uint8)
    key[:, :60] = games_rec["moves"]
    for i, field in enumerate(("tournament", "black", "white")):
        key[:, 60 + 2 * i:62 + 2 * i] = games_rec[field].astype("<u2").view(np.uint8).reshape(n, 2)
    order = np.lexsort((np.arange(n), zero_year))  # games of real-year files first: those are kept
    _, first, inverse = np.unique(key[order].view("V66").ravel(), return_index=True, return_inverse=True)
    keeper = np.empty(n, np.int64)
    keeper[order] = order[first][inverse.ravel()]
    rows = np.arange(n)
    repeat = (keeper != rows) & ((file_id[keeper] == file_id) | zero_year | zero_year[keeper])
    return np.where(repeat, keeper, rows)


def transcripts(moves: np.ndarray) -> np.ndarray:
    """WTHOR move bytes ``[n, 60]`` -> ``'f5d6c3...'`` per game, as recorded (passes
    are not recorded), up to the first byte that is no move; one vectorized pass."""
    moves = np.asarray(moves)
    # A byte table for the usual uint8 records: wthor_to_square itself makes several int64
    # copies of its input, ~230 MiB at once for the 7.5 M move bytes of all WTHOR years.
    sq = _BYTE_SQUARES[moves] if moves.dtype == np.uint8 else wthor_to_square(moves)
    recorded = np.minimum.accumulate(sq >= 0, axis=1)
    names = np.ascontiguousarray(_SQUARE_NAMES[np.where(recorded, sq, 64)])
    return names.view(f"S{2 * moves.shape[1]}").ravel().astype(str)


def _names(wthor_dir: Path, filename: str) -> list[str]:
    for p in wthor_dir.iterdir():
        if p.name.lower() == filename.lower():
            return read_names(p)
    return []


def _lookup(names: list[str], ids: np.ndarray) -> list[str]:
    return [names[i] if i < len(names) else "" for i in ids.tolist()]


def _progress(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="game", desc="replaying", file=sys.stderr, smoothing=0.1, disable=not enabled,
                **bar_pacing())


@dataclass
class BuildResult:
    positions: np.ndarray
    games: pd.DataFrame
    summary: dict


def build(wthor_dir, years: set[int] | None = None, progress: bool = True, warn=print) -> BuildResult:
    """Read and replay WTHOR files into positions, a games table and a summary.

    A malformed file raises ``WthorFormatError`` naming it; so does a file whose
    header gives another year than its name (a copy saved under the wrong year
    would put its games in another split; a header year of 0 says nothing). A
    game with an illegal move is skipped, reported through ``warn`` with its
    file, index and ply, and counted in ``skipped_games``; so is a game whose record
    cannot be right (a black score over 64 or one the finished game's final board
    contradicts) and a game repeated in its file or in a copy whose header year is 0
    (``_repeats``: the repeat is skipped, the first kept). A theoretical score over 64
    is warned about and the game kept (the field is not used), counted in ``warned_games``.
    """
    wthor_dir = Path(wthor_dir)
    files = find_wtb_files(wthor_dir, years, warn=warn)
    players = _names(wthor_dir, "WTHOR.JOU")
    tournaments = _names(wthor_dir, "WTHOR.TRN")

    tables, records, zero_year = [], [], []
    for year, path in files:
        w = read_wtb(path)
        if w.year and w.year != year:
            raise WthorFormatError(f"{path}: the header says its games are from {w.year}, the file name says {year}; "
                                   "rename the file or replace it")
        records.append(w.games)
        zero_year.append(np.full(len(w.games), w.year == 0))
        tables.append(
            pd.DataFrame(
                {
                    "year": np.full(len(w.games), year, dtype=np.int16),
                    "file": path.name,
                    "index": np.arange(len(w.games), dtype=np.int32),
                    "depth": np.int16(w.depth),
                }
            )
        )
    games_rec = np.concatenate(records)
    games = pd.concat(tables, ignore_index=True)
    n = len(games_rec)
    if n == 0:
        raise UserError(f"{wthor_dir}: no games in {', '.join(p.name for _, p in files)} "
                        "(each header says 0 games); nothing to build")
    damaged, damaged_ply, damaged_reasons = _record_errors(games_rec)
    repeats = _repeats(games_rec, np.repeat(np.arange(len(files)), [len(r) for r in records]),
                       np.concatenate(zero_year))
    repeated = (repeats != np.arange(n)) & ~damaged
    damaged = damaged | repeated  # known before the replay: replayed as empty records too
    # Damaged games are replayed as empty records: no positions, no wrapped scores.
    replay_moves = np.where(damaged[:, None], np.uint8(0), games_rec["moves"])
    replay_scores = np.where(damaged, np.uint8(32), games_rec["black_score"])

    # A game gives at most one position per move byte before its first 0 (none if skipped), so
    # each chunk's positions are copied into one array as they come: concatenating the chunks
    # at the end held them all and their copy at once (2 x 200 MiB for all years).
    positions = np.empty(np.count_nonzero(replay_moves), POSITION_DTYPE)
    n_positions, n_moves, final_black, finished = 0, [], [], []
    error_ply, error_move = [], []
    bar = _progress(n, progress)
    for start in range(0, n, CHUNK_GAMES):
        stop = start + CHUNK_GAMES
        r = replay(replay_moves[start:stop], replay_scores[start:stop])
        r.positions["game"] += start
        positions[n_positions:n_positions + len(r.positions)] = r.positions
        n_positions += len(r.positions)
        n_moves.append(r.n_moves)
        final_black.append(r.final_black)
        finished.append(r.finished)
        error_ply.append(r.error_ply)
        error_move.append(r.error_move)
        bar.update(len(r.n_moves))
    bar.close()
    positions = positions[:n_positions]  # a view: short of the bound by the skipped games' moves only
    error_ply = np.concatenate(error_ply)
    error_move = np.concatenate(error_move)
    n_moves, final_black, finished = np.concatenate(n_moves), np.concatenate(final_black), np.concatenate(finished)
    # A finished game's result is its board's; a recorded score that says otherwise (both count the
    # empties to the winner) means the moves or the score are damaged, and which cannot be told.
    recorded = 2 * games_rec["black_score"].astype(np.int64) - 64
    contradicted = finished & (recorded != final_black)
    if contradicted.any():  # rare: their positions, already copied, are taken out (one copy)
        positions = positions[~contradicted[positions["game"]]]
        n_moves = np.where(contradicted, 0, n_moves)

    games["tournament_id"] = games_rec["tournament"]
    games["tournament"] = _lookup(tournaments, games_rec["tournament"])
    games["black_id"] = games_rec["black"]
    games["black"] = _lookup(players, games_rec["black"])
    games["white_id"] = games_rec["white"]
    games["white"] = _lookup(players, games_rec["white"])
    games["black_score"] = games_rec["black_score"]
    games["theoretical_score"] = games_rec["theoretical_score"]
    games["moves"] = n_moves.astype(np.int8)
    games["finished"] = finished
    games["result"] = final_black.astype(np.int8)  # black's final disc difference
    counts = np.bincount(positions["game"], minlength=n) if n else np.zeros(0, np.int64)
    games["first_position"] = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    games["transcript"] = transcripts(games_rec["moves"])
    games["error"] = ""
    games.index.name = "game"

    problems = {}  # game -> (ply, byte, reason), in game order below
    for g, reason in zip(np.nonzero(damaged & ~repeated)[0].tolist(), damaged_reasons):
        ply = int(damaged_ply[g])
        problems[g] = (ply, 0, reason) if ply > 0 else (None, None, reason)
    for g in np.nonzero(repeated)[0].tolist():
        k = int(repeats[g])
        problems[g] = (None, None, f"the same game (moves, players, tournament) as game {int(games.at[k, 'index'])} "
                                   f"of {games.at[k, 'file']}")
    for g in np.nonzero(contradicted)[0].tolist():
        problems[g] = (None, None, f"black score {int(games_rec['black_score'][g])} contradicts the final board "
                                   f"(black {(int(final_black[g]) + 64) // 2}, empties to the winner)")
    for g in np.nonzero(error_ply >= 0)[0].tolist():
        ply, byte = int(error_ply[g]), int(error_move[g])
        sq = int(wthor_to_square(byte))
        what = square_name(sq) if sq >= 0 else f"byte {byte} (no such square)"
        problems[g] = (ply + 1, byte, f"illegal move {what} as move {ply + 1}")
    skipped = []
    for g in sorted(problems):
        ply, byte, reason = problems[g]
        row = games.loc[g]
        games.loc[g, "error"] = reason
        skipped.append({"file": row["file"], "game": int(row["index"]), "ply": ply, "move": byte, "reason": reason})
        names = f"; {row['black'] or '?'} vs {row['white'] or '?'}" if row["black"] or row["white"] else ""
        warn(f"warning: {row['file']}: game {int(row['index'])} (counted from 0{names}): {reason}; game skipped")
    # A field no position uses is wrong: the game is kept, and counted so that the table shows it.
    theoretical = games_rec["theoretical_score"].astype(np.int64)
    warned_rows = (theoretical > 64) & (games["error"] == "").to_numpy()
    warned = []
    for g in np.nonzero(warned_rows)[0].tolist():
        row = games.loc[g]
        reason = f"theoretical score {theoretical[g]} is not 0..64"
        warned.append({"file": row["file"], "game": int(row["index"]), "reason": reason})
        names = f"; {row['black'] or '?'} vs {row['white'] or '?'}" if row["black"] or row["white"] else ""
        warn(f"warning: {row['file']}: game {int(row['index'])} (counted from 0{names}): {reason}; game kept "
             "(the field is not used)")

    per_year = {}
    first = 0
    for year, _ in files:  # every year read, one with no games too (listed with 0, not left out)
        grp = games[games["year"] == year]
        npos = int(counts[grp.index].sum())
        per_year[str(year)] = {
            "games": int(len(grp)),
            "positions": npos,
            "skipped_games": int((grp["error"] != "").sum()),
            "warned_games": int(warned_rows[grp.index].sum()),
            "position_range": [first, first + npos],
        }
        first += npos
    summary = {
        "format": FORMAT_MARKER,
        "format_version": FORMAT_VERSION,
        "source": str(wthor_dir),
        "position_dtype": POSITION_DTYPE.descr,
        "years": per_year,
        "total": {
            "games": int(n),
            "positions": int(len(positions)),
            "skipped_games": len(skipped),
            "warned_games": len(warned),
        },
        "reference_split": {k: list(v) for k, v in REFERENCE_SPLIT.items()},
        "skipped": skipped,
        "warned": warned,
    }
    return BuildResult(positions=positions, games=games, summary=summary)


def _building(pid: int) -> bool:
    """Whether a build folder's writer may still be at work: our own leftovers come from an
    earlier, finished call."""
    return pid != os.getpid() and process_exists(pid)


def _only_dataset_files(folder: Path) -> bool:
    """Whether ``folder`` holds nothing but files a build writes (so deleting it loses nothing of the user's)."""
    return all(p.name in DATASET_FILES and p.is_file() and not p.is_symlink() for p in folder.iterdir())


def _side_stem(name: str) -> str:
    """What the build's folders beside a dataset named ``name`` are named after: a name the file
    system takes must leave room for ``.`` and ``.build.PID``."""
    return short_name(name, len(".") + len(".build.") + len(str(2**32)))


def recover(out, log=None) -> None:
    """Undo what a killed ``write`` left beside ``out``, and remove its temporary folders.

    Only folders named ``.OUT.build.PID`` / ``.OUT.old.PID`` whose process is
    gone are touched (a live writer's are left alone). If ``out`` is missing and
    an ``.old`` folder is there, the kill fell between the two renames of the
    swap: the old dataset is put back, as a failed build leaves it."""
    out = Path(os.path.abspath(out))
    if not out.parent.is_dir():
        return
    pattern = re.compile(rf"\.{re.escape(_side_stem(out.name))}\.(build|old)\.(\d+)")
    olds, builds = [], []
    for p in out.parent.iterdir():
        m = pattern.fullmatch(p.name)
        if not (m and p.is_dir() and not p.is_symlink()) or _building(int(m.group(2))):
            continue
        if not _only_dataset_files(p):
            if log:
                log(f"warning: {p}: left alone: it holds files a build does not write")
            continue
        (olds if m.group(1) == "old" else builds).append(p)
    if olds and not os.path.lexists(out):
        newest = max(olds, key=lambda p: p.stat().st_mtime)
        os.replace(newest, out)
        olds.remove(newest)
        if log:
            log(f"{out}: restored the dataset a killed build had moved to {newest.name}")
    for p in olds + builds:
        shutil.rmtree(p)
        if log:
            log(f"{out.parent}: removed {p.name}, left by a killed build")


def check_replaceable(out) -> None:
    """Refuse (``UserError``) unless ``out`` is absent, an empty folder, or a dataset this tool wrote.

    A dataset is a folder whose ``summary.json`` carries ``FORMAT_MARKER`` and
    that holds only the dataset's files, or (written before the marker) exactly
    ``positions.npy``, ``games.csv`` and ``summary.json``. Anything else may be
    the user's (the WTHOR folder, the working folder) and is never replaced."""
    out = Path(out)
    if out.is_symlink():
        raise UserError(f"--out {out}: is a symbolic link; give the folder it points to, or another path")
    if not out.exists():
        return
    if not out.is_dir():
        raise UserError(f"--out {out}: is a file, not a dataset folder; refusing to replace it (choose another --out)")
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return
    if _only_dataset_files(out):
        if set(entries) == DATASET_FILES:
            return  # a legacy dataset, or ours
        try:
            if parse_nested(json.loads, (out / "summary.json").read_text()).get("format") == FORMAT_MARKER:
                return
        except (OSError, ValueError, AttributeError):
            pass
    foreign = [e for e in entries if e not in DATASET_FILES] or entries
    more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
    raise UserError(f"--out {out}: is a folder that is not a dataset written by this tool (it holds {foreign[0]!r}{more}); "
                    "refusing to replace it: choose a new or empty folder")


@contextmanager
def _writing(out: Path, name: str):
    """Name the dataset file in an OS error (a full disk raises one without a file name)."""
    try:
        yield
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), str(out / name)) from e


def write(result: BuildResult, out, log=None, recovered: bool = False) -> Path:
    """Write a dataset folder atomically: built beside ``out``, then swapped in.

    An existing ``out`` is replaced only when ``check_replaceable`` allows it,
    and only once the new one is complete; leftovers of a killed earlier run
    are dealt with first (``recover``; ``recovered``: the caller just did)."""
    given = Path(out)
    out = Path(os.path.abspath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    if not recovered:
        recover(out, log)
    check_replaceable(out)
    tmp = out.with_name(f".{_side_stem(out.name)}.build.{os.getpid()}")
    old = out.with_name(f".{_side_stem(out.name)}.old.{os.getpid()}")
    try:
        tmp.mkdir()
    except OSError as e:  # named for the folder asked for, not the hidden build folder beside it
        raise OSError(e.errno, e.strerror or str(e), str(given)) from e
    moved_aside = False
    try:
        with _writing(out, "positions.npy"):
            np.save(tmp / "positions.npy", result.positions)
        with _writing(out, "games.csv"):
            result.games.to_csv(tmp / "games.csv")
        with _writing(out, "summary.json"):  # last: a build folder with it is complete
            (tmp / "summary.json").write_text(json.dumps(result.summary, indent=1) + "\n")
        for name in sorted(DATASET_FILES):  # on the disk before the old one goes
            with _writing(out, name), open(tmp / name, "rb") as f:
                os.fsync(f.fileno())
        if os.path.lexists(out):
            os.replace(out, old)
            moved_aside = True
            os.replace(tmp, out)
            moved_aside = False
            shutil.rmtree(old)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if moved_aside and not os.path.lexists(out):
            os.replace(old, out)
        raise
    return given


def content_digest(summary: dict) -> str:
    """A digest of a dataset's summary.json without its ``source``: the same for a copy or a
    rebuild from the same files (the build is deterministic), another for a rebuild from other
    years or files whose counts differ (games, positions, skipped games by year; a rebuild from
    files of exactly the same counts passes). Kept in a training run's checkpoints, it tells a
    folder rebuilt in place since the run began, which ``same_dataset`` cannot: by then only
    the new build is there."""
    import hashlib

    kept = {k: v for k, v in summary.items() if k != "source"}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


def same_dataset(a, b) -> bool:
    """Whether two dataset folders hold the same data: one folder, or a copy or a rebuild of
    it elsewhere (the build is deterministic, so the same files give the same bytes; only the
    summary's ``source``, where the files were read, may differ). A run resumed from another
    checkout of the project reads its own copy of the data and is not training on other data."""
    import filecmp

    a, b = Path(a), Path(b)
    if os.path.samefile(a, b):
        return True
    try:
        summaries = [parse_nested(json.loads, (d / "summary.json").read_text()) for d in (a, b)]
    except (OSError, ValueError):  # not both datasets: not the same data
        return False
    if not all(isinstance(s, dict) for s in summaries):
        return False
    for s in summaries:
        s.pop("source", None)
    try:
        return summaries[0] == summaries[1] and all(
            filecmp.cmp(a / name, b / name, shallow=False) for name in ("games.csv", "positions.npy"))
    except OSError:
        return False


class DatasetError(UserError, ValueError):
    """A dataset folder that cannot be read as built (damaged, cut short, of another format, or
    without the years asked for): one line naming the file, as every command reports it."""


class WthorDataset:
    """A built dataset folder: memory-mapped positions, games and year splits."""

    def __init__(self, path, mmap: bool = True):
        self.path = Path(path)
        summary_path = self.path / "summary.json"
        if not summary_path.exists():
            raise FileNotFoundError(f"{self.path} is not a dataset folder (no summary.json)")
        try:
            self.summary = parse_nested(json.loads, summary_path.read_text())
        except ValueError as e:  # a copy cut short, not text, or nested past reading
            raise DatasetError(f"{summary_path}: not valid JSON ({e}); rebuild the dataset") from None
        if not isinstance(self.summary, dict):
            raise DatasetError(f"{summary_path}: not a dataset summary (a JSON {type(self.summary).__name__}); "
                               "rebuild the dataset")
        if self.summary.get("format_version") != FORMAT_VERSION:
            raise DatasetError(f"{self.path}: dataset format {self.summary.get('format_version')} is not "
                               f"{FORMAT_VERSION}; rebuild it")
        records = self.path / "positions.npy"
        try:
            self.positions = np.load(records, mmap_mode="r" if mmap else None)
        except FileNotFoundError:
            raise
        except (OSError, ValueError, EOFError) as e:  # cut short: numpy's words only ("mmap length ...")
            if "allow_pickle" in str(e):  # numpy suggests loading it "unsafely": never, and never advised
                raise DatasetError(f"{records}: not a .npy file of position records (numpy would read it as a "
                                   "pickle, which is never loaded); rebuild the dataset") from None
            raise DatasetError(f"{records}: cannot be read ({e}; damaged or cut short?); rebuild the dataset") from None
        if self.positions.dtype != POSITION_DTYPE:
            raise DatasetError(f"{self.path / 'positions.npy'}: unexpected record layout {self.positions.dtype}")
        self._check()
        self._games = None

    def _check(self, chunk: int = 1 << 20) -> None:
        """A damaged summary or record is a ``DatasetError`` naming the file now, not an IndexError
        or KeyError mid-run, or a net trained on nonsense: the years' position ranges following on
        from 0 to the last record (a positions.npy copied from a build of other years is not read
        as this summary's years), each record's move, ply, history and result in range, its two sides' discs apart
        and its move on an empty square (one pass over those fields)."""
        n = len(self.positions)
        years = self.summary.get("years")
        if not isinstance(years, dict):
            raise DatasetError(f"{self.path / 'summary.json'}: no per-year table (\"years\"); rebuild the dataset")
        for year, v in years.items():
            r = v.get("position_range") if isinstance(v, dict) else None
            if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r) and 0 <= r[0] <= r[1] <= n
                    and str(year).isdigit()):
                raise DatasetError(f"{self.path / 'summary.json'}: year {year}: no valid position_range "
                                   f"(found {r!r}; {n:,} positions); rebuild the dataset")
        end, previous = 0, None  # stored by year: ranges that overlap would put a year's positions in two splits
        for year, v in sorted(years.items(), key=lambda item: int(item[0])):
            lo, hi = v["position_range"]
            if lo < end:
                raise DatasetError(f"{self.path / 'summary.json'}: year {year}'s position_range {[lo, hi]} overlaps "
                                   f"year {previous}'s (positions are stored by year); rebuild the dataset")
            if lo > end:
                raise DatasetError(f"{self.path / 'summary.json'}: year {year}'s position_range {[lo, hi]} leaves "
                                   f"positions {end}..{lo - 1} to no year (a build's ranges follow on); "
                                   "rebuild the dataset")
            if hi > end:
                end, previous = hi, year
        if end != n:  # records past the summary's years: positions.npy from another build (more years than it says)
            raise DatasetError(f"{self.path / 'positions.npy'}: {n:,} positions, but summary.json's years cover "
                               f"{end:,}: the two files are from different builds; rebuild the dataset")
        for start in range(0, n, chunk):  # one read of each chunk for all three fields
            records = self.positions[start:start + chunk]
            for name, lo, hi in (("move", 0, 63), ("ply", 0, 59), ("history", -1, 64), ("result", -64, 64)):
                values = records[name]
                bad = np.nonzero(((values < lo) | (values > hi)).reshape(len(values), -1).any(1))[0]
                if len(bad):
                    i = start + int(bad[0])
                    raise DatasetError(f"{self.path / 'positions.npy'}: position {i}: {name} "
                                       f"{self.positions[name][i].tolist()} is not {lo}..{hi} (damaged?); "
                                       "rebuild the dataset")
            discs = records["player"] | records["opponent"]
            bad = np.nonzero((records["player"] & records["opponent"]).astype(bool)
                             | (discs >> records["move"].astype(np.uint64) & np.uint64(1)).astype(bool))[0]
            if len(bad):
                raise DatasetError(f"{self.path / 'positions.npy'}: position {start + int(bad[0])}: a square held by "
                                   "both sides, or the move on an occupied square (damaged?); rebuild the dataset")

    @property
    def games(self) -> pd.DataFrame:
        if self._games is None:
            self._games = pd.read_csv(self.path / "games.csv", index_col="game", keep_default_na=False)
        return self._games

    @property
    def years(self) -> list[int]:
        return sorted(int(y) for y in self.summary["years"])

    def positions_of(self, years: set[int] | None = None) -> np.ndarray:
        """The positions of ``years`` (None: all) in storage order (year, game, ply), the order
        a replay of the raw files gives. Adjacent years stay one memory-mapped view, not a copy.
        A year the dataset lacks is a ValueError naming it: a run or an evaluation quietly short
        of a year would be reported as if it covered it."""
        if years is None:
            return self.positions
        missing = set(years) - set(self.years)
        if missing:
            raise DatasetError(f"{self.path}: no year {format_years(missing)} (it has {format_years(self.years)})")
        merged: list[list[int]] = []
        for y in sorted(years):
            lo, hi = self.summary["years"][str(y)]["position_range"]
            if merged and merged[-1][1] == lo:
                merged[-1][1] = hi
            else:
                merged.append([lo, hi])
        if len(merged) == 1:
            return self.positions[merged[0][0]:merged[0][1]]
        return np.concatenate([self.positions[lo:hi] for lo, hi in merged] or [self.positions[:0]])

    def split(self, name: str, splits: dict | None = None) -> np.ndarray:
        """Positions of a named split (``train``/``val``/``test`` by default): every year of it,
        or a ValueError naming those the dataset lacks (``positions_of``), not the part it has."""
        lo, hi = (splits or REFERENCE_SPLIT)[name]
        return self.positions_of(set(range(lo, hi + 1)))

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
    "check_replaceable",
    "find_wtb_files",
    "format_years",
    "parse_years",
    "recover",
    "transcripts",
    "write",
]
