"""The exact endgame: the final disc difference under perfect play, and
``endgame:E:SPEC``, a player that plays like SPEC until E squares are empty
and perfectly from there.

Why: every Othello program solves its endgame, and a network alone throws
away won games there. Played perfectly from 10 empties, the 60 % policy
``best_value.pt`` scores 0.601 against itself at 1 ply
(docs/results/search.md#perfect-endgames-from-e-empties); its
1-ply choice is optimal in 85 % of positions with 4 empties and 60 % with 10.

Python ints, one position at a time, as ``alphabeta.py``: a solve is a
sequential tree walk. The move generator is written out for Python ints
(the generic one in ``othello.bitboard`` also serves numpy and torch and is
about half as fast here). Children are searched fastest-first (fewest
replies) far from the end, where the ordering pays for itself, corners
first near it. Measured on positions of the policies' games (one core): about
0.05 s at 10 empties, 0.3 s at 12, 2 s at 14; over 14 is refused.
"""

from __future__ import annotations

from collections import OrderedDict

from othello import bitboard as bb

MAX_EMPTIES = 14  # a solve beyond this takes minutes in Python
FASTEST_FIRST = 7  # empties from which children are ordered by the opponent's mobility

_FULL, _NOT_A, _NOT_H = bb.FULL, bb.NOT_A, bb.NOT_H  # NOT_A: what a shift toward file h may land on
# (shift, left?, landing mask) for the eight directions
_DIRS = ((1, True, _NOT_A), (1, False, _NOT_H), (8, True, _FULL), (8, False, _FULL),
         (7, True, _NOT_H), (7, False, _NOT_A), (9, True, _NOT_A), (9, False, _NOT_H))
_CORNERS = 0x8100000000000081
_ORDER = (_CORNERS, _FULL & ~_CORNERS)


def _moves(p: int, o: int) -> int:
    empty = ~(p | o) & _FULL
    out = 0
    for s, left, m in _DIRS:
        if left:
            x = (p << s) & m & o
            x |= (x << s) & m & o
            x |= (x << s) & m & o
            x |= (x << s) & m & o
            x |= (x << s) & m & o
            x |= (x << s) & m & o
            out |= (x << s) & m & empty
        else:
            x = (p >> s) & m & o
            x |= (x >> s) & m & o
            x |= (x >> s) & m & o
            x |= (x >> s) & m & o
            x |= (x >> s) & m & o
            x |= (x >> s) & m & o
            out |= (x >> s) & m & empty
    return out


def _play(p: int, o: int, move: int) -> tuple[int, int]:
    """The position after the side to move plays the single-bit ``move``, roles swapped."""
    f = 0
    for s, left, m in _DIRS:
        x, run = move, 0
        while True:
            x = ((x << s) if left else (x >> s)) & m
            if x & o:
                run |= x
            else:
                if x & p:
                    f |= run
                break
    return o & ~f, p | f | move


def _final(p: int, o: int) -> int:
    """The final disc difference, empties to the winner (``bb.final_disc_difference``)."""
    d = p.bit_count() - o.bit_count()
    e = 64 - p.bit_count() - o.bit_count()
    return d + e if d > 0 else d - e if d < 0 else 0


def _children(p: int, o: int, moves: int, empties: int):
    kids = []
    for region in _ORDER:
        x = moves & region
        while x:
            mv = x & -x
            x ^= mv
            kids.append(_play(p, o, mv))
    if empties >= FASTEST_FIRST:
        kids.sort(key=lambda c: _moves(c[0], c[1]).bit_count())
    return kids


def _negamax(p: int, o: int, alpha: int, beta: int, empties: int) -> int:
    moves = _moves(p, o)
    if not moves:
        if not _moves(o, p):
            return _final(p, o)
        return -_negamax(o, p, -beta, -alpha, empties)
    best = -65
    for cp, co in _children(p, o, moves, empties):
        v = -_negamax(cp, co, -beta, -alpha, empties - 1)
        if v > best:
            best = v
            if v > alpha:
                alpha = v
                if alpha >= beta:
                    break
    return best


def _ints(player, opponent) -> tuple[int, int]:
    """The boards as non-negative Python ints: a torch int64 board with h8 set is negative, and
    the solver's bit arithmetic would read it as a board with 56 empty squares."""
    return int(player) & _FULL, int(opponent) & _FULL


def empties(player: int, opponent: int) -> int:
    return 64 - (player | opponent).bit_count()


def _in_range(player: int, opponent: int) -> int:
    """The empty squares of a position an exact search can take, or a ValueError saying why not."""
    n = empties(player, opponent)
    if n > MAX_EMPTIES:
        raise ValueError(f"an exact solve needs at most {MAX_EMPTIES} empty squares, this position has {n}")
    return n


def _solvable(player: int, opponent: int, what: str) -> tuple[int, int]:
    """(empty squares, legal moves) of a position an exact search can take, or a ValueError saying why not."""
    n = _in_range(player, opponent)
    moves = _moves(player, opponent)
    if not moves:
        raise ValueError(f"{what} needs a position where the side to move has a legal move")
    return n, moves


# The last positions solved: an engine asked for a move and then for its evaluation (NBoard's
# go, othello-solve) solves the position once, not twice (2 s at 14 empties).
_SOLVED: OrderedDict[tuple[int, int], tuple[int, tuple[int, ...]]] = OrderedDict()
_SOLVED_KEEP = 64


def solve(player: int, opponent: int) -> tuple[int, list[int]]:
    """(the final disc difference under perfect play from the side to move's view,
    every square that achieves it). The side to move must have a legal move. The boards are
    Python ints or numpy uint64 / torch int64 scalars (two's complement), here and below."""
    player, opponent = _ints(player, opponent)
    key = (player, opponent)
    if key in _SOLVED:
        _SOLVED.move_to_end(key)
        v, best = _SOLVED[key]
        return v, list(best)
    v, best = _solve(player, opponent)
    _remember(key, v, best)
    return v, best


def _remember(key: tuple[int, int], v: int, best: list[int]) -> None:
    _SOLVED[key] = v, tuple(best)
    if len(_SOLVED) > _SOLVED_KEEP:
        _SOLVED.popitem(last=False)


def solved_from_moves(player: int, opponent: int, values: dict[int, int]) -> None:
    """Every legal move's exact value (``move_value``'s, as hints compute them) is the
    position's solve: kept, so the ``go`` that follows a ``hint`` does not solve it again."""
    player, opponent = _ints(player, opponent)
    if values and set(values) == {sq for sq in range(64) if _moves(player, opponent) >> sq & 1}:
        v = max(values.values())
        _remember((player, opponent), v, sorted(sq for sq, x in values.items() if x == v))


def _solve(player: int, opponent: int) -> tuple[int, list[int]]:
    n, moves = _solvable(player, opponent, "solve")
    best, best_moves = -65, []
    for sq in range(64):
        mv = 1 << sq
        if not moves & mv:
            continue
        cp, co = _play(player, opponent, mv)
        # Window (best - 1, 65): a tie with the best so far is still exact.
        v = -_negamax(cp, co, -65, -(best - 1), n - 1)
        if v > best:
            best, best_moves = v, [sq]
        elif v == best:
            best_moves.append(sq)
    return best, best_moves


def value(player: int, opponent: int) -> int:
    """``solve``'s value alone, of any position in range: a forced pass or a finished game
    too, since an evaluation is asked of the positions moves lead to and those can be either."""
    player, opponent = _ints(player, opponent)
    if (player, opponent) in _SOLVED:
        return _SOLVED[player, opponent][0]
    return _negamax(player, opponent, -65, 65, _in_range(player, opponent))


def move_value(player: int, opponent: int, sq: int) -> int:
    """The exact value of playing ``sq`` (a legal square), from the side to move's view: one
    solve of the position it leads to, none when ``sq`` is an optimal move of a position just solved."""
    player, opponent = _ints(player, opponent)
    solved = _SOLVED.get((player, opponent))
    if solved is not None and sq in solved[1]:
        return solved[0]
    if not (0 <= sq < 64 and _moves(player, opponent) >> sq & 1):  # it would value a board no game reaches
        raise ValueError(f"move_value: square {sq} is not a legal move here")
    cp, co = _play(player, opponent, 1 << sq)
    return -value(cp, co)


def move_results(player: int, opponent: int) -> dict[int, int]:
    """Each legal square's result under perfect play from the side to move's
    view: 1 a win, 0 a draw, -1 a loss. Cheaper than the exact values: a null
    window around 0 settles only the sign. Why: which moves keep a won game won
    is what a 1-ply player needs to learn, more than the disc count."""
    player, opponent = _ints(player, opponent)
    n, moves = _solvable(player, opponent, "move_results")
    out = {}
    for sq in range(64):
        if moves >> sq & 1:
            cp, co = _play(player, opponent, 1 << sq)
            v = -_negamax(cp, co, -1, 1, n - 1)  # fail-soft: the sign is exact, the size is not
            out[sq] = (v > 0) - (v < 0)
    return out
