"""A generation's matches: the gate (the candidate's search against the best network's) and the
optional --eval-vs match (the candidate's 1-ply policy against a program). Each is dealt into
parts of --parallel games (``players.arena.plan_match``), played one after the other in this
process, or side by side on the run's Ray actors (--backend ray): the same seed gives the same
games, and so the same gate, either way and with any number of actors."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from othello_learn.files import write_json
from othello_learn.players.arena import match_result, plan_match, play_match
from othello_learn.players.base import Player
from othello_learn.players.elo import MatchResult, finite_elo
from othello_learn.players.network import PolicyPlayer, search_player
from othello_learn.rl.records import COMMITTED, REDONE, _paths, generation_seeds, load_net, read_state
from othello_learn.rl.settings import RunConfig, eval_opponent, self_play_workers


@dataclass(frozen=True)
class LoopPlayer:
    """A player of the loop's matches as any process builds it: a network's search (``search``:
    "puct" or "gumbel", without noise or tree reuse: a gate compares nets, not luck) or its 1-ply
    policy (``search`` None), the network named by its file's hash; or a program (``spec``)."""

    name: str
    net: str | None = None
    search: str | None = None
    simulations: int = 0
    considered: int = 0
    c_puct: float = 1.5
    spec: str | None = None

    def build(self, nets: dict, device: torch.device) -> Player:
        """The player, with ``nets`` (the networks by hash) on ``device``."""
        if self.spec is not None:
            player = eval_opponent(self.spec)
        elif self.search is None:
            player = PolicyPlayer(nets[self.net], device)
        else:
            player = search_player(self.search, nets[self.net], self.simulations, device, self.considered,
                                   c_puct=self.c_puct)
        player.name = self.name
        return player


def _gate_player(cfg: RunConfig, name: str, key: str) -> LoopPlayer:
    """Self-play's search (its --c-puct or --gumbel-considered) at --gate-simulations."""
    return LoopPlayer(name, key, cfg.search, cfg.gate_simulations, cfg.gumbel_considered, cfg.c_puct)


def _key(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def gate(cfg: RunConfig, gen: int) -> Path:
    """The match of generation ``gen``'s candidate against the best network
    (none with --continuous), and the optional --eval-vs match."""
    p = _paths(cfg, gen)
    if p["gate"].exists():
        return p["gate"]
    state = read_state(cfg.out / "state.json")
    seeds = generation_seeds(cfg, gen)
    dev = torch.device(cfg.device)
    # loaded here whoever plays: a damaged network is named before any match
    cand = _key(p["net"])
    nets = {cand: (p["net"], load_net(p["net"], dev, REDONE).to(dev))}
    if cfg.continuous:
        result = {"games": 0, "score": None, "elo": 0.0, "elo_low": None, "elo_high": None}
    else:
        path = cfg.out / state["best"]
        best = _key(path)
        nets[best] = (path, load_net(path, dev, COMMITTED).to(dev))
        r = play(cfg, "gate", _gate_player(cfg, p["tag"], cand), _gate_player(cfg, state["best"], best), nets,
                 cfg.gate_games, seeds["gate"])
        result = _match_summary(r)
    if cfg.eval_vs:
        r = play(cfg, "--eval-vs", LoopPlayer("policy", cand), LoopPlayer(cfg.eval_vs, spec=cfg.eval_vs), nets,
                 cfg.eval_games, seeds["eval"])
        result["eval_vs"] = {"spec": cfg.eval_vs, **_match_summary(r)}
    write_json(p["gate"], result)
    return p["gate"]


def play(cfg: RunConfig, what: str, a: LoopPlayer, b: LoopPlayer, nets: dict, games: int, seed: int) -> MatchResult:
    """A match of ``games`` games of ``a`` against ``b`` in parts of --parallel games: here, or on the
    Ray actors. ``nets``: each network's file and the network, loaded on --device, by hash.
    ``what``: the match, in messages."""
    if cfg.backend == "ray":
        from othello_learn.rl.ray_backend import play_match_parts

        plan = plan_match(games, seed, part_games=cfg.parallel)
        workers, threads = self_play_workers(cfg.workers, torch.device(cfg.device), len(plan.parts))
        files = {key: path for key, (path, _) in nets.items() if key in (a.net, b.net)}
        results = play_match_parts(cfg, what, a, b, files, plan, workers, threads)
        return match_result(a.name, b.name, plan, results)
    dev, loaded = torch.device(cfg.device), {key: net for key, (_, net) in nets.items()}
    return play_match(a.build(loaded, dev), b.build(loaded, dev), games, seed=seed, progress=not cfg.quiet,
                      part_games=cfg.parallel)


def gate_elo_gain(result: dict) -> float:
    """The Elo a gate match adds to the run's curve (0 without one: --continuous)."""
    return 0.0 if result["score"] is None else finite_elo(result["elo"], result["score"], result["games"])


def _match_summary(r) -> dict:
    """A gate's or evaluation's record in gate.json: the match's counts and Elo (infinite: null)."""
    d = r.to_dict()
    return {k: d[k] for k in ("games", "wins", "draws", "losses", "score", "elo", "elo_low", "elo_high")}
