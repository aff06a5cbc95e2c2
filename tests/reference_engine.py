"""A slow, obvious Othello engine on an 8x8 list of lists: the independent
reference the bitboard engine is tested against. Cells hold 1 (black),
-1 (white) or 0; squares are (row, col) with row 0 = row 1, col 0 = file a."""

from __future__ import annotations

DIRECTIONS = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0)]


def start_board() -> list[list[int]]:
    b = [[0] * 8 for _ in range(8)]
    b[3][3] = b[4][4] = -1  # d4, e5 white
    b[3][4] = b[4][3] = 1  # e4, d5 black
    return b


def flipped(board, color, r, c) -> list[tuple[int, int]]:
    if board[r][c] != 0:
        return []
    out = []
    for dr, dc in DIRECTIONS:
        line = []
        rr, cc = r + dr, c + dc
        while 0 <= rr < 8 and 0 <= cc < 8 and board[rr][cc] == -color:
            line.append((rr, cc))
            rr, cc = rr + dr, cc + dc
        if line and 0 <= rr < 8 and 0 <= cc < 8 and board[rr][cc] == color:
            out.extend(line)
    return out


def legal(board, color) -> list[tuple[int, int]]:
    return [(r, c) for r in range(8) for c in range(8) if flipped(board, color, r, c)]


def apply(board, color, r, c) -> list[list[int]]:
    flips = flipped(board, color, r, c)
    assert flips, "illegal move"
    new = [row[:] for row in board]
    new[r][c] = color
    for rr, cc in flips:
        new[rr][cc] = color
    return new


def game_over(board) -> bool:
    return not legal(board, 1) and not legal(board, -1)


def final_score(board) -> int:
    """Black minus white, empties to the winner."""
    b = sum(v == 1 for row in board for v in row)
    w = sum(v == -1 for row in board for v in row)
    e = 64 - b - w
    return b - w + (e if b > w else -e if w > b else 0)


def to_bitboards(board, color) -> tuple[int, int]:
    """(player, opponent) bitboards with ``color`` to move."""
    p = o = 0
    for r in range(8):
        for c in range(8):
            if board[r][c] == color:
                p |= 1 << (8 * r + c)
            elif board[r][c] == -color:
                o |= 1 << (8 * r + c)
    return p, o


def random_game(rng, stop_after: int | None = None):
    """Play random legal moves; returns [(board, color, move_square or 64 for pass)],
    the final board and the colour to move there."""
    board, color, record, played = start_board(), 1, [], 0
    while True:
        moves = legal(board, color)  # listed once a ply (a game_over() before it listed them again)
        if not moves and not legal(board, -color):
            break  # the game is over
        if stop_after is not None and played >= stop_after:
            break
        if not moves:
            record.append((board, color, 64))
            color = -color
            continue
        r, c = moves[rng.randrange(len(moves))]
        record.append((board, color, 8 * r + c))
        board, color, played = apply(board, color, r, c), -color, played + 1
    return record, board, color
