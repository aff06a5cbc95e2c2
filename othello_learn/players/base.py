"""The arena's player interface and the baseline players.

The interface is batched (``select`` takes N positions, returns N moves) so a
network player can evaluate all the games of a match that wait on it in one
forward pass. ``random`` and ``greedy`` are the floor every learned player
must clear; ``alphabeta:D`` (the search in ``othello_learn.search.alphabeta``) the strongest
player with no network, and ``endgame:E:SPEC`` adds the exact solver
(``othello_learn.search.endgame``) to any player. The network players are in
``othello_learn.players.network``, and specs become players in ``othello_learn.players.specs``.
"""

from __future__ import annotations

import numpy as np

from othello import bitboard as bb
from othello.game import IllegalMoveError
from othello.notation import PASS, square_name
from othello.states import States
from othello_learn.search.alphabeta import AlphaBetaSearch
from othello_learn.search.endgame import MAX_EMPTIES, solve
from othello_learn.settings import Setting

_SQUARE_BITS = np.uint64(1) << np.arange(64, dtype=np.uint64)


def spec_int(text: str, what: str, least: int | None = None, most: int | None = None) -> int:
    """A spec's number argument, checked as every setting is, or a ValueError saying which one is
    bad and why (the registry turns it into one line naming the spec)."""
    try:
        value = int(text)
    except ValueError:
        value = text  # refused as no integer
    return Setting(int, low=least, high=most).check(value, what)


MAX_SIMULATIONS = 100_000  # a search tree per game is allocated whole: beyond, a typo ends in an allocation error


class Player:
    """A move chooser over a batch of positions.

    ``select`` gets the games waiting on the player as a numpy ``othello.states.States``
    batch (the side to move's and the opponent's boards, who is to move, the last four
    actions) and a generator to draw from (the arena owns it, so matches are reproducible
    from one seed). It returns N square indices (0..63). The arena only asks where a
    legal move exists: passes and game ends are its business, never the player's.

    ``uses_moves``: ``select`` also gets ``moves``, every action of each game from the
    standard start, where they are known (an external engine replays the game; a set-up
    board has none, and then it is None); the others get None, and the arena does not
    copy every game's moves for them. ``interactive``: a person plays (no progress bar).
    ``close()``, where a player has one, is called when the match ends.
    """

    name: str = "player"
    uses_moves: bool = False
    interactive: bool = False

    @classmethod
    def from_args(cls, args: list[str]) -> "Player":
        """Build from a spec's arguments (``kind:arg:arg``); the plain players take none."""
        if args:
            raise ValueError(f"{cls.name!r} takes no arguments, got {args}")
        return cls()

    def select(self, states: States, rng: np.random.Generator, moves: list[list[int]] | None = None) -> np.ndarray:
        raise NotImplementedError

    def reset(self) -> None:
        """Called before each match; stateful players (trees, caches) clear here."""

    def check(self, keep_running: bool = False) -> None:
        """Raise a UserError now if the player cannot play (an external engine that does
        not answer), so a long job finds out before its work; in-process players can.
        ``keep_running``: a match follows at once, so an engine started for the check
        may stay up for it (``close`` stops it)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def checked_moves(player: Player, answer, legal: np.ndarray, position, where) -> np.ndarray:
    """``player.select``'s ``answer`` for N positions as int64 squares, each one of
    ``legal`` [N, 64] (the positions' legal squares; players are asked only where a
    move exists, so a pass is never one). Anything else is the player's bug: an
    IllegalMoveError naming the player, ``where(i)`` and the board ``position(i)``; an
    answer of floats or of another shape is refused whole (19.7 is not d3). The one
    check of the arena, the GUIs' and the person's opponents, and solve."""
    if hasattr(answer, "detach"):  # a torch tensor, possibly on the GPU
        answer = answer.detach().cpu().numpy()
    mv = np.asarray(answer)
    n = len(legal)
    if mv.shape != (n,) or not np.issubdtype(mv.dtype, np.integer):
        raise IllegalMoveError(f"player {player.name!r} returned {mv.dtype} moves of shape {mv.shape}, "
                               f"expected {n} square indices (integers 0..63)")
    mv = mv.astype(np.int64)
    ok = (mv >= 0) & (mv < 64)
    ok[ok] = legal[np.nonzero(ok)[0], mv[ok]]
    if not ok.all():
        i = int(np.nonzero(~ok)[0][0])
        sq, pos = int(mv[i]), position(i)
        raise IllegalMoveError(
            f"player {player.name!r} played {square_name(sq) if 0 <= sq <= PASS else sq}, which is illegal, "
            f"{where(i)} (legal: {', '.join(map(square_name, pos.legal_moves()))}):\n{pos}")
    return mv


def select_one(player: Player, states: States, rng: np.random.Generator, moves: list[list[int]] | None = None) -> int:
    """``player``'s move in the one game of ``states`` (``othello.game.Game.states``), which has
    one, checked legal (``checked_moves``): what a GUI, a person's opponent or a front-end hands
    on. ``moves``: the game's actions from the standard start (``[game.moves]``), for a player
    that ``uses_moves``, where known."""
    legal = states.legal_actions()[:, :PASS]  # before the player, which could write to its inputs
    pos = states.position(0)
    sq = player.select(states, rng, moves=moves)
    return int(checked_moves(player, sq, legal, lambda i: pos, lambda i: "here")[0])


def close_players(*players: Player) -> None:
    """Close each distinct player that can be closed; every one is tried even
    when an earlier close fails or a second Ctrl-C breaks into it (an engine's
    polite close waits seconds), and the first failure is raised afterwards."""
    error = None
    seen: set[int] = set()
    for player in players:
        close = getattr(player, "close", None)
        if close is None or id(player) in seen:
            continue
        seen.add(id(player))
        try:
            close()
        except BaseException as e:  # noqa: BLE001 - keep closing the others
            error = error or e
    if error is not None:
        raise error


class HumanQuit(Exception):
    """The person at the keyboard quit (or their input ended) during a match: the arena
    abandons the match rather than score it."""


def random_legal_squares(legal: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniform choice per row of an [N, 64] legal mask: argmax of random keys,
    with illegal squares keyed below every legal one."""
    keys = rng.random(legal.shape)
    keys[~legal] = -1.0
    return keys.argmax(axis=-1).astype(np.int64)


class RandomPlayer(Player):
    """Uniform over the legal moves: the floor every other player must clear."""

    name = "random"

    def select(self, states, rng, moves=None):
        return random_legal_squares(bb.bits(states.legal_squares()), rng)


def flip_counts(player: np.ndarray, opponent: np.ndarray) -> np.ndarray:
    """[N, 64] discs flipped by each square, -1 where the square is illegal.

    All 64 squares go through the batched engine at once, so a batch costs a
    handful of numpy calls however many games it holds.
    """
    p = np.asarray(player, dtype=np.uint64)[:, None]
    o = np.asarray(opponent, dtype=np.uint64)[:, None]
    p64, o64 = np.broadcast_to(p, (p.shape[0], 64)), np.broadcast_to(o, (o.shape[0], 64))
    moves = np.broadcast_to(_SQUARE_BITS, p64.shape)
    counts = bb.popcount(bb.flips(p64, o64, moves)).astype(np.int64)
    counts[~bb.bits(~(p[:, 0] | o[:, 0])) | (counts == 0)] = -1
    return counts


class GreedyPlayer(Player):
    """Flips the most discs now: a weak but non-random opponent, ties at random."""

    name = "greedy"

    def select(self, states, rng, moves=None):
        counts = flip_counts(states.player, states.opponent)
        best = counts == counts.max(axis=1, keepdims=True)
        return random_legal_squares(best & (counts > 0), rng)


def before_solves(player: Player) -> Player:
    """SPEC's player for ``endgame:E:SPEC`` (it plays, and so is what can evaluate, until E
    squares are empty), ``player`` itself for the rest."""
    while getattr(player, "inner", None) is not None:  # endgame:E:SPEC wraps SPEC's player
        player = player.inner
    return player


def network_of(player: Player):
    """The network behind a ``policy:``, ``mcts:`` or ``gumbel:`` player, or the one an
    ``endgame:E:SPEC`` player uses before its solves; else None."""
    player = before_solves(player)
    net = getattr(player, "net", None)
    if net is None and getattr(player, "evaluator", None) is not None:
        net = player.evaluator.net
    return net


class AlphaBetaPlayer(AlphaBetaSearch, Player):
    """``alphabeta:D``: the alpha-beta search's move (a random one of the best, so games vary)."""

    def __init__(self, depth: int = 3):
        super().__init__(depth)
        self.name = f"alphabeta:{depth}"

    @classmethod
    def from_args(cls, args: list[str]) -> "AlphaBetaPlayer":
        """``alphabeta[:DEPTH]``, depth 3 when not given."""
        if len(args) > 1:
            raise ValueError(f"'alphabeta' takes one argument (the depth), got {args}")
        return cls(spec_int(args[0], "alpha-beta depth") if args else 3)

    def select(self, states, rng, moves=None):
        out = np.empty(len(states), dtype=np.int64)
        for i, (p, o) in enumerate(zip(np.asarray(states.player).tolist(), np.asarray(states.opponent).tolist())):
            _, best = self.search(int(p), int(o))
            out[i] = best[rng.integers(len(best))] if len(best) > 1 else best[0]
        return out


class EndgamePlayer(Player):
    """``endgame:E:SPEC``: SPEC's move while more than E squares are empty, a
    perfect one from there (a random one of the optimal moves, so games vary)."""

    def __init__(self, inner: Player, empties: int):
        Setting(int, low=0, high=MAX_EMPTIES).check(empties, "endgame empties")
        self.inner, self.empties = inner, empties
        self.name = f"endgame:{empties}:{inner.name}"
        self.uses_moves, self.interactive = inner.uses_moves, inner.interactive

    def select(self, states, rng, moves=None):
        player, opponent = np.asarray(states.player), np.asarray(states.opponent)
        left = 64 - bb.popcount(player | opponent).astype(np.int64)
        late = left <= self.empties
        out = np.empty(len(player), dtype=np.int64)
        early = np.nonzero(~late)[0]
        if early.size:
            early_moves = None if moves is None else [moves[i] for i in early]
            out[early] = self.inner.select(states[early], rng, moves=early_moves)
        for i in np.nonzero(late)[0]:
            _, best = solve(int(player[i]), int(opponent[i]))
            out[i] = best[rng.integers(len(best))] if len(best) > 1 else best[0]
        return out

    def reset(self) -> None:
        self.inner.reset()

    def check(self, keep_running: bool = False) -> None:
        self.inner.check(keep_running)  # an external engine inside plays every move before the solves

    def close(self) -> None:
        if hasattr(self.inner, "close"):
            self.inner.close()
