"""Player specs: ``kind[:arg...]`` on the command line becomes a ``Player``.

The registry names each built-in kind's factory as a ``"module:attribute"``
string and imports the module only when a spec of that kind is built, so
``random`` needs no torch and no player class needs the registry to exist
(``play``, the terminal command that also defines the ``human`` player, uses the
registry only to build its opponent). Other code adds kinds with ``register_player``
(a factory or such a string); the arena's ``--import MODULE`` imports a
module that does so.
"""

from __future__ import annotations

import importlib
import re
from typing import Callable, Union

from othello_learn.files import UserError, describe_os_error, one_line

PlayerFactory = Callable[[list], object]  # spec arguments -> Player


class PlayerSpecError(UserError, ValueError):
    """A spec that builds no player (unknown kind, bad number, unreadable
    checkpoint): a UserError so commands print one line and exit 2, and a
    ValueError for callers that already catch those."""


# kind -> factory, or "module:attribute" of one (resolved on first use).
PLAYER_FACTORIES: dict[str, Union[PlayerFactory, str]] = {
    "random": "othello_learn.players.base:RandomPlayer.from_args",
    "greedy": "othello_learn.players.base:GreedyPlayer.from_args",
    "alphabeta": "othello_learn.players.base:AlphaBetaPlayer.from_args",
    "human": "othello_learn.frontends.terminal:HumanPlayer.from_args",
    "policy": "othello_learn.players.network:policy_from_args",
    "mcts": "othello_learn.players.network:mcts_from_args",
    "gumbel": "othello_learn.players.network:gumbel_from_args",
    "nboard": "othello_learn.players.external:nboard_from_args",
    "gtp": "othello_learn.players.external:gtp_from_args",
    "endgame": "othello_learn.players.specs:_endgame",
}


def split_spec(spec: str) -> list[str]:
    """``kind:arg:...`` split at each ``:`` but an escaped one, ``\\:``, which stays in its part as
    ``:``: a checkpoint whose path holds a colon is ``policy:runs/a\\:b.pt``."""
    return [part.replace("\\:", ":") for part in re.split(r"(?<!\\):", spec.strip())]


def join_spec(parts: list[str]) -> str:
    """The spec ``split_spec`` reads as ``parts``: a colon inside a part escaped."""
    return ":".join(part.replace(":", "\\:") for part in parts)


def _endgame(args: list[str]):
    """``endgame:E:SPEC``: SPEC's player, built here, wrapped with perfect play from E empties
    (so the endgame module, like every player module, never imports the registry)."""
    from othello_learn.players.base import EndgamePlayer
    from othello_learn.players.base import spec_int

    if len(args) < 2 or not ":".join(args[1:]).strip():  # "endgame:10:" was "unknown player spec ''"
        raise ValueError("expected endgame:EMPTIES:SPEC, e.g. endgame:10:policy:checkpoints/best_value.pt")
    return EndgamePlayer(make_player(join_spec(args[1:])), spec_int(args[0], "endgame empties"))


def register_player(kind: str, factory: Union[PlayerFactory, str]) -> None:
    """Make ``kind:arg1:arg2`` specs build players through ``factory(args)``
    (a callable, or ``"module:attribute"`` naming one, imported when first
    used); re-registering a kind replaces it (handy when a module is reloaded)."""
    if not kind or ":" in kind:
        raise ValueError(f"player kind must be a non-empty name without ':', got {kind!r}")
    if isinstance(factory, str) and factory.count(":") != 1:
        raise ValueError(f"a factory named by a string is 'module:attribute', got {factory!r}")
    PLAYER_FACTORIES[kind] = factory


def _resolve(kind: str) -> PlayerFactory:
    factory = PLAYER_FACTORIES[kind]
    if isinstance(factory, str):
        module, attr = factory.split(":")
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        PLAYER_FACTORIES[kind] = factory = obj
    return factory


# What a spec may be, for --help texts (the kinds registered by othello_learn itself).
SPEC_KINDS = ("random, greedy, alphabeta[:D], policy:CKPT, mcts:CKPT[:SIMS], gumbel:CKPT[:SIMS[:K]], "
              "endgame:E:SPEC, nboard:CMD, gtp:CMD; a ':' in a path written '\\:'")


INTERACTIVE_KINDS = ("human",)  # kinds that ask a person for moves: not offered where none can answer
PROGRAM_KINDS = ("nboard", "gtp")  # kinds that start the command they are given


def starts_a_program(spec: str) -> bool:
    """Whether ``spec`` (however wrapped: ``endgame:E:gtp:CMD``) would start an external program: a
    spec read from a file someone else wrote must not run their command line."""
    kind, *args = split_spec(spec)
    if kind == "endgame" and len(args) >= 2:
        return starts_a_program(join_spec(args[1:]))
    return kind in PROGRAM_KINDS


def make_player(spec: str, unlisted: tuple[str, ...] = ()):
    """Build a player from ``kind[:arg...]``; the player's name becomes the spec
    so match reports say exactly what was played. An unknown kind's error lists
    the known ones but ``unlisted``."""
    kind, *args = split_spec(spec)
    if kind not in PLAYER_FACTORIES:
        known = ", ".join(k for k in sorted(PLAYER_FACTORIES) if k not in unlisted)
        raise PlayerSpecError(f"unknown player spec {spec!r}: known kinds are {known} (as kind[:arg[:arg...]])")
    try:
        player = _resolve(kind)(args)
    except PlayerSpecError:
        raise
    except ImportError as e:  # the kind's module, or what it needs (torch), is not installed
        raise PlayerSpecError(f"bad player spec {spec!r}: cannot load the {kind!r} players: {one_line(e)}") from e
    except UserError as e:  # e.g. load_network on a file that is not a checkpoint: it names the file
        raise PlayerSpecError(f"bad player spec {spec!r}: {e}") from e
    except OSError as e:  # a checkpoint that is missing or unreadable
        raise PlayerSpecError(f"bad player spec {spec!r}: {describe_os_error(e)}") from e
    except (ValueError, RuntimeError) as e:  # a bad number in the spec; a device or engine that fails to start
        raise PlayerSpecError(f"bad player spec {spec!r}: {one_line(e)}") from e
    player.name = spec.strip()
    return player


def make_program(spec: str, where: str = "here (this command has no board to show)"):
    """``make_player`` for commands where no person can play: the NBoard engine speaks
    its protocol on stdin, solve reads no input, the RL loop runs unattended. Any
    interactive player is refused, however wrapped (``human``, ``human:CKPT``,
    ``endgame:E:human``, a registered kind that sets ``interactive``): it would ask
    for moves where nobody answers, after the work before its first match."""
    player = make_player(spec, unlisted=INTERACTIVE_KINDS)
    if getattr(player, "interactive", False):
        if hasattr(player, "close"):
            player.close()
        raise PlayerSpecError(f"player spec {spec!r}: a human cannot play {where}; pick a program: random, greedy, "
                              "alphabeta:D, policy:CKPT, ...")
    return player
