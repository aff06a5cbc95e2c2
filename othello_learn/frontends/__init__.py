"""Where people and other programs meet a player: the terminal game (``terminal``), the NBoard
and GTP engine protocols (``nboard``, ``gtp``, sharing ``session``), a position's analysis
(``analysis``), and grading a player on an OBF file of positions (``solve_obf``)."""

__all__ = ["terminal", "nboard", "gtp", "session", "analysis", "solve_obf"]
