"""Replay many recorded games at once with the batched engine.

All games advance one ply together: the numpy work per ply is a few hundred
array operations over the whole batch, never a Python loop per game or per
square. Games step through ``othello.States`` like every other game in the
toolkit. Passes are not recorded in WTHOR, so they are inferred: when the
recorded move is not legal and the side to move has no legal move, that side
passes and the move is tried for the other side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from othello.notation import PASS, wthor_to_square
from othello.states import HISTORY, States

POSITION_DTYPE = np.dtype(
    [
        ("player", "<u8"),  # discs of the side to move
        ("opponent", "<u8"),
        ("game", "<u4"),  # row of the games table
        ("move", "i1"),  # the expert's move, 0..63
        ("ply", "u1"),  # moves played before this one (passes excluded), 0..59
        ("history", "i1", (HISTORY,)),  # previous moves, most recent first; 64 = pass, -1 = none
        ("black_to_move", "?"),
        ("result", "i1"),  # final disc difference from the side to move's view
    ]
)


@dataclass
class ReplayResult:
    positions: np.ndarray  # POSITION_DTYPE, ordered by game then ply; ``game`` is the batch row
    n_moves: np.ndarray  # moves played per game (0 for a skipped game)
    final_black: np.ndarray  # black's disc difference at the end of the record (empties to the winner if over)
    finished: np.ndarray  # the record reaches a position where neither side can move
    error_ply: np.ndarray  # 0-based ply of the first illegal move, -1 if the game is legal
    error_move: np.ndarray  # the WTHOR byte found there


def replay(moves: np.ndarray, black_scores: np.ndarray | None = None) -> ReplayResult:
    """Replay WTHOR move bytes ``[n_games, 60]``.

    A game with an illegal move (or a byte that is no square) is dropped whole
    and reported in ``error_ply`` / ``error_move``; the other games are kept.
    ``result`` is the final disc difference of the replayed board when the game
    is finished there, otherwise the recorded ``black_scores`` (WTHOR's
    black disc count, empties to the winner), from the mover's view.
    """
    moves = np.ascontiguousarray(moves, dtype=np.uint8)
    n, width = moves.shape
    squares = wthor_to_square(moves).astype(np.int8)
    length = np.where((moves == 0).any(1), np.argmax(moves == 0, axis=1), width)

    state = States.initial(n)  # numpy: the games' working storage, stepped in place a subset at a time
    alive = np.ones(n, dtype=bool)
    error_ply = np.full(n, -1, dtype=np.int16)

    # Positions are kept per (game, ply) slot in plain arrays (structured
    # fancy indexing is ~20x slower) and packed once at the end.
    slot_player = np.zeros((n, width), dtype=np.uint64)
    slot_opponent = np.zeros((n, width), dtype=np.uint64)
    slot_history = np.zeros((n, width, HISTORY), dtype=np.int8)
    slot_black = np.zeros((n, width), dtype=bool)
    filled = np.zeros((n, width), dtype=bool)
    one = np.uint64(1)

    for i in range(width):
        idx = np.nonzero(alive & (length > i))[0]
        if idx.size == 0:
            break
        sq = squares[idx, i].astype(np.int64)
        bit = np.where(sq >= 0, one << np.clip(sq, 0, 63).astype(np.uint64), np.uint64(0))
        cur = state[idx]
        legal = cur.legal_squares()
        ok = (legal & bit) != 0
        if not ok.all():
            # Not legal for the side to move: a pass when it has no move and the
            # other side can play the square, else an illegal record.
            r = np.nonzero(~ok)[0]
            passing = (sq[r] >= 0) & (legal[r] == 0)
            after = cur[r].step_where(passing, np.full(r.size, PASS))
            passed = passing & ((after.legal_squares() & bit[r]) != 0)
            bad = r[~passed]
            alive[idx[bad]] = False
            error_ply[idx[bad]] = i
            cur.put(r[passed], after[passed])
            keep = np.ones(idx.size, dtype=bool)
            keep[bad] = False
            idx, sq, cur = idx[keep], sq[keep], cur[keep]

        slot_player[idx, i], slot_opponent[idx, i] = cur.player, cur.opponent
        slot_history[idx, i], slot_black[idx, i] = cur.history, cur.black_to_move
        filled[idx, i] = True
        state.put(idx, cur.step(sq, check=False))

    finished = state.is_over()
    if not n:
        final_black = np.zeros(0, np.int64)
    else:
        on_board = state.outcome()
        recorded = 2 * np.asarray(black_scores, dtype=np.int64) - 64 if black_scores is not None else on_board
        final_black = np.where(finished, on_board, recorded)

    filled &= alive[:, None]
    rows, plies = np.nonzero(filled)
    positions = np.empty(rows.size, dtype=POSITION_DTYPE)
    positions["player"], positions["opponent"] = slot_player[filled], slot_opponent[filled]
    positions["game"], positions["ply"], positions["move"] = rows, plies, squares[filled]
    positions["history"], positions["black_to_move"] = slot_history[filled], slot_black[filled]
    positions["result"] = np.where(positions["black_to_move"], 1, -1) * final_black[rows]
    bad_games = np.nonzero(~alive)[0]
    error_move = np.zeros(n, dtype=np.uint8)
    error_move[bad_games] = moves[bad_games, error_ply[bad_games]]
    return ReplayResult(
        positions=positions,
        n_moves=np.where(alive, length, 0),
        final_black=final_black,
        finished=finished & alive,
        error_ply=error_ply,
        error_move=error_move,
    )
