"""Self-play on a Ray cluster (``--backend ray``): actors, each holding the best network on its
device, play the same seeded parts that the worker processes of ``workers`` play, so the games
are the same whatever the backend and the number of workers. The driver writes each returned part
atomically as it comes back: the run folder, its resume and its commit point are the other
backend's. The same actors play the gate's and --eval-vs's match parts (``play_match_parts``, for
``rl.matches``). Ray is imported here only, and only for ``--backend ray`` (``pip install -e ".[ray]"``).

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
busy_seconds = 0.0  # what actors of this process's sessions spent playing (parts written, match parts): a measure


def import_ray():
    """Ray, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError("--backend ray needs Ray: pip install -e \".[ray]\" (or pip install 'ray>=2.9')") from None
    return ray


class _Actor:
    """One actor: the networks it was last sent, on its device, and the parts it plays (self-play's,
    and the gate's and --eval-vs's match parts)."""

    def __init__(self, device: str, threads: int):
        torch.set_num_threads(threads)
        self.device, self.key, self.evaluator = torch.device(device), None, None
        self.nets = {}  # a match's networks by their file's hash (the candidate and the best: two)

    def _net(self, key: str, data: bytes):
        from othello_learn.rl.records import COMMITTED, load_net

        if key not in self.nets:
            if len(self.nets) >= 2:
                self.nets.clear()
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / f"{key}.pt"
                path.write_bytes(data)
                self.nets[key] = load_net(path, self.device, COMMITTED).to(self.device)
        return self.nets[key]

    def play(self, key: str, net: bytes, search, sp, n: int, seed: int):
        """The part's games and the seconds they took (loading a new network included)."""
        start = time.perf_counter()
        from othello_learn.rl.selfplay import play_games
        from othello_learn.search.mcts import Evaluator

        if key != self.key:  # a new best network: loaded once, kept for the parts after
            self.evaluator = Evaluator(self._net(key, net), self.device)
            self.nets.pop(key)  # the evaluator holds it
            self.key = key
        return play_games(self.evaluator, n, search, sp, seed=seed, progress=False), time.perf_counter() - start

    def play_match_part(self, part, a, b, a_net: bytes | None, b_net: bytes | None, cwd: str):
        """A match part's result (``players.arena.play_part``) and the seconds it took. ``a``,
        ``b``: ``rl.matches.LoopPlayer``s, built here with their networks' bytes; ``cwd``: the
        driver's folder, where a program's spec names its files from (when this node has it)."""
        start = time.perf_counter()
        from othello_learn.players.arena import play_part
        from othello_learn.players.base import close_players

        if os.path.isdir(cwd):
            os.chdir(cwd)
        nets = {p.net: self._net(p.net, data) for p, data in ((a, a_net), (b, b_net)) if p.net is not None}
        players = a.build(nets, self.device), b.build(nets, self.device)
        try:
            return play_part(*players, part), time.perf_counter() - start
        finally:
            close_players(*players)


class RayPool:
    """A Ray connection (made here unless one is open already) and the actors started on it."""

    def __init__(self, cfg):
        self.cfg, self.actors, self.started = cfg, [], False
        self.lock, self.replaced = threading.Lock(), {}
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
        remote = ray.remote(num_cpus=1, num_gpus=self.cfg.gpus_per_worker or 0)(_Actor)
        with self.lock:
            while len(self.actors) < workers:
                self.actors.append(remote.remote(self.cfg.device, threads))
            return self.actors[:workers]

    def replace(self, actor, threads: int):
        """A fresh actor in a dead one's place (the same one to both of --async's dispatchers)."""
        ray = import_ray()
        with self.lock:
            if id(actor) in self.replaced:
                return self.replaced[id(actor)][1]
            with contextlib.suppress(Exception):  # dead already, most often
                ray.kill(actor)
            remote = ray.remote(num_cpus=1, num_gpus=self.cfg.gpus_per_worker or 0)(_Actor)
            fresh = remote.remote(self.cfg.device, threads)
            self.actors[self.actors.index(actor)] = fresh
            self.replaced[id(actor)] = (actor, fresh)  # the dead handle kept: its id stays its own
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
    """``todo``'s self-play parts dealt to the pool's actors, each with the network ``best()`` names
    as it starts, and written as it returns; until done or ``stop`` is set."""

    def submit(actor, part):
        now = best()
        return actor.play.remote(now.key, now.ref, search, sp, part[1], part[2]), now

    def done(part, result, now):
        games, seconds = result
        games.network = np.full(len(games.winner), now.network, np.int32)
        games.save(part[0])
        return seconds

    _deal(pool, [(part[0].name, part[1], part) for part in todo], submit, done, workers, threads, "self-play",
          "play the missing parts (finished parts are kept)", progress, stop)


def play_match_parts(cfg, what: str, a, b, nets: dict, plan, workers: int, threads: int) -> list:
    """The results of ``plan``'s parts (``players.arena.plan_match``), played by ``workers`` actors:
    ``a`` against ``b`` (``rl.matches.LoopPlayer``s), with the network files ``nets`` names by hash.
    ``what``: the match, in messages."""
    with ray_session(cfg) as pool:
        pool.connect(workers)
        refs = {key: import_ray().put(path.read_bytes()) for key, path in nets.items()}
        cwd, results = os.getcwd(), {}

        def submit(actor, k):
            return actor.play_match_part.remote(plan.parts[k], a, b, refs.get(a.net), refs.get(b.net), cwd), None

        def done(k, result, _):
            results[k], seconds = result
            return seconds

        n = len(plan.parts)
        _deal(pool, [(f"{what} part {k + 1} of {n}", part.games, k) for k, part in enumerate(plan.parts)], submit,
              done, workers, threads, what, "play the match again", not cfg.quiet)
        return [results[k] for k in range(n)]


def _deal(pool, tasks: list, submit, done, workers: int, threads: int, what: str, rerun: str, progress: bool,
          stop=None) -> None:
    """Each (name, games, task) of ``tasks`` played on one of the pool's actors: ``submit(actor,
    task)`` starts it ((its ref, what ``done`` needs of the start)), ``done(task, result, that)`` keeps
    its result (and says the seconds it took); a task whose actor died goes to a fresh one. Until
    all are done or ``stop`` is set. ``what``: the tasks, in messages; ``rerun``: what a rerun does."""
    from tqdm.auto import tqdm

    from othello_learn.cli import bar_pacing

    ray = import_ray()
    idle, queue, pending, tries = list(pool.take(workers, threads)), list(tasks), {}, {}
    bar = tqdm(total=sum(games for _, games, _ in tasks), unit="game", desc=f"{what} ({workers} Ray actors)",
               disable=not progress,
               file=sys.stderr, **bar_pacing())
    try:
        while (queue or pending) and not (stop is not None and stop.is_set()):
            while queue and idle:
                task, actor = queue.pop(0), idle.pop(0)
                ref, started = submit(actor, task[2])
                pending[ref] = (task, actor, started)
            for ref in _wait(list(pending)):
                task, actor, started = pending.pop(ref)
                name = task[0]
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayActorError as e:  # died: killed, out of memory, its node lost
                    tries[name] = tries.get(name, 0) + 1
                    if tries[name] >= MAX_TRIES:
                        raise UserError(f"{name}: its Ray actor died {MAX_TRIES} times ({type(e).__name__}):"
                                        f" rerun the same command to {rerun}, with fewer --workers if they ran "
                                        "out of memory") from None
                    print(f"{what}: a Ray actor died ({type(e).__name__}); {name} is played again", file=sys.stderr)
                    idle.append(pool.replace(actor, threads))
                    queue.insert(0, task)
                    continue
                except ray.exceptions.RayTaskError as e:  # raised in the actor: the same error here
                    cause = e.cause
                    if isinstance(cause, (UserError, OSError)):
                        why = describe_os_error(cause) if isinstance(cause, OSError) else cause
                        raise UserError(f"{what} actor: {why}") from None
                    raise
                global busy_seconds
                busy_seconds += done(task[2], result, started)
                bar.update(task[1])
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
