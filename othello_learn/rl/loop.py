"""The AlphaZero loop: self-play, training on a replay window, gating.

    othello-rl --init checkpoints/cpu_resnet.pt --out runs/rl --generations 20
    othello-rl --init random --out runs/rl_scratch --generations 20

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

A first try, small enough to see every stage (two generations of 32 games; 37 s on 2 idle
cores of an AMD EPYC with bf16, several times that while other jobs keep them busy):

    othello-rl --init random --out runs/try --generations 2 --games 32 --parallel 32 \\
        --simulations 8 --train-steps 20 --gate-games 16 --gate-simulations 8

The defaults are a real run: about 35 minutes a generation for a 4x64 net (--init
checkpoints/best_value.pt) on a 2-core CPU with bf16 (about twice that without), scaled from
docs/results/selfplay.md (~7,000 games/hour at 64 simulations, so 2,048 games at 100 take
~27 minutes; 200 training steps in 45 s, so 1,000 take ~4; the 200-game gate ~2).
"""

from __future__ import annotations

import importlib
import sys
import typing
from pathlib import Path

from othello_learn.cli import run_main, say_stopped, stop_signals_raise, stop_status
from othello_learn.files import UserError
from othello_learn.lock import RunLock
from othello_learn.rl.settings import RunConfig
from othello_learn.run_folder import take_back_new_run

# What the loop runs, imported once a run starts: these modules import torch (seconds), which
# --help and a refused flag need not wait for. Module attributes all the same (rl_loop.self_play),
# for callers and for tests that replace one.
_STAGES = {"othello_learn.rl.records": ("NEW_RUN_FILES", "committed_generation", "open_run", "remove_killed_writes"),
           "othello_learn.rl.stages": ("Logger", "commit", "play_ahead", "publish", "self_play", "train"),
           "othello_learn.rl.matches": ("gate",),
           "othello_learn.rl.workers": ("LOOP_STOP_SIGNALS",),
           "othello_learn.rl.ray_backend": ("ray_session",)}
if typing.TYPE_CHECKING:  # the same names, for readers and linters
    from othello_learn.rl.records import NEW_RUN_FILES, committed_generation, open_run, remove_killed_writes
    from othello_learn.rl.matches import gate
    from othello_learn.rl.ray_backend import ray_session
    from othello_learn.rl.stages import Logger, commit, play_ahead, publish, self_play, train
    from othello_learn.rl.workers import LOOP_STOP_SIGNALS


def __getattr__(name: str):
    for module, names in _STAGES.items():
        if name in names:
            value = globals()[name] = getattr(importlib.import_module(module), name)
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _import_stages() -> None:
    """The stages as this module's globals, where not set already (a test's replacement stays)."""
    for names in _STAGES.values():
        for name in names:
            if name not in globals():
                __getattr__(name)


def build_parser():
    """The command's parser (the command reference in docs/ is generated from it)."""
    return RunConfig.parser(__doc__)


def main(argv=None) -> int:
    cfg = RunConfig.from_args(argv, __doc__)
    _import_stages()
    # The first stop signal unwinds as Ctrl-C does (workers stopped); later ones, until the
    # message below is out, are ignored.
    with stop_signals_raise(LOOP_STOP_SIGNALS) as stop:
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
    _import_stages()
    cfg.check()
    new = not cfg.out.exists()
    set_up = ()  # what a new run refused before its first generation takes back with OUT
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
                set_up = NEW_RUN_FILES
                raise
            try:
                with ray_session(cfg):  # --backend ray: one Ray session for the run, closed however it ends
                    for gen in range(state["generation"] + 1, cfg.generations + 1):
                        self_play(cfg, gen)  # the best network's games: games/gen_N.npz
                        if cfg.async_ and gen < cfg.generations:
                            play_ahead(cfg, gen + 1)  # the actors play on while this generation trains and gates
                        train(cfg, gen)  # the trainee on the replay window: nets/gen_N.pt
                        gate(cfg, gen)  # candidate against the best: stats/gen_N_gate.json
                        state = commit(cfg, gen, log)  # promote, recalibrate resignation: state.json
            finally:
                log.finish()
            return state
    finally:
        if new:  # refused before any file, or before its first generation: no folder left
            take_back_new_run(cfg.out, set_up)


def cli() -> None:
    """The ``othello-rl`` console script; ``python -m`` and the script path run the same."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    cli()
