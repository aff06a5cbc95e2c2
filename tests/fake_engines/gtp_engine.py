"""A tiny GTP Othello engine for the tests: follows ``play``, answers ``genmove``
with its lowest legal square (or ``pass``). Misbehaviours on request:
``--hang`` never answers genmove, ``--hang-once FILE`` hangs only in the first
process (the one that creates FILE), ``--illegal`` answers an occupied square,
``--chatty`` writes comment lines forever instead of a move, ``--die-after N``
exits at its (N+1)-th genmove, ``--exit-after-answer`` exits right after answering
each genmove (dead while idle), ``--refuse-genmove`` answers it with an error,
``--noblank`` ends no answer with the empty line GTP requires, ``--resign`` answers
``genmove`` with ``resign`` (as GTP allows), ``--pid-file F``
writes its process id to F, ``--hung-file F`` writes it to F once it hangs on genmove
(a test waits for that, not for a fixed time), ``--slow-start S`` then waits S seconds before reading
(an engine loading its book)."""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from othello.game import Position  # noqa: E402
from othello.notation import PASS, parse_square, square_name  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--hang", action="store_true")
ap.add_argument("--hang-once")
ap.add_argument("--illegal", action="store_true")
ap.add_argument("--chatty", action="store_true")
ap.add_argument("--die-after", type=int)
ap.add_argument("--exit-after-answer", action="store_true")
ap.add_argument("--refuse-genmove", action="store_true")
ap.add_argument("--noblank", action="store_true")
ap.add_argument("--resign", action="store_true")
ap.add_argument("--pid-file")
ap.add_argument("--hung-file")
ap.add_argument("--slow-start", type=float, default=0.0)
ap.add_argument("--starts-file", help="append a line each time the engine starts")
args = ap.parse_args()
if args.pid_file:
    Path(args.pid_file).write_text(str(__import__("os").getpid()))
time.sleep(args.slow_start)
if args.starts_file:
    with open(args.starts_file, "a") as f:
        f.write("started\n")
genmoves = 0
hang = args.hang
if args.hang_once and not Path(args.hang_once).exists():
    Path(args.hang_once).write_text("hung")
    hang = True

pos = Position()


def answer(text="", ok=True):
    sys.stdout.write(("= " if ok else "? ") + text + ("\n" if args.noblank else "\n\n"))
    sys.stdout.flush()


for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    cmd = words[0]
    if cmd == "quit":
        answer()
        break
    if cmd in ("boardsize", "komi", "name", "version", "protocol_version"):
        answer("fake" if cmd == "name" else "")
    elif cmd == "clear_board":
        pos = Position()
        answer()
    elif cmd == "play":
        black = words[1].lower().startswith("b")
        if black != pos.black_to_move and pos.must_pass():
            pos = pos.play(PASS)  # passes are implied by the colour, as in gtp-rhino
        if black != pos.black_to_move:
            answer("wrong colour", ok=False)
            continue
        try:
            pos = pos.play(parse_square(words[2]))
            answer()
        except ValueError as e:
            answer(str(e), ok=False)
    elif cmd == "genmove":
        if words[1].lower().startswith("b") != pos.black_to_move and pos.must_pass():
            pos = pos.play(PASS)
        if hang:
            if args.hung_file:
                Path(args.hung_file).write_text(str(__import__("os").getpid()))
            time.sleep(3600)
        genmoves += 1
        if args.die_after is not None and genmoves > args.die_after:
            sys.exit(1)
        if args.refuse_genmove:
            answer("not now", ok=False)
            continue
        if args.resign:
            answer("Resign")  # in any case
            continue
        while args.chatty:
            sys.stdout.write("# thinking\n")
            sys.stdout.flush()
            time.sleep(0.05)
        legal = pos.legal_moves()
        if args.illegal:
            answer(square_name((pos.player | pos.opponent).bit_length() - 1))
        else:
            answer(square_name(legal[0]) if legal else "pass")
        if args.exit_after_answer:
            sys.exit(1)
    else:
        answer("unknown command", ok=False)
