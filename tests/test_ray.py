"""--backend ray: Ray actors play the self-play parts that worker processes play, the same games
part for part, written by the driver; a dead actor's part played again, a stop resumed, a run of
two generations, the gate's and --eval-vs's match parts, --async, a stop to the process group. One
local Ray (2 CPUs) is shared by this module's tests (it takes seconds to start); the last test's
command starts its own."""

import dataclasses
import json
import os
import time

import numpy as np
import pytest
import torch

from othello_learn.files import UserError
from othello_learn.rl import loop as rl_loop
from othello_learn.rl import ray_backend
from othello_learn.rl.selfplay import SelfPlayGames
from test_selfplay import LOOP

ray = pytest.importorskip("ray")
RAY = ["--backend", "ray", "--workers", "2", "--logger", "none"]


@pytest.fixture(scope="module")
def ray_cluster():
    """One local Ray for the module (2 CPUs, loopback); the code joins it rather than starting
    its own, and leaves it up."""
    ray_backend.start_local_ray(2, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """Generation 1's games by one worker process, one thread (the actors run one each)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = rl_loop.RunConfig.from_args(LOOP + ["--out", str(tmp_path_factory.mktemp("p") / "rl"), "--logger", "none"])
        rl_loop.open_run(cfg)
        return SelfPlayGames.load(rl_loop.self_play(cfg, 1))
    finally:
        torch.set_num_threads(threads)


def _same(a: SelfPlayGames, b: SelfPlayGames) -> None:
    for f in dataclasses.fields(SelfPlayGames):
        np.testing.assert_array_equal(getattr(a, f.name), getattr(b, f.name), err_msg=f.name)


def _stage(tmp_path, name: str):
    cfg = rl_loop.RunConfig.from_args(LOOP + ["--out", str(tmp_path / name)] + RAY)
    rl_loop.open_run(cfg)
    return cfg


def test_a_killed_actors_part_is_played_again(ray_cluster, one_process, tmp_path, monkeypatch, capsys):
    real, killed = ray_backend._wait, []

    def kill_one(refs):
        if not killed:  # mid-generation: both actors are playing their first part
            killed.append(ray_backend._open.actors[0])
            ray.kill(killed[0])
        return real(refs)

    monkeypatch.setattr(ray_backend, "_wait", kill_one)
    cfg = _stage(tmp_path, "rl")
    _same(one_process, SelfPlayGames.load(rl_loop.self_play(cfg, 1)))  # the games one process plays
    assert killed and "a Ray actor died" in capsys.readouterr().err
    stats = json.loads((cfg.out / "stats" / "gen_0001_selfplay.json").read_text())
    assert stats["workers"] == 2 and not (cfg.out / "games" / "gen_0001").exists()
    assert ray.is_initialized() and ray_backend._open is None, "the caller's Ray is left up, the actors not"


def test_a_stopped_generation_keeps_its_finished_parts_and_plays_only_the_rest(ray_cluster, one_process, tmp_path,
                                                                              monkeypatch):
    real, calls = ray_backend._wait, []

    def stopped_after_a_part(refs):
        calls.append(len(refs))
        if any((tmp_path / "rl" / "games" / "gen_0001").glob("part_*.npz")):
            raise KeyboardInterrupt
        return real(refs)

    monkeypatch.setattr(ray_backend, "_wait", stopped_after_a_part)
    cfg = _stage(tmp_path, "rl")
    with pytest.raises(KeyboardInterrupt):
        rl_loop.self_play(cfg, 1)
    kept = list((cfg.out / "games" / "gen_0001").glob("part_*.npz"))
    assert len(kept) == 1 and ray_backend._open is None
    calls.clear()
    monkeypatch.setattr(ray_backend, "_wait", lambda refs: (calls.append(len(refs)), real(refs))[1])
    _same(one_process, SelfPlayGames.load(rl_loop.self_play(cfg, 1)))
    assert calls and set(calls) == {1}, "the one part left, played by one actor"


def test_a_two_generation_run_on_ray(ray_cluster, tmp_path, capsys):
    out = tmp_path / "rl"
    assert rl_loop.main(LOOP + ["--out", str(out)] + RAY) == 0
    state = json.loads((out / "state.json").read_text())
    assert state["generation"] == 2 and (out / "best.pt").exists()
    assert ray_backend._open is None and ray.is_initialized()


def test_the_gate_and_eval_matches_are_split_across_the_actors(ray_cluster, tmp_path, monkeypatch):
    """The gate's 6 games and --eval-vs's 5 in parts of 3 (--parallel): the actors play the parts,
    each the games one process plays of it (transcripts equal, hence gate.json). (A dead actor's
    part is dealt again as self-play's is, by the same code: test_a_killed_actors_part_is_played_again.)"""
    from othello_learn.models.nets import load_network, save_network
    from othello_learn.rl import matches

    extra = ["--gate-games", "6", "--eval-vs", "random", "--eval-games", "5", "--gate-simulations", "2"]
    cfgs = {}
    for name, backend in (("local", []), ("ray", RAY)):
        cfg = cfgs[name] = rl_loop.RunConfig.from_args(LOOP + ["--out", str(tmp_path / name), *extra] + backend)
        rl_loop.open_run(cfg)
        net = load_network(cfg.out / "nets" / "gen_0000.pt")
        torch.manual_seed(1)
        with torch.no_grad():  # a candidate unlike the best
            for p in net.parameters():
                p.add_(0.3 * torch.randn_like(p))
        save_network(net, cfg.out / "nets" / "gen_0001.pt")
    parts, real_deal = [], ray_backend._deal
    monkeypatch.setattr(ray_backend, "_deal", lambda pool, tasks, *a, **k: (parts.append([t[0] for t in tasks]),
                                                                          real_deal(pool, tasks, *a, **k))[1])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each of the two actors
    try:
        with ray_backend.ray_session(cfgs["ray"]):  # as the loop runs: one pool of actors for the run's matches
            gates = {name: json.loads(rl_loop.gate(cfg, 1).read_text()) for name, cfg in cfgs.items()}
            path = cfgs["ray"].out / "nets" / "gen_0001.pt"
            a, b = matches.LoopPlayer("cand", matches._key(path), "puct", 2), matches.LoopPlayer("random", spec="random")
            nets = {a.net: (path, load_network(path))}
            results = {name: matches.play(cfg, "test", a, b, nets, 7, seed=3) for name, cfg in cfgs.items()}
    finally:
        torch.set_num_threads(threads)
    assert gates["local"] == gates["ray"] and gates["ray"]["games"] == 6 and gates["ray"]["eval_vs"]["games"] == 5
    assert results["local"].transcripts == results["ray"].transcripts and len(results["ray"].transcripts) == 7
    np.testing.assert_array_equal(results["local"].disc_diffs, results["ray"].disc_diffs)
    assert parts == [["gate part 1 of 2", "gate part 2 of 2"], ["--eval-vs part 1 of 2", "--eval-vs part 2 of 2"],
                     ["test part 1 of 3", "test part 2 of 3", "test part 3 of 3"]]
    assert ray_backend._open is None


def test_ray_flags_need_the_ray_backend(tmp_path):
    for extra in (["--ray-address", "auto"], ["--gpus-per-worker", "0.5"]):
        cfg = rl_loop.RunConfig.from_args(LOOP + ["--out", str(tmp_path / "rl")] + extra)
        with pytest.raises(UserError, match=f"{extra[0]} is for --backend ray"):
            cfg.check()


def test_the_ray_backend_without_ray_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # as if not installed
    cfg = rl_loop.RunConfig.from_args(LOOP + ["--out", str(tmp_path / "rl")] + RAY)
    with pytest.raises(UserError, match=r'pip install -e "\.\[ray\]"'):
        cfg.check()
    assert not (tmp_path / "rl").exists()


def test_async_plays_the_next_generation_while_this_one_trains(ray_cluster, tmp_path, monkeypatch):
    """--async: generation 2's parts start while generation 1 trains; a stop then keeps those written,
    the rerun plays only the rest; each game names the network that played it, and a generation
    trains --train-ratio samples per new sample."""
    out, real_train, real_dispatch, dispatched = tmp_path / "rl", rl_loop.train, ray_backend._dispatch, []
    parts2 = out / "games" / "gen_0002"

    def dispatch(pool, cfg, best, search, sp, todo, *a, **k):
        dispatched.append([path.relative_to(out).as_posix() for path, _, _ in todo])
        return real_dispatch(pool, cfg, best, search, sp, todo, *a, **k)

    def stopped_once_a_part_is_ahead(cfg, gen):
        for _ in range(600):  # generation 2's first part, played while this one would train
            if any(parts2.glob("part_*.npz")):
                break
            time.sleep(0.1)
        raise KeyboardInterrupt

    argv = LOOP + ["--out", str(out), "--async", "--train-ratio", "0.5"] + RAY
    monkeypatch.setattr(ray_backend, "_dispatch", dispatch)
    monkeypatch.setattr(rl_loop, "train", stopped_once_a_part_is_ahead)
    assert rl_loop.main(argv) == 130
    ahead = sorted(p.relative_to(out).as_posix() for p in parts2.glob("part_*.npz"))
    assert ahead and dispatched[-1][0].startswith("games/gen_0002/") and ray_backend._open is None
    dispatched.clear()
    monkeypatch.setattr(rl_loop, "train", real_train)
    assert rl_loop.main(argv) == 0
    assert not set(ahead) & {path for todo in dispatched for path in todo}, "a part kept was played again"
    state = json.loads((out / "state.json").read_text())
    assert state["generation"] == 2
    for gen in (1, 2):
        games = SelfPlayGames.load(out / "games" / f"gen_{gen:04d}.npz")
        assert set(np.unique(games.network)) <= {0, gen - 1}
        stats = json.loads((out / "stats" / f"gen_{gen:04d}_selfplay.json").read_text())
        assert stats["networks"] == sorted(set(np.unique(games.network).tolist()))
        history = state["history"][gen - 1]
        assert history["train_steps"] == -(-len(games.player) // 2 // 16), history  # ratio 0.5, batches of 16


def test_async_needs_the_ray_backend(tmp_path):
    cfg = rl_loop.RunConfig.from_args(LOOP + ["--out", str(tmp_path / "rl"), "--async"])
    with pytest.raises(UserError, match="--async plays on Ray actors: add --backend ray"):
        cfg.check()


@pytest.mark.xdist_group("ray_cluster")
def test_a_stop_to_the_process_group_ends_a_local_ray_run_cleanly(tmp_path):
    """SIGTERM to the whole group (as Ctrl-C at a terminal sends SIGINT): Ray's core had taken SIGTERM
    over (exit 134, a crash report) and its processes died under the driver (exit 1). Now: the
    loop's stop status and line, the finished parts kept, no process of the run left."""
    import signal
    import subprocess
    import sys

    from conftest import REPO

    ray.shutdown()  # the module's (its last test): the command starts its own, and two slowed both
    out = tmp_path / "rl"
    proc = subprocess.Popen([sys.executable, str(REPO / "selfplay" / "loop.py"), *LOOP, "--out", str(out), *RAY,
                             "--games", "12", "--simulations", "16"],  # 4 parts: 2 still to play after the first
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        for _ in range(1200):
            if any((out / "games" / "gen_0001").glob("part_*.npz")) or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()[1]
        os.killpg(proc.pid, signal.SIGTERM)
        err = proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # 143, or 130 where Ray's processes got the signal first and Ray's core interrupted the driver
    said = {143: "terminated", 130: "interrupted"}.get(proc.returncode)
    assert said and f"{said}; rerun the same command to resume from generation 1" in err, err
    assert list((out / "games" / "gen_0001").glob("part_*.npz"))
    for _ in range(50):  # Ray's processes are killed at its shutdown: none of the session left
        left = subprocess.run(["ps", "-o", "pid=", "-s", str(proc.pid)], capture_output=True, text=True,
                              check=False).stdout.split()  # ps exits 1 when it lists none
        if not left:
            break
        time.sleep(0.1)
    assert not left, left
