"""Self-play: many games at once, one batched search per ply for all of them.

Each game records, at every position where the side to move has a move (a forced pass is not
recorded: there is nothing to learn there; a single legal move is, as a one-hot target),
the compact state and the search's policy target (the root visit distribution of
PUCT, Gumbel's improved policy, or an even spread over the best moves where the
position is solved exactly); when the game ends, every record gets the outcome
from its side to move's view (the value target). Games may resign when the search's value drops below a
threshold, except a share that is always played out, which measures how often
resigning would have been wrong (to calibrate the threshold).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import torch

from othello import bitboard as bb
from othello_learn.cli import bar_pacing
from othello_learn.files import atomic_path
from othello.notation import PASS, format_transcript
from othello.states import HISTORY, States

from othello_learn.search.endgame import solve
from othello_learn.search.mcts import Evaluator, MCTSConfig, make_search


@dataclass
class SelfPlayConfig:
    temperature_plies: int = 12  # sample moves by visit counts for this many plies, then the most visited
    resign_threshold: float | None = -0.9  # resign below this root value; None: never
    no_resign_fraction: float = 0.1  # share of games always played to the end
    # From this many empty squares on, moves are solved exactly instead of searched
    # (endgame.solve): a random optimal move is played, the policy target is uniform
    # over the optimal moves and the recorded value is the exact result's sign. 0: off.
    solve_empties: int = 0


# Bytes of one sample of SelfPlayGames: player and opponent (8 each), history (4), side to move (1),
# policy (64 float16), outcome and ply (1 each), game (4), value (2); a game records at most 60 of
# them (a position where the side to move has a move).
SAMPLE_BYTES = 8 + 8 + 4 + 1 + 64 * 2 + 1 + 1 + 4 + 2
SAMPLES_PER_GAME = 60


@dataclass
class SelfPlayGames:
    """Samples (one per recorded position) and per-game statistics, as numpy arrays."""

    player: np.ndarray  # uint64
    opponent: np.ndarray
    history: np.ndarray  # int8 [n, 4]
    black_to_move: np.ndarray
    policy: np.ndarray  # float16 [n, 64], root visits (PUCT), improved policy (Gumbel), even over the best (solved)
    outcome: np.ndarray  # int8, +1 / 0 / -1 for the side to move
    ply: np.ndarray  # uint8
    game: np.ndarray  # int32, game index within this batch
    value: np.ndarray  # float16, the search's root value for the side to move (solved: the exact result's sign)
    winner: np.ndarray  # per game: +1 black, -1 white, 0 draw
    disc_diff: np.ndarray  # per game: black's final disc difference (0 for resigned games)
    resigned: np.ndarray  # per game: ended by resignation
    no_resign: np.ndarray  # per game: resignation disabled (calibration game)
    length: np.ndarray  # per game: plies played (passes included)
    # Per game: every move played, int8 [games, width], 64 = pass, -1 after the
    # game's ``length`` plies; so a run's games can be replayed and inspected.
    # None for files written before it was recorded (they still load).
    moves: np.ndarray | None = None
    # Per game: the generation whose best network played it (nets/gen_N.pt: N), int32. With --async
    # a generation's parts may be played by the networks of two generations. None in older files.
    network: np.ndarray | None = None

    def save(self, path) -> None:
        """Atomically: a killed run never leaves a truncated generation under ``path``."""
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, **{k: v for k, v in self.__dict__.items() if v is not None})

    @classmethod
    def load(cls, path) -> "SelfPlayGames":
        """The games in ``path``, checked (``check``): a run folder's file may have been edited."""
        with np.load(path) as f:  # never unpickles: object arrays raise
            games = cls(**{k: f[k] for k in f.files if k in cls.__dataclass_fields__})
        games.check()
        return games

    # the dtype kind of each field: unsigned, signed or unsigned integer, bool, float
    _KINDS = {"player": "u", "opponent": "u", "history": "iu", "black_to_move": "b", "policy": "f", "outcome": "iu",
              "ply": "iu", "game": "iu", "value": "f", "winner": "iu", "disc_diff": "iu", "resigned": "b",
              "no_resign": "b", "length": "iu", "moves": "iu", "network": "iu"}
    _PER_GAME = ("winner", "disc_diff", "resigned", "no_resign", "length", "moves", "network")

    def check(self) -> None:
        """A ValueError naming the first field out of shape: arrays that do not line up (a sample
        without its policy), numbers of the wrong kind (bitboards as floats lose squares), a policy
        or value that is not finite (a NaN network committed as the next generation), outcomes
        beyond ±1, samples of games the file does not hold, moves that are no square or pass, a
        square held by both sides."""
        n, games = len(self.policy), len(self.winner)  # the samples are the targets; the games, their results
        shapes = {"history": (n, HISTORY), "policy": (n, 64)}
        for name, kinds in self._KINDS.items():
            a = getattr(self, name)
            if a is None:
                continue
            want = shapes.get(name, (games,) if name in self._PER_GAME else (n,))
            ndim = 2 if name in ("history", "policy", "moves") else 1
            if a.dtype.kind not in kinds or a.shape[:len(want)] != want or a.ndim != ndim:
                raise ValueError(f"field {name!r} is {a.dtype} {a.shape}, expected {n} samples of {games} games")
        if not (np.isfinite(self.policy).all() and np.isfinite(self.value).all() and (self.policy >= 0).all()):
            raise ValueError("a policy or value that is not a finite number (or a negative probability)")
        if n and (np.abs(self.outcome.astype(np.int64)).max() > 1 or self.game.min() < 0 or self.game.max() >= games):
            raise ValueError("an outcome beyond ±1, or a sample of a game the file does not hold")
        history = self.history.astype(np.int64)
        if n and (history.min() < -1 or history.max() > 64 or (self.player & self.opponent).any()):
            raise ValueError("a history move outside -1..64, or a square held by both sides")
        if self.moves is not None and self.moves.size and (self.moves.min() < -1 or self.moves.max() > 64):
            raise ValueError("a game move outside -1..64")

    @classmethod
    def concat(cls, parts: list["SelfPlayGames"]) -> "SelfPlayGames":
        offsets = np.cumsum([0] + [len(p.winner) for p in parts[:-1]])
        fields = {}
        for k in cls.__dataclass_fields__:
            if k in ("moves", "network"):
                continue
            arrays = [getattr(p, k) + off if k == "game" else getattr(p, k) for p, off in zip(parts, offsets)]
            fields[k] = np.concatenate(arrays)
        if parts and all(p.moves is not None for p in parts):  # one part without moves: none for the whole
            width = max(p.moves.shape[1] for p in parts)
            fields["moves"] = np.concatenate(
                [np.pad(p.moves, ((0, 0), (0, width - p.moves.shape[1])), constant_values=-1) for p in parts])
        if parts and all(p.network is not None for p in parts):  # as moves: one part without, none for the whole
            fields["network"] = np.concatenate([p.network for p in parts])
        return cls(**fields)

    def game_moves(self, i: int) -> list[int]:
        """Game ``i``'s moves from the start position, passes (64) included."""
        if self.moves is None:
            raise ValueError("these games were saved without their moves (written before moves were recorded)")
        return [int(m) for m in self.moves[i, : int(self.length[i])]]

    def transcript(self, i: int) -> str:
        """Game ``i`` as ``f5d6c3...`` (passes left out: ``Position.from_transcript`` infers them)."""
        return format_transcript(self.game_moves(i))


@torch.inference_mode()
def play_games(evaluator: Evaluator, n_games: int, mcts: MCTSConfig = MCTSConfig(), cfg: SelfPlayConfig = SelfPlayConfig(),
               seed: int = 0, progress: bool = True) -> SelfPlayGames:
    """Play ``n_games`` self-play games together from the start position.

    A ``GumbelConfig`` searches with Gumbel AlphaZero: the move played is the
    sequential-halving winner (sampled by the root's Gumbel noise at every ply,
    so ``temperature_plies`` does not apply) and the policy target is the
    improved policy. Otherwise PUCT: visit counts, as in AlphaZero."""
    dev = evaluator.device
    gen = torch.Generator(device=dev).manual_seed(seed)
    rng = np.random.default_rng(seed)
    B = n_games
    state = States.initial(B, like=torch.zeros(0, dtype=torch.long, device=dev))
    plies = torch.zeros(B, dtype=torch.long, device=dev)
    moves_played = torch.zeros(B, dtype=torch.long, device=dev)
    # A pass is legal only when the other side can move, so a move follows it: at most 60 moves and 60 passes.
    move_log = torch.full((B, 128), -1, dtype=torch.int8, device=dev)
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    winner = torch.zeros(B, dtype=torch.long, device=dev)
    disc = torch.zeros(B, dtype=torch.long, device=dev)
    resigned = torch.zeros(B, dtype=torch.bool, device=dev)
    no_resign = torch.from_numpy(rng.random(B) < cfg.no_resign_fraction).to(dev)
    if cfg.resign_threshold is None:
        no_resign[:] = True

    search = make_search(evaluator, B, mcts, generator=gen)
    search.set_roots(torch.arange(B, device=dev), state)
    records: list[tuple] = []

    from tqdm.auto import tqdm

    bar = tqdm(total=B, disable=not progress, desc="self-play", unit="game", file=sys.stderr, leave=False,
               **bar_pacing())
    while not done.all():
        live = (~done).nonzero().squeeze(1)
        now = state[live]
        over = now.is_over()
        if over.any():
            g = live[over]
            d_black = now.outcome()[over]
            disc[g], winner[g], done[g] = d_black, torch.sign(d_black), True
            bar.update(int(g.numel()))
            live, now = live[~over], now[~over]
        if live.numel() == 0:
            break
        has_move = now.legal_squares() != 0
        movers = live[has_move]  # the others must pass: nothing to search or record
        action = torch.full((B,), PASS, dtype=torch.long, device=dev)
        s = now[has_move]
        if cfg.solve_empties and movers.numel():
            exact = (64 - bb.popcount(s.player | s.opponent)) <= cfg.solve_empties
            if exact.any():  # solved, not searched: never resigns, the game ends in perfect play
                e, g = s[exact], movers[exact]
                value, pi, action[g] = solve_positions(e.player, e.opponent, rng, dev)
                records.append((g.cpu(), e.player.cpu(), e.opponent.cpu(), e.history.cpu(), e.black_to_move.cpu(),
                                pi.half().cpu(), moves_played[g].cpu(), value.half().cpu()))
                movers, s = movers[~exact], s[~exact]
        if movers.numel():
            # PUCT samples by visits for the first plies; Gumbel plays its winner (its noise samples).
            out = search.run(movers, explore=True, sample=plies[movers] < cfg.temperature_plies)
            value, action[movers], pi = out.value, out.action, out.action_weights[:, :64]
            quit_ = (~no_resign[movers]) & (value < (cfg.resign_threshold if cfg.resign_threshold is not None else -2))
            records.append((movers.cpu(), s.player.cpu(), s.opponent.cpu(), s.history.cpu(),
                            s.black_to_move.cpu(), pi.half().cpu(), moves_played[movers].cpu(), value.half().cpu()))
            if quit_.any():
                g = movers[quit_]
                winner[g] = torch.where(state.black_to_move[g], -1, 1)  # the side to move gives up
                resigned[g], done[g] = True, True
                bar.update(int(g.numel()))
        # Play the moves (and forced passes) of the games still going.
        go = live[~done[live]]
        a = action[go]
        state.put(go, state[go].step(a, check=False))  # searched moves and forced passes are legal
        move_log[go, plies[go]] = a.to(torch.int8)
        plies[go] += 1
        moves_played[go] += (a < PASS).long()
        fresh = search.advance(go, a)
        need = go[fresh]
        search.set_roots(need, state[need])
    bar.close()

    g, p, o, h, b, pi, ply, v = (torch.cat(x) for x in zip(*records)) if records else (torch.zeros(0),) * 8
    w = winner.cpu()
    outcome = (w[g] * torch.where(b, 1, -1)).to(torch.int8) if records else torch.zeros(0, dtype=torch.int8)
    if records:  # group the samples by game, in play order within each
        order = torch.from_numpy(np.argsort(g.numpy(), kind="stable"))
        g, p, o, h, b, pi, ply, v, outcome = (x[order] for x in (g, p, o, h, b, pi, ply, v, outcome))
    return SelfPlayGames(
        player=p.numpy().view(np.uint64) if records else np.zeros(0, np.uint64),
        opponent=o.numpy().view(np.uint64) if records else np.zeros(0, np.uint64),
        history=h.numpy().astype(np.int8) if records else np.zeros((0, 4), np.int8),
        black_to_move=b.numpy().astype(bool) if records else np.zeros(0, bool),
        policy=pi.numpy() if records else np.zeros((0, 64), np.float16),
        outcome=outcome.numpy(),
        ply=ply.numpy().astype(np.uint8) if records else np.zeros(0, np.uint8),
        game=g.numpy().astype(np.int32) if records else np.zeros(0, np.int32),
        winner=w.numpy().astype(np.int8),
        disc_diff=disc.cpu().numpy().astype(np.int8),
        resigned=resigned.cpu().numpy(),
        no_resign=no_resign.cpu().numpy(),
        value=v.numpy().astype(np.float16) if records else np.zeros(0, np.float16),
        length=plies.cpu().numpy().astype(np.int16),
        moves=move_log[:, : int(plies.max()) if B else 0].cpu().numpy(),
    )


def solve_positions(player: torch.Tensor, opponent: torch.Tensor, rng: np.random.Generator, device):
    """Exact solves of positions with a legal move: (the result's sign for the
    side to move, the uniform policy over the optimal moves [n, 64], a random
    optimal move), as tensors on ``device``."""
    n = len(player)
    value = torch.zeros(n, device=device)
    pi = torch.zeros(n, 64, device=device)
    move = torch.zeros(n, dtype=torch.long, device=device)
    for i, (p, o) in enumerate(zip(player.tolist(), opponent.tolist())):
        v, best = solve(p & bb.FULL, o & bb.FULL)  # the engine's int64 boards, as unsigned ints
        value[i] = float(np.sign(v))
        pi[i, best] = 1.0 / len(best)
        move[i] = best[int(rng.integers(len(best)))]
    return value, pi, move


def false_resign_rate(games: SelfPlayGames, threshold: float) -> tuple[float, int]:
    """The share of played-out games that resigning at ``threshold`` would
    have lost wrongly: the first side whose root value fell below it did not
    in fact lose. Also returns how many games were played out."""
    n = int(games.no_resign.sum())
    sel = games.no_resign[games.game] & (games.value < threshold)
    first = np.unique(games.game[sel], return_index=True)[1]  # samples are in play order within a game
    wrong = int((games.outcome[sel][first] >= 0).sum())
    return (wrong / n if n else 0.0), n


GRID = np.round(np.arange(-0.99, -0.49, 0.01), 2)
NEVER = -1.0  # a resign threshold no root value is below: calibration's answer when no threshold of GRID is safe


def false_resign_bound(rate: float, n: int, z: float = 1.6448536269514722) -> float:
    """The one-sided 95 % Wilson upper bound of a false-resign ``rate`` seen in
    ``n`` played-out games. Calibrating the observed rate to the target put
    the next generation's rate over it a third of the time (up to 12 % at a
    5 % target, on ~300 played-out games a generation); with the bound it
    averaged 3.1 %, at most 5.8 %
    (docs/results/selfplay.md#resignation-with-a-confidence-bound)."""
    if n == 0:
        return 1.0
    centre = rate + z * z / (2 * n)
    spread = z * np.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n))
    return float((centre + spread) / (1 + z * z / n))


def calibrate_resign_threshold(games: SelfPlayGames, target: float = 0.05, current: float = -0.9,
                               min_games: int = 10) -> float:
    """The highest threshold (in -0.99..-0.5) at and below which the
    false-resign rate on the played-out games is under ``target`` with 95 %
    confidence (``false_resign_bound``); ``current`` when fewer than
    ``min_games`` games were played out; ``NEVER`` (-1.0: no root value is
    below it, so no game resigns) when not even -0.99 is: keeping -0.99 then
    went on resigning at a rate known to be over the target. The played-out
    games of the next generation are calibrated afresh."""
    rates = [false_resign_rate(games, float(t)) for t in GRID]
    if rates[0][1] < min_games:
        return current
    best = NEVER
    for t, (rate, n) in zip(GRID, rates):
        if false_resign_bound(rate, n) >= target:
            break
        best = float(t)
    return best
