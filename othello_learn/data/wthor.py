"""Build the (state, expert move) dataset from the FFO's WTHOR database.

    othello-dataset --out data/wthor              # ../shared/data/wthor if present
    othello-dataset --wthor-dir DIR --out OUT --years 1977-2016
    othello-dataset --download --wthor-dir DIR --out OUT

Exit status 0 on success (skipped games are reported, not fatal), 2 on bad
input (one line naming the file; ``--debug`` shows the traceback), 130 on
Ctrl-C, 143 on SIGTERM and 129 on a closed terminal (SIGHUP); OUT is left
untouched on failure, and only an empty folder or a dataset this tool wrote is
ever replaced.
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import time
import urllib.request
import zipfile
import zlib
from io import BytesIO
from pathlib import Path

from othello_learn.cli import STOP_SIGNALS, ArgumentParser, run_main, stop_signals_raise
from othello_learn.files import UserError, atomic_write, check_output
from othello_learn import HOME, HOME_HELP
from othello_learn.data.dataset import (REFERENCE_SPLIT, WTB_NAME, build, check_replaceable, parse_years, recover,
                                         write)

SHARED_WTHOR = HOME.parent / "shared" / "data" / "wthor"
DOWNLOAD_URL = "https://www.ffothello.org/wthor/base_zip/WTH_{year}.ZIP"


WTHOR_ENV = "OTHELLO_WTHOR_DIR"


NO_WTHOR_DIR = (f"no --wthor-dir given, ${WTHOR_ENV} is not set and ../shared/data/wthor does not exist; pass "
                f"--wthor-dir DIR (or set ${WTHOR_ENV})")


def default_wthor_dir() -> Path | None:
    """``$OTHELLO_WTHOR_DIR``, set once where the files live away from the checkout, else
    ``../shared/data/wthor`` beside the current folder or the checkout, else None."""
    given = os.environ.get(WTHOR_ENV)
    if given:
        path = Path(given).expanduser()
        if not path.is_dir():
            raise UserError(f"${WTHOR_ENV} {given}: not a folder; point it at the WTH_YYYY.wtb files, or unset it")
        return path
    for candidate in (Path.cwd().parent / "shared" / "data" / "wthor", SHARED_WTHOR):
        if candidate.is_dir():
            return candidate
    return None


def download(wthor_dir: Path, years: set[int], log=print) -> None:
    """Fetch ``WTH_YYYY.wtb`` files from the FFO's site (zipped, one a year).

    Each file appears whole or not at all (``atomic_path``), so an interrupted
    download is fetched again next time rather than read as a damaged file."""
    created = not wthor_dir.exists()
    wthor_dir.mkdir(parents=True, exist_ok=True)
    try:
        _download(wthor_dir, years, log)
    except BaseException:
        if created and not any(wthor_dir.iterdir()):  # ours, and empty: nothing of the user's in it
            wthor_dir.rmdir()
        raise


def _download(wthor_dir: Path, years: set[int], log) -> None:
    # A year is there under any case of its name (WTH_1977.WTB, as DOS wrote it): the build reads
    # those, and fetching WTH_1977.wtb beside it made "two files for 1977", a run that cannot build.
    present = {int(m.group(1)) for p in wthor_dir.iterdir() if (m := WTB_NAME.fullmatch(p.name))}
    for year in sorted(years):
        target = wthor_dir / f"WTH_{year}.wtb"
        if year in present or target.exists():
            continue
        url = DOWNLOAD_URL.format(year=year)
        log(f"downloading {url}")
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                data = resp.read()
        except (OSError, http.client.HTTPException) as e:  # URLError, HTTPError, timeouts; IncompleteRead: cut short
            raise UserError(f"{url}: download failed: {getattr(e, 'reason', None) or e}") from e
        try:
            archive = zipfile.ZipFile(BytesIO(data))
        except zipfile.BadZipFile as e:
            raise UserError(f"{url}: not a zip archive ({len(data)} bytes)") from e
        member = next((m for m in archive.namelist() if m.lower().endswith(".wtb")), None)
        if member is None:
            raise UserError(f"{url}: the archive holds no .wtb file")
        try:
            content = archive.read(member)
        except (zipfile.BadZipFile, zlib.error, EOFError) as e:  # a bad CRC or a damaged stream: a traceback
            raise UserError(f"{url}: {member} in the archive is damaged ({e}); try again") from e
        atomic_write(target, content)


def format_table(summary: dict) -> str:
    # games: the file's, skipped ones included; warned: kept with a warning (a summary of an
    # earlier build has no such count: 0)
    rows = [("year", "games read", "positions", "of which skipped", "warned, kept")]

    def counts(label, sel):
        rows.append((label, f"{sum(v['games'] for v in sel):,}", f"{sum(v['positions'] for v in sel):,}",
                     str(sum(v["skipped_games"] for v in sel)), str(sum(v.get("warned_games", 0) for v in sel))))

    for year, v in summary["years"].items():
        counts(year, [v])
    for name, (lo, hi) in REFERENCE_SPLIT.items():
        years = sorted(int(y) for y in summary["years"] if lo <= int(y) <= hi)
        sel = [summary["years"][str(y)] for y in years]
        if sel:  # named by the years it holds: a build of 2013-2014 is no "train 1977-2014"
            first, last = years[0], years[-1]
            counts((f"{name} {first}-{last}" if first != last else f"{name} {first}") + (
                f" ({len(years)} years)" if len(years) < last - first + 1 else ""), sel)
    counts("total", [summary["total"]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The command's parser (the command reference in docs/ is generated from it)."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wthor-dir", type=Path, default=None,
                        help="folder of WTH_YYYY.wtb files (+ WTHOR.JOU, WTHOR.TRN for names); "
                             f"default: ${WTHOR_ENV} when set, else ../shared/data/wthor when it exists")
    parser.add_argument("--out", type=Path, default=HOME / "data" / "wthor",
                        help="dataset folder to write (replaced atomically; only an empty folder or a dataset "
                             "this tool wrote is replaced); default: data/wthor in " + HOME_HELP)
    parser.add_argument("--years", default=None,
                        help="years to include, e.g. 1977-2016 or 2015,2016; every year named, inside a range "
                             "too, must have its file; default: every file found")
    parser.add_argument("--download", action="store_true",
                        help="first fetch missing WTH_YYYY.wtb files from ffothello.org into --wthor-dir, "
                             "given explicitly (needs network; --years defaults to 1977-2018 then)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    try:
        years = parse_years(args.years)
    except ValueError as e:
        parser.error(f"--years: {e}")

    with stop_signals_raise(STOP_SIGNALS):  # unwound as Ctrl-C is: the build folder removed, exit 143 / 129
        return _run(parser, args, years)


def _run(parser, args, years) -> int:
    def warn(message):
        print(message, file=sys.stderr)

    # Before any download or replay: a refused --out should not cost the whole build first.
    check_output(args.out, "--out", folder=True)
    recover(args.out, log=warn)
    check_replaceable(args.out)
    wthor_dir = args.wthor_dir
    if args.download:
        if wthor_dir is None:
            parser.error("--download needs --wthor-dir, the folder to download into")
        download(wthor_dir, years or set(range(1977, 2019)))
    if wthor_dir is None:
        wthor_dir = default_wthor_dir()
        if wthor_dir is None:
            parser.error(NO_WTHOR_DIR + ", or --download --wthor-dir DIR to fetch the files")

    start = time.perf_counter()
    result = build(wthor_dir, years, progress=not args.quiet, warn=warn)
    out = write(result, args.out, log=warn, recovered=True)  # recovered above: its notes once
    elapsed = time.perf_counter() - start
    if not args.quiet:
        print(format_table(result.summary))
        print(f"wrote {out} ({result.summary['total']['positions']:,} positions, "
              f"{(out / 'positions.npy').stat().st_size / 2**20:.0f} MiB) in {elapsed:.1f} s")
    return 0


def cli() -> None:
    """The ``othello-dataset`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
