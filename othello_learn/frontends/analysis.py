"""What a player can say about one position: its move, its evaluation, its ranked
hints. The NBoard engine (``nboard.py``) and ``othello-solve`` (``solve.py``) report
both for any player kind. An ``endgame:E:SPEC`` player is SPEC until E squares are
empty, so there it is evaluated as SPEC is (its alpha-beta, ``players.before_solves``;
its network, found as ``othello-play``'s hints find it, ``players.network_of``), and
exactly from there."""

from __future__ import annotations

import numpy as np

from othello import bitboard as bb
from othello.game import Position
from othello.notation import PASS
from othello.states import States, last_actions
from othello_learn.search import endgame
from othello_learn.search.alphabeta import WIN_SCALE
from othello_learn.players.base import AlphaBetaPlayer, EndgamePlayer, Player, before_solves, network_of, select_one


EXACT = "exact disc difference"
# What an evaluation's figure is, in short (othello-solve's lines and records): every one is from the side
# to move's view on the disc scale GUIs read, but only a result seen to the end counts discs.
EXACT_DISCS, HEURISTIC, NET_VALUE = "exact discs", "heuristic / 100", "64 x net value"
UNITS = (EXACT_DISCS, HEURISTIC, NET_VALUE)


def net_unit(ev: float | None, over: bool, what: str = "the net's value") -> str:
    """What a network's evaluation ``ev`` is, for a hint's text: a value head (and a search over it)
    gives an expected result, -1 lost .. +1 won, which the eval shows x 64 on the disc scale GUIs
    read; that is no disc count, as an exact disc difference beside it is."""
    if ev is None:
        return ""
    if over:  # a move that ends the game: its margin, counted
        return f", {EXACT}"
    return f", eval = 64 x {what} {ev / 64:+.3f} (-1 lost .. +1 won)"


class Analyst:
    """Moves and evaluations of one position for any player kind.

    ``choose`` is the player's own move (its ``select``); ``hints`` ranks the
    legal moves by what the player can say about them: the policy (with the
    value of each child when there is a value head) for ``policy:``, the one search
    ``choose`` reads too for ``mcts:`` and ``gumbel:`` (its move first, then by visits),
    one search per move for alpha-beta, one exact solve per move where an
    ``endgame:E:SPEC`` player solves; for the rest, which cannot rank moves, only
    the move they would play."""

    def __init__(self, player: Player, seed: int = 0):
        self.player = player
        self.rng = np.random.default_rng(seed)
        self.net = network_of(player)
        inner = before_solves(player)
        self.ab = inner if isinstance(inner, AlphaBetaPlayer) else None  # the search to evaluate with, if any
        self.search = inner if callable(getattr(inner, "analyse", None)) else None  # mcts: / gumbel:
        self.device = None if self.net is None else next(self.net.parameters()).device
        self._last_choice = None
        self._last_search = None

    # -- networks
    def net_out(self, s: States):
        """The network's move probabilities [N, 64] and values [N] (None without a
        value head) for the (numpy) states ``s``."""
        import torch  # only players with a network get here: alphabeta and the rest run without torch

        from othello_learn.models.batch import from_states

        with torch.inference_mode():
            out = self.net(from_states(s, self.device))
        probs = torch.softmax(out["policy"].float(), -1).cpu().numpy()
        value = out["value"].float().cpu().numpy() if "value" in out else None
        return probs, value

    def net_evals(self, positions: list[Position], histories: np.ndarray | None = None):
        """``net_out``'s probabilities, and evaluations in discs for each side to move [N] (None
        without a value head): a finished game by its exact disc difference (the search,
        ``tree.evaluate``, backs up only its sign, which x 64 would read a win by 2 as 64; the
        margin is what a GUI can show of a move that ends the game), a forced pass as minus the
        position after it, as the search values it (the head never saw either), any other
        position by the head (64 a full win). ``histories``: each position's row of last actions
        (None: none known, as at a set-up position)."""
        s = States.from_positions(positions, histories)
        probs, value = self.net_out(s)
        if value is None:
            return probs, None
        evals = 64.0 * value.astype(np.float64)
        passes = []
        for i, pos in enumerate(positions):
            if pos.is_over():
                evals[i] = bb.final_disc_difference(int(pos.player), int(pos.opponent))
            elif pos.must_pass():
                passes.append(i)
        if passes:
            _, after = self.net_out(s[passes].step(np.full(len(passes), PASS)))
            evals[passes] = 0.0 - 64.0 * after.astype(np.float64)  # 0.0 - x: no "-0.00"
        return probs, evals

    def exact(self, pos: Position) -> bool:
        """Whether the player solves ``pos`` (``endgame:E:SPEC`` with at most E empty squares):
        then it knows the result, and its evaluations are that, not SPEC's guess."""
        return (isinstance(self.player, EndgamePlayer)
                and endgame.empties(pos.player, pos.opponent) <= self.player.empties)

    def root_eval(self, pos: Position, moves: list[int]) -> float | None:
        return self.root_eval_unit(pos, moves)[0]

    def root_eval_unit(self, pos: Position, moves: list[int]) -> tuple[float | None, str | None]:
        """``root_eval``'s figure and what it is, one of ``UNITS`` (None, None: no evaluation)."""
        if self.exact(pos):
            return float(endgame.value(pos.player, pos.opponent)), EXACT_DISCS
        if self.ab is not None:
            v, _ = self.ab.search(pos.player, pos.opponent)
            return self._ab_discs(v), EXACT_DISCS if abs(v) >= WIN_SCALE else HEURISTIC  # the end within its depth
        if self.net is not None:
            _, evals = self.net_evals([pos], last_actions(moves)[None])
            return (None, None) if evals is None else (float(evals[0]), NET_VALUE)
        return None, None

    def searched(self, pos: Position, moves: list[int]):
        """A search player's ``analyse`` of ``pos`` (its move, root visits, root values), once
        for a position and its moves: ``hint`` and then ``go`` read one search, so the move
        played is the hint ranked first, with the same evaluation."""
        key = (pos.player, pos.opponent, pos.black_to_move, tuple(moves))
        if self._last_search is None or self._last_search[0] != key:
            self._last_search = key, self.search.analyse(pos.player, pos.opponent, pos.black_to_move, self.rng,
                                                         history=last_actions(moves)[None])
        return self._last_search[1]

    def depth(self, pos: Position) -> int:
        """The plies behind a hint's evaluation in ``pos``: every empty square for a solve,
        alpha-beta's depth, 1 for a network's look at each child (a GUI shows it beside the eval)."""
        if self.exact(pos):
            return endgame.empties(pos.player, pos.opponent)
        return self.ab.depth if self.ab is not None else 1

    @staticmethod
    def _ab_discs(v: int) -> float:
        return v / WIN_SCALE if abs(v) >= WIN_SCALE else v / 100.0

    def choose(self, pos: Position, moves: list[int], start: Position | None = None) -> int:
        """The player's move in ``pos``, reached from ``start`` by ``moves`` (``start`` None: not
        known, ``moves`` are only the history). Asked again about the same position and moves (``go``
        after ``hint``, for a player whose hint is its move), the same one, not a fresh random draw."""
        key = (pos.player, pos.opponent, pos.black_to_move, tuple(moves), start)
        if self._last_choice is not None and self._last_choice[0] == key:
            return self._last_choice[1]
        sq = self._select(pos, moves, start)
        self._last_choice = key, sq
        return sq

    def _select(self, pos: Position, moves: list[int], start: Position | None) -> int:
        if self.search is not None and not self.exact(pos):
            return self.searched(pos, moves)[0]
        game = None
        if self.player.uses_moves and start is not None:
            # An external engine is told the game, not just the board: a GTP engine can only
            # replay moves from the standard start, and an NBoard engine keeps the history.
            inner = before_solves(self.player)
            if start == Position():
                game = [list(moves)]  # the arena's form: every action from the standard start
            elif not self.exact(pos) and callable(getattr(inner, "move_for", None)):
                # A set-up start, which the arena's ``moves`` cannot carry: the engine is given the
                # set-up position and the moves from it (a GTP engine with GRhino's set-up command).
                return inner.move_for(start, list(moves), pos)
        s = States.from_positions([pos], last_actions(moves)[None])
        return select_one(self.player, s, self.rng, moves=game)  # never an illegal move to a GUI

    def move_eval(self, pos: Position, moves: list[int], sq: int) -> float | None:
        """The evaluation ``hints`` gives ``sq``, or None: NBoard's ``=== move/eval`` is the
        chosen move's evaluation, so a GUI showing it beside the hints shows one number a move."""
        rows = self._rows(pos, moves, [sq])
        return None if rows is None else rows[0][1]

    def pass_eval(self, pos: Position, moves: list[int]) -> float | None:
        """A forced pass's evaluation, or None: like any move's, minus the value of the position
        it leads to (the value head never trained on a position whose side must pass)."""
        after = self.root_eval(pos.play(PASS), moves + [PASS])
        return None if after is None else 0.0 - after  # 0.0 - x: no "-0.00"

    def pass_eval_unit(self, pos: Position, moves: list[int]) -> tuple[float | None, str | None]:
        """``pass_eval``'s figure and what it is."""
        after, unit = self.root_eval_unit(pos.play(PASS), moves + [PASS])
        return (None, None) if after is None else (0.0 - after, unit)  # 0.0 - x: no "-0.00"

    def hints(self, pos: Position, moves: list[int], n: int,
              start: Position | None = None) -> list[tuple[int, float, str]]:
        """Up to ``n`` (move, eval, free text), best first."""
        legal = pos.legal_moves()
        if not legal:
            if pos.is_over():
                return []
            ev = self.pass_eval(pos, moves)
            if ev is None:  # as for the player's move elsewhere: 0.00 in the field, said so in the text
                return [(PASS, 0.0, "forced pass (no evaluation)")]
            return [(PASS, ev, "forced pass")]
        rows = self._rows(pos, moves, legal)
        if rows is None:  # nothing to rank: the one move the player would play, with no evaluation to give
            return [(self.choose(pos, moves, start), 0.0, f"{self.player.name}'s move (no evaluation)")]
        rows.sort(key=lambda r: r[3], reverse=True)  # stable: ties keep the order of the squares
        return [(sq, 0.0 if ev is None else ev, text) for sq, ev, text, _ in rows[: max(n, 1)]]

    def _rows(self, pos: Position, moves: list[int], squares: list[int]):
        """(move, eval or None, text, sort key) for each of ``squares`` (legal ones), the eval from the
        side to move's view after playing it; None for a player that cannot say anything about moves."""
        rows = []
        if self.exact(pos):
            for sq in squares:
                v = endgame.move_value(pos.player, pos.opponent, sq)
                rows.append((sq, float(v), EXACT, v))
            endgame.solved_from_moves(pos.player, pos.opponent, {sq: v for sq, _, _, v in rows})
        elif self.ab is not None:
            ab = self.ab
            for sq in squares:
                cp, co = bb.play(pos.player, pos.opponent, 1 << sq)
                v = -ab.negamax(cp, co, ab.depth - 1, -10**9, 10**9)
                seen = EXACT if abs(v) >= WIN_SCALE else "heuristic / 100"  # the end within its depth, or not
                rows.append((sq, self._ab_discs(v), f"alphabeta depth {ab.depth}, {seen}", v))
        elif self.net is not None:
            probs, _ = self.net_out(States.from_positions([pos], last_actions(moves)[None]))
            children = [pos.play(sq) for sq in squares]
            hist = np.stack([last_actions(moves + [sq]) for sq in squares])
            _, child_evals = self.net_evals(children, hist)
            searched = self.searched(pos, moves) if self.search is not None else None
            for i, sq in enumerate(squares):
                p = float(probs[0, sq])
                ev = None if child_evals is None else 0.0 - float(child_evals[i])
                if searched is None:
                    rows.append((sq, ev, f"policy {p:.3f}" + net_unit(ev, children[i].is_over()), p))
                    continue
                # The search's view: its move first, then by visits; a visited move valued by its mean
                # backed-up value, others as a policy player values them (an unvisited move; one that
                # ends the game, whose exact result the search backs up as its sign only; any move of a
                # net without a value head, whose search values every position 0).
                chosen, visits, q = searched
                n = int(visits[sq])
                unit = net_unit(ev, children[i].is_over())
                if n and child_evals is not None and not children[i].is_over():
                    ev = 64.0 * float(q[sq])
                    unit = net_unit(ev, False, "the search's mean value")
                rows.append((sq, ev, f"search {n} visits, policy {p:.3f}{unit}", (sq == chosen, n, p)))
        else:
            return None
        return rows
