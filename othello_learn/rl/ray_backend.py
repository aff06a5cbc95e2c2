"""Self-play on a Ray cluster (``--backend ray``): actors, each holding the best network on its
device, play the same seeded parts that the worker processes of ``workers`` play, so the games
are the same whatever the backend and the number of workers. The driver writes each returned part
atomically as it comes back: the run folder, its resume and its commit point are the other
backend's. Ray is imported here only, and only for ``--backend ray`` (``pip install -e ".[ray]"``).

One Ray session serves a whole run (``ray_session`` in ``loop.run``): actors start once and keep
the network until a commit promotes another. A part whose actor died is played again on a fresh
actor; a stop keeps the parts written and kills the actors; a local Ray this module started is
shut down however the command ends."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

from othello_learn.files import UserError, describe_os_error

MAX_TRIES = 3  # plays of one part before the stage gives up: an actor dying that often is no accident

_open = None  # the RayPool of the ray_session now open, if any
busy_seconds = 0.0  # what actors of this process's sessions spent playing the parts written (a measure)


def import_ray():
    """Ray, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError("--backend ray needs Ray: pip install -e \".[ray]\" (or pip install 'ray>=2.9')") from None
    return ray


class _SelfPlayActor:
    """One self-play actor: the network it was last sent, on its device, and the parts it plays."""

    def __init__(self, device: str, threads: int):
        torch.set_num_threads(threads)
        self.device, self.key, self.evaluator = torch.device(device), None, None

    def play(self, key: str, net: bytes, search, sp, n: int, seed: int):
        """The part's games and the seconds they took (loading a new network included)."""
        start = time.perf_counter()
        from othello_learn.rl.records import COMMITTED, load_net
        from othello_learn.rl.selfplay import play_games
        from othello_learn.search.mcts import Evaluator

        if key != self.key:  # a new best network: loaded once, kept for the parts after
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "best.pt"
                path.write_bytes(net)
                self.evaluator = Evaluator(load_net(path, self.device, COMMITTED).to(self.device), self.device)
            self.key = key
        return play_games(self.evaluator, n, search, sp, seed=seed, progress=False), time.perf_counter() - start


class RayPool:
    """A Ray connection (made here unless one is open already) and the actors started on it."""

    def __init__(self, cfg):
        self.cfg, self.actors, self.started = cfg, [], False
        self.ahead = None  # --async: (generation, thread, stop, its error) of the parts played ahead

    def connect(self, workers: int) -> None:
        ray = import_ray()
        if ray.is_initialized():  # the caller's connection (a notebook's, the tests' shared one): theirs to close
            return
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        common = {"logging_level": "warning", "log_to_driver": False, "configure_logging": False}
        # Ray's core takes SIGTERM over as it starts (a crash report, exit 134): the loop's own handlers
        # are put back, so a stop still unwinds as Ctrl-C does (parts kept, actors killed, exit 143).
        # Ray's processes start with the stop signals blocked (they inherit the mask): a signal to the
        # whole process group (Ctrl-C at the terminal) killed them under the driver, which Ray's core
        # then ended with exit status 1 before it could stop; the driver's shutdown ends them instead
        # (one that unblocks them and dies first makes Ray's core interrupt the driver: a Ctrl-C stop).
        stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        handlers = ({sig: signal.getsignal(sig) for sig in stops}
                    if threading.current_thread() is threading.main_thread() else {})
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
        try:
            if self.cfg.ray_address:
                ray.init(address=self.cfg.ray_address, **common)
            else:
                start_local_ray(max(workers, os.cpu_count() or 1), **common)
        except ConnectionError as e:
            raise UserError(f"--ray-address {self.cfg.ray_address}: {e}") from None
        finally:  # one that came meanwhile is delivered here, to the loop's handler
            for sig, handler in handlers.items():
                if handler is not None:
                    signal.signal(sig, handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        self.started = True

    def take(self, workers: int, threads: int) -> list:
        """``workers`` actors (started now if fewer are up)."""
        ray = import_ray()
        remote = ray.remote(num_cpus=1, num_gpus=self.cfg.gpus_per_worker or 0)(_SelfPlayActor)
        while len(self.actors) < workers:
            self.actors.append(remote.remote(self.cfg.device, threads))
        return self.actors[:workers]

    def replace(self, actor, threads: int):
        """A fresh actor in a dead one's place."""
        ray = import_ray()
        with contextlib.suppress(Exception):  # dead already, most often
            ray.kill(actor)
        remote = ray.remote(num_cpus=1, num_gpus=self.cfg.gpus_per_worker or 0)(_SelfPlayActor)
        fresh = remote.remote(self.cfg.device, threads)
        self.actors[self.actors.index(actor)] = fresh
        return fresh

    def close(self) -> None:
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return
        try:
            for actor in self.actors:  # nothing queued plays on
                with contextlib.suppress(Exception):  # one already gone (its node lost) leaves the others to kill
                    ray.kill(actor)
        finally:
            self.actors = []
            if self.started:  # a local Ray's processes stop with it; a cluster's stay up for its next driver
                ray.shutdown()


def start_local_ray(num_cpus: int, **options) -> None:
    """A Ray on this machine alone: on loopback (Ray binds the machine's address otherwise, for nodes
    that could join; its switch for that is the one it uses on macOS and Windows, read by the processes
    it starts and, in this one, at its import), no dashboard, usage statistics off, its workers
    importing this checkout's code (an installed copy may be another version)."""
    import ray
    from ray._private import ray_constants

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    switch, before = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    cluster, ray_constants.ENABLE_RAY_CLUSTER, os.environ[switch] = ray_constants.ENABLE_RAY_CLUSTER, False, "0"
    try:
        ray.init(num_cpus=num_cpus, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": path}},
                 **options)
    finally:  # for this process's later connections
        ray_constants.ENABLE_RAY_CLUSTER = cluster
        if before is None:
            del os.environ[switch]
        else:
            os.environ[switch] = before


@contextlib.contextmanager
def ray_session(cfg):
    """The run's Ray pool while the block runs (nested: the open one); nothing of it is left after."""
    global _open
    if _open is not None or cfg.backend != "ray":
        yield _open
        return
    _open = RayPool(cfg)
    try:
        yield _open
    finally:
        try:
            finish_ahead()  # --async: the parts played ahead stop (those written are kept)
        finally:
            pool, _open = _open, None
            pool.close()


def _wait(refs: list):
    """The first of ``refs`` to finish, if one does within a second (apart so a test can kill an
    actor while the parts play)."""
    return import_ray().wait(refs, num_returns=1, timeout=1.0)[0]


class Best:
    """The network the next part is played with, as the actors get it: its hash (an actor reloads
    on a new one), its bytes in the object store, and its generation (recorded in each game)."""

    def __init__(self, path: Path, network: int):
        data = path.read_bytes()
        self.path, self.network = path, network
        self.key, self.ref = hashlib.sha256(data).hexdigest(), import_ray().put(data)


def play_parts_on_ray(cfg, best: Path, network: int, search, sp, todo: list, workers: int, threads: int) -> None:
    """Each (path, games, seed) of ``todo`` played by ``workers`` actors with the network at ``best``
    (generation ``network``'s) and written here as it returns."""
    with ray_session(cfg) as pool:
        pool.connect(workers)
        now = Best(best, network)
        _dispatch(pool, cfg, lambda: now, search, sp, todo, workers, threads, progress=not cfg.quiet)


def _dispatch(pool, cfg, best, search, sp, todo: list, workers: int, threads: int, progress: bool,
              stop=None) -> None:
    """``todo``'s parts dealt to the pool's actors, each with the network ``best()`` names as it
    starts, and written as it returns; until done or ``stop`` is set."""
    from tqdm.auto import tqdm

    from othello_learn.cli import bar_pacing

    ray = import_ray()
    idle, queue, pending, tries = list(pool.take(workers, threads)), list(todo), {}, {}
    bar = tqdm(total=sum(n for _, n, _ in todo), unit="game", desc=f"self-play ({workers} Ray actors)",
               disable=not progress, file=sys.stderr, **bar_pacing())
    try:
        while (queue or pending) and not (stop is not None and stop.is_set()):
            while queue and idle:
                part, actor, now = queue.pop(0), idle.pop(0), best()
                pending[actor.play.remote(now.key, now.ref, search, sp, part[1], part[2])] = (part, actor, now)
            for ref in _wait(list(pending)):
                part, actor, now = pending.pop(ref)
                try:
                    games, seconds = ray.get(ref)
                except ray.exceptions.RayActorError as e:  # died: killed, out of memory, its node lost
                    tries[part] = tries.get(part, 0) + 1
                    if tries[part] >= MAX_TRIES:
                        raise UserError(f"{part[0].name}: its Ray actor died {MAX_TRIES} times ({type(e).__name__}):"
                                        " rerun the same command to play the missing parts (finished parts "
                                        "are kept), with fewer --workers if they ran out of memory") from None
                    print(f"self-play: a Ray actor died ({type(e).__name__}); {part[0].name} is played again",
                          file=sys.stderr)
                    idle.append(pool.replace(actor, threads))
                    queue.insert(0, part)
                    continue
                except ray.exceptions.RayTaskError as e:  # raised in the actor: the same error here
                    cause = e.cause
                    if isinstance(cause, (UserError, OSError)):
                        why = describe_os_error(cause) if isinstance(cause, OSError) else cause
                        raise UserError(f"self-play actor: {why}") from None
                    raise
                games.network = np.full(len(games.winner), now.network, np.int32)
                games.save(part[0])
                global busy_seconds
                busy_seconds += seconds
                bar.update(part[1])
                idle.append(actor)
    finally:  # a stop or an error: the parts still playing are dropped unwritten (the session kills the actors)
        bar.close()


def play_ahead(cfg, gen: int, parts: list, sp, search, workers: int, threads: int, best) -> None:
    """--async: generation ``gen``'s ``parts`` played in the background (a thread of this process
    dealing them to the actors) while this generation trains and gates; ``best()`` is read as each
    part starts, so a commit's new best network plays the parts from then on."""
    pool = _open
    pool.connect(workers)
    stop, failed = threading.Event(), []

    def run():
        try:
            _dispatch(pool, cfg, best, search, sp, parts, workers, threads, progress=False, stop=stop)
        except BaseException as e:  # noqa: BLE001 - raised again in the main thread (finish_ahead)
            failed.append(e)

    thread = threading.Thread(target=run, name=f"self-play ahead (generation {gen})", daemon=True)
    pool.ahead = (gen, thread, stop, failed)
    thread.start()


def finish_ahead(gen: int | None = None) -> None:
    """Wait for the parts played ahead (for generation ``gen``; None: stop them, as the run ends)
    and raise what stopped them."""
    pool = _open
    if pool is None or pool.ahead is None:
        return
    ahead_gen, thread, stop, failed = pool.ahead
    if gen is None or gen != ahead_gen:
        stop.set()
    thread.join()
    pool.ahead = None
    if failed and gen is not None:
        raise failed[0]
