"""Players for the arena: a batched interface, baselines, and a registry of specs.

The interface is batched (``select`` takes N positions, returns N moves) so a
network player can evaluate all the games of a match that wait on it in one
forward pass; the classical players below simply loop where they must.

Specs name players on the command line: ``random``, ``greedy``,
``alphabeta:3``; other modules add kinds with ``register_player`` (e.g.
``policy:CKPT``, ``mcts:CKPT:200``), and are imported on demand when listed in
``PLAYER_MODULES`` (or with the arena's ``--import MODULE``).
"""

from __future__ import annotations

import importlib
import pickle
from typing import Callable

import numpy as np

from othello import bitboard as bb
from othello.files import UserError, describe_os_error

_SQUARE_BITS = np.uint64(1) << np.arange(64, dtype=np.uint64)


class PlayerSpecError(UserError, ValueError):
    """A spec that builds no player (unknown kind, bad number, unreadable
    checkpoint): a UserError so commands print one line and exit 2, and a
    ValueError for callers that already catch those."""


class Player:
    """A move chooser over a batch of positions.

    ``select`` gets the side to move's and the opponent's boards (uint64
    arrays of shape [N]), who is to move, and a generator to draw from (the
    arena owns it, so matches are reproducible from one seed). It returns N
    square indices (0..63). The arena only asks where a legal move exists:
    passes and game ends are its business, never the player's.
    """

    name: str = "player"

    def select(
        self,
        player: np.ndarray,
        opponent: np.ndarray,
        black_to_move: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        raise NotImplementedError

    def reset(self) -> None:
        """Called before each match; stateful players (trees, caches) clear here."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def legal_squares(player: np.ndarray, opponent: np.ndarray) -> np.ndarray:
    """[N, 64] bool of the legal squares of numpy boards (players work in numpy)."""
    return bb.bits(bb.legal_moves(np.asarray(player, dtype=np.uint64), np.asarray(opponent, dtype=np.uint64)))


def random_legal_squares(legal: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniform choice per row of an [N, 64] legal mask: argmax of random keys,
    with illegal squares keyed below every legal one."""
    keys = rng.random(legal.shape)
    keys[~legal] = -1.0
    return keys.argmax(axis=-1).astype(np.int64)


class RandomPlayer(Player):
    """Uniform over the legal moves: the floor every other player must clear."""

    name = "random"

    def select(self, player, opponent, black_to_move, rng):
        return random_legal_squares(legal_squares(player, opponent), rng)


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

    def select(self, player, opponent, black_to_move, rng):
        counts = flip_counts(player, opponent)
        best = counts == counts.max(axis=1, keepdims=True)
        return random_legal_squares(best & (counts > 0), rng)


# --------------------------------------------------------------------------
# Alpha-beta with a classical evaluation (Python ints: one position at a time)

# Square weights of the classical Othello programs: corners good, the squares
# that give a corner away (X and C squares) bad, edges mildly good.
SQUARE_WEIGHTS = (
    (100, -20, 10, 5, 5, 10, -20, 100),
    (-20, -50, -2, -2, -2, -2, -50, -20),
    (10, -2, -1, -1, -1, -1, -2, 10),
    (5, -2, -1, -1, -1, -1, -2, 5),
    (5, -2, -1, -1, -1, -1, -2, 5),
    (10, -2, -1, -1, -1, -1, -2, 10),
    (-20, -50, -2, -2, -2, -2, -50, -20),
    (100, -20, 10, 5, 5, 10, -20, 100),
)


def _weight_masks() -> tuple[tuple[int, int], ...]:
    masks: dict[int, int] = {}
    for sq in range(64):
        w = SQUARE_WEIGHTS[sq // 8][sq % 8]
        masks[w] = masks.get(w, 0) | (1 << sq)
    # Descending weight: also the move-ordering classes (corners first).
    return tuple(sorted(masks.items(), key=lambda kv: -kv[0]))


WEIGHT_MASKS = _weight_masks()
CORNERS = (1 << 0) | (1 << 7) | (1 << 56) | (1 << 63)
_ROW1, _ROW8 = 0xFF, 0xFF << 56
_FILE_A, _FILE_H = bb.FILE_A, bb.FILE_H
_EDGES = (_ROW1, _ROW8, _FILE_A, _FILE_H)
_ROW_EDGES, _FILE_EDGES = _ROW1 | _ROW8, _FILE_A | _FILE_H
FULL = bb.FULL

# Evaluation weights; the heuristic stays well under WIN_SCALE in magnitude
# (|positional| < 700, |mobility| <= 200, |corners| <= 100, |stability| <= 640),
# so any won game outranks any unfinished position.
MOBILITY_WEIGHT = 2
CORNER_WEIGHT = 25
STABILITY_WEIGHT = 10
WIN_SCALE = 10_000
INF = 10**9
# Each ply costs ~5x (depth 7: ~6 s a midgame move on one core, depth 8 ~30 s):
# deeper would be a match that never finishes, not a stronger player.
MAX_ALPHABETA_DEPTH = 8


def edge_stable(player: int, opponent: int) -> int:
    """The side to move's discs that can never flip, as far as edges show:
    corners, discs on a completely filled edge (an edge disc can only be
    flipped along its edge), and unbroken runs along an edge from those.
    A subset of the true stable discs, cheap enough for every leaf."""
    occupied = player | opponent
    stable = player & CORNERS
    if occupied & CORNERS:  # a full edge has its corners: nothing to find without one
        for edge in _EDGES:
            if occupied & edge == edge:
                stable |= player & edge
    if not stable:
        return 0
    while True:
        grow = (((stable << 1) & bb.NOT_A) | (stable >> 1) & bb.NOT_H) & _ROW_EDGES
        grow |= ((stable << 8) | (stable >> 8)) & _FILE_EDGES
        new = stable | (grow & player & FULL)
        if new == stable:
            return stable
        stable = new


def _load_stability():
    """Full stability from ``othello.stability`` when that module is there and
    works on Python ints; else None (the edge-anchored fallback is used)."""
    try:
        from othello.stability import stable_discs  # type: ignore
    except Exception:
        return None
    try:
        s = stable_discs(bb.BLACK_START | 1, bb.WHITE_START)
        int(s)
    except Exception:
        return None
    return stable_discs


_MODULE_STABLE = _load_stability()


def stable_counts(player: int, opponent: int, use_module: bool = True) -> tuple[int, int]:
    """Stable discs of (side to move, opponent).

    Counted only once a corner is occupied: before that almost no disc is
    stable, and skipping the call keeps the leaves cheap. ``stable_discs`` is
    called from both sides and masked with the side's own discs, which is
    right whether it returns one side's stable discs or both sides'.
    """
    if not (player | opponent) & CORNERS:
        return 0, 0
    if use_module and _MODULE_STABLE is not None:
        mine = int(_MODULE_STABLE(player, opponent)) & player
        theirs = int(_MODULE_STABLE(opponent, player)) & opponent
    else:
        mine, theirs = edge_stable(player, opponent), edge_stable(opponent, player)
    return mine.bit_count(), theirs.bit_count()


def evaluate(player: int, opponent: int, moves: int | None = None, opp_moves: int | None = None,
             use_module_stability: bool = True) -> int:
    """Static value of an unfinished position for the side to move (an int,
    so equal moves compare equal and ties can be broken at random)."""
    if moves is None:
        moves = bb.legal_moves(player, opponent)
    if opp_moves is None:
        opp_moves = bb.legal_moves(opponent, player)
    positional = 0
    for w, m in WEIGHT_MASKS:
        positional += w * ((player & m).bit_count() - (opponent & m).bit_count())
    mm, om = moves.bit_count(), opp_moves.bit_count()
    mobility = (100 * (mm - om)) // (mm + om + 2)
    corners = (player & CORNERS).bit_count() - (opponent & CORNERS).bit_count()
    s_mine, s_theirs = stable_counts(player, opponent, use_module_stability)
    return (positional + MOBILITY_WEIGHT * mobility + CORNER_WEIGHT * corners
            + STABILITY_WEIGHT * (s_mine - s_theirs))


def terminal_value(player: int, opponent: int) -> int:
    """Exact value of a finished game: the final disc difference, scaled past
    the heuristic's range."""
    return WIN_SCALE * bb.final_disc_difference(player, opponent)


def _ordered_squares(moves: int):
    """Legal squares by descending square weight: corners first, X squares last."""
    for _, m in WEIGHT_MASKS:
        x = moves & m
        while x:
            low = x & -x
            yield low
            x ^= low


class AlphaBetaPlayer(Player):
    """Fixed-depth negamax alpha-beta on the classical evaluation.

    Depth counts moves; a forced pass does not use depth (it is no choice),
    and a finished game is scored exactly wherever it is reached. Children
    are ordered by square weight near the leaves and by their static value
    higher up. At the root, moves are searched with a window one below the
    best so far, so moves that tie with it get exact values and the choice
    among them is random: deterministic search, varied games.
    """

    def __init__(self, depth: int = 3, use_module_stability: bool = True):
        if not 1 <= depth <= MAX_ALPHABETA_DEPTH:
            raise ValueError(f"alpha-beta depth must be 1..{MAX_ALPHABETA_DEPTH}, got {depth}")
        self.depth = depth
        self.use_module_stability = use_module_stability
        self.name = f"alphabeta:{depth}"
        self.nodes = 0

    def _eval(self, p: int, o: int, moves: int, opp_moves: int) -> int:
        return evaluate(p, o, moves, opp_moves, self.use_module_stability)

    def negamax(self, p: int, o: int, depth: int, alpha: int, beta: int) -> int:
        """Fail-soft negamax value of (p, o) for the side to move."""
        self.nodes += 1
        moves = bb.legal_moves(p, o)
        if not moves:
            opp_moves = bb.legal_moves(o, p)
            if not opp_moves:
                return terminal_value(p, o)
            if depth == 0:
                return self._eval(p, o, 0, opp_moves)
            return -self.negamax(o, p, depth, -beta, -alpha)
        if depth == 0:
            return self._eval(p, o, moves, bb.legal_moves(o, p))
        if depth >= 2:
            children = []
            for mv in _ordered_squares(moves):
                c = bb.play(p, o, mv)
                children.append((evaluate(c[0], c[1], None, None, self.use_module_stability), c))
            children.sort(key=lambda t: t[0])  # child's value is the opponent's: lowest first
            kids = (c for _, c in children)
        else:
            kids = (bb.play(p, o, mv) for mv in _ordered_squares(moves))
        best = -INF
        for cp, co in kids:
            v = -self.negamax(cp, co, depth - 1, -beta, -alpha)
            if v > best:
                best = v
                if v > alpha:
                    alpha = v
                    if alpha >= beta:
                        break
        return best

    def search(self, player: int, opponent: int) -> tuple[int, list[int]]:
        """(value, every best move as a square index) for one position."""
        moves = bb.legal_moves(player, opponent)
        if not moves:
            raise ValueError("search needs a position with a legal move")
        best, best_moves = -INF, []
        for mv in _ordered_squares(moves):
            cp, co = bb.play(player, opponent, mv)
            # Window (best - 1, INF): a tie with the best is still exact.
            v = -self.negamax(cp, co, self.depth - 1, -INF, -(best - 1) if best > -INF else INF)
            sq = mv.bit_length() - 1
            if v > best:
                best, best_moves = v, [sq]
            elif v == best:
                best_moves.append(sq)
        return best, sorted(best_moves)

    def select(self, player, opponent, black_to_move, rng):
        out = np.empty(len(player), dtype=np.int64)
        for i, (p, o) in enumerate(zip(np.asarray(player).tolist(), np.asarray(opponent).tolist())):
            _, best = self.search(int(p), int(o))
            out[i] = best[rng.integers(len(best))] if len(best) > 1 else best[0]
        return out


# --------------------------------------------------------------------------
# Registry

PlayerFactory = Callable[[list[str]], Player]
PLAYER_FACTORIES: dict[str, PlayerFactory] = {}
# Modules that register more kinds when imported (e.g. the network players).
# make_player imports them on first use, so this module need not import torch
# and the modules need not import each other in a cycle.
PLAYER_MODULES: list[str] = ["selfplay.nn_players", "selfplay.external"]  # network kinds (torch), external engines
_imported_modules: set[str] = set()


def register_player(kind: str, factory: PlayerFactory) -> None:
    """Make ``kind:arg1:arg2`` specs build players through ``factory(args)``;
    re-registering a kind replaces it (handy when a module is reloaded)."""
    if not kind or ":" in kind:
        raise ValueError(f"player kind must be a non-empty name without ':', got {kind!r}")
    PLAYER_FACTORIES[kind] = factory


def _no_args(cls) -> PlayerFactory:
    def factory(args: list[str]) -> Player:
        if args:
            raise ValueError(f"{cls.name!r} takes no arguments, got {args}")
        return cls()

    return factory


def _alphabeta(args: list[str]) -> Player:
    if len(args) > 1:
        raise ValueError(f"'alphabeta' takes one argument (the depth), got {args}")
    try:
        depth = int(args[0]) if args else 3
    except ValueError:
        raise ValueError(f"alpha-beta depth must be an integer, got {args[0]!r}") from None
    return AlphaBetaPlayer(depth)


register_player("random", _no_args(RandomPlayer))
register_player("greedy", _no_args(GreedyPlayer))
register_player("alphabeta", _alphabeta)


def _human(args: list[str]) -> Player:
    from selfplay.play import HumanPlayer  # the terminal game's prompt: one implementation

    return HumanPlayer.from_args(args)


register_player("human", _human)


def _one_line(e: Exception) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


def make_player(spec: str) -> Player:
    """Build a player from ``kind[:arg...]``; the player's name becomes the spec
    so match reports say exactly what was played."""
    for module in PLAYER_MODULES:
        if module not in _imported_modules:
            importlib.import_module(module)
            _imported_modules.add(module)
    kind, *args = spec.strip().split(":")
    if kind not in PLAYER_FACTORIES:
        known = ", ".join(sorted(PLAYER_FACTORIES))
        raise PlayerSpecError(f"unknown player spec {spec!r}: known kinds are {known} (as kind[:arg[:arg...]])")
    try:
        player = PLAYER_FACTORIES[kind](args)
    except PlayerSpecError:
        raise
    except UserError as e:  # e.g. load_network on a file that is not a checkpoint: it names the file
        raise PlayerSpecError(f"bad player spec {spec!r}: {e}") from e
    except OSError as e:  # a checkpoint that is missing or unreadable
        raise PlayerSpecError(f"bad player spec {spec!r}: {describe_os_error(e)}") from e
    except (ValueError, RuntimeError, EOFError, pickle.UnpicklingError) as e:
        # RuntimeError / EOFError / UnpicklingError: what torch.load says of a corrupt or truncated file
        raise PlayerSpecError(f"bad player spec {spec!r}: {_one_line(e)}") from e
    player.name = spec.strip()
    return player
