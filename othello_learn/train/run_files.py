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

# The first line of the config.yaml a run writes, a YAML comment (the file stays a recipe that
# --config reads): the proof that the folder is a run's, as a dataset's summary.json carries its
# format, where a killed run left no checkpoint yet.
RUN_CONFIG_MARK = "# othello-learn training run:"


def run_config_text(cfg: dict) -> str:
    """OUT/config.yaml: the run's settings under the line that marks the folder as a run's."""
    import yaml  # (a Lightning dependency)

    return (f"{RUN_CONFIG_MARK} the settings of its last start (a recipe for --config)\n"
            + yaml.safe_dump(cfg, sort_keys=False))


def _written_by_a_run(config_yaml: Path) -> bool:
    try:
        with open(config_yaml, "rb") as f:
            return f.readline().startswith(RUN_CONFIG_MARK.encode())
    except OSError:
        return False


def check_run_folder(out: Path) -> None:
    """A folder that is not empty must be a run of this command: one whose checkpoints/ holds a
    run's checkpoints, or whose config.yaml a run wrote (a run killed before its first
    checkpoint); model.pt, config.yaml and metrics.json there are then ours to replace. In any
    other folder they could be the user's, and so could a checkpoints/ folder holding files but
    none of our checkpoints (this repository's own, say), or an empty one beside the user's files.
    Only OUT's lock and an empty checkpoints/ (what a run makes first) are let through alone."""
    for name in RUN_FILES:  # found now: a folder in a file's place stopped the run after its training
        if (out / name).is_dir():
            raise UserError(f"--out {out}: {name} there is a folder, where the run writes a file; "
                            "move it, or choose another --out")
    if not out.is_dir():
        return
    ckpts = out / "checkpoints"
    if ckpts.is_dir():
        names = sorted(temp_target(p.name) or p.name for p in ckpts.iterdir()
                       if temp_target(p.name) or not p.name.startswith("."))  # a .DS_Store is no one's run
        if any(CHECKPOINT_NAME.fullmatch(name) for name in names):
            return
        if names:
            raise UserError(f"--out {out}: its checkpoints/ folder is not a training run's (it holds {names[0]!r}"
                            f"{f' and {len(names) - 1} more' if len(names) > 1 else ''}, no last.ckpt or "
                            "best-*.ckpt): choose a new or an empty folder")
    if _written_by_a_run(out / "config.yaml"):
        return
    theirs = sorted(p.name for p in out.iterdir() if p.name not in (".lock", "checkpoints"))
    if theirs:
        more = f" and {len(theirs) - 1} more" if len(theirs) > 1 else ""
        raise UserError(f"--out {out}: the folder is not empty and holds no training run (no checkpoints, no "
                        f"config.yaml a run wrote; it holds {theirs[0]!r}{more}): choose a new or an empty folder")


def batches_per_step(trainer: dict | None) -> int:
    """How many batches one logged step trained on (``trainer.accumulate_grad_batches``, 1 when
    unset): curves.py counts a run's positions by it, and a resume may not change it."""
    return int((trainer or {}).get("accumulate_grad_batches") or 1)
