"""What the two engine front-ends (``nboard.py``, ``gtp_engine.py``) share: the player of a
session started and stopped, the command line, and the read-answer loop. The protocols
differ in their lines; how a session starts, reads and ends does not."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from othello_learn.cli import STOP_SIGNALS, ArgumentParser, StopOnce, standard_input, stdout_to_devnull, stop_signals_raise
from othello_learn.settings import seed_arg
from othello_learn.files import UserError
from othello_learn.players.base import Player
from othello_learn.players.specs import PlayerSpecError, make_program


ECHO = 200  # characters of a bad command quoted on stderr: a GUI may send a line of any length


class GuiGone(Exception):
    """Our output was closed (the GUI or referee quit without ``quit``): the session ends quietly."""


def session_player(spec: str) -> Player:
    """The ``--player`` of an engine session (and of solve), ready: an external engine that cannot start is
    found before the first command (one line naming --player), and one that can stays up
    for the session (``engine_main`` stops it at the end)."""
    try:
        player = make_program(spec)
    except PlayerSpecError as e:  # it names the spec
        raise UserError(f"--player: {e}") from None
    try:
        player.check(keep_running=True)
    except UserError as e:
        raise UserError(f"--player: {e}") from None
    player.reset()
    return player


def serve_lines(engine, inp=None, out=None, stop: StopOnce | None = None) -> int:
    """Feed ``engine.handle`` the input's lines until it returns False (``quit``) or input ends.
    Standard input's bytes that are not text become replacement characters (a command the
    engine refuses), not a traceback that ends the session. A stop of ``stop`` that something
    swallowed ends the session before the next read (``StopOnce.check``): a referee's SIGTERM
    is not lost until its input ends, with every later one ignored."""
    if inp is None and hasattr(sys.stdin, "reconfigure"):
        sys.stdin.reconfigure(errors="replace")
    lines = iter(sys.stdin if inp is None else inp)
    try:
        while True:
            if stop is not None:
                stop.check()
            line = next(lines, None)
            if line is None or not engine.handle(line):
                break
    except GuiGone:  # the session is over as on quit; run_main's exit flush must not fail on it either
        if out is None:
            stdout_to_devnull()
    return 0


def engine_parser(doc: str, name_help: str) -> argparse.ArgumentParser:
    """An engine front-end's parser: ``--player``, ``--name``, ``--seed``."""
    parser = ArgumentParser(description=doc.split("\n\n")[0], epilog=doc.split("\n\n", 1)[1],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--player", required=True, help="player spec: alphabeta:3, policy:CKPT, mcts:CKPT:100, ...")
    parser.add_argument("--name", help=f"{name_help} (default: 'othello-learn SPEC')")
    parser.add_argument("--seed", type=seed_arg, default=0, help="seed of the player's random tie-breaks (default 0)")
    return parser


def engine_main(argv, doc: str, serve: Callable[..., int], name_help: str) -> int:
    """An engine front-end's command: ``--player``, ``--name``, ``--seed``; the session is
    ``serve(player, name, seed=..., stop=...)``.

    An engine started with its stderr closed (``2>&-``, a launcher that gives it none) has no
    ``sys.stderr`` in Python: ``print(..., file=sys.stderr)`` then writes to stdout, so a
    player's start-up note came before the first answer as a line the GUI cannot parse, and the
    first refused command's note was an AttributeError that ended the session. Notes go to
    the null device instead: stdout carries protocol lines only, and the session goes on."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")
    args = engine_parser(doc, name_help).parse_args(argv)
    standard_input("the session's commands")  # closed: said before a player starts, not a traceback at the read
    # A GUI's or referee's kill unwinds, so the finally below runs; a second SIGTERM while an
    # external engine is closed is ignored (the handler stays for the close), not a death
    # that leaves it running. The player starts inside the block: a kill while an external
    # engine loads (its process already up) unwinds too, and check() stops that process.
    with stop_signals_raise(STOP_SIGNALS) as stop:
        player = None
        try:
            player = session_player(args.player)
            return serve(player, args.name or f"othello-learn {args.player}", seed=args.seed, stop=stop)
        finally:
            if hasattr(player, "close"):  # an external engine's process ends with the session
                player.close()
