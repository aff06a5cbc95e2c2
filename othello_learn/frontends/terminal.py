"""Play Othello against any player spec in the terminal.

    othello-play --opponent policy:checkpoints/cpu_hc_long.pt
    othello-play --opponent gumbel:checkpoints/best_selfplay.pt:32 --colour white --show-policy
    othello-play --opponent alphabeta:3 --hint-net checkpoints/best_selfplay.pt --save game.ggf
    othello-play --start f5d6c3d3c4 --colour white    # practise a line: play on from its end
    othello-play --level hard

Levels (--level), each a player spec (--opponent takes any spec) and its measured strength
(docs/results/index.md):

  easy    policy:checkpoints/cpu_hc_long.pt, the reference network's move without search:
          0.682 against alphabeta:2, 0.522 against alphabeta:3 (400 games)
  medium  policy:checkpoints/best_selfplay.pt, the self-play network's move without search (the
          default): beats GRhino levels 1 and 2 (0.838, 0.648), loses to level 3 (0.345; 200 games)
  hard    endgame:10:gumbel:checkpoints/best_selfplay.pt:32, its Gumbel search of 32 simulations,
          perfect play from 10 empty squares; measured in its parts: a Gumbel-32 search scores 0.935
          against its net's own move (best_value.pt, 200 games), perfect play from 10 empties adds
          +63 Elo to the network's move
  max     endgame:14:gumbel:checkpoints/best_selfplay.pt:100, 100 simulations, perfect play from 14:
          the search alone beats GRhino level 3 (0.864, 400 games) and level 4 (0.693, 200 games);
          perfect play from 14 empties adds +125 Elo to the network's move

The board marks the legal moves *, the last move [X] and the discs it flipped (X); the moves so far
are listed below it. Colour on a terminal, unless NO_COLOR is set; plain text in a pipe or a file.

Type a square (``f5``, any case), ``pass`` (only when you have no move; Enter
does too), ``undo``, ``hint``, ``help`` or ``quit``. The prompt code here is
also the arena's ``human`` player, so both read moves the same way.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from othello import bitboard as bb
from othello_learn.cli import ArgumentParser, run_main, standard_input, STOP_SIGNALS, stop_signals_raise
from othello_learn.settings import Setting, seed_arg
from othello_learn.files import UserError, atomic_write, check_input, check_output
from othello.formats import FormatError, play_with_passes
from othello.game import Game, Position
from othello.notation import PASS, PASS_WORDS, format_transcript, parse_square, parse_transcript, square_name
from othello_learn import HOME
from othello_learn.players.base import HumanQuit, Player, close_players, network_of, select_one
from othello_learn.players.specs import SPEC_KINDS, join_spec, make_program, split_spec, starts_a_program

# --level: player specs of the shipped networks, weakest first; their strengths (docs/results/index.md)
# are in the module docstring, which --help shows
LEVELS = {
    "easy": "policy:checkpoints/cpu_hc_long.pt",
    "medium": "policy:checkpoints/best_selfplay.pt",
    "hard": "endgame:10:gumbel:checkpoints/best_selfplay.pt:32",
    "max": "endgame:14:gumbel:checkpoints/best_selfplay.pt:100",
}
# the strongest network alone (docs/results/selfplay.md#the-shipped-self-play-net)
DEFAULT_OPPONENT = LEVELS["medium"]
CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear screen: the board redraws in place on a terminal
NO_HINT = "hints need a network: play a policy:, mcts: or gumbel: opponent, or give --hint-net CKPT"

HELP = (
    "commands: a square such as f5 (any case); pass (only when you have no move; Enter does too); "
    "undo (take back your last move and the reply); hint (the network's top moves); help; quit"
)


# --------------------------------------------------------------------------
# Reading a command: one implementation for the terminal game and the arena


class InputError(ValueError):
    """What the person typed cannot be played; the message is the one-line reason."""


@dataclass
class Command:
    kind: str  # "move", "pass", "undo", "hint", "help", "quit" or "eof"
    square: int = -1


def parse_command(text: str, position: Position) -> Command:
    """One line of input in ``position`` -> a command, or ``InputError`` saying why not."""
    word = text.strip().lower()
    legal = position.legal_moves()
    names = ", ".join(position.legal_moves(names=True))
    if word == "" or word in PASS_WORDS:
        if not legal:
            return Command("pass", PASS)
        if word:
            _refuse(f"you cannot pass: you have legal moves ({names})")
        _refuse(f"type a move (legal: {names}), or help")
    if word in ("undo", "u", "takeback"):
        return Command("undo")
    if word in ("hint", "h", "?"):
        return Command("hint")
    if word in ("help",):
        return Command("help")
    if word in ("quit", "q", "exit", "resign"):
        return Command("quit")
    try:
        sq = parse_square(word)
    except ValueError:
        _refuse(f"{text.strip()!r} is not a move or a command: type a square like f5, or help")
    if not legal:
        _refuse("you have no legal move: type pass (or press Enter)")
    if sq not in legal:
        _refuse(f"{square_name(sq)} is not legal here; legal moves: {names}")
    return Command("move", sq)


def _refuse(reason: str):
    raise InputError(reason)


def ask(position: Position, inp, out, prompt: str = "your move: ", hint=None, allow_undo: bool = True) -> Command:
    """Prompt until a playable command comes: a move, a pass, undo, quit, or
    ``eof`` when the input ends. Bad input gets its reason and the prompt
    again; ``hint`` and ``help`` are answered here (``hint()`` returns the
    text, or is None when no network is at hand). ``inp`` None: standard input,
    whose being closed is a UserError (the game played so far is saved as on quit)."""
    if inp is None:
        inp = standard_input("your moves")
    while True:
        out.write(prompt)
        out.flush()
        line = inp.readline()
        if not line:  # end of input: leave cleanly, the caller says what happened
            out.write("\n")
            return Command("eof")
        try:
            cmd = parse_command(line, position)
        except InputError as e:
            out.write(f"{e}\n")
            continue
        if cmd.kind == "hint":
            out.write((hint() if hint is not None else NO_HINT) + "\n")
        elif cmd.kind == "help":
            out.write(HELP + "\n")
        elif cmd.kind == "undo" and not allow_undo:
            out.write("undo is not available here\n")
        else:
            return cmd


# --------------------------------------------------------------------------
# Drawing


# ANSI colours (SGR): black's discs, white's, the legal squares, the last move and its flips
COLOURS = {"X": "1;36", "O": "1;33", "legal": "32", "last": "1;31", "flipped": "35"}


def paint(text: str, what: str, ansi: bool) -> str:
    return f"\x1b[{COLOURS[what]}m{text}\x1b[0m" if ansi else text


def use_colours(out) -> bool:
    """Colour only on a terminal, and not where NO_COLOR is set (no-color.org): a log, a pipe
    and a test read plain text."""
    return hasattr(out, "isatty") and out.isatty() and not os.environ.get("NO_COLOR")


def render(position: Position, probs=None, last: int = -1, flipped: int = 0, ansi: bool = False) -> str:
    """The board with legal moves marked ``*`` (or, given ``probs``, the
    network's probability in percent on each legal square), the last move
    in brackets and the discs it flipped (the bits of ``flipped``) in parentheses;
    ``ansi``: in ANSI colours too (the cells keep their width)."""
    legal = set(position.legal_moves())
    lines = ["   a  b  c  d  e  f  g  h"]  # each letter over the middle of its column's cells
    for r in range(8):
        cells = []
        for c in range(8):
            sq, bit = 8 * r + c, 1 << (8 * r + c)
            if position.black & bit or position.white & bit:
                side = "X" if position.black & bit else "O"
                disc = paint(side, side, ansi)
                if sq == last:
                    cells.append(paint("[", "last", ansi) + disc + paint("]", "last", ansi))
                elif flipped & bit:
                    cells.append(paint("(", "flipped", ansi) + disc + paint(")", "flipped", ansi))
                else:
                    cells.append(f" {disc} ")
            elif sq in legal:
                mark = f"{round(100 * float(probs[sq])):3d}" if probs is not None else " * "
                cells.append(paint(mark, "legal", ansi))
            else:
                cells.append(" . ")
        lines.append(f"{r + 1} " + "".join(cells))
    nb, nw = bb.popcount(position.black), bb.popcount(position.white)
    lines.append(f"X black {nb}, O white {nw}")
    return "\n".join(lines)


def hint_text(net, position: Position, history, you: str = "you") -> str:
    """The network's top moves in ``position`` and its value when it has a value head."""
    from othello_learn.players.network import best_move

    if not position.legal_moves():
        return "no legal move: you must pass"
    _, probs, value = best_move(net, position, history)
    order = [int(s) for s in np.argsort(-probs, kind="stable") if probs[s] > 0][:5]
    text = "hint: " + ", ".join(f"{square_name(s)} {100 * probs[s]:.0f}%" for s in order)
    if value is not None:
        text += f"; value {value:+.2f} for {you} (-1 lost .. +1 won)"
    return text


# --------------------------------------------------------------------------
# GGF (othello.formats), what other Othello programs read


def game_record(moves: list[int], black: str, white: str, start: Position = Position()):
    """A ``GameRecord`` of a game played here; RE (black's final disc
    difference) only when the game is over."""
    return Game(start, moves).record(black=black, white=white, place="othello-learn",
                                     date=datetime.date.today().isoformat())


def write_ggf(path, games: list[tuple[list[int], str, str]]) -> None:
    """Games ``(moves, black name, white name)`` from the start position, one per line, atomically."""
    from othello.formats import format_ggf

    atomic_write(path, "".join(format_ggf(game_record(m, b, w)) + "\n" for m, b, w in games))


def saved_game(path: Path):
    """The one game ``path`` holds (as ``--save`` writes it), to resume it; a file of several
    games, or one from a set-up board, is a UserError naming it."""
    from othello.formats import parse_ggf

    # UTF-8, as --save writes it, whatever the locale; a byte-order mark (Windows editors) is not text.
    # A FormatError names the file and the ply.
    games = parse_ggf(path.read_text(encoding="utf-8-sig", errors="replace"), str(path))
    if len(games) != 1:
        raise UserError(f"--start {path}: holds {len(games)} games; give a file with the one game to resume")
    if games[0].start != Position():
        raise UserError(f"--start {path}: the game starts from a set-up board; only games from the start resume here")
    return games[0]


def saved_sides(record) -> tuple[str, str] | None:
    """(your colour, the opponent's spec) of a game ``--save`` wrote, where one side is ``human``
    and the other names a program: a resumed game goes on as it was played."""
    names = {"black": record.black.strip(), "white": record.white.strip()}
    human = [colour for colour, name in names.items() if name == "human"]
    if len(human) != 1:
        return None
    other = names["white" if human[0] == "black" else "black"]
    return (human[0], other) if other else None


# --------------------------------------------------------------------------
# The arena's human player


class HumanPlayer(Player):
    """A person choosing moves at the terminal; in the arena every game waiting
    on them is shown and asked in turn. ``human:CKPT`` gives hints from CKPT."""

    interactive = True  # the arena turns its progress bar off

    def __init__(self, hint_net=None, inp=None, out=None):
        self.hint_net = hint_net
        self.inp, self.out = inp, out
        self.name = "human"

    @classmethod
    def from_args(cls, args: list[str]) -> "HumanPlayer":
        if len(args) > 1:
            raise ValueError("expected human or human:HINT_CHECKPOINT")
        if not args:
            return cls()
        from othello_learn.models.nets import load_network

        return cls(load_network(args[0]))

    def check(self, keep_running: bool = False) -> None:
        if self.inp is None:  # closed: said before the match, not at the first move asked
            standard_input("the human player's moves")

    def select(self, states, rng, moves=None):
        out = sys.stdout if self.out is None else self.out
        n = len(states)
        chosen = np.empty(n, dtype=np.int64)
        for i in range(n):
            pos = states.position(i)
            hist = [int(h) for h in states.history[i] if h >= 0]
            colour = "black (X)" if pos.black_to_move else "white (O)"
            last = hist[0] if hist else -1
            said = "" if last < 0 else "; last move: pass" if last == PASS else f"; last move {square_name(last)}"
            where = f"position {i + 1} of {n} waiting on you" if n > 1 else "your turn"
            out.write(f"\n{where}: you are {colour}{said}\n{render(pos, last=last)}\n")
            hint = ((lambda p=pos, h=hist: hint_text(self.hint_net, p, h)) if self.hint_net is not None
                    else (lambda: "hints need a network: play as human:CKPT"))
            cmd = ask(pos, self.inp, out, prompt=f"{colour} move: ", hint=hint, allow_undo=False)
            if cmd.kind in ("quit", "eof"):
                raise HumanQuit("the human player quit" if cmd.kind == "quit" else "the human player's input ended")
            chosen[i] = cmd.square
        return chosen


# --------------------------------------------------------------------------
# The terminal game


class TerminalGame:
    """One game of a person against a player, kept in ``game`` (an ``othello.Game``); a
    person's undo takes the game back to before their last move."""

    def __init__(self, opponent: Player, human_black: bool, inp, out, hint_net=None, show_policy: bool = False,
                 seed: int = 0, tty: bool | None = None, start: Position = Position(), ansi: bool | None = None):
        self.opponent, self.human_black = opponent, human_black
        self.inp, self.out = inp, out
        self.hint_net, self.show_policy = hint_net, show_policy
        self.rng = np.random.default_rng(seed)
        self.tty = out.isatty() if tty is None and hasattr(out, "isatty") else bool(tty)
        self.ansi = use_colours(out) if ansi is None else ansi  # colours: None, where the output allows
        self.game = Game(start)
        self.human_turns: list[int] = []  # indices in the game's moves where the human chose a move
        self.notes: list[str] = []
        opponent.reset()

    @property
    def position(self) -> Position:
        return self.game.position

    def opponent_move(self) -> None:
        pos = self.position
        name = self.opponent.name
        if pos.must_pass():
            self.notes.append(f"{name} has no legal move and passes.")
            self.game.play(PASS)
            return
        # the game from the start: an engine is told the moves (history, and no set-up needed)
        moves = [list(self.game.moves)] if self.opponent.uses_moves and self.game.from_standard_start else None
        sq = select_one(self.opponent, self.game.states(), self.rng, moves=moves)
        self.game.play(sq)
        self.notes.append(f"{name} plays {square_name(sq)}{self.flips_said()}.")

    def draw(self) -> None:
        pos = self.position
        probs = None
        if self.show_policy and self.hint_net is not None and pos.legal_moves() and not pos.is_over():
            from othello_learn.players.network import best_move

            probs = best_move(self.hint_net, pos, self.game.history())[1]
        last, flipped = self.last_move()
        text = render(pos, probs, last, flipped, self.ansi)
        you = "black (X)" if self.human_black else "white (O)"
        header = f"You: {you}   opponent: {self.opponent.name}   move {sum(m != PASS for m in self.game.moves) + 1}"
        self.out.write((CLEAR if self.tty else "\n") + header + "\n" + text + "\n" + self.move_list())
        for note in self.notes:
            self.out.write(note + "\n")
        self.notes = []

    def last_move(self) -> tuple[int, int]:
        """The last disc played (-1: none) and the bits of the discs it flipped."""
        i = next((i for i in range(len(self.game.moves) - 1, -1, -1) if self.game.moves[i] != PASS), -1)
        if i < 0:
            return -1, 0
        before, after = self.game.positions[i], self.game.positions[i + 1]
        return self.game.moves[i], (before.black & after.white) | (before.white & after.black)

    def move_list(self) -> str:
        """The game's moves so far, numbered, passes named, wrapped to 78 columns ("" before any)."""
        if not self.game.moves:
            return ""
        words = [f"{n}.{'pass' if m == PASS else square_name(m)}" for n, m in enumerate(self.game.moves, 1)]
        return "\n".join(textwrap.wrap("moves: " + " ".join(words), 78, subsequent_indent="       ")) + "\n"

    def replay(self, moves: list[int]) -> None:
        """Play ``moves`` (a transcript's, passes inferred) before the game is handed over:
        they are part of the game (the saved record, an engine told the moves) but no one's
        to take back. An illegal one is a ``FormatError`` naming its ply."""
        self.game.extend(play_with_passes(self.position, moves, "--start")[0])

    def flips_said(self) -> str:
        n = bb.popcount(self.last_move()[1])
        return f", flipping {n} disc{'s' if n != 1 else ''}"

    def undo(self) -> None:
        if not self.human_turns:
            self.notes.append("Nothing to undo.")
            return
        taken = self.game.truncate(self.human_turns.pop())
        self.notes.append(f"Took back {' '.join(map(square_name, taken))}.")

    def hint(self) -> str:
        if self.hint_net is None:
            return NO_HINT
        you = "you (black)" if self.human_black else "you (white)"
        return hint_text(self.hint_net, self.position, self.game.history(), you)

    def play(self) -> bool:
        """Play until the game ends (True) or the person quits or input ends (False)."""
        while not self.position.is_over():
            pos = self.position
            if pos.black_to_move != self.human_black:
                self.opponent_move()
                continue
            self.draw()
            if pos.must_pass():
                self.out.write("You have no legal move and must pass: type pass or press Enter.\n")
            cmd = ask(pos, self.inp, self.out, prompt="your move: ", hint=self.hint)
            if cmd.kind in ("quit", "eof"):
                self.out.write("Input ended: " if cmd.kind == "eof" else "")
                self.out.write("game abandoned.\n")
                return False
            if cmd.kind == "undo":
                self.undo()
            elif cmd.kind == "pass":
                self.notes.append("You pass.")
                self.game.play(PASS)
            else:
                self.human_turns.append(len(self.game.moves))
                self.game.play(cmd.square)
                self.notes.append(f"You play {square_name(cmd.square)}{self.flips_said()}.")
        self.draw()
        return True

    def transcript(self) -> str:
        """The moves as ``f5d6c3...`` (passes left out: replaying infers them)."""
        return format_transcript(self.game.moves)

    def result_line(self) -> str:
        pos = self.position
        d = pos.score()
        nb, nw = bb.popcount(pos.black), bb.popcount(pos.white)
        mine = d if self.human_black else -d
        verdict = "a draw" if mine == 0 else f"you win by {mine}" if mine > 0 else f"you lose by {-mine}"
        return f"Final score: black {nb}, white {nw}: {verdict} (black {d:+d}, empties to the winner)."


def build_parser() -> argparse.ArgumentParser:
    """The command's parser (the command reference in docs/ is generated from it)."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--opponent",
                        help=f"the opponent's player spec ({SPEC_KINDS}); default {DEFAULT_OPPONENT}, or the "
                             "saved game's opponent with --start GAME.ggf")
    parser.add_argument("--level", **Setting(str, choices=tuple(LEVELS)).argument(
                        help="a named opponent instead of --opponent, weakest first: easy, medium (the default "
                             "opponent), hard, max; each a spec of the shipped networks, listed below with its "
                             "strength"))
    parser.add_argument("--colour", "--color", **Setting(str, choices=("black", "white")).argument(
                        help="your colour (black moves first); default black, or your colour in the saved game "
                             "with --start GAME.ggf"))
    parser.add_argument("--show-policy", action="store_true",
                        help="show the network's probabilities (percent) on the legal squares on your turn")
    parser.add_argument("--hint-net", metavar="CKPT", help="network for hints and --show-policy "
                        "(default: the opponent's network, if it has one)")
    parser.add_argument("--save", metavar="GAME.ggf", type=Path,
                        help="write the game here (GGF) however it ends: finished, quit, end of input, Ctrl-C, "
                             "SIGTERM, a closed terminal (SIGHUP), an engine's failure (then without a result)")
    parser.add_argument("--start", metavar="MOVES|GAME.ggf", default="",
                        help="play on from the position these moves from the start lead to (a transcript such as "
                             "f5d6c3d3c4, passes inferred, or a game --save wrote, to resume it): they open the "
                             "saved game and cannot be undone; default: none, the start position")
    parser.add_argument("--seed", type=seed_arg, default=0, help="seed of the opponent's random choices (default 0)")
    return parser


def main(argv=None, stdin=None, stdout=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    resumed = None  # (your colour, the opponent's spec) of a saved game
    if args.start.lower().endswith(".ggf"):
        check_input(args.start, "--start")
    elif Path(args.start).is_file():
        raise UserError(f"--start {args.start}: a file, but not a .ggf game; give a game --save wrote, or moves")
    try:
        if args.start.lower().endswith(".ggf"):
            record = saved_game(Path(args.start))
            start, resumed = record.moves, saved_sides(record)
        else:
            start = parse_transcript(args.start)
    except ValueError as e:
        raise UserError(f"--start: {e}") from None
    inp, out = stdin, (sys.stdout if stdout is None else stdout)  # inp None: standard input, read by ask()
    if args.save is not None:  # found before the game, not after it
        check_output(args.save, "--save", suffixes=(".ggf",))  # a game is saved as GGF; --start resumes only that

    colour = args.colour or (resumed[0] if resumed else "black")
    for flag, value, give in (("--opponent", args.opponent, "a player spec"),
                              ("--hint-net", args.hint_net, "a checkpoint")):
        if value == "":  # it read as not given: the default played
            raise UserError(f"{flag}: empty; give {give}, or leave the flag out")
    if args.level and args.opponent:
        raise UserError(f"--level {args.level} and --opponent {args.opponent} both choose the opponent: give one")
    chosen = args.opponent or LEVELS.get(args.level)
    spec = chosen or (resumed[1] if resumed else DEFAULT_OPPONENT)
    if not chosen and resumed and starts_a_program(spec):  # a game file must not run a command line
        raise UserError(f"--start {args.start}: the saved opponent {spec!r} starts a program; "
                        "give it as --opponent to run it")
    # where the opponent came from, for its errors: the flag, or the saved game
    flag = (f"--level {args.level}" if args.level else "--opponent" if args.opponent or not resumed
            else f"--start {args.start}: the saved opponent (give --opponent to choose another)")
    if spec in LEVELS.values():
        spec = shipped(spec, f"--level {args.level}" if args.level else "the default opponent")
    if spec.partition(":")[0] == "human":
        raise UserError("--opponent human: you are the human here; pick a program (random, greedy, alphabeta:D, ...)")
    try:
        # make_program: a human wrapped in another kind (endgame:4:human) would read moves from
        # your own input, and its end would be a traceback rather than one line
        opponent = make_program(spec, where="as your opponent (you are the human here)")
        opponent.check(keep_running=True)  # an engine that cannot start is found before the first prompt
    except (ValueError, UserError) as e:
        raise UserError(f"{flag}: {e}") from None
    try:
        hint_net = network_of(opponent)
        if args.hint_net:
            if not Path(args.hint_net).exists():
                raise UserError(f"--hint-net {args.hint_net}: no such checkpoint")
            from othello_learn.models.nets import load_network

            try:
                hint_net = load_network(args.hint_net)
            except (ValueError, UserError) as e:
                raise UserError(f"--hint-net: {e}") from None
        if args.show_policy and hint_net is None:
            raise UserError(f"--show-policy needs a network: {NO_HINT.split(': ', 1)[1]}")

        game = TerminalGame(opponent, colour == "black", inp, out, hint_net=hint_net,
                            show_policy=args.show_policy, seed=args.seed)
        try:
            game.replay(start)
        except FormatError as e:
            raise UserError(str(e)) from None
        if game.position.is_over():
            raise UserError(f"--start {args.start}: the game is over after these moves")
        if resumed and (args.colour is None or args.opponent is None):  # once it can go on, not before an error
            print(f"resuming {args.start}: you play {colour} against {spec}", file=out)
        # Also around the save: a SIGTERM there unwinds through atomic_write, no temp file left.
        # SIGHUP (the terminal closed) is taken too, so a game is not lost with its window.
        with stop_signals_raise(STOP_SIGNALS):
            try:
                finished = game.play()
            except BaseException:
                # Ctrl-C, SIGTERM, SIGHUP, an engine's failure: the moves played are kept as on
                # quit, then run_main reports the error with the exit status it has alone.
                end_game(game, False, args.save, out, "\ngame abandoned.")
                raise
            end_game(game, finished, args.save, out)
    finally:  # the engine started for the check played the game: stopped once, here
        close_players(opponent)
    return 0


def shipped(spec: str, what: str) -> str:
    """A level's spec (the default opponent's too) with its networks read from the checkout where
    the current folder has no ``checkpoints/`` of its own; an install without the checkout, which
    ships the networks, is one line naming ``what`` chose it."""
    parts = split_spec(spec)
    for i, part in enumerate(parts):
        if part.startswith("checkpoints/") and not Path(part).exists():
            if not (HOME / part).exists():
                raise UserError(f"{what}, {spec}, is a network of the othello-learn checkout and is not here or "
                                f"in {HOME}; run from the checkout, or give --opponent (alphabeta:3, policy:CKPT, ...)")
            parts[i] = str(HOME / part)
    return join_spec(parts)  # a ':' in HOME's path escaped, as specs read it


def end_game(game: TerminalGame, finished: bool, save: Path | None, out, why: str = "") -> None:
    """One ending for every way a game ends, so an abandoned game is kept as a finished one
    is: the score when ``finished`` (else ``why``, where the game has not said it), the
    transcript, the moves so far written to ``save``.
    The file is written first: an abandoned game's terminal may be gone (a hang-up), and
    then the lines to it are dropped, not the game. A file that cannot be written (a full
    disk) is said after the score and the transcript, which keep the game."""
    unsaved = None
    if save:
        you, them = "human", game.opponent.name
        black, white = (you, them) if game.human_black else (them, you)
        try:
            write_ggf(save, [(game.game.moves, black, white)])
        except OSError as e:
            unsaved = e
    lines = [game.result_line()] if finished else [why] if why else []
    lines.append(f"Transcript: {game.transcript() or '(no moves)'}")
    if save and unsaved is None:
        lines.append(f"Saved to {save}{'' if finished else ' (unfinished)'}.")
    try:
        out.write("".join(line + "\n" for line in lines))
        out.flush()
    except OSError:
        if finished and unsaved is None:
            raise
    if unsaved is not None:
        raise unsaved


def cli() -> None:
    """The ``othello-play`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
