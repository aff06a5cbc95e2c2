"""The AlphaZero loop: self-play, training on a replay window, gating.

    python selfplay/loop.py --init checkpoints/cpu_resnet.pt --out runs/rl --generations 20
    python selfplay/loop.py --init random --out runs/rl_scratch --generations 20

Each generation: the best network plays ``--games`` self-play games (batched
MCTS), the trainee network trains on the last ``--window`` generations of
games, and a match against the best network decides whether it becomes the
best (score above ``--gate-threshold``; ``--continuous`` promotes always).
Each of these stages reads and writes files under OUT, atomically (temporary
file, then rename), self-play in parts, and skips work whose output is already
there, so the process can be killed at any moment: rerunning the same command
resumes where it stopped, without losing or repeating a game (training goes on from
its state, saved every minute); Ctrl-C (exit status 130), SIGTERM (143) or a closed
terminal (SIGHUP, 129) says which generation the rerun resumes from.
Settings marked (fixed) define the run and cannot change on resume.
Per-generation statistics go to OUT/stats, W&B (offline by default) and OUT/elo.png.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
import typing
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from othello_learn.cli import (STOP_SIGNALS, ArgumentParser, StopOnce, bar_pacing, run_main, say_stopped, stop_signals_raise,
                         stop_status, taken)
from othello_learn.files import (NestingError, UserError, atomic_write, check_output, describe_os_error, one_line,
                           parse_nested, remove_stale_temps, temp_target, write_json)
from othello_learn.lock import RunLock
from othello_learn.models.encoders import ENCODERS
from othello_learn.models.fastpath import default_device, device_memory, usable_device
from othello_learn.models.nets import (SIZE_LIMITS, NetConfig, TrainingCheckpointError, build_network, grow_network,
                                       load_network, read_checkpoint, save_network)
from othello_learn.players.arena import MAX_GAMES, play_match
from othello_learn.players.elo import finite_elo
from othello_learn.rl.elo_plot import plot_elo
from othello_learn.search.endgame import MAX_EMPTIES
from othello_learn.search.gumbel import TARGET_Q, GumbelConfig
from othello_learn.rl.learner import MAX_BATCH, OptimizerStateError, TrainingDiverged, policy_sharpness, train_network
from othello_learn.search.mcts import Evaluator, MCTSConfig, tree_capacity
from othello_learn.players.network import PolicyPlayer, check_considered, search_player
from othello_learn.players.base import MAX_SIMULATIONS
from othello_learn.players.specs import make_program
from othello_learn.rl.selfplay import (SAMPLE_BYTES, SAMPLES_PER_GAME, SelfPlayConfig, SelfPlayGames,
                                             calibrate_resign_threshold, false_resign_rate, play_games)
from othello_learn.settings import REQUIRED, Setting
from othello_learn.tracking import start_wandb

# The largest count a setting without a limit of its own may be: a typo's extra digits ended in an
# OverflowError a generation in (numpy's seed spawning), after the run folder was made.
COUNT_CEILING = 2**31 - 1
RANDOM_INIT = {"arch": "resnet", "encoder": "raw", "blocks": 6, "width": 64, "value_head": True}
DEFAULT_SEARCH = "puct"  # for a new run


def opt(default=REQUIRED, help="", *, resumable=False, saved_default=None, kind=None, **limits):
    """A RunConfig field, its ``Setting`` of ``kind`` (by default its default's type) with
    ``limits`` (``low``, ``high``, ``choices``, ...). ``resumable``: a resumed run may change it;
    the others define the run (a change would replay or skip games, or train another net).
    ``saved_default``: what a run folder saved before the field existed used."""
    kind = kind or type(default)
    if kind is int and "low" in limits and "high" not in limits:  # past numpy's and torch's sizes
        limits["high"] = COUNT_CEILING
    return Setting(kind, default, help, **limits).field(resumable=resumable, saved_default=saved_default)


@dataclass
class RunConfig:
    init: str = opt(kind=str, help="exported network with a value head (a .pt: checkpoints/best_*.pt, a training "
                                   "run's model.pt), or 'random'")
    out: Path = opt(kind=Path, help="run folder (resumed if it exists)", resumable=True)
    generations: int = opt(10, "run until this many generations are done", resumable=True, low=1)
    # at most as many games as the arena plays in one match (its MAX_GAMES); check_memory says whether they fit
    games: int = opt(2048, "self-play games per generation", low=1, high=MAX_GAMES)
    # A part is one file of --parallel games: a change mid-generation would replay or skip games.
    parallel: int = opt(512, "games played at once (one part file each)", low=1, high=MAX_GAMES)
    simulations: int = opt(100, "MCTS simulations per move in self-play", low=1, high=MAX_SIMULATIONS)
    # On a CPU the tree search runs in one thread between network calls: processes of one thread each
    # keep every core busy where one process of N threads leaves them waiting (1.40x games/hour on 2 cores:
    # benchmarks/selfplay_workers.py).
    workers: int = opt(0, "self-play processes, each playing whole parts on its share of the CPU threads "
                       "(0: one per thread on a CPU, 1 on a GPU; never more than the parts left)", resumable=True,
                       low=0)
    search: typing.Optional[str] = opt(None, "self-play and gating search (default: the run's own; "
                                       f"{DEFAULT_SEARCH} for a new run). gumbel: Gumbel AlphaZero, the policy "
                                       "target is the improved policy", choices=["puct", "gumbel"], kind=(str, None),
                                       saved_default="puct")
    gumbel_considered: int = opt(0, "root moves sampled by Gumbel-top-k (0: simulations / 4, between 2 and 16)",
                                 resumable=True, low=0)
    policy_target: str = opt("rescaled", "with --search gumbel, how the improved-policy target reads Q: rescaled "
                             "(min-max over the moves, the paper's) or absolute ((Q + 1) / 2: the target sharpens "
                             "in proportion to the values' differences, so the prior turns over-confident more "
                             "slowly; measured: a weaker 1-ply policy, and no better a search once calibrated)",
                             choices=list(TARGET_Q), saved_default="rescaled")
    c_puct: float = opt(1.5, "PUCT exploration constant", resumable=True, low=0, low_open=True)
    dirichlet_weight: float = opt(0.25, "share of Dirichlet noise in the root priors", resumable=True,
                                  low=0, high=1)
    dirichlet_alpha_scale: float = opt(10.0, "alpha = this / number of legal moves", resumable=True,
                                       low=0, low_open=True)
    temperature_plies: int = opt(12, "plies played by visit-count sampling", resumable=True, low=0)
    no_tree_reuse: bool = opt(False, "start each move's search from scratch", resumable=True)
    resign_threshold: float = opt(-0.9, "the first generation's threshold, recalibrated after each generation "
                                  "(a resumed run keeps its calibrated one)", resumable=True,
                                  low=-1, high=1)
    no_resign: bool = opt(False, "never resign", resumable=True)
    no_resign_fraction: float = opt(0.1, "share of games always played out", resumable=True, low=0, high=1)
    solve_empties: int = opt(0, "in self-play, solve positions with at most this many empty squares exactly: "
                             "perfect moves, exact targets (0: off; 10 costs about 0.04 s a game, mostly its first "
                             "solve)", resumable=True, low=0, high=MAX_EMPTIES)
    window: int = opt(4, "generations of games in the replay window", low=1)
    train_steps: int = opt(1000, "training steps per generation", low=1)
    batch_size: int = opt(512, "training batch size", low=1, high=MAX_BATCH)
    lr: float = opt(3e-4, "learning rate", resumable=True, low=0, low_open=True)
    l2: float = opt(1e-4, "L2 weight decay", resumable=True, low=0)
    value_weight: float = opt(1.0, "weight of the value loss beside the policy loss (AlphaZero: 1; below 1 the value "
                              "head moves more slowly towards the replay window's few thousand game results)",
                              resumable=True, low=0, saved_default=1.0)
    keep_optimizer: bool = opt(False, "carry Adam's moments from one generation's training to the next (KataGo's "
                               "loop keeps its optimizer), instead of a fresh Adam each generation", resumable=True,
                               saved_default=False)
    gate_games: int = opt(200, "games of the gating match", resumable=True, low=1, high=MAX_GAMES)
    gate_simulations: int = opt(50, "simulations per move in gating matches", resumable=True,
                                low=1, high=MAX_SIMULATIONS)
    gate_threshold: float = opt(0.55, "score the candidate needs to become the best", resumable=True,
                                low=0, high=1)
    continuous: bool = opt(False, "no gating: the trainee is always the best")
    eval_vs: typing.Optional[str] = opt(None, "also play the candidate network's 1-ply policy against this spec "
                                        "each generation (default: no such match)", resumable=True, kind=(str, None))
    eval_games: int = opt(100, "games of the --eval-vs match", resumable=True, low=1, high=MAX_GAMES)
    arch_blocks: int = opt(RANDOM_INIT["blocks"], "residual blocks, with --init random",
                           low=1, high=SIZE_LIMITS["blocks"])
    arch_width: int = opt(RANDOM_INIT["width"], "channels, with --init random", low=1, high=SIZE_LIMITS["width"])
    arch_encoder: str = opt(RANDOM_INIT["encoder"], "input encoder, with --init random", choices=sorted(ENCODERS))
    grow_blocks: int = opt(0, "residual blocks added on top of the --init network, starting as identities: it plays "
                           "as before, with depth for self-play to fill", low=0, saved_default=0)
    grow_width: int = opt(0, "channels added to every layer of the --init network, read with weight 0 at first: it "
                          "plays as before, with width for self-play to fill", low=0, saved_default=0)
    device: str = opt(default_device(), "torch device", resumable=True)
    seed: int = opt(0, "root of every generation's seeds", low=0, high=2**64, high_open=True)
    logger: str = opt("wandb", "per-generation statistics to W&B, or none", resumable=True, choices=["wandb", "none"])
    wandb_online: bool = opt(False, "stream to your W&B account instead of offline files", resumable=True)
    wandb_project: str = opt("othello-learn-rl", "W&B project", resumable=True)
    quiet: bool = opt(False, "no progress bars", resumable=True)

    @classmethod
    def parser(cls) -> argparse.ArgumentParser:
        ap = ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=_Help,
                            epilog=__doc__.split("\n\n", 1)[1])
        for f in dataclasses.fields(cls):
            setting, flag = f.metadata["setting"], "--" + f.name.replace("_", "-")
            helptext = setting.help + ("" if f.metadata["resumable"] else " (fixed)")
            # ranges and choices are checked by check(), as a run folder's config.json is
            kw = setting.argument(checked=False, help=helptext)
            if f.default is dataclasses.MISSING:
                kw.update(required=True, default=None)
            if setting.kind is Path:
                kw["type"] = Path  # the parser's own reading of a path (an empty one refused)
            ap.add_argument(flag, **kw)
        return ap

    @classmethod
    def from_args(cls, argv=None) -> "RunConfig":
        return cls(**vars(cls.parser().parse_args(argv)))

    @classmethod
    def from_json(cls, saved: dict) -> "RunConfig":
        """A run folder's config.json, from any version: a field it lacks gets
        the value runs had before the field existed (``saved_default``, else
        today's default); a key we do not know is dropped (a resume warns of it)."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        values = {}
        for name, f in known.items():
            if name in saved:
                values[name] = saved[name]
            elif f.metadata["saved_default"] is not None:
                values[name] = f.metadata["saved_default"]
            elif f.default is not dataclasses.MISSING:
                values[name] = f.default
            else:
                values[name] = None
        values["out"] = Path(values["out"]) if values["out"] is not None else None
        return cls(**values)

    def to_json(self) -> dict:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(self).items()}

    def fixed_changes(self, saved: "RunConfig") -> list[str]:
        def same(name, now, then):
            if now == then:
                return True
            return name == "init" and None not in (now, then) and "random" not in (now, then) and same_init(now, then)

        return [f.name for f in dataclasses.fields(self)
                if not f.metadata["resumable"] and not same(f.name, getattr(self, f.name), getattr(saved, f.name))]

    def check(self) -> None:
        """Refuse any setting that would hang (``--simulations 0``), crash later or
        train on nonsense, before anything is loaded, played or written."""
        self.check_values()
        for flag, sims in (("--simulations", self.simulations), ("--gate-simulations", self.gate_simulations)):
            try:
                check_considered(self.gumbel_considered, sims)  # as the gumbel: player spec checks it
            except ValueError as e:
                raise UserError(f"--gumbel-considered {self.gumbel_considered} with {flag} {sims}: {e}") from None
        check_output(self.out, "--out", folder=True)
        self.check_memory(usable_device(self.device))
        for flag, value, instead in (("--grow-blocks", self.grow_blocks, "--arch-blocks"),
                                     ("--grow-width", self.grow_width, "--arch-width")):
            if self.init == "random" and value:
                raise UserError(f"{flag} grows the --init checkpoint's network; with --init random, set {instead}")
        if self.init != "random" and not Path(self.init).is_file():
            what = "a folder, not a checkpoint file" if Path(self.init).is_dir() else "no such checkpoint file"
            raise UserError(f"--init {self.init}: {what} (or give 'random')")
        given = [f"--arch-{k}" for k in ("blocks", "width", "encoder") if getattr(self, f"arch_{k}") != RANDOM_INIT[k]]
        if self.init != "random" and given:  # it was ignored, yet recorded as fixed, so a resume without it was refused
            raise UserError(f"{given[0]} shapes the network of --init random; --init {self.init} brings its own "
                            f"(--grow-blocks / --grow-width add to it)")
        if self.eval_vs:
            try:
                eval_opponent(self.eval_vs).check()
            except UserError as e:
                raise UserError(f"--eval-vs: {e}") from e

    def check_memory(self, device: torch.device) -> None:
        """What a generation allocates, against the memory ``device`` has, before any work: the
        replay window's samples (training holds --window generations of --games games at once, at
        most 60 samples of SAMPLE_BYTES each) and the search trees (--parallel games of
        ``tree_capacity`` nodes in each self-play process at once; a gating match's --gate-games).
        Sizes each within its limit can still be terabytes together."""
        from othello_learn.search.tree import node_bytes

        ram = device_memory(torch.device("cpu"))
        memory = device_memory(device)
        if None in (ram, memory) or None in (self.games, self.parallel, self.window):  # (a resume's unset)
            return
        node = node_bytes()
        workers = self_play_workers(self.workers or 0, device, -(-self.games // self.parallel))[0]
        reuse = not self.no_tree_reuse and self.search != "gumbel"  # Gumbel's trees start afresh
        self_play = MCTSConfig(simulations=self.simulations, reuse_tree=reuse)
        gate = MCTSConfig(simulations=self.gate_simulations, reuse_tree=False)  # _gate_player's: no reuse
        trees = min(self.parallel, self.games) * tree_capacity(self_play) * node * workers
        where = "this machine's" if device.type != "cuda" else f"{device}'s"
        needs = [(self.window * self.games * SAMPLES_PER_GAME * SAMPLE_BYTES, ram, "this machine's",
                  ("window", "games"), "the replay window's samples"),
                 (trees, memory, where, ("parallel", "simulations"),
                  f"self-play's search trees ({workers} process{'es' if workers > 1 else ''} at once)"),
                 (0 if self.continuous else self.gate_games * tree_capacity(gate) * node, memory, where,
                  ("gate_games", "gate_simulations"), "a gating match's search trees")]
        for need, have, whose, names, what in needs:
            if need > have:
                flags = " with ".join(f"--{n.replace('_', '-')} {getattr(self, n)}" for n in names)
                raise UserError(f"{flags}: {what} would take about {need / 2**30:,.1f} GiB, more than {whose} "
                                f"{have / 2**30:,.1f} GiB of memory; give smaller ones")

    def check_values(self) -> None:
        """Each setting of its type, within its limits and choices (``check`` without what needs the
        machine: also asked of a run's config.json, which a hand edit could have put out of range)."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:  # a setting not given (--search: the run's own)
                f.metadata["setting"].check(value, "--" + f.name.replace("_", "-"))


def eval_opponent(spec: str):
    """The --eval-vs player: a program, since the loop runs unattended (a human
    would be asked for moves a whole generation in, and end the run on a quit)."""
    return make_program(spec, "in the loop (it runs unattended)")


def same_init(given: str, saved: str) -> bool:
    """Whether a resumed run's --init names the checkpoint in its config.json:
    the same file by any path, or, where the saved path names no file from
    here, a file of the same name. New runs save the absolute path, but older
    ones saved it as given, relative to a folder they did not record (and a
    file may have moved since); the checkpoint only made generation 0, which
    the run keeps (nets/gen_0000.pt), so its name is all that is left to check."""
    try:
        return os.path.samefile(given, saved)
    except OSError:
        return not os.path.exists(saved) and Path(given).name == Path(saved).name


class _Help(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    def _get_help_string(self, action):
        if action.required or action.default is None:  # None's meaning is in the help text itself
            return action.help
        return super()._get_help_string(action)


# What a rerun does with a file we find broken, by the role the file plays.
REPLAYED = "delete it and rerun the same command: that part is played again"
REDONE = "delete it and rerun the same command: this step of the generation is done again"
COMMITTED = "the run cannot go on without it: restore it from a backup, or start a new --out"


def load_games(path: Path, remedy: str) -> SelfPlayGames:
    """The games at ``path``, or a UserError naming the file and what to do:
    a truncated .npz would otherwise surface as a bare zipfile error."""
    try:
        return SelfPlayGames.load(path)
    except OSError as e:
        raise UserError(f"{describe_os_error(e)}: {remedy}") from e
    except (zipfile.BadZipFile, ValueError, EOFError, KeyError, TypeError) as e:
        why = one_line(e)
        if "pickled" in why:  # numpy's advice to unpickle it: never, for a file that is not what we wrote
            why = "not an array file the loop wrote: it would need unpickling"
        raise UserError(f"{path}: unreadable self-play games, truncated or corrupt ({why}): {remedy}") from e


def load_net(path: Path, dev, remedy: str):
    try:
        return load_network(path, map_location=dev)
    except TrainingCheckpointError:
        raise  # its remedy is in it
    except UserError as e:
        raise UserError(f"{e}: {remedy}") from e
    except OSError as e:  # read_checkpoint makes every damaged file a UserError; this is a missing one
        raise UserError(f"{describe_os_error(e)}: {remedy}") from e


def read_json(path: Path, remedy: str, needs: tuple[str, ...] | None = None):
    """``path``'s JSON; with ``needs``, an object holding those keys (a record the loop wrote),
    so a file edited or replaced by hand is one line naming it, not a KeyError generations on."""
    try:
        data = parse_nested(json.loads, path.read_text())
    except OSError as e:
        raise UserError(f"{describe_os_error(e)}: {remedy}") from e
    except NestingError as e:
        raise UserError(f"{path}: {e}: {remedy}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not valid JSON, truncated or corrupt ({one_line(e)}): {remedy}") from e
    if needs is not None:
        missing = [f"no {k!r}" for k in needs if k not in data] if isinstance(data, dict) else ["not a JSON object"]
        if missing:
            raise UserError(f"{path}: not the record the loop wrote ({missing[0]}): {remedy}")
    return data


STATE_FIELDS = {"generation": int, "best": str, "trainee": str, "elo_best": (int, float), "history": list,
                "wandb_id": str}


# the numbers of a generation's history record that the run reads back (the Elo plot)
HISTORY_NUMBERS = ("elo_best", "gate_score", "elo_candidate", "eval_elo", "eval_score", "eval_games", "eval_elo_low",
                   "eval_elo_high")


def _a_threshold(x) -> bool:
    """A resign threshold as the run files hold it: a finite number, or None (none kept or used)."""
    return x is None or (not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x))


def read_state(path: Path) -> dict:
    """The run's commit point, checked: a state that does not hold together would
    otherwise fail generations later, or silently train the wrong network."""
    remedy = "it is the run's commit point: restore it from a backup, or start a new --out"
    state = read_json(path, remedy)
    if not isinstance(state, dict):
        raise UserError(f"{path}: corrupt run state (not a JSON object): {remedy}")
    for key, kind in STATE_FIELDS.items():
        if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool):
            raise UserError(f"{path}: corrupt run state (no valid {key!r}): {remedy}")
    for key in ("best", "trainee"):  # the run's own nets: publish copies the best over best.pt
        if not re.fullmatch(r"nets/gen_\d{4,}\.pt", state[key]):
            raise UserError(f"{path}: corrupt run state ({key} {state[key]!r} is not one of the run's nets): {remedy}")
    if not all(isinstance(h, dict) for h in state["history"]):
        raise UserError(f"{path}: corrupt run state (a history record is not a JSON object): {remedy}")
    for i, h in enumerate(state["history"], 1):  # what the Elo plot reads, after a whole generation's work
        numbers = [h.get(k) for k in HISTORY_NUMBERS if h.get(k) is not None]
        if (h.get("generation") != i or not isinstance(h.get("promoted"), bool) or "elo_best" not in h
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in numbers)):
            raise UserError(f"{path}: corrupt run state (history record {i} lacks its generation, promotion "
                            f"or Elo, or holds a number that is not one): {remedy}")
    if not math.isfinite(state["elo_best"]):
        raise UserError(f"{path}: corrupt run state (elo_best {state['elo_best']}): {remedy}")
    if not _a_threshold(state.get("resign_threshold", "missing")):
        raise UserError(f"{path}: corrupt run state (no valid 'resign_threshold'): {remedy}")
    if state["generation"] < 0 or len(state["history"]) != state["generation"]:
        raise UserError(f"{path}: corrupt run state (generation {state['generation']} with "
                        f"{len(state['history'])} history records): {remedy}")
    return state


def committed_generation(out: Path) -> int:
    """The last generation state.json commits, 0 when there is none (yet)."""
    try:
        return read_state(out / "state.json")["generation"]
    except UserError:
        return 0


def generation_seeds(cfg: RunConfig, gen: int) -> dict:
    """Independent streams for each generation and stage, from --seed alone: a
    resumed stage draws what the killed one would have, and no two stages or
    parts share a stream (as ad-hoc seed arithmetic can)."""
    ss = np.random.SeedSequence(cfg.seed).spawn(gen)[gen - 1]
    self_play, train, gate, evaluate = ss.spawn(4)
    parts = -(-cfg.games // cfg.parallel)

    def to_int(s):
        return int(s.generate_state(1, np.uint32)[0])
    return {"self_play": [to_int(s) for s in self_play.spawn(parts)], "train": to_int(train), "gate": to_int(gate),
            "eval": to_int(evaluate)}


def initial_network(cfg: RunConfig):
    if cfg.init == "random":
        torch.manual_seed(cfg.seed)
        hp = {**RANDOM_INIT, "blocks": cfg.arch_blocks, "width": cfg.arch_width, "encoder": cfg.arch_encoder}
        try:
            config = NetConfig(**hp)
        except ValueError as e:  # both sizes within their limits, too large together
            raise UserError(f"--arch-blocks {cfg.arch_blocks} --arch-width {cfg.arch_width}: {e}") from None
        return build_network(config).eval()
    net = load_net(Path(cfg.init), "cpu",
                   "give an exported network (checkpoints/best_value.pt, a training run's model.pt), or --init random")
    if getattr(net, "value_head", None) is None:
        raise UserError(f"--init {cfg.init}: self-play needs a network with a value head "
                        "(checkpoints/best_value.pt, or train one with arch: resnet, value_head: true: "
                        "train/configs/cpu_value_fast.yaml on a CPU, resnet_best.yaml on a GPU)")
    if cfg.grow_blocks or cfg.grow_width:
        try:
            grown = dataclasses.replace(net.config, blocks=net.config.blocks + cfg.grow_blocks,
                                        width=net.config.width + cfg.grow_width)
        except ValueError as e:  # grown past nets.SIZE_LIMITS
            raise UserError(f"--grow-blocks {cfg.grow_blocks} / --grow-width {cfg.grow_width} on --init {cfg.init}: "
                            f"the grown network's {e}") from None
        net = grow_network(net, grown, where=f"--init {cfg.init}").eval()
    return net


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


_STOP_SIGNALS = {signal.SIGINT, *STOP_SIGNALS}  # and a closed terminal: SIGHUP


def main(argv=None) -> int:
    cfg = RunConfig.from_args(argv)
    # The first stop signal unwinds as Ctrl-C does (workers stopped); later ones, until the
    # message below is out, are ignored.
    with stop_signals_raise(_STOP_SIGNALS) as stop:
        try:
            run(cfg)
        except KeyboardInterrupt as e:
            stop.caught = True
            # Everything is written atomically, so the rerun finds only whole files.
            g = min(committed_generation(cfg.out) + 1, cfg.generations)
            what, code = stop_status(e)
            say_stopped(f"{Path(sys.argv[0]).name}: {what}; rerun the same command to resume from generation {g}")
            return code
    return 0


def run(cfg: RunConfig) -> dict:
    """Play, train, gate and commit generations until ``--generations`` are done; the final state."""
    cfg.check()
    new = not cfg.out.exists()
    try:
        with RunLock(cfg.out):  # a second loop into this --out is refused, naming the first
            state = open_run(cfg)
            remove_killed_writes(cfg.out)
            publish(cfg, state)  # a run stopped between its commit point and these left them behind
            if state["generation"] >= cfg.generations:
                print(f"{cfg.out} holds {state['generation']} generations already (--generations "
                      f"{cfg.generations}): nothing to do; a larger --generations goes on", file=sys.stderr)
                return state  # before the logger: an idle rerun opens no W&B run
            try:
                log = Logger(cfg, state)
            except UserError:  # --wandb-online without a login: a new run leaves no folder behind
                if new and state["generation"] == 0:
                    _take_back_new_run(cfg.out)
                raise
            try:
                for gen in range(state["generation"] + 1, cfg.generations + 1):
                    self_play(cfg, gen)  # the best network's games: games/gen_N.npz
                    train(cfg, gen)  # the trainee on the replay window: nets/gen_N.pt
                    gate(cfg, gen)  # candidate against the best: stats/gen_N_gate.json
                    state = commit(cfg, gen, log)  # promote, recalibrate resignation: state.json
            finally:
                log.finish()
            return state
    finally:
        if new and cfg.out.is_dir() and not any(cfg.out.iterdir()):  # refused before any file: no folder left
            cfg.out.rmdir()


# The files the loop writes under OUT that are not a generation's (_paths names those).
RUN_TOP_FILES = ("config.json", "state.json", "best.pt", "elo.png")


def _take_back_new_run(out: Path) -> None:
    """Remove what setting up a new run wrote (open_run, publish), before a generation began:
    by name, and its folders only if that leaves them empty (``run`` removes OUT itself)."""
    for name in RUN_TOP_FILES:
        (out / name).unlink(missing_ok=True)
    (out / "nets" / "gen_0000.pt").unlink(missing_ok=True)
    for folder in ("nets", "stats", "games"):
        if (out / folder).is_dir() and not any((out / folder).iterdir()):
            (out / folder).rmdir()


def _is_run_file(name: str) -> bool:
    """Whether ``name`` is one the loop writes, so atomic_path's temporary copies of it are
    ours to remove. A generation's names are derived from _gen_paths, so a new kind of
    generation file is covered; the top-level names and _part_paths' are restated here."""
    if name in RUN_TOP_FILES or re.fullmatch(r"part_\d{3,}\.npz", name):
        return True
    m = re.match(r"gen_(\d{4,})", name)
    return bool(m) and name in {p.name for k, p in _gen_paths(Path(), int(m[1])).items() if k not in ("tag", "parts")}


def remove_killed_writes(out: Path) -> None:
    """The temporary files a run killed outright (kill -9, the out-of-memory killer) left
    mid-write, removed on resume: a generation's games run to tens of MB, and a parts
    folder holding one would never be removed. Called with the run's lock held."""
    folders = [out, out / "nets", out / "stats", out / "games"]
    if (out / "games").is_dir():
        folders += sorted(p for p in (out / "games").iterdir() if p.is_dir() and re.fullmatch(r"gen_\d{4,}", p.name))
    removed = [p for folder in folders for p in remove_stale_temps(folder, _is_run_file)]
    if removed:
        print(f"{out}: removed {len(removed)} temporary file(s) a killed run left half-written "
              f"({', '.join(str(p.relative_to(out)) for p in removed[:3])}{', ...' if len(removed) > 3 else ''})",
              file=sys.stderr)


def open_run(cfg: RunConfig) -> dict:
    """The run's state: a new run folder set up, or an existing one checked
    (same run settings, a readable commit point) before anything is written.
    Settings left unset (None) take the run's own value."""
    out = cfg.out
    for name in RUN_TOP_FILES:  # found now, not after a generation's hour of self-play
        if (out / name).is_dir():
            raise UserError(f"{out / name}: a folder, where the run writes a file: move it, or use another --out")
    for name in ("nets", "stats", "games"):
        if (out / name).exists() and not (out / name).is_dir():
            raise UserError(f"{out / name}: a file, where the run keeps a folder: move it, or use another --out")
    cfg_path, state_path = out / "config.json", out / "state.json"
    if cfg_path.exists():
        saved = read_json(cfg_path, "it records the run's settings: restore it from a backup, or start a new --out")
        if not isinstance(saved, dict):
            raise UserError(f"{cfg_path}: corrupt run settings (not a JSON object): restore it, or start a new --out")
        unknown = sorted(set(saved) - {f.name for f in dataclasses.fields(RunConfig)})
        if unknown:  # a hand edit's typo, or a newer version's setting: said, since it changes nothing here
            print(f"warning: {cfg_path}: {', '.join(map(repr, unknown))} "
                  f"{'is no setting' if len(unknown) == 1 else 'are no settings'} of this version of the loop "
                  "(ignored)", file=sys.stderr)
        try:
            saved = RunConfig.from_json(saved)
            saved.check_values()  # a hand edit: "search": "xyz" ran PUCT without a word
        except (TypeError, UserError) as e:
            raise UserError(f"{cfg_path}: corrupt run settings ({one_line(e)}): restore it, or start a new --out")
        for f in dataclasses.fields(cfg):
            if getattr(cfg, f.name) is None and not f.metadata["resumable"]:
                setattr(cfg, f.name, getattr(saved, f.name))
        _check_gumbel_only(cfg, resumed=cfg.search == saved.search)
        changed = cfg.fixed_changes(saved)
        if changed:
            raise UserError(f"{out} was started with different {', '.join(changed)} "
                            f"({', '.join(f'{k}={getattr(saved, k)!r}' for k in changed)}): rerun with those, "
                            "or use another --out")
        if state_path.exists():
            return read_state(state_path)
        if (out / "games").exists() or (out / "stats").exists():
            raise UserError(f"{state_path} is missing, but {out} holds generations already: restore state.json "
                            "from a backup, or start a new --out")
    elif state_path.exists() or (out / "games").exists() or (out / "stats").exists():
        raise UserError(f"{cfg_path} is missing, but {out} holds a loop run: restore config.json from a "
                        "backup, or start a new --out")
    # (A first config.json cut short by a kill leaves its temporary copy: the folder is still a new
    # run's, and remove_killed_writes clears the copy.)
    elif out.is_dir() and any(p.name != ".lock" and not _is_run_file(temp_target(p.name) or "")
                              for p in out.iterdir()):
        raise UserError(f"--out {out}: the folder is not empty and holds no loop run (no config.json): "
                        "give a new or empty folder")
    # A new run (or one killed before its first commit): the initial network
    # is checked before the first file is written.
    net = initial_network(cfg)
    if cfg.search is None:
        cfg.search = DEFAULT_SEARCH
    _check_gumbel_only(cfg)
    if cfg.init != "random":  # saved absolute: a resume from another folder finds the same file
        cfg.init = os.path.abspath(cfg.init)
    if not cfg_path.exists():
        write_json(cfg_path, cfg.to_json())
    save_network(net, out / "nets" / "gen_0000.pt")
    state = {"generation": 0, "best": "nets/gen_0000.pt", "trainee": "nets/gen_0000.pt", "elo_best": 0.0,
             "resign_threshold": cfg.resign_threshold, "history": [],
             "wandb_id": f"rl-{int(time.time())}-{os.getpid()}"}
    write_json(state_path, state)
    return state


def _check_gumbel_only(cfg: RunConfig, resumed: bool = False) -> None:
    """The Gumbel settings, given to a PUCT run, would be ignored in silence. A resumed run keeps
    the search it started with, so there the remedy is to drop the setting."""
    remedy = ("drop {flag} (a resumed run keeps the search it started with)" if resumed
              else "add --search gumbel")
    if cfg.policy_target != "rescaled" and cfg.search != "gumbel":
        raise UserError(f"--policy-target {cfg.policy_target} sets Gumbel search's improved-policy target, and this "
                        f"run searches with {cfg.search} (its target is the visit counts): "
                        + remedy.format(flag="--policy-target"))
    if cfg.gumbel_considered and cfg.search != "gumbel":
        raise UserError(f"--gumbel-considered {cfg.gumbel_considered} sets how many root moves Gumbel search samples, "
                        f"and this run searches with {cfg.search}: " + remedy.format(flag="--gumbel-considered"))


def _paths(cfg: RunConfig, gen: int) -> dict:
    return _gen_paths(cfg.out, gen)


def _gen_paths(out: Path, gen: int) -> dict:
    tag = f"gen_{gen:04d}"
    return {"tag": tag, "games": out / "games" / f"{tag}.npz", "parts": out / "games" / tag,
            "self_play": out / "stats" / f"{tag}_selfplay.json", "net": out / "nets" / f"{tag}.pt",
            "train": out / "stats" / f"{tag}_train.json", "train_state": out / "nets" / f"{tag}.training",
            "optimizer": out / "nets" / f"{tag}.adam",
            "gate": out / "stats" / f"{tag}_gate.json",
            "record": out / "stats" / f"{tag}.json"}


def _search_config(cfg: RunConfig):
    if cfg.search == "gumbel":
        return GumbelConfig(simulations=cfg.simulations, max_considered=cfg.gumbel_considered,
                            target_q=cfg.policy_target)
    return MCTSConfig(simulations=cfg.simulations, c_puct=cfg.c_puct, dirichlet_weight=cfg.dirichlet_weight,
                      dirichlet_alpha_scale=cfg.dirichlet_alpha_scale, reuse_tree=not cfg.no_tree_reuse)


def _part_paths(cfg: RunConfig, p: dict) -> list[Path]:
    """A generation's self-play parts, ``--parallel`` games each: the only files its clean-up deletes."""
    return [p["parts"] / f"part_{k:03d}.npz" for k in range(len(range(0, cfg.games, cfg.parallel)))]


def _window_paths(cfg: RunConfig, gen: int) -> list[Path]:
    """The committed generations' games that generation ``gen`` trains on beside its own."""
    return [cfg.out / "games" / f"gen_{i:04d}.npz" for i in range(max(1, gen - cfg.window + 1), gen)]


def self_play(cfg: RunConfig, gen: int) -> Path:
    """Generation ``gen``'s games by the best network, played in parts of
    ``--parallel`` games (by ``--workers`` processes at once): a part on disk is
    never played again, the merged file on disk means the stage is done."""
    p = _paths(cfg, gen)
    state = read_state(cfg.out / "state.json")
    if p["parts"].is_symlink():  # its parts would be adopted as played, then deleted where it points
        raise UserError(f"{p['parts']}: a link, not a folder of this run's self-play parts: remove the link "
                        "and rerun the same command")
    if not p["games"].exists():
        threshold = None if cfg.no_resign else calibrated_threshold(state, cfg)  # --no-resign: from any generation on
        print(f"generation {gen}: best {state['best']}, resign threshold "
              f"{'none (--no-resign)' if threshold is None else threshold}", file=sys.stderr)
        dev = torch.device(cfg.device)
        best = cfg.out / state["best"]
        net = load_net(best, dev, COMMITTED).to(dev)  # checked here, before any worker starts
        # What this generation's training reads from earlier ones, checked before the play, not after it.
        for path in _window_paths(cfg, gen):
            load_games(path, COMMITTED)
        if state["trainee"] != state["best"]:  # the same file was read just above
            load_net(cfg.out / state["trainee"], torch.device("cpu"), COMMITTED)
        if cfg.keep_optimizer and _optimizer_file(cfg, state).exists():  # the Adam state the training goes on from
            _trainee_optimizer(cfg, state)
        sp = SelfPlayConfig(temperature_plies=cfg.temperature_plies, resign_threshold=threshold,
                            no_resign_fraction=cfg.no_resign_fraction, solve_empties=cfg.solve_empties)
        seeds = generation_seeds(cfg, gen)["self_play"]
        parts = [(path, min(cfg.parallel, cfg.games - start), seeds[k])
                 for k, (path, start) in enumerate(zip(_part_paths(cfg, p), range(0, cfg.games, cfg.parallel)))]
        kept = {path: load_games(path, REPLAYED) for path, _, _ in parts if path.exists()}  # checked before playing
        todo = [(path, n, seed) for path, n, seed in parts if path not in kept]
        workers, threads = self_play_workers(cfg.workers, dev, len(todo))
        t0 = time.time()
        if workers <= 1:
            _play_into(Evaluator(net, dev), _search_config(cfg), sp, todo, progress=not cfg.quiet)
        else:
            del net
            _play_parts_in_workers(cfg, best, sp, todo, workers, threads)
        seconds = time.time() - t0
        played = sum(n for _, n, _ in todo)
        merged = [kept[path] if path in kept else load_games(path, REPLAYED) for path, _, _ in parts]
        # The record before the merged games, whose file ends the stage: written after them, a kill
        # between the two lost it for good. A rerun that plays nothing keeps the one there.
        if played or not p["self_play"].exists():
            write_json(p["self_play"], {"seconds": seconds, "games_played": played, "workers": workers,
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


def self_play_workers(requested: int, dev: torch.device, parts: int) -> tuple[int, int]:
    """(processes, torch threads each) for ``parts`` parts: ``--workers 0``
    is one single-threaded process per thread torch would use on a CPU, and
    one process on a GPU. Threads are shared out so the total stays that of
    this process (OMP_NUM_THREADS)."""
    total = torch.get_num_threads()
    wanted = requested or (total if dev.type == "cpu" else 1)
    workers = max(1, min(wanted, parts))
    return workers, max(1, total // workers)


def _play_into(ev: Evaluator, search, sp: SelfPlayConfig, parts: list, progress: bool) -> None:
    """Each (path, games, seed) of ``parts`` played and saved, in this process."""
    for path, n, seed in parts:
        play_games(ev, n, search, sp, seed=seed, progress=progress).save(path)


def _stop_when_orphaned(parent: int, every_s: float = 1.0) -> None:
    """A worker's watch on the main process ``parent``: one killed outright (kill -9, the
    out-of-memory killer) cannot stop its workers, which played on alone for the rest of
    their parts (hours at scale), beside the rerun's own and outside its lock. Once the
    parent is gone the worker stops itself as on SIGTERM (its part in progress unwritten)."""
    def watch():
        while os.getppid() == parent:
            time.sleep(every_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent watch", daemon=True).start()


def _play_parts(best: Path, device: str, search, sp: SelfPlayConfig, parts: list, threads: int,
                parent: int | None = None) -> None:
    """A worker process: its share of the parts, each the same games as the
    main process would play for it. Errors are one line and exit status 2
    (the main process names the worker); a stop signal exits quietly (a
    worker killed outright would leave its semaphores behind), and reporting
    it is the main process's business. The worker starts with the stop signals
    blocked (``_play_parts_in_workers``): one sent while it imports waits here."""
    stop = StopOnce()
    for sig in _STOP_SIGNALS:  # all but nohup's SIGHUP, which stays ignored (the main process stops us by SIGINT)
        if sig in (signal.SIGINT, signal.SIGTERM) or taken(sig):
            signal.signal(sig, stop)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # one that came meanwhile is raised here
        if parent is not None:
            _stop_when_orphaned(parent)
        torch.set_num_threads(threads)
        dev = torch.device(device)
        _play_into(Evaluator(load_net(best, dev, COMMITTED).to(dev), dev), search, sp, parts, progress=False)
        if stop.raised is not None:  # swallowed on its way out (stop_signals_raise says where): stopped all the same
            sys.exit(130)
    except KeyboardInterrupt:
        sys.exit(130)
    except (UserError, OSError) as e:
        print(f"self-play worker: error: {describe_os_error(e) if isinstance(e, OSError) else e}", file=sys.stderr)
        sys.exit(2)
    finally:  # nothing left to stop: a late signal must not break into the exit
        stop.done = True


def _play_parts_in_workers(cfg: RunConfig, best: Path, sp: SelfPlayConfig, todo: list, workers: int,
                           threads: int) -> None:
    """The parts in ``todo`` dealt out to ``workers`` processes. Each part is
    written atomically as it finishes, so a crash or Ctrl-C keeps the finished
    ones, and on either the workers are stopped at once (nothing queued plays
    on). Spawned, not forked: a fork of a process whose torch threads are
    running can deadlock. They start with the stop signals blocked (a spawned
    process inherits the mask) and unblock them once they can stop quietly:
    a signal to the whole process group during their seconds of imports would
    otherwise print a traceback, and the main process's stop could be lost."""
    from multiprocessing import resource_tracker

    from tqdm.auto import tqdm

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_play_parts, args=(best, cfg.device, _search_config(cfg), sp, todo[i::workers],
                                                   threads, os.getpid()), name=f"self-play worker {i}")
             for i in range(workers)]
    bar = tqdm(total=sum(n for _, n, _ in todo), unit="game", desc=f"self-play ({workers} processes)",
               disable=cfg.quiet, file=sys.stderr, **bar_pacing())
    try:
        # Started first: starting the resource tracker unblocks SIGINT and SIGTERM (and so would undo this block).
        resource_tracker.ensure_running()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            for proc in procs:
                proc.start()
        finally:  # one that came meanwhile is delivered here
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        while any(proc.is_alive() for proc in procs):
            time.sleep(0.2)
            bar.update(sum(n for path, n, _ in todo if path.exists()) - bar.n)  # a part file is whole
        failed = [proc for proc in procs if proc.exitcode != 0]
        if failed:
            code = failed[0].exitcode
            why = f"killed by signal {-code}, out of memory?" if code < 0 else f"exit status {code}"
            raise UserError(f"{failed[0].name} failed ({why}): rerun the same command to "
                            "play the missing parts again (finished parts are kept), with fewer --workers if it "
                            "ran out of memory")
    finally:
        for proc in procs:  # Ctrl-C (to a worker too): a part being written is left whole or not at all
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGINT)
        for proc in (proc for proc in procs if proc.pid is not None):  # started
            proc.join(timeout=30)
            if proc.is_alive():  # stuck: it ignores signals once stopping
                proc.kill()
                proc.join()
        bar.close()


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
        stats = train_network(trainee, SelfPlayGames.concat(window), cfg.train_steps, cfg.batch_size, cfg.lr,
                              cfg.l2, dev, seed=generation_seeds(cfg, gen)["train"], progress=not cfg.quiet,
                              state_path=p["train_state"], value_weight=cfg.value_weight,
                              optimizer_state=inherited, optimizer_out=p["optimizer"] if cfg.keep_optimizer else None)
    except UserError as e:
        raise UserError(f"{e}: {REDONE}") from e
    except TrainingDiverged as e:  # the same seeds would diverge again: the step size is what can change
        raise UserError(f"generation {gen}: {e}; rerun with a lower --lr (it may change on resume)") from e
    except OptimizerStateError as e:  # the file belongs to another network (a hand-copied nets/ folder)
        raise UserError(f"{_optimizer_file(cfg, state)}: {e}: delete it to train generation {gen} with a fresh "
                        f"Adam") from e
    stats["inherited_optimizer"] = inherited is not None
    stats["window_positions"] = int(sum(len(w.player) for w in window))
    stats.update(policy_sharpness(trainee, window[-1], seed=generation_seeds(cfg, gen)["train"], device=dev))
    # may change on resume: each generation records its own
    stats["lr"], stats["l2_weight"], stats["value_weight"] = cfg.lr, cfg.l2, cfg.value_weight
    save_network(trainee.cpu(), p["net"], generation=gen)
    write_json(p["train"], stats)
    _drop_training_leftovers(cfg, gen)
    return p["net"]


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


def _gate_player(cfg: RunConfig, net, dev: torch.device):
    """Self-play's search (its --c-puct or --gumbel-considered) at --gate-simulations,
    without noise or tree reuse: the gate compares nets, not luck."""
    return search_player(cfg.search, net, cfg.gate_simulations, dev, cfg.gumbel_considered, c_puct=cfg.c_puct)


def gate(cfg: RunConfig, gen: int) -> Path:
    """The match of generation ``gen``'s candidate against the best network
    (none with --continuous), and the optional --eval-vs match."""
    p = _paths(cfg, gen)
    if p["gate"].exists():
        return p["gate"]
    state = read_state(cfg.out / "state.json")
    dev = torch.device(cfg.device)
    seeds = generation_seeds(cfg, gen)
    cand = load_net(p["net"], dev, REDONE)
    if cfg.continuous:
        result = {"games": 0, "score": None, "elo": 0.0, "elo_low": None, "elo_high": None}
    else:
        best = load_net(cfg.out / state["best"], dev, COMMITTED).to(dev)
        a, b = _gate_player(cfg, cand, dev), _gate_player(cfg, best, dev)
        a.name, b.name = p["tag"], state["best"]
        r = play_match(a, b, cfg.gate_games, seed=seeds["gate"], progress=not cfg.quiet)
        result = _match_summary(r)
    if cfg.eval_vs:
        r = play_match(PolicyPlayer(cand, dev), eval_opponent(cfg.eval_vs), cfg.eval_games, seed=seeds["eval"],
                       progress=not cfg.quiet)
        result["eval_vs"] = {"spec": cfg.eval_vs, **_match_summary(r)}
    write_json(p["gate"], result)
    return p["gate"]


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


def gate_elo_gain(result: dict) -> float:
    """The Elo a gate match adds to the run's curve (0 without one: --continuous)."""
    return 0.0 if result["score"] is None else finite_elo(result["elo"], result["score"], result["games"])


def _match_summary(r) -> dict:
    """A gate's or evaluation's record in gate.json: the match's counts and Elo (infinite: null)."""
    d = r.to_dict()
    return {k: d[k] for k in ("games", "wins", "draws", "losses", "score", "elo", "elo_low", "elo_high")}


def cli() -> None:
    """The ``othello-rl`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
