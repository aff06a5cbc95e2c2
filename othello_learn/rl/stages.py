"""A generation's stages, each idempotent over files under OUT: ``self_play`` (the best network's
games), ``train`` (the trainee on the replay window), the gate (``rl.matches``: the candidate
against the best) and ``commit`` (state.json, the commit point), then ``publish``: what a user
reads off the run (best.pt, elo.png) and the per-generation statistics (``Logger``, W&B)."""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from othello_learn.files import UserError, atomic_write, describe_os_error, write_json
from othello_learn.models.fastpath import auto_path
from othello_learn.models.nets import read_checkpoint, save_network
from othello_learn.rl.elo_plot import plot_elo
from othello_learn.rl.learner import (OptimizerStateError, Resume, TrainingDiverged, TrainSettings, policy_sharpness,
                                      train_network)
from othello_learn.rl.matches import gate_elo_gain
from othello_learn.rl.records import (COMMITTED, REDONE, REPLAYED, _a_threshold, _part_paths, _paths, _window_paths,
                                      generation_seeds, load_games, load_net, read_json, read_state)
from othello_learn.rl.selfplay import SelfPlayConfig, SelfPlayGames, calibrate_resign_threshold, false_resign_rate
from othello_learn.rl.settings import RunConfig, self_play_workers
from othello_learn.rl.workers import play_parts
from othello_learn.tracking import start_wandb


class Logger:
    def __init__(self, cfg: RunConfig, state: dict):
        self.run = None
        if cfg.logger != "wandb":
            return
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        self.run = start_wandb(lambda: wandb.init(
            project=cfg.wandb_project, dir=str(cfg.out), id=state["wandb_id"], resume="allow",
            mode="online" if cfg.wandb_online else "offline", config=cfg.to_json(), name=cfg.out.name),
            cfg.wandb_online)

    def log(self, metrics: dict, step: int) -> None:
        """One generation's row, committed now: given a step and no ``commit``, W&B holds the row
        back until a later step is logged or the run finishes, so a kill -9 (the OOM killer) in
        the next generation's hour of self-play lost the generation committed before it."""
        if self.run is not None:
            self.run.log(metrics, step=step, commit=True)

    def finish(self):
        if self.run is not None:
            self.run.finish()


def self_play(cfg: RunConfig, gen: int) -> Path:
    """Generation ``gen``'s games by the best network, played in parts of
    ``--parallel`` games (by ``--workers`` processes at once): a part on disk is
    never played again, the merged file on disk means the stage is done."""
    p = _paths(cfg, gen)
    if cfg.backend == "ray":  # --async: the parts played ahead while the generation before trained
        from othello_learn.rl.ray_backend import finish_ahead

        finish_ahead(gen)
    state = read_state(cfg.out / "state.json")
    if p["parts"].is_symlink():  # its parts would be adopted as played, then deleted where it points
        raise UserError(f"{p['parts']}: a link, not a folder of this run's self-play parts: remove the link "
                        "and rerun the same command")
    if not p["games"].exists():
        threshold = None if cfg.no_resign else calibrated_threshold(state, cfg)  # --no-resign: from any generation on
        dev = torch.device(cfg.device)
        print(f"generation {gen}: best {state['best']}, resign threshold "
              f"{'none (--no-resign)' if threshold is None else threshold}; network: {auto_path(dev)}",
              file=sys.stderr)
        best = cfg.out / state["best"]
        load_net(best, dev, COMMITTED)  # checked here, before any part is played
        # What this generation's training reads from earlier ones, checked before the play, not after it.
        for path in _window_paths(cfg, gen):
            load_games(path, COMMITTED)
        if state["trainee"] != state["best"]:  # the same file was read just above
            load_net(cfg.out / state["trainee"], torch.device("cpu"), COMMITTED)
        if cfg.keep_optimizer and _optimizer_file(cfg, state).exists():  # the Adam state the training goes on from
            _trainee_optimizer(cfg, state)
        sp = _self_play_config(cfg, threshold)
        parts = _generation_parts(cfg, gen)
        kept = {path: load_games(path, REPLAYED) for path, _, _ in parts if path.exists()}  # checked before playing
        todo = [(path, n, seed) for path, n, seed in parts if path not in kept]
        t0 = time.time()
        network = _net_generation(state["best"])
        workers = play_parts(cfg, best, sp, todo, network)  # which parts is decided here; who plays them, there
        seconds = time.time() - t0
        played = sum(n for _, n, _ in todo)
        merged = [kept[path] if path in kept else load_games(path, REPLAYED) for path, _, _ in parts]
        for games in merged:  # played here by the best network (the Ray backend's parts say which played them)
            if games.network is None:
                games.network = np.full(len(games.winner), network, np.int32)
        # The record before the merged games, whose file ends the stage: written after them, a kill
        # between the two lost it for good. A rerun that plays nothing keeps the one there.
        if played or not p["self_play"].exists():
            write_json(p["self_play"], {"seconds": seconds, "games_played": played, "workers": workers,
                                        "networks": sorted({int(n) for g in merged for n in np.unique(g.network)}),
                                        "games_per_hour": played / seconds * 3600 if played and seconds > 1 else None,
                                        "resign_threshold": threshold})
        SelfPlayGames.concat(merged).save(p["games"])
    if p["parts"].exists():  # our parts, now in the merged file (also after a kill during this clean-up)
        for path in _part_paths(cfg, p):
            path.unlink(missing_ok=True)
        try:
            p["parts"].rmdir()
        except OSError:  # something we did not write is in there: leave it
            pass
    return p["games"]


def _self_play_config(cfg: RunConfig, threshold: float | None) -> SelfPlayConfig:
    return SelfPlayConfig(temperature_plies=cfg.temperature_plies, resign_threshold=threshold,
                          no_resign_fraction=cfg.no_resign_fraction, solve_empties=cfg.solve_empties)


def _generation_parts(cfg: RunConfig, gen: int) -> list:
    """Generation ``gen``'s self-play parts: (path, games, seed) each."""
    seeds = generation_seeds(cfg, gen)["self_play"]
    return [(path, min(cfg.parallel, cfg.games - start), seeds[k]) for k, (path, start)
            in enumerate(zip(_part_paths(cfg, _paths(cfg, gen)), range(0, cfg.games, cfg.parallel)))]


def _net_generation(name: str) -> int:
    """The generation of a run's net, ``nets/gen_N.pt`` (read_state checked the name)."""
    return int(Path(name).stem.removeprefix("gen_"))


def play_ahead(cfg: RunConfig, gen: int) -> None:
    """--async: generation ``gen``'s missing parts started on the Ray actors, in the background, with
    the best network at the time each part starts (state.json is read then: a commit's promotion
    reaches the next part); ``self_play(cfg, gen)`` waits for them and plays what is left."""
    from othello_learn.rl import ray_backend
    from othello_learn.rl.workers import _search_config

    if _paths(cfg, gen)["games"].exists():
        return
    state = read_state(cfg.out / "state.json")
    threshold = None if cfg.no_resign else calibrated_threshold(state, cfg)  # the calibration before this commit
    todo = [part for part in _generation_parts(cfg, gen) if not part[0].exists()]
    if not todo:
        return
    workers, threads = self_play_workers(cfg.workers, torch.device(cfg.device), len(todo))
    cache = {}

    def best():
        name = read_state(cfg.out / "state.json")["best"]
        if name not in cache:
            cache.clear()
            cache[name] = ray_backend.Best(cfg.out / name, _net_generation(name))
        return cache[name]

    ray_backend.play_ahead(cfg, gen, todo, _self_play_config(cfg, threshold), _search_config(cfg), workers,
                           threads, best)


def train(cfg: RunConfig, gen: int) -> Path:
    """The trainee, trained on the last ``--window`` generations of games,
    saved as generation ``gen``'s candidate (with its training statistics)."""
    p = _paths(cfg, gen)
    if p["net"].exists() and p["train"].exists():
        _drop_training_leftovers(cfg, gen)  # a kill just before their removal left them
        return p["net"]
    state = read_state(cfg.out / "state.json")
    dev = torch.device(cfg.device)
    window = [load_games(path, COMMITTED) for path in _window_paths(cfg, gen)]
    window.append(load_games(p["games"], f"delete it and rerun the same command: generation {gen}'s self-play "
                                         "is played again"))
    trainee = load_net(cfg.out / state["trainee"], dev, COMMITTED).to(dev)
    inherited = _trainee_optimizer(cfg, state) if cfg.keep_optimizer else None
    try:  # a kill mid-training loses at most a minute of it: the rerun goes on from nets/gen_N.training
        steps = _train_steps(cfg, window[-1])
        settings = TrainSettings.from_run(cfg, steps, seed=generation_seeds(cfg, gen)["train"])
        resume = Resume(p["train_state"], optimizer_state=inherited,
                        optimizer_out=p["optimizer"] if cfg.keep_optimizer else None)
        stats = train_network(trainee, SelfPlayGames.concat(window), settings, device=dev, progress=not cfg.quiet,
                              resume=resume)
    except UserError as e:
        raise UserError(f"{e}: {REDONE}") from e
    except TrainingDiverged as e:  # the same seeds would diverge again: the step size is what can change
        raise UserError(f"generation {gen}: {e}; rerun with a lower --lr (it may change on resume)") from e
    except OptimizerStateError as e:  # the file belongs to another network (a hand-copied nets/ folder)
        raise UserError(f"{_optimizer_file(cfg, state)}: {e}: delete it to train generation {gen} with a fresh "
                        f"Adam") from e
    stats["steps"], stats["inherited_optimizer"] = steps, inherited is not None
    stats["window_positions"] = int(sum(len(w.player) for w in window))
    stats.update(policy_sharpness(trainee, window[-1], seed=generation_seeds(cfg, gen)["train"], device=dev))
    # may change on resume: each generation records its own
    stats["lr"], stats["l2_weight"], stats["value_weight"] = cfg.lr, cfg.l2, cfg.value_weight
    save_network(trainee.cpu(), p["net"], generation=gen)
    write_json(p["train"], stats)
    _drop_training_leftovers(cfg, gen)
    return p["net"]


def _train_steps(cfg: RunConfig, new: SelfPlayGames) -> int:
    """--train-steps; with --async, --train-ratio training samples per new sample (``new``'s positions)."""
    return max(1, math.ceil(cfg.train_ratio * len(new.player) / cfg.batch_size)) if cfg.async_ else cfg.train_steps


def _drop_training_leftovers(cfg: RunConfig, gen: int) -> None:
    """Once generation ``gen``'s net and statistics are written: its resumable training
    state, and the Adam state of the generation before (this one's goes on from it)."""
    _paths(cfg, gen)["train_state"].unlink(missing_ok=True)
    if gen > 1:
        _paths(cfg, gen - 1)["optimizer"].unlink(missing_ok=True)


def _optimizer_file(cfg: RunConfig, state: dict) -> Path:
    """Where the trainee's Adam state is: beside its net, nets/gen_N.adam (none for the --init net)."""
    return (cfg.out / state["trainee"]).with_suffix(".adam")


def _trainee_optimizer(cfg: RunConfig, state: dict) -> dict | None:
    """The trainee's Adam state from its last training, or None (a fresh Adam: the first
    generation, or --keep-optimizer turned on mid-run), said once on stderr."""
    path = _optimizer_file(cfg, state)
    if path.exists():
        try:
            return read_checkpoint(path)
        except UserError as e:
            raise UserError(f"{e}: delete it to train the next generation with a fresh Adam") from e
    if state["generation"] > 0:
        print(f"--keep-optimizer: no {path.name} beside the trainee: its training starts a fresh Adam",
              file=sys.stderr)
    return None


def calibrated_threshold(state: dict, cfg: RunConfig) -> float:
    """The run's calibrated resign threshold. Runs started with --no-resign before 2026-11-26
    kept none (null), and so could never resign again: they start from --resign-threshold."""
    return cfg.resign_threshold if state["resign_threshold"] is None else state["resign_threshold"]


def commit(cfg: RunConfig, gen: int, log: Logger | None = None) -> dict:
    """Generation ``gen`` recorded: the candidate promoted if it won the gate,
    the resign threshold recalibrated on the played-out games, state.json
    (the commit point) rewritten. The state after it."""
    p = _paths(cfg, gen)
    state = read_state(cfg.out / "state.json")
    if state["generation"] >= gen:
        return state
    games = load_games(p["games"], f"delete it and rerun the same command: generation {gen}'s self-play is played "
                                  "again")
    load_net(p["net"], torch.device("cpu"), REDONE)  # once committed it is the trainee, and may become the best
    train_stats = read_json(p["train"], REDONE, needs=())
    result = read_json(p["gate"], REDONE, needs=("games", "score", "elo"))
    # Runs from before the self-play statistics file have none for a generation in flight.
    sp_stats = (read_json(p["self_play"], REDONE, needs=("games_per_hour",)) if p["self_play"].exists()
                else {"games_per_hour": None})
    promoted = cfg.continuous or (result["score"] is not None and result["score"] > cfg.gate_threshold)
    elo_candidate = state["elo_best"] + gate_elo_gain(result)
    # The threshold the games were played with (None: --no-resign); a stats file from before
    # 2026-11-26 does not say, and the state's was the one then.
    threshold = sp_stats.get("resign_threshold", state["resign_threshold"])
    if not _a_threshold(threshold):
        raise UserError(f"{p['self_play']}: not a resign threshold: {threshold!r}: {REDONE}")
    frr, n_low = false_resign_rate(games, threshold) if threshold is not None else (0.0, 0)
    n = len(games.winner)
    record = {
        "generation": gen,
        "games": n,
        "positions": int(len(games.player)),
        "black_wins": float((games.winner > 0).mean()),
        "white_wins": float((games.winner < 0).mean()),
        "draws": float((games.winner == 0).mean()),
        "resigned": float(games.resigned.mean()),
        "mean_length": float(games.length.mean()),
        "resign_threshold": threshold,
        "false_resign_rate": frr,
        "false_resign_sample": n_low,
        "games_per_hour": sp_stats["games_per_hour"],
        **{f"train_{k}": v for k, v in train_stats.items()},
        "gate_score": result["score"],
        "gate_elo": result["elo"],
        "elo_candidate": elo_candidate,
        "promoted": bool(promoted),
        "elo_best": elo_candidate if promoted else state["elo_best"],
        "seeds": generation_seeds(cfg, gen),
    }
    if "eval_vs" in result:
        ev = result["eval_vs"]
        record["eval_vs"], record["eval_score"], record["eval_elo"] = ev["spec"], ev["score"], ev["elo"]
        # Absent in gate files from before 2026-11-24 (the interval) and 2026-11-25 (the games): None.
        for key in ("elo_low", "elo_high", "games", "wins", "draws", "losses"):
            record[f"eval_{key}"] = ev.get(key)
    write_json(p["record"], record)
    state = {**state, "generation": gen, "trainee": f"nets/{p['tag']}.pt",
             "best": f"nets/{p['tag']}.pt" if promoted else state["best"], "elo_best": record["elo_best"],
             # calibrated under --no-resign too (every game is played out then), so dropping it resigns well
             "resign_threshold": calibrate_resign_threshold(games, 0.05, calibrated_threshold(state, cfg)),
             "history": state["history"] + [record]}
    write_json(cfg.out / "state.json", state)
    if log is not None:
        log.log({k: v for k, v in record.items() if isinstance(v, (int, float)) and v is not None}, step=gen)
    publish(cfg, state)
    gated = (f"gate score {result['score']:.3f}, {'promoted' if promoted else 'kept best'}"
             if result["score"] is not None else "no gate (--continuous)")
    evaluated = f"; 1-ply vs {record['eval_vs']}: {record['eval_score']:.3f}" if "eval_vs" in record else ""
    sharp = (f"; policy entropy {record['train_policy_entropy']:.2f} nats (its targets "
             f"{record['train_target_entropy']:.2f})" if "train_policy_entropy" in record else "")
    print(f"generation {gen}: {n} games ({record['black_wins']:.0%} black wins, {record['resigned']:.0%} resigned), "
          f"{gated}; Elo {record['elo_best']:+.0f}{evaluated}{sharp}", file=sys.stderr)
    return state


def publish(cfg: RunConfig, state: dict) -> None:
    """What a user reads off the run, made to match state.json: ``best.pt`` (the best network's
    copy) and ``elo.png``. After every commit, and as every rerun starts, not at the
    end of the run: a long run is stopped by Ctrl-C or a kill far more often than it reaches
    ``--generations``, and it used to leave ``best.pt`` missing or a previous run's. Each is
    written only if stale, so a rerun with nothing to do rewrites nothing."""
    source = cfg.out / state["best"]
    remedy = "restore it from a backup (best.pt is its copy as last published), or start a new --out"
    try:
        best = source.read_bytes()
    except OSError as e:
        raise UserError(f"{describe_os_error(e)}: {remedy}") from e
    target = cfg.out / "best.pt"
    if not target.is_file() or target.read_bytes() != best:
        load_net(source, torch.device("cpu"), remedy)  # a damaged net is not copied over the good copy
        atomic_write(target, best)
    plot, committed = cfg.out / "elo.png", cfg.out / "state.json"
    if state["history"] and (not plot.is_file() or plot.stat().st_mtime_ns < committed.stat().st_mtime_ns):
        plot_elo(state["history"], plot)
