"""Learning curves of one or more training runs: validation accuracy against
training positions seen and, where the run logged its training time
(``time/hours``), against wall-clock hours, in one PNG. Reads the run's CSV
logs (``--logger csv``) or, without them, its W&B run files (the default
logger, offline or online: ``OUT/wandb/*run-*/run-*.wandb``), so a run need
not be synced to be plotted. A resumed run writes a new CSV version (a new W&B
run file) each time; all are joined, the later one winning a step both logged; after a
``--fresh``, only the new run's.

    othello-curves runs/cpu_raw_long runs/cpu_hc_long --out results/cpu_long_curves.png
    othello-curves runs/cpu_value_fast --metric val/value_loss --out value_loss.png
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path

import pandas as pd
import yaml

from othello_learn.cli import STOP_SIGNALS, ArgumentParser, run_main, stop_signals_raise
from othello_learn.files import UserError, one_line, parse_nested
from othello_learn.plots import check_plot_path, pyplot, save_figure
from othello_learn.train.logs import FRESH_START, batches_per_step, csv_versions


HOURS = "time/hours"


_LOG_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _log_records(data: bytes):
    """Payloads of a W&B run file: a 7-byte header, then LevelDB's log format
    (32 KiB blocks of chunks, each with a 7-byte header: CRC, length, kind;
    a record too long for the rest of a block is split first/middle/last).
    Stops at a truncated chunk (a run killed while writing)."""
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        room = _LOG_BLOCK - pos % _LOG_BLOCK
        if room < 7:  # a block's tail too short for a header is padding
            pos += room
            continue
        _crc, length, kind = struct.unpack_from("<IHB", data, pos)
        chunk = data[pos + 7 : pos + 7 + length]
        if len(chunk) < length:
            return
        pos += 7 + length
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            yield pending + chunk
            pending = b""


def wandb_history(path: Path) -> list[dict]:
    """The history rows (``wandb.log`` calls) of one W&B run file. W&B reads these
    files only in its compiled core; its protobuf schema ships with the Python package."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B run file")
    rows = []
    for payload in _log_records(data):
        record = wandb_internal_pb2.Record()
        try:
            record.ParseFromString(payload)
        except DecodeError as e:
            raise ValueError(f"{path}: a corrupt record after {len(rows)} history rows ({e})") from e
        if record.WhichOneof("record_type") == "history":
            rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                         for item in record.history.item})
    return rows


def _wandb_frame(run: Path) -> pd.DataFrame:
    # run folders are named [offline-]run-YYYYMMDD_HHMMSS-ID: the timestamp orders the resumes, and
    # the ID (OUT/wandb_id, renewed by --fresh) leaves out the runs a --fresh discarded
    id_path = run / "wandb_id"
    run_id = id_path.read_text().strip() if id_path.is_file() else ""
    files = sorted((f for f in (run / "wandb").glob("*run-*/run-*.wandb") if not run_id or f.stem == f"run-{run_id}"),
                   key=lambda p: p.parent.name.split("run-", 1)[1])
    rows = [row for f in files for row in wandb_history(f) if "trainer/global_step" in row]
    frame = pd.DataFrame(rows)
    return frame.rename(columns={"trainer/global_step": "step"}) if len(frame) else frame


def _read_csv(path: Path) -> pd.DataFrame | None:
    """A CSV log, or None for an empty one (a full disk, or a start stopped before its first line),
    which is said and skipped: the run's other logs still draw its curve."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        print(f"warning: {path}: an empty training log (a full disk?), skipped", file=sys.stderr)
        return None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not a readable training log ({one_line(e)})") from None


def _log_frame(run: Path) -> tuple[pd.DataFrame, str]:
    if not run.is_dir():
        raise UserError(f"{run}: {'not a folder' if run.exists() else 'no such folder'} (give an othello-train run folder)")
    versions = csv_versions(run)
    fresh = run / FRESH_START
    if fresh.is_file():  # a --fresh run: only its own logs, not those of the run it discarded
        try:
            first = int(parse_nested(json.loads, fresh.read_text())["csv_version"])
        except (ValueError, KeyError, TypeError, OverflowError) as e:
            raise UserError(f"{fresh}: not the record of a --fresh start ({one_line(e)})") from None
        versions = {n: v for n, v in versions.items() if n >= first}
    logs = [versions[n] / "metrics.csv" for n in sorted(versions) if (versions[n] / "metrics.csv").is_file()]
    frames = [frame for frame in map(_read_csv, logs) if frame is not None]
    if frames:
        return pd.concat(frames, ignore_index=True), "CSV logs"
    frame = _wandb_frame(run)
    if len(frame):
        return frame, "W&B run files"
    raise FileNotFoundError(f"{run}: no training log: neither csv/version_*/metrics.csv nor wandb/*run-*/run-*.wandb "
                            "with logged steps (is it an othello-train run folder?)")


def _default_batch_size() -> int:
    """The DataModule's default, which config.yaml leaves out when no one set it (imported
    only then: the DataModule brings torch and Lightning)."""
    import inspect

    from othello_learn.data.datamodule import WthorDataModule
    return inspect.signature(WthorDataModule.__init__).parameters["batch_size"].default


def load_curve(run: Path, metric: str = "val/acc") -> pd.DataFrame:
    """``positions`` seen, ``hours`` of training (NaN where not logged) and ``metric``
    at each validation of a run, over all its CSV versions or W&B run files (one per resume)."""
    frame, source = _log_frame(run)
    if metric not in frame:
        raise ValueError(f"{run}: no column {metric!r} in its {source} (has {', '.join(map(str, frame.columns))})")
    cfg_path = run / "config.yaml"
    try:
        cfg = (parse_nested(yaml.safe_load, cfg_path.read_text()) if cfg_path.exists() else {}) or {}
        batch = (cfg.get("data") or {}).get("batch_size")
        batch = int(_default_batch_size() if batch is None else batch)
        # a step is one optimizer step: with accumulation, that many batches
        batch *= batches_per_step(cfg.get("trainer"))
    except (yaml.YAMLError, AttributeError, TypeError, ValueError, OverflowError) as e:
        raise UserError(f"{cfg_path}: not a training config with data.batch_size: {one_line(e)}") from None
    if "step" not in frame or not pd.api.types.is_numeric_dtype(frame["step"]):
        raise UserError(f"{run}: its {source} have no numeric 'step' column (not a training log written here?)")
    hours = frame[HOURS] if HOURS in frame else pd.Series(float("nan"), index=frame.index)
    rows = pd.DataFrame({"step": frame["step"], "hours": hours, metric: frame[metric]})
    if not pd.api.types.is_numeric_dtype(rows[metric]):
        raise UserError(f"{run}: its {source} hold {metric} values that are not numbers (damaged?)")
    rows = rows.dropna(subset=[metric]).drop_duplicates("step", keep="last").sort_values("step")
    if rows.empty:  # an empty plot, exit 0, before
        raise UserError(f"{run}: its {source} have no value of {metric} (only blanks or NaN)")
    return pd.DataFrame({"positions": (rows["step"].to_numpy() + 1) * batch, "hours": rows["hours"].to_numpy(),
                         metric: rows[metric].to_numpy()})


def is_fraction(metric: str) -> bool:
    """Accuracies are logged as fractions and shown in percent; losses are shown as they are."""
    name = metric.rsplit("/", 1)[-1]
    return "acc" in name or "top" in name


def run_labels(runs: list[Path]) -> list[str]:
    """Each run's name in the legend: its folder's name, with as many of the folders above it as
    tell it from another run of the same name (``a/x`` and ``b/x``, which were drawn as one curve)."""
    parts = [Path(os.path.abspath(run)).parts for run in runs]
    depth = [1] * len(runs)
    while True:
        labels = ["/".join(p[-d:]) for p, d in zip(parts, depth)]
        clash = {i for i, label in enumerate(labels) for j, other in enumerate(labels)
                 if i != j and label == other and parts[i] != parts[j] and depth[i] < len(parts[i])}
        if not clash:
            return labels
        for i in clash:
            depth[i] += 1


def plot(runs: list[Path], out: Path, metric: str = "val/acc") -> Path:
    plt = pyplot()
    curves = {}
    for run, label in zip(runs, run_labels(runs)):
        curves.setdefault(label, load_curve(run, metric))  # a run given twice is drawn once
    timed = any(c["hours"].notna().any() for c in curves.values())
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(12 if timed else 7, 4.2), squeeze=False)
    scale, unit = (100, " (%)") if is_fraction(metric) else (1, "")
    for i, (name, curve) in enumerate(curves.items()):
        style = {"marker": "o", "ms": 3, "label": name, "color": f"C{i % 10}"}  # a run's colour in both panels
        axes[0, 0].plot(curve["positions"] / 1e6, scale * curve[metric], **style)
        if timed and curve["hours"].notna().any():  # (a run without times is left out of the second)
            axes[0, 1].plot(curve["hours"], scale * curve[metric], **style)
    axes[0, 0].set_xlabel("training positions seen (millions)")
    if timed:
        axes[0, 1].set_xlabel("training time (hours)")
    for ax in axes[0]:
        ax.set_ylabel(metric + unit)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return save_figure(fig, out)


def build_parser() -> argparse.ArgumentParser:
    """The command's parser (the command reference in docs/ is generated from it)."""
    ap = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run folders of othello-train")
    ap.add_argument("--out", type=Path, required=True, help="PNG to write")
    ap.add_argument("--metric", default="val/acc", help="logged metric to plot (default: %(default)s)")
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    check_plot_path(args.out, "--out")
    try:
        with stop_signals_raise(STOP_SIGNALS):  # a kill or a closed terminal: "terminated", the plot unwritten
            print(plot(args.runs, args.out, args.metric))
    except (FileNotFoundError, ValueError) as err:  # a missing log or metric is the user's to fix
        raise UserError(str(err)) from None
    return 0


def cli() -> None:
    """The ``othello-curves`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
