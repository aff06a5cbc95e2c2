"""The command line of the research scripts that extend the package at import (an encoder,
a network part): ``grow SRC DST`` makes a checkpoint into one that uses the extension and
plays as before; ``run SCRIPT ARGS...`` runs another script with the extension in place.
Research code, not tested."""
import runpy
import sys


def main(doc: str, grow) -> None:
    """``doc`` is the caller's usage, shown for a bad command line; ``grow(src, dst)`` its grow."""
    if len(sys.argv) < 3 or sys.argv[1] not in ("grow", "run"):
        raise SystemExit(doc)
    cmd, *rest = sys.argv[1:]
    if cmd == "grow":
        grow(*rest)
    else:
        sys.argv = rest
        runpy.run_path(rest[0], run_name="__main__")
