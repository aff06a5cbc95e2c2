"""Othello rules: batched bitboards (numpy / torch / int), symmetries, notation."""

from .bitboard import (
    BLACK_START,
    WHITE_START,
    final_disc_difference,
    flips,
    is_terminal,
    legal_moves,
    play,
    popcount,
)
from .game import Game, IllegalMoveError, Position
from .formats import FormatError, GameRecord, format_ggf, format_obf, parse_ggf, parse_obf, read_transcript
from .notation import PASS, format_transcript, parse_square, parse_transcript, square_name
from .symmetry import INVERSE, NAMES as SYMMETRY_NAMES, SQUARE_MAP, START_PRESERVING, transform, transform_square

__all__ = [
    "BLACK_START", "WHITE_START", "PASS", "Position", "Game", "IllegalMoveError",
    "legal_moves", "flips", "play", "popcount", "is_terminal", "final_disc_difference",
    "square_name", "parse_square", "parse_transcript", "format_transcript",
    "FormatError", "GameRecord", "parse_ggf", "format_ggf", "read_transcript", "parse_obf", "format_obf",
    "SYMMETRY_NAMES", "START_PRESERVING", "INVERSE", "SQUARE_MAP", "transform", "transform_square",
]
