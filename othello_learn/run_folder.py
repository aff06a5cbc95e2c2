"""A run folder's life cycle, the same for a training run (``othello-train``) and an RL run
(``othello-rl``): a new folder taken back when its run is refused or stopped before its work
began, and the temporary files a run killed outright left there, removed as the next run
starts. ``lock.py`` keeps one process per folder; each command names its own files."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Iterable

from othello_learn.files import remove_stale_temps


def take_back_new_run(out: Path, files: Iterable[str] = (), folders: Iterable[str] = ()) -> bool:
    """Remove the folder OUT that this run made, when it holds only what setting the run up
    wrote: the ``files`` (paths under OUT) and the ``folders`` (and those files' folders),
    nothing else. Else all of it stays: anything more is not ours to remove (a run started
    into the same new OUT at once, which holds it now: its lock and files), or the work has
    begun. Call it with the run's lock released, so that another run's lock is seen as such.
    Whether OUT was removed."""
    files = {Path(f) for f in files}
    folders = {Path(f) for f in folders} | {p for f in files for p in f.parents if p != Path()}
    if not out.is_dir() or out.is_symlink():
        return False
    found = set()
    for top, dirs, names in os.walk(out):  # links are listed, never followed
        found |= {(Path(top) / n).relative_to(out) for n in dirs + names}
    if not found <= files | folders:
        return False
    if any((out / d).is_symlink() or not (out / d).is_dir() for d in folders & found) or any(
            (out / f).is_dir() and not (out / f).is_symlink() for f in files & found):
        return False  # not of the kind set-up writes: not ours
    for f in files & found:
        (out / f).unlink(missing_ok=True)
    for d in sorted(folders & found, key=lambda d: len(d.parts), reverse=True):  # the deepest first
        (out / d).rmdir()
    out.rmdir()
    return True


def remove_killed_writes(out: Path, folders: Iterable[tuple[Path, Callable[[str], bool]]]) -> list[Path]:
    """The temporary files a run killed outright (kill -9, the out-of-memory killer) left
    mid-write in each (folder, which names are the run's) of ``folders``, removed as a rerun
    starts and said in one line: a generation's games or a checkpoint run to tens of MB, and
    nothing else would ever remove them. Only with the run's lock held. The paths removed."""
    removed = [p for folder, ours in folders for p in remove_stale_temps(folder, ours)]
    if removed:
        print(f"{out}: removed {len(removed)} temporary file(s) a killed run left half-written "
              f"({', '.join(str(p.relative_to(out)) for p in removed[:3])}{', ...' if len(removed) > 3 else ''})",
              file=sys.stderr)
    return removed
