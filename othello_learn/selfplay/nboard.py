"""Our players as an NBoard-protocol engine, so GUIs and match tools can drive them.

    python selfplay/nboard.py --player policy:checkpoints/cpu_hc_long.pt
    python -m othello_learn.selfplay.nboard --player alphabeta:3

The protocol (Chris Welty's NBoard, version 2; Edax and NTest speak it) is one
command a line on stdin, answers on stdout, flushed at once. The GUI keeps the
game: ``set game <GGF>`` and ``move <sq>[/eval/time]`` say where we are,
``go`` asks for a move (``=== F5/eval/time``; the engine does not play it
until the GUI sends ``move``), ``hint N`` for the top N moves as
``search <move> <eval> 0 <depth> <text>`` lines, ``ping N`` for ``pong N``
once everything before it is done. Commands we do not know are ignored, as the
protocol asks; a bad game or move leaves the position as it was and says why
on stderr, so stdout only ever carries protocol lines.

Evaluations are from the side to move's view, in discs (NBoard's scale): the
value head's expected result times 64 for network players, the search value
for ``alphabeta`` (exact disc difference once the search sees the end, the
heuristic / 100 before), none otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from othello import bitboard as bb
from othello.files import UserError, run_main
from othello.formats import FormatError, GameRecord, parse_ggf_game, parse_move
from othello.game import IllegalMoveError, Position
from othello.notation import PASS, square_name
from othello_learn.selfplay.alphabeta import WIN_SCALE, AlphaBetaPlayer
from othello_learn.selfplay.players import Player, check_seed
from othello_learn.selfplay.registry import make_program


def move_text(sq: int) -> str:
    return "PA" if sq == PASS else square_name(sq).upper()


def history_of(moves: list[int]) -> np.ndarray:
    """The last four moves, most recent first (PASS = 64, none = -1): the network's history planes."""
    h = np.full((1, 4), -1, dtype=np.int64)
    recent = moves[::-1][:4]
    h[0, : len(recent)] = recent
    return h


class Analyst:
    """Moves and evaluations of one position for any player kind.

    ``choose`` is the player's own move (its ``select``); ``hints`` ranks the
    legal moves by what the player can say about them: the policy (with the
    value of each child when there is a value head) for network players, one
    search per move for alpha-beta, nothing to rank for the rest."""

    def __init__(self, player: Player, seed: int = 0):
        self.player = player
        self.rng = np.random.default_rng(seed)
        net = getattr(player, "net", None)
        if net is None and hasattr(player, "evaluator"):
            net = player.evaluator.net
        self.net = net
        self.device = getattr(player, "device", None)

    # -- networks
    def _net_out(self, positions: list[Position], histories: np.ndarray):
        import torch

        from othello_learn.models.batch import from_arrays

        p = np.array([x.player for x in positions], dtype=np.uint64)
        o = np.array([x.opponent for x in positions], dtype=np.uint64)
        btm = np.array([x.black_to_move for x in positions], dtype=bool)
        with torch.inference_mode():
            out = self.net(from_arrays(p, o, btm, histories, self.device))
        probs = torch.softmax(out["policy"].float(), -1).cpu().numpy()
        value = out["value"].float().cpu().numpy() if "value" in out else None
        return probs, value

    def root_eval(self, pos: Position, moves: list[int]) -> float | None:
        if isinstance(self.player, AlphaBetaPlayer):
            v, _ = self.player.search(pos.player, pos.opponent)
            return self._ab_discs(v)
        if self.net is not None:
            _, value = self._net_out([pos], history_of(moves))
            return None if value is None else 64.0 * float(value[0])
        return None

    @staticmethod
    def _ab_discs(v: int) -> float:
        return v / WIN_SCALE if abs(v) >= WIN_SCALE else v / 100.0

    def choose(self, pos: Position, moves: list[int]) -> int:
        extra = {"history": history_of(moves)} if getattr(self.player, "uses_history", False) else {}
        sq = self.player.select(np.array([pos.player], dtype=np.uint64), np.array([pos.opponent], dtype=np.uint64),
                                np.array([pos.black_to_move]), self.rng, **extra)
        if hasattr(sq, "detach"):
            sq = sq.detach().cpu().numpy()
        sq = int(np.asarray(sq).reshape(-1)[0])
        if sq not in pos.legal_moves():  # never hand an illegal move to a GUI
            raise RuntimeError(f"player {self.player.name!r} chose {sq}, not a legal move")
        return sq

    def hints(self, pos: Position, moves: list[int], n: int) -> list[tuple[int, float, str]]:
        """Up to ``n`` (move, eval, free text), best first."""
        legal = pos.legal_moves()
        if not legal:
            return [] if pos.is_over() else [(PASS, self.root_eval(pos.play(PASS), moves + [PASS]) or 0.0, "forced pass")]
        rows: list[tuple[int, float, str, float]] = []  # move, eval, text, sort key
        if isinstance(self.player, AlphaBetaPlayer):
            ab = self.player
            for sq in legal:
                cp, co = bb.play(pos.player, pos.opponent, 1 << sq)
                v = -ab.negamax(cp, co, ab.depth - 1, -10**9, 10**9)
                rows.append((sq, self._ab_discs(v), f"alphabeta depth {ab.depth}", v))
        elif self.net is not None:
            probs, _ = self._net_out([pos], history_of(moves))
            children = [pos.play(sq) for sq in legal]
            hist = np.concatenate([history_of(moves + [sq]) for sq in legal])
            _, child_values = self._net_out(children, hist)
            for i, sq in enumerate(legal):
                p = float(probs[0, sq])
                ev = 0.0 if child_values is None else -64.0 * float(child_values[i])
                rows.append((sq, ev, f"policy {p:.3f}", p))
        else:
            rows = [(sq, 0.0, self.player.name, 0.0) for sq in legal]
        rows.sort(key=lambda r: -r[3])
        return [(sq, ev, text) for sq, ev, text, _ in rows[: max(n, 1)]]


class Engine:
    """The protocol's state machine: the game so far, and one handler per command."""

    def __init__(self, player: Player, name: str, out=None, err=None, seed: int = 0):
        self.analyst = Analyst(player, seed)
        self.name = name
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.game = GameRecord()
        self.pos = Position()
        self.depth = None

    def send(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def warn(self, msg: str) -> None:
        self.err.write(f"nboard: {msg}\n")
        self.err.flush()

    def handle(self, line: str) -> bool:
        """One command; False when the session should end."""
        words = line.split()
        if not words:
            return True
        cmd, rest = words[0].lower(), line.strip()[len(words[0]):].strip()
        try:
            if cmd == "quit":
                return False
            handler = getattr(self, f"cmd_{cmd}", None)
            if handler is not None:
                handler(rest)
            elif len(cmd) == 2 and cmd != "go":  # NBoard 1.1 sent a bare "F5" for "move F5"
                self.cmd_move(cmd)
            else:
                self.warn(f"ignored unknown command: {line.strip()!r}")
        except (FormatError, IllegalMoveError, ValueError) as e:
            self.warn(f"{cmd}: {e} (position unchanged)")
        except Exception as e:  # a GUI session must survive anything one command does
            self.warn(f"{cmd}: {type(e).__name__}: {e}")
        return True

    # -- commands
    def cmd_nboard(self, rest):
        if rest.strip() not in ("1", "2"):
            self.warn(f"protocol version {rest!r}: speaking version 2")
        self.send(f"set myname {self.name}")

    def cmd_set(self, rest):
        what, _, value = rest.partition(" ")
        what = what.lower()
        if what == "game":
            self.game = parse_ggf_game(value, "set game")
            self.pos = self.game.final
        elif what == "depth":
            self.depth = int(value.split()[0])  # noted; the player spec fixes the strength
            self.send(f"set myname {self.name}")
        # set contempt / set time / anything else: nothing for us to change

    def cmd_move(self, rest):
        text = rest.split()[0] if rest.split() else ""
        sq = parse_move(text.split("/")[0])
        new = self.pos.play(sq)
        self.game.moves.append(sq)
        self.game.evals.append(None)
        self.game.times.append(None)
        self.pos = new

    def cmd_ping(self, rest):
        self.send(f"pong {rest}".rstrip())

    def cmd_learn(self, rest):
        self.send("learned")

    def cmd_hint(self, rest):
        n = int(rest.split()[0]) if rest.split() else 1
        self.send("status Analyzing")
        for sq, ev, text in self.analyst.hints(self.pos, self.game.moves, n):
            self.send(f"search {move_text(sq)} {ev:.2f} 0 1 {text}")
        self.send("status")

    def cmd_go(self, rest):
        self.send("status Thinking")
        t0 = time.perf_counter()
        if self.pos.is_over():
            self.warn("go: the game is over; answering PA")
            self.send("=== PA")
        elif self.pos.must_pass():
            self.send("=== PA")
        else:
            sq = self.analyst.choose(self.pos, self.game.moves)
            ev = self.analyst.root_eval(self.pos, self.game.moves)
            dt = time.perf_counter() - t0
            self.send(f"=== {move_text(sq)}" + (f"/{ev:.2f}/{dt:.3f}" if ev is not None else f"//{dt:.3f}"))
        self.send("status")

    def cmd_analyze(self, rest):
        """``analysis <ply> <eval>`` for each position of the game with an
        evaluation, from the end back (NBoard's order), then an empty status."""
        self.send("status Analyzing")
        positions = self.game.positions()
        for i in range(len(positions) - 1, -1, -1):
            pos = positions[i]
            if pos.is_over() or pos.must_pass():
                continue
            ev = self.analyst.root_eval(pos, self.game.moves[:i])
            if ev is not None:
                self.send(f"analysis {i} {ev:.2f}")
        self.send("status")


def serve(player: Player, name: str, inp=None, out=None, err=None, seed: int = 0) -> int:
    engine = Engine(player, name, out, err, seed)
    for line in inp or sys.stdin:
        if not engine.handle(line):
            break
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--player", required=True, help="player spec: alphabeta:3, policy:CKPT, mcts:CKPT:100, ...")
    parser.add_argument("--name", help="name reported to the GUI (default: 'othello-learn SPEC')")
    parser.add_argument("--seed", type=int, default=0, help="seed of the player's random tie-breaks (default 0)")
    args = parser.parse_args(argv)
    check_seed(args.seed)
    try:
        player = make_program(args.player)
    except (ValueError, OSError) as e:
        raise UserError(f"--player {args.player}: {e}") from None
    player.reset()
    return serve(player, args.name or f"othello-learn {args.player}", seed=args.seed)


def cli() -> None:
    """The ``othello-engine`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
