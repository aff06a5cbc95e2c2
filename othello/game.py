"""One game position with the convenient API (Python ints under the hood), and a game with its
history (``Game``)."""

from __future__ import annotations

import operator
from dataclasses import dataclass

from . import bitboard as bb
from .notation import PASS, parse_square, parse_transcript, square_name
from .states import States, last_actions


class IllegalMoveError(ValueError):
    """A move that the rules do not allow in the given position. From ``Position.replay``,
    ``ply`` is the move's 1-based index in the moves given and ``reason`` the rule it broke."""

    def __init__(self, message: str, ply: int | None = None, reason: str | None = None):
        super().__init__(message)
        self.ply, self.reason = ply, reason or message


@dataclass(frozen=True)
class Position:
    """Immutable position: boards from the side to move's view, and its colour. The boards may
    be given as numpy uint64 or torch int64 scalars too (a dataset record's fields, say): they are
    kept as Python ints."""

    player: int = bb.BLACK_START
    opponent: int = bb.WHITE_START
    black_to_move: bool = True

    def __post_init__(self):
        # Boards often come out of arrays (a dataset record's numpy uint64, a torch int64 whose
        # h8 bit makes it negative): the one-position code relies on Python ints' own methods
        # (bit_length) and on positions comparing and hashing alike whatever they were built from.
        object.__setattr__(self, "player", int(self.player) & bb.FULL)
        object.__setattr__(self, "opponent", int(self.opponent) & bb.FULL)
        object.__setattr__(self, "black_to_move", bool(self.black_to_move))
        if self.player & self.opponent:  # every rule below would answer for a board no game reaches
            both = ", ".join(square_name(s) for s in bb.squares(self.player & self.opponent))
            raise ValueError(f"a square holds both colours: {both}")

    @property
    def black(self) -> int:
        return self.player if self.black_to_move else self.opponent

    @property
    def white(self) -> int:
        return self.opponent if self.black_to_move else self.player

    def legal_moves(self, names: bool = False) -> list[int] | list[str]:
        """Legal squares, ascending; empty when the side to move must pass.
        ``names=True`` gives ``['c4', 'd3', ...]`` for people and prompts."""
        squares = bb.squares(bb.legal_moves(self.player, self.opponent))
        return [square_name(s) for s in squares] if names else squares

    def must_pass(self) -> bool:
        """No legal move, but the game goes on: the only move is ``PASS`` (as opposed to the end)."""
        return bb.legal_moves(self.player, self.opponent) == 0 and not self.is_over()

    def is_over(self) -> bool:
        """Neither side can move: the score is final (empties go to the winner)."""
        return bool(bb.is_terminal(self.player, self.opponent))

    def play(self, move: int | str) -> "Position":
        """Play a square (index or name) or ``PASS``; raises ``IllegalMoveError``."""
        sq = parse_square(move) if isinstance(move, str) else operator.index(move)  # 37.7 is no square
        if sq == PASS:
            if bb.legal_moves(self.player, self.opponent):
                raise IllegalMoveError("cannot pass: a legal move exists")
            if self.is_over():
                raise IllegalMoveError("cannot pass: the game is over")
            return Position(self.opponent, self.player, not self.black_to_move)
        if not 0 <= sq < 64:
            raise IllegalMoveError(f"no such square: {sq}")
        b = 1 << sq
        if (self.player | self.opponent) & b or not bb.flips(self.player, self.opponent, b):
            # The error names what is legal instead, so a person (or a log) can see the slip.
            legal = ", ".join(self.legal_moves(names=True)) or "pass"
            why = "the game is over" if self.is_over() else f"legal: {legal}"
            raise IllegalMoveError(f"{square_name(sq)} is not legal here ({why})")
        p, o = bb.play(self.player, self.opponent, b)
        return Position(p, o, not self.black_to_move)

    def score(self) -> int:
        """Final disc difference for black (empties to the winner) if over;
        otherwise the current black-minus-white disc count."""
        if self.is_over():
            d = bb.final_disc_difference(self.player, self.opponent)
            return d if self.black_to_move else -d
        return bb.popcount(self.black) - bb.popcount(self.white)

    def replay(self, moves) -> tuple[list[int], "Position"]:
        """Play ``moves`` from here; returns (the moves with every pass explicit, the final position).

        A square played when the side to move has no move first passes for it (WTHOR,
        transcripts and many GGF writers leave passes out). An illegal move is an
        ``IllegalMoveError`` naming its 1-based ply among ``moves``."""
        pos, out = self, []
        for i, sq in enumerate(moves):
            if sq != PASS and pos.must_pass():
                pos = pos.play(PASS)
                out.append(PASS)
            try:
                pos = pos.play(sq)
            except IllegalMoveError as e:
                name = square_name(sq) if sq == PASS or 0 <= sq < 64 else sq  # "no such square" says the rest
                raise IllegalMoveError(f"move {i + 1} ({name}): {e}", ply=i + 1, reason=str(e)) from None
            out.append(sq)
        return out, pos

    @classmethod
    def from_transcript(cls, text: str) -> "Position":
        """Replay ``'f5d6c3...'`` from the start; passes are inferred."""
        return cls().replay(parse_transcript(text))[1]

    def __str__(self) -> str:
        legal = bb.legal_moves(self.player, self.opponent)
        rows = ["  a b c d e f g h"]
        for r in range(8):
            cells = []
            for c in range(8):
                b = 1 << (8 * r + c)
                cells.append("X" if self.black & b else "O" if self.white & b else "." if legal & b == 0 else "*")
            rows.append(f"{r + 1} " + " ".join(cells))
        rows.append(("black" if self.black_to_move else "white") + " (X=black, O=white, *=legal) to move")
        return "\n".join(rows)


class Game:
    """A game with its history: where it starts (the standard start or a set-up board),
    every action from there (passes explicit, ``PASS`` = 64) and the position after each.
    What a front-end keeps (the terminal game, the NBoard and GTP engines), each around
    its own protocol: a move is checked once, here, and taking moves back is a truncation."""

    def __init__(self, start: Position | None = None, moves=()):
        self.start = Position() if start is None else start
        self.moves: list[int] = []
        self.positions = [self.start]  # before each move, then the current one
        self.extend(moves)

    @property
    def position(self) -> Position:
        return self.positions[-1]

    @property
    def from_standard_start(self) -> bool:
        """Whether ``moves`` are every action from the standard start (what an external engine
        replays; a set-up board has to be set up instead)."""
        return self.start == Position()

    def play(self, action: int) -> None:
        """One action as ``Position.play`` takes it (a pass only where it is the rule);
        ``IllegalMoveError`` leaves the game as it was."""
        self.positions.append(self.position.play(action))
        self.moves.append(action)

    def extend(self, moves) -> list[int]:
        """Play ``moves``, a pass inferred before a square where the side to move has none
        (``Position.replay``); returns the actions added. An illegal one is ``replay``'s
        ``IllegalMoveError`` (its ``ply`` among ``moves``) and leaves the game as it was."""
        actions, _ = self.position.replay(moves)
        for a in actions:
            self.play(a)
        return actions

    def truncate(self, length: int) -> list[int]:
        """Keep the first ``length`` actions; returns those taken back."""
        taken = self.moves[length:]
        del self.moves[length:], self.positions[length + 1:]
        return taken

    def history(self):
        """The last actions, most recent first (``othello.states.last_actions``): what the
        network players' move planes read."""
        return last_actions(self.moves)

    def states(self):
        """The current position as a one-game ``States`` with its history: what a player's
        ``select`` takes."""
        return States.from_positions([self.position], self.history()[None])

    def record(self, **tags):
        """The game as an ``othello.formats.GameRecord`` (GGF), ``tags`` its fields (names,
        place, date); ``result`` (black's disc difference) only once the game is over."""
        from .formats import GameRecord  # here: formats reads positions from this module

        result = float(self.position.score()) if self.position.is_over() else None
        return GameRecord(moves=list(self.moves), start=self.start, result=result, **tags)
