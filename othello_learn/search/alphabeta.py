"""Alpha-beta with a classical evaluation: the strongest baseline that needs
no network, and the engine behind ``alphabeta:D`` specs.

Python ints, one position at a time: a search is branchy and sequential, and
the classical programs' cost is in the tree, not in vectorizable leaves.
"""

from __future__ import annotations

from othello import bitboard as bb
from othello.stability import stable_discs
from othello_learn.settings import Setting

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

# Evaluation weights; the heuristic stays well under WIN_SCALE in magnitude
# (|positional| < 930, |mobility| <= 200, |corners| <= 100, |stability| <= 640),
# so any won game outranks any unfinished position.
MOBILITY_WEIGHT = 2
CORNER_WEIGHT = 25
STABILITY_WEIGHT = 10
WIN_SCALE = 10_000
INF = 10**9
# Each ply costs ~5x (depth 7: ~6 s a midgame move on one core, depth 8 ~30 s):
# deeper would be a match that never finishes, not a stronger player.
MAX_ALPHABETA_DEPTH = 8


def stable_counts(player: int, opponent: int) -> tuple[int, int]:
    """Stable discs of (side to move, opponent).

    Counted only once a corner is occupied: before that a disc is stable only
    where all four of its lines are full, rare in a game, so the count is an
    approximation there (0) that keeps the leaves cheap.
    """
    if not (player | opponent) & CORNERS:
        return 0, 0
    return stable_discs(player, opponent).bit_count(), stable_discs(opponent, player).bit_count()


def evaluate(player: int, opponent: int, moves: int | None = None, opp_moves: int | None = None) -> int:
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
    s_mine, s_theirs = stable_counts(player, opponent)
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


class AlphaBetaSearch:
    """Fixed-depth negamax alpha-beta on the classical evaluation (the player is
    ``othello_learn.players.base.AlphaBetaPlayer``).

    Depth counts moves; a forced pass does not use depth (it is no choice),
    and a finished game is scored exactly wherever it is reached. Children
    are ordered by square weight near the leaves and by their static value
    higher up. At the root, moves are searched with a window one below the
    best so far, so moves that tie with it get exact values and the choice
    among them is random: deterministic search, varied games.
    """

    def __init__(self, depth: int = 3):
        Setting(int, low=1, high=MAX_ALPHABETA_DEPTH).check(depth, "alpha-beta depth")  # a ValueError
        self.depth = depth
        self.nodes = 0

    def negamax(self, p: int, o: int, depth: int, alpha: int, beta: int) -> int:
        """Fail-soft negamax value of (p, o) for the side to move."""
        self.nodes += 1
        moves = bb.legal_moves(p, o)
        if not moves:
            opp_moves = bb.legal_moves(o, p)
            if not opp_moves:
                return terminal_value(p, o)
            if depth == 0:
                return evaluate(p, o, 0, opp_moves)
            return -self.negamax(o, p, depth, -beta, -alpha)
        if depth == 0:
            return evaluate(p, o, moves, bb.legal_moves(o, p))
        if depth >= 2:
            children = []
            for mv in _ordered_squares(moves):
                c = bb.play(p, o, mv)
                children.append((evaluate(c[0], c[1]), c))
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
