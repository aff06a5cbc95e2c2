"""Who plays a generation's self-play parts: this process, ``--workers`` spawned processes, or
``--workers`` Ray actors (``ray_backend``), each playing whole parts (``self_play`` in ``stages`` decides which parts are left to play).
A part is written atomically as it finishes, so a stop or a crash keeps the finished ones."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from pathlib import Path

import torch

from othello_learn.cli import STOP_SIGNALS, StopOnce, bar_pacing, taken
from othello_learn.files import UserError, describe_os_error
from othello_learn.rl.records import COMMITTED, load_net
from othello_learn.rl.selfplay import SelfPlayConfig, play_games
from othello_learn.rl.settings import RunConfig, self_play_workers
from othello_learn.search.gumbel import GumbelConfig
from othello_learn.search.mcts import Evaluator, MCTSConfig

# What stops the loop and its workers: Ctrl-C, SIGTERM and a closed terminal (SIGHUP).
LOOP_STOP_SIGNALS = {signal.SIGINT, *STOP_SIGNALS}


def _search_config(cfg: RunConfig):
    """Self-play's search, as the settings give it (each worker gets it whole)."""
    if cfg.search == "gumbel":
        return GumbelConfig(simulations=cfg.simulations, max_considered=cfg.gumbel_considered,
                            target_q=cfg.policy_target)
    return MCTSConfig(simulations=cfg.simulations, c_puct=cfg.c_puct, dirichlet_weight=cfg.dirichlet_weight,
                      dirichlet_alpha_scale=cfg.dirichlet_alpha_scale, reuse_tree=not cfg.no_tree_reuse)


def play_parts(cfg: RunConfig, best: Path, sp: SelfPlayConfig, todo: list, network: int = 0) -> int:
    """Each (path, games, seed) of ``todo`` played by the network at ``best`` and saved as it
    finishes: in this process, or dealt out to ``--workers`` processes or Ray actors
    (``self_play_workers``). ``network``: the generation whose best network ``best`` is (the Ray
    backend records it in each game; the stage, for the others). How many played them."""
    dev = torch.device(cfg.device)
    workers, threads = self_play_workers(cfg.workers, dev, len(todo))
    if cfg.backend == "ray":  # actors, on this machine or a cluster's nodes
        from othello_learn.rl.ray_backend import play_parts_on_ray

        play_parts_on_ray(cfg, best, network, _search_config(cfg), sp, todo, workers, threads)
    elif workers <= 1:
        _play_into(Evaluator(load_net(best, dev, COMMITTED).to(dev), dev), _search_config(cfg), sp, todo,
                   progress=not cfg.quiet)
    else:
        _play_parts_in_workers(cfg, best, sp, todo, workers, threads)
    return workers


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
    for sig in LOOP_STOP_SIGNALS:  # all but nohup's SIGHUP, which stays ignored (the main process stops us by SIGINT)
        if sig in (signal.SIGINT, signal.SIGTERM) or taken(sig):
            signal.signal(sig, stop)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, LOOP_STOP_SIGNALS)  # one that came meanwhile is raised here
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
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, LOOP_STOP_SIGNALS)
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
