"""What a training run keeps in its folder, OUT: which files are its own (so a rerun may
replace them and nothing else), the CSV logs of each start, and where a ``--fresh`` run's
logs begin. ``train.py`` writes the folder; ``curves.py`` reads it."""

from __future__ import annotations

import re
from pathlib import Path

from othello_learn.files import UserError, temp_target, write_json


FRESH_START = "fresh_start.json"  # in OUT: where the logs of the run a --fresh began start


def csv_versions(out: Path) -> dict[int, Path]:
    """The CSV logger's folders in OUT, ``csv/version_N`` by N (one per start or resume)."""
    return {int(p.name[8:]): p for p in (out / "csv").glob("version_*") if p.name[8:].isdigit()}


def mark_fresh_start(out: Path) -> None:
    """``--fresh`` keeps the discarded run's logs (as its best checkpoints): the new run's CSV
    logs start at the next version, and ``curves.py`` joins none before it (the W&B files it
    tells apart by the run id, which ``--fresh`` renews)."""
    write_json(out / FRESH_START, {"csv_version": max(csv_versions(out), default=-1) + 1})


RUN_FILES = ("config.yaml", "model.pt", "metrics.json", "wandb_id")  # what a run writes in OUT itself


# What a run writes in OUT/checkpoints: Lightning's last and best checkpoints.
CHECKPOINT_NAME = re.compile(r"last\.ckpt|best-.*\.ckpt")


def check_run_folder(out: Path) -> None:
    """A folder that is not empty must be a run of this command, which makes OUT/checkpoints
    before anything else: model.pt, config.yaml and metrics.json there are then ours to
    replace. In any other folder they could be the user's, and so could a checkpoints/
    folder holding files but none of our checkpoints (this repository's own, say)."""
    for name in RUN_FILES:  # found now: a folder in a file's place stopped the run after its training
        if (out / name).is_dir():
            raise UserError(f"--out {out}: {name} there is a folder, where the run writes a file; "
                            "move it, or choose another --out")
    ckpts = out / "checkpoints"
    if ckpts.is_dir():
        names = sorted(temp_target(p.name) or p.name for p in ckpts.iterdir()
                       if temp_target(p.name) or not p.name.startswith("."))  # a .DS_Store is no one's run
        if names and not any(CHECKPOINT_NAME.fullmatch(name) for name in names):
            raise UserError(f"--out {out}: its checkpoints/ folder is not a training run's (it holds {names[0]!r}"
                            f"{f' and {len(names) - 1} more' if len(names) > 1 else ''}, no last.ckpt or "
                            "best-*.ckpt): choose a new or an empty folder")
        return
    if not out.is_dir():
        return
    theirs = sorted(p.name for p in out.iterdir() if p.name != ".lock")
    if theirs:
        more = f" and {len(theirs) - 1} more" if len(theirs) > 1 else ""
        raise UserError(f"--out {out}: the folder is not empty and holds no training run (no checkpoints/ "
                        f"folder; it holds {theirs[0]!r}{more}): choose a new or an empty folder")


def batches_per_step(trainer: dict | None) -> int:
    """How many batches one logged step trained on (``trainer.accumulate_grad_batches``, 1 when
    unset): curves.py counts a run's positions by it, and a resume may not change it."""
    return int((trainer or {}).get("accumulate_grad_batches") or 1)
