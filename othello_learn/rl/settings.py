"""The RL run's settings: ``RunConfig``, one field per ``othello-rl`` flag (``opt``: its
``Setting``, with help, limits and choices, and whether a resumed run may change it), the parser
built from it, and its checks before any work, in the one wording of ``othello_learn/settings.py``;
a run folder keeps them as config.json."""

from __future__ import annotations

import argparse
import dataclasses
import os
import typing
from dataclasses import dataclass
from pathlib import Path

from othello_learn.cli import ArgumentParser
from othello_learn.files import UserError, check_output
from othello_learn.settings import REQUIRED, Setting, imported

if typing.TYPE_CHECKING:
    import torch

# The settings' ceilings are read from their homes at the check, and two lists of choices (which
# --help shows) are restated here: those homes import torch, which --help needs not wait for (a
# test keeps these in step).
ENCODER_NAMES = ("handcrafted", "raw")  # sorted(models.encoders.ENCODERS)
POLICY_TARGETS = ("rescaled", "absolute")  # search.gumbel.TARGET_Q
MAX_GAMES = imported("othello_learn.players.arena", "MAX_GAMES")
MAX_SIMULATIONS = imported("othello_learn.players.base", "MAX_SIMULATIONS")


def _size(key: str):
    return imported("othello_learn.models.nets", "SIZE_LIMITS", lambda limits: limits[key])


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
    parallel: int = opt(512, "games played at once: a self-play part (one file each), or a part of a gating or "
                             "--eval-vs match", low=1, high=MAX_GAMES)
    simulations: int = opt(100, "MCTS simulations per move in self-play", low=1, high=MAX_SIMULATIONS)
    # On a CPU the tree search runs in one thread between network calls: processes of one thread each
    # keep every core busy where one process of N threads leaves them waiting (1.40x games/hour on 2 cores:
    # benchmarks/selfplay_workers.py).
    workers: int = opt(0, "self-play processes, each playing whole parts on its share of the CPU threads "
                       "(0: one per thread on a CPU, 1 on a GPU; never more than the parts left)", resumable=True,
                       low=0)
    backend: str = opt("processes", "who plays the self-play parts: --workers local processes, or --workers Ray actors, "
                       "which play the gate's and --eval-vs's match parts too (ray: pip install -e '.[ray]'; a local "
                       "Ray unless --ray-address)", resumable=True,
                       choices=["processes", "ray"], saved_default="processes")
    ray_address: typing.Optional[str] = opt(None, "with --backend ray, the cluster to join ('auto': the one `ray start` "
                                            "made on this node; default: start a local Ray, stopped at the end)",
                                            resumable=True, kind=(str, None))
    gpus_per_worker: float = opt(0.0, "with --backend ray, the GPUs each actor takes (0.25: four actors a GPU; 0: "
                                 "actors on CPUs)", resumable=True, low=0, saved_default=0.0)
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
                             choices=list(POLICY_TARGETS), saved_default="rescaled")
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
                             "solve)", resumable=True, low=0,
                             high=imported("othello_learn.search.endgame", "MAX_EMPTIES"))
    # A generation stays --games games, its training, its gate and its commit (state.json): with --async the
    # next generation's parts are played while this one trains and gates (docs/selfplay.md#asynchronous-self-play).
    async_: bool = opt(False, "with --backend ray, the actors play the next generation's parts with the newest "
                       "best network while this one trains and gates (reloaded as a commit promotes another); its "
                       "training takes --train-ratio training samples per new sample instead of --train-steps",
                       resumable=True, saved_default=False)
    # 2: the shipped CPU recipe's ratio (200 steps of 512 on 1024 games of about 55 positions: 1.8), so a
    # position is trained on about twice while in the window; KataGo and EfficientZero throttle likewise.
    train_ratio: float = opt(2.0, "with --async, training samples per new self-play sample (the steps of a "
                             "generation: this x its positions / --batch-size)", resumable=True,
                             low=0, low_open=True, saved_default=2.0)
    window: int = opt(4, "generations of games in the replay window", low=1)
    train_steps: int = opt(1000, "training steps per generation", low=1)
    batch_size: int = opt(512, "training batch size", low=1, high=imported("othello_learn.rl.learner", "MAX_BATCH"))
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
                           low=1, high=_size("blocks"))
    arch_width: int = opt(RANDOM_INIT["width"], "channels, with --init random", low=1, high=_size("width"))
    arch_encoder: str = opt(RANDOM_INIT["encoder"], "input encoder, with --init random", choices=list(ENCODER_NAMES))
    grow_blocks: int = opt(0, "residual blocks added on top of the --init network, starting as identities: it plays "
                           "as before, with depth for self-play to fill", low=0, saved_default=0)
    grow_width: int = opt(0, "channels added to every layer of the --init network, read with weight 0 at first: it "
                          "plays as before, with width for self-play to fill", low=0, saved_default=0)
    device: typing.Optional[str] = opt(None, "torch device (default: cuda where torch sees a GPU, else cpu)",
                                       resumable=True, kind=(str, None))  # None: set at once (__post_init__)
    seed: int = opt(0, "root of every generation's seeds", low=0, high=2**64, high_open=True)
    logger: str = opt("wandb", "per-generation statistics to W&B, or none", resumable=True, choices=["wandb", "none"])
    wandb_online: bool = opt(False, "stream to your W&B account instead of offline files", resumable=True)
    wandb_project: str = opt("othello-learn-rl", "W&B project", resumable=True)
    quiet: bool = opt(False, "no progress bars", resumable=True)

    def __post_init__(self):
        if self.device is None:  # the default, known only to torch: not imported for --help
            from othello_learn.models.fastpath import default_device

            self.device = default_device()

    @classmethod
    def parser(cls, doc: str = "") -> argparse.ArgumentParser:
        """``doc``: the command's text (the loop module's docstring), its first paragraph the
        description and the rest the epilog."""
        description, _, epilog = doc.partition("\n\n")
        ap = ArgumentParser(description=description, formatter_class=_Help, epilog=epilog or None)
        for f in dataclasses.fields(cls):
            setting, flag = f.metadata["setting"], _flag(f.name)
            helptext = setting.help + ("" if f.metadata["resumable"] else " (fixed)")
            # ranges and choices are checked by check(), as a run folder's config.json is
            kw = setting.argument(checked=False, help=helptext)
            if f.default is dataclasses.MISSING:
                kw.update(required=True, default=None)
            if setting.kind is Path:
                kw["type"] = Path  # the parser's own reading of a path (an empty one refused)
            ap.add_argument(flag, dest=f.name, **kw)
        return ap

    @classmethod
    def from_args(cls, argv=None, doc: str = "") -> "RunConfig":
        return cls(**vars(cls.parser(doc).parse_args(argv)))

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
        from othello_learn.models.fastpath import usable_device
        from othello_learn.players.network import check_considered

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
        if self.backend != "ray" and (self.ray_address is not None or self.gpus_per_worker):
            flag = "--ray-address" if self.ray_address is not None else "--gpus-per-worker"
            raise UserError(f"{flag} is for --backend ray (this run's is {self.backend})")
        if self.async_ and self.backend != "ray":
            raise UserError("--async plays on Ray actors: add --backend ray (pip install -e \".[ray]\")")
        if self.backend == "ray":
            from othello_learn.rl.ray_backend import import_ray

            import_ray()
        if self.eval_vs:
            try:
                eval_opponent(self.eval_vs).check()
            except UserError as e:
                raise UserError(f"--eval-vs: {e}") from e

    def check_memory(self, device: torch.device) -> None:
        """What a generation allocates, against the memory ``device`` has, before any work: the
        replay window's samples (training holds --window generations of --games games at once, at
        most 60 samples of SAMPLE_BYTES each) and the search trees (--parallel games of
        ``tree_capacity`` nodes in each self-play process at once; a gating match's --gate-games,
        at most --parallel at once in each process).
        Sizes each within its limit can still be terabytes together."""
        import torch

        from othello_learn.models import fastpath
        from othello_learn.rl.selfplay import SAMPLE_BYTES, SAMPLES_PER_GAME
        from othello_learn.search.mcts import MCTSConfig, tree_capacity
        from othello_learn.search.tree import node_bytes

        ram = fastpath.device_memory(torch.device("cpu"))
        memory = fastpath.device_memory(device)
        if None in (ram, memory) or None in (self.games, self.parallel, self.window):  # (a resume's unset)
            return
        node = node_bytes()
        workers = self_play_workers(self.workers or 0, device, -(-self.games // self.parallel))[0]
        reuse = not self.no_tree_reuse and self.search != "gumbel"  # Gumbel's trees start afresh
        self_play = MCTSConfig(simulations=self.simulations, reuse_tree=reuse)
        gate = MCTSConfig(simulations=self.gate_simulations, reuse_tree=False)  # the gate's players: no reuse
        trees = min(self.parallel, self.games) * tree_capacity(self_play) * node * workers
        where = "this machine's" if device.type != "cuda" else f"{device}'s"
        needs = [(self.window * self.games * SAMPLES_PER_GAME * SAMPLE_BYTES, ram, "this machine's",
                  ("window", "games"), "the replay window's samples"),
                 (trees, memory, where, ("parallel", "simulations"),
                  f"self-play's search trees ({workers} process{'es' if workers > 1 else ''} at once)"),
                 # a match is played a part of --parallel games at a time, one part in each Ray actor
                 (0 if self.continuous else min(self.parallel, self.gate_games) * tree_capacity(gate) * node
                  * (workers if self.backend == "ray" else 1), memory, where,
                  ("gate_games" if self.gate_games <= self.parallel else "parallel", "gate_simulations"),
                  "a gating match's search trees")]
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
                f.metadata["setting"].check(value, _flag(f.name))


def _flag(name: str) -> str:
    """A field's flag: ``async_`` (a Python keyword without its underscore) is ``--async``."""
    return "--" + name.rstrip("_").replace("_", "-")


def eval_opponent(spec: str):
    """The --eval-vs player: a program, since the loop runs unattended (a human
    would be asked for moves a whole generation in, and end the run on a quit)."""
    from othello_learn.players.specs import make_program

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


def self_play_workers(requested: int, dev: torch.device, parts: int) -> tuple[int, int]:
    """(processes, torch threads each) for ``parts`` parts: ``--workers 0``
    is one single-threaded process per thread torch would use on a CPU, and
    one process on a GPU. Threads are shared out so the total stays that of
    this process (OMP_NUM_THREADS)."""
    import torch

    total = torch.get_num_threads()
    wanted = requested or (total if dev.type == "cpu" else 1)
    workers = max(1, min(wanted, parts))
    return workers, max(1, total // workers)
