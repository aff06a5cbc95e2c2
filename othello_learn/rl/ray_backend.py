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
import sys
import tempfile
from pathlib import Path

import torch

from othello_learn.files import UserError, describe_os_error

MAX_TRIES = 3  # plays of one part before the stage gives up: an actor dying that often is no accident

_open = None  # the RayPool of the ray_session now open, if any


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
        from othello_learn.rl.records import COMMITTED, load_net
        from othello_learn.rl.selfplay import play_games
        from othello_learn.search.mcts import Evaluator

        if key != self.key:  # a new best network: loaded once, kept for the parts after
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "best.pt"
                path.write_bytes(net)
                self.evaluator = Evaluator(load_net(path, self.device, COMMITTED).to(self.device), self.device)
            self.key = key
        return play_games(self.evaluator, n, search, sp, seed=seed, progress=False)


class RayPool:
    """A Ray connection (made here unless one is open already) and the actors started on it."""

    def __init__(self, cfg):
        self.cfg, self.actors, self.started = cfg, [], False

    def connect(self, workers: int) -> None:
        ray = import_ray()
        if ray.is_initialized():  # the caller's connection (a notebook's, the tests' shared one): theirs to close
            return
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        common = {"logging_level": "warning", "log_to_driver": False, "configure_logging": False}
        try:
            if self.cfg.ray_address:
                ray.init(address=self.cfg.ray_address, **common)
            else:  # a local Ray on loopback, its workers importing this checkout's code
                root = str(Path(__file__).resolve().parents[2])
                path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
                ray.init(num_cpus=max(workers, os.cpu_count() or 1), include_dashboard=False,
                         _node_ip_address="127.0.0.1", runtime_env={"env_vars": {"PYTHONPATH": path}}, **common)
        except ConnectionError as e:
            raise UserError(f"--ray-address {self.cfg.ray_address}: {e}") from None
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
        import_ray().kill(actor)
        ray = import_ray()
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
                ray.kill(actor)
        finally:
            self.actors = []
            if self.started:  # a local Ray's processes stop with it; a cluster's stay up for its next driver
                ray.shutdown()


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
        pool, _open = _open, None
        pool.close()


def _wait(refs: list):
    """The first of ``refs`` to finish (apart so a test can kill an actor while the parts play)."""
    return import_ray().wait(refs, num_returns=1)[0]


def play_parts_on_ray(cfg, best: Path, search, sp, todo: list, workers: int, threads: int) -> None:
    """Each (path, games, seed) of ``todo`` played by ``workers`` actors and written here as it returns."""
    from tqdm.auto import tqdm

    from othello_learn.cli import bar_pacing

    with ray_session(cfg) as pool:
        ray = import_ray()
        pool.connect(workers)
        data = best.read_bytes()
        key, net = hashlib.sha256(data).hexdigest(), ray.put(data)
        idle, queue, pending, tries = list(pool.take(workers, threads)), list(todo), {}, {}
        bar = tqdm(total=sum(n for _, n, _ in todo), unit="game", desc=f"self-play ({workers} Ray actors)",
                   disable=cfg.quiet, file=sys.stderr, **bar_pacing())
        try:
            while queue or pending:
                while queue and idle:
                    part, actor = queue.pop(0), idle.pop(0)
                    pending[actor.play.remote(key, net, search, sp, part[1], part[2])] = (part, actor)
                for ref in _wait(list(pending)):
                    part, actor = pending.pop(ref)
                    try:
                        games = ray.get(ref)
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
                    games.save(part[0])
                    bar.update(part[1])
                    idle.append(actor)
        finally:  # a stop or an error: the parts still playing are dropped unwritten (the session kills the actors)
            bar.close()
