"""The RL loop's run settings (RunConfig) and seeds: no games played."""

import dataclasses
import json
import re

import numpy as np
import pytest
import torch

from othello_learn.files import UserError
from othello_learn.models import fastpath
from othello_learn.rl import elo_plot
from othello_learn.rl import loop as rl_loop
from othello_learn.rl import records as rl_records
from othello_learn.rl import stages as rl_stages
from othello_learn.rl import workers as rl_workers
from othello_learn.rl.records import generation_seeds
from othello_learn.rl.settings import RunConfig

BASE = ["--init", "random", "--out", "runs/x"]


def test_the_command_line_is_the_dataclass():
    ap = RunConfig.parser()
    flags = {a.dest: a for a in ap._actions if a.dest not in ("help", "debug")}  # debug: run_main's
    assert set(flags) == {f.name for f in dataclasses.fields(RunConfig)}
    for f in dataclasses.fields(RunConfig):
        if f.default is not dataclasses.MISSING:
            assert flags[f.name].default == f.default, f.name
    text = ap.format_help()
    assert "(default: 2048)" in text and "(default: othello-learn-rl)" in text
    assert "self-play games per generation (fixed)" in text
    options = text.split("options:")[1]
    assert "(default: None)" not in options.split("--generations")[0], "required flags have no default to show"
    cfg = RunConfig.from_args(BASE + ["--games", "8", "--no-resign", "--lr", "0.01", "--search", "gumbel"])
    assert (cfg.games, cfg.no_resign, cfg.lr, cfg.search, cfg.init) == (8, True, 0.01, "gumbel", "random")


def test_which_settings_may_change_on_resume_is_a_property_of_the_field():
    saved = RunConfig.from_args(BASE)
    fixed = {f.name for f in dataclasses.fields(RunConfig) if not f.metadata["resumable"]}
    assert {"games", "parallel", "simulations", "window", "seed", "search", "init"} <= fixed
    assert not {"generations", "out", "lr", "device", "quiet"} & fixed
    for name in ("generations", "lr", "gate_games"):
        changed = dataclasses.replace(saved, **{name: getattr(saved, name) * 2})
        assert changed.fixed_changes(saved) == []
    assert dataclasses.replace(saved, parallel=7, window=9).fixed_changes(saved) == ["parallel", "window"]


def test_the_saved_config_round_trips_and_old_ones_still_load():
    cfg = RunConfig.from_args(BASE + ["--games", "8"])
    cfg.search = "puct"
    assert RunConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
    # A config.json from before --search and --gumbel-considered, with a setting since removed.
    old = {k: v for k, v in cfg.to_json().items() if k not in ("search", "gumbel_considered")}
    old["some_removed_flag"] = 3
    back = RunConfig.from_json(old)
    assert back.search == "puct" and back.gumbel_considered == 0 and back.games == 8
    assert back.fixed_changes(cfg) == []


def test_a_resumed_run_fills_unset_fixed_settings_from_its_own(tmp_path, monkeypatch, capsys):
    out = tmp_path / "rl"
    base = ["--init", "random", "--out", str(out), "--generations", "1", "--arch-blocks", "1", "--arch-width", "8",
            "--logger", "none", "--search", "gumbel"]
    seen = []
    for stage in ("self_play", "train", "gate"):
        monkeypatch.setattr(rl_loop, stage, lambda cfg, gen: None)
    monkeypatch.setattr(rl_loop, "commit", lambda cfg, gen, log=None: (seen.append(cfg.search),
                                                                        rl_records.read_state(cfg.out / "state.json"))[1])
    assert rl_loop.main(base) == 0
    assert json.loads((out / "config.json").read_text())["search"] == "gumbel"
    assert rl_loop.main(base[:-2]) == 0 and seen == ["gumbel", "gumbel"], "no --search: the run's own"
    assert "no setting" not in capsys.readouterr().err, "a config.json of known keys: no warning"
    saved = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**saved, "simulation": 64}))  # a hand edit's typo
    assert rl_loop.main(base) == 0
    assert "config.json: 'simulation' is no setting of this version of the loop (ignored)" in capsys.readouterr().err
    (out / "config.json").write_text(json.dumps({**saved, "simulation": 64, "gamez": 3}))
    assert rl_loop.main(base) == 0
    assert "config.json: 'gamez', 'simulation' are no settings of this version" in capsys.readouterr().err
    with pytest.raises(UserError, match="search"):
        rl_loop.main(base[:-1] + ["puct"])


def test_the_policy_target_reaches_the_search_and_needs_gumbel(tmp_path):
    cfg = RunConfig.from_args(BASE + ["--search", "gumbel", "--policy-target", "absolute"])
    assert rl_workers._search_config(cfg).target_q == "absolute"
    assert RunConfig.from_json({"init": "random", "out": "x"}).policy_target == "rescaled", "runs from before the flag"
    with pytest.raises(UserError, match="^--policy-target absolute .* searches with puct .*: add --search gumbel"):
        rl_loop.main(["--init", "random", "--out", str(tmp_path / "rl"), "--policy-target", "absolute"])
    assert not (tmp_path / "rl").exists(), "refused before anything is written"
    # so is the number of moves Gumbel search samples, which PUCT would ignore in silence
    with pytest.raises(UserError, match="^--gumbel-considered 4 sets .* searches with puct: add --search gumbel"):
        rl_loop.main(["--init", "random", "--out", str(tmp_path / "rl"), "--gumbel-considered", "4"])
    assert not (tmp_path / "rl").exists()
    # a resumed PUCT run keeps its search: there the remedy is to drop the setting
    run = tmp_path / "puct"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(RunConfig.from_args(BASE + ["--out", str(run), "--search",
                                                                            "puct"]).to_json()))
    with pytest.raises(UserError, match=r"^--gumbel-considered 4 .* searches with puct: drop --gumbel-considered "
                                        r"\(a resumed run keeps the search it started with\)$"):
        rl_loop.main(BASE + ["--out", str(run), "--gumbel-considered", "4"])


@pytest.mark.parametrize("flag,value", [("--search", "alphabeta"), ("--logger", "csv"), ("--arch-encoder", "x"),
                                        ("--policy-target", "sharp")])
def test_choices_are_checked_with_one_line_naming_the_flag(flag, value):
    cfg = RunConfig.from_args(BASE + [flag, value])
    with pytest.raises(UserError, match=f"^{flag}: expected one of"):
        cfg.check()


@pytest.mark.parametrize("extra,where", [(["--gumbel-considered", "1"], "--simulations"),
                                         (["--simulations", "64", "--gumbel-considered", "60"], "--gate-simulations 50")])
def test_gumbel_considered_is_checked_as_the_player_spec_checks_it(extra, where):
    cfg = RunConfig.from_args(BASE + extra)
    with pytest.raises(UserError, match=f"^--gumbel-considered .* with {where}.*considered moves must be"):
        cfg.check()
    RunConfig.from_args(BASE + ["--gumbel-considered", "0"]).check()  # automatic: always fine


@pytest.mark.parametrize("flag", ["--simulations", "--gate-simulations"])
def test_simulations_have_the_arena_specs_ceiling(flag):
    """A search tree per game is allocated whole: a typo's extra digits ended in an allocation
    error a generation in (the gating match's), not in one line before anything ran."""
    with pytest.raises(UserError, match=f"^{flag}: must be at most 100000, got 1000000$"):
        RunConfig.from_args(BASE + [flag, "1000000"]).check_values()
    RunConfig.from_args(BASE + [flag, "100000"]).check_values()


@pytest.mark.parametrize("flag,most", [("--games", 1_000_000), ("--parallel", 1_000_000), ("--gate-games", 1_000_000),
                                       ("--eval-games", 1_000_000), ("--batch-size", 2**20)])
def test_self_play_sizes_have_the_arenas_ceiling(flag, most):
    """2**31-1 games, games at once or a batch of them were accepted and allocated (17 GB, 16 GiB), in a
    traceback; a match's games have the arena's ceiling, a batch the training config's."""
    with pytest.raises(UserError, match=f"^{flag}: must be at most {most}, got 2147483647$"):
        RunConfig.from_args(BASE + [flag, "2147483647"]).check_values()
    RunConfig.from_args(BASE + [flag, str(most)]).check_values()


@pytest.mark.parametrize("extra,said", [
    (["--games", "1000000", "--parallel", "1000"],
     r"--window 4 with --games 1000000: the replay window's samples would take about 35\.1 GiB"),
    (["--games", "100000", "--parallel", "100000", "--window", "1"],
     r"--parallel 100000 with --simulations 100: self-play's search trees \(1 process at once\) would take"),
    (["--games", "80000", "--parallel", "20000", "--window", "1", "--workers", "4"],  # each process its own trees
     r"--parallel 20000 with --simulations 100: self-play's search trees \(4 processes at once\)"),
    (["--gate-games", "100000", "--gate-simulations", "100", "--parallel", "100000", "--games", "1000"],
     r"--gate-games 100000 with --gate-simulations 100: a gating match's search trees would take"),
    (["--gate-games", "100000", "--gate-simulations", "400", "--parallel", "50000", "--games", "1000"],
     r"--parallel 50000 with --gate-simulations 400: a gating match's search trees would take"),  # a part at a time
])
def test_a_generation_that_cannot_fit_in_memory_is_refused_before_any_work(tmp_path, monkeypatch, capsys, extra, said):
    from othello_learn.cli import run_main

    def no_work(cfg):
        raise AssertionError("the run began")

    monkeypatch.setattr(fastpath, "device_memory", lambda device: 8 * 2**30)
    monkeypatch.setattr(rl_loop, "open_run", no_work)
    out = tmp_path / "rl"
    argv = ["--init", "random", "--out", str(out), "--device", "cpu", "--logger", "none", "--quiet"]
    assert run_main(rl_loop.main, argv + extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(said + r".*, more than this machine's 8\.0 GiB of memory", err), err
    assert not out.exists()
    RunConfig.from_args(argv).check_memory(torch.device("cpu"))  # the defaults fit, with room to spare


def test_seeds_are_independent_streams_per_generation_stage_and_part():
    cfg = RunConfig.from_args(BASE + ["--games", "10", "--parallel", "4"])
    s1, s2 = generation_seeds(cfg, 1), generation_seeds(cfg, 2)
    assert len(s1["self_play"]) == 3
    every = s1["self_play"] + s2["self_play"] + [s[k] for s in (s1, s2) for k in ("train", "gate", "eval")]
    assert len(set(every)) == len(every)
    assert generation_seeds(cfg, 2) == s2, "the same seeds when a run resumes"
    # They are SeedSequence's spawned children, not arithmetic on --seed.
    expected = np.random.SeedSequence(0).spawn(2)[1].spawn(4)[1].generate_state(1, np.uint32)[0]
    assert s2["train"] == int(expected)
    other = generation_seeds(dataclasses.replace(cfg, seed=1), 2)
    assert not set(other["self_play"]) & set(s2["self_play"])


def test_grow_deepens_and_widens_the_warm_start_without_changing_its_play(tmp_path):
    import torch

    from othello_learn.models.batch import from_arrays
    from othello_learn.models.nets import NetConfig, build_network, save_network

    torch.manual_seed(0)
    source = build_network(NetConfig("resnet", encoder="handcrafted", blocks=1, width=8, value_head=True)).eval()
    for m in source.modules():  # trained-looking batch norms, so an identity block is not trivially one
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    ckpt = tmp_path / "warm.pt"
    save_network(source, ckpt)
    cfg = RunConfig.from_args(["--init", str(ckpt), "--out", str(tmp_path / "rl"), "--grow-blocks", "2",
                               "--grow-width", "8"])
    cfg.check()
    grown = rl_records.initial_network(cfg)
    assert grown.config.blocks == 3 and grown.config.width == 16
    rng = np.random.default_rng(1)
    player = rng.integers(0, 2**63, 16, dtype=np.uint64) & np.uint64(0x00FFFF0000FFFF00)
    opponent = rng.integers(0, 2**63, 16, dtype=np.uint64) & ~player & np.uint64(0x0000FFFFFFFF0000)
    batch = from_arrays(player, opponent, rng.integers(0, 2, 16).astype(bool), np.full((16, 4), -1), "cpu")
    with torch.no_grad():
        a, b = source(batch), grown(batch)
    assert torch.allclose(a["policy"], b["policy"], atol=1e-5) and torch.allclose(a["value"], b["value"], atol=1e-5)
    for flag in ("blocks", "width"):
        with pytest.raises(UserError, match=f"--grow-{flag} .*--arch-{flag}"):
            RunConfig.from_args(BASE + [f"--grow-{flag}", "1"]).check()
    # --arch-* with a checkpoint was ignored, yet recorded as fixed: a resume without it was refused
    for flag, value in (("--arch-blocks", "3"), ("--arch-width", "16"), ("--arch-encoder", "handcrafted")):
        with pytest.raises(UserError, match=f"{flag} shapes the network of --init random; --init {ckpt}"):
            RunConfig.from_args(["--init", str(ckpt), "--out", str(tmp_path / "rl2"), flag, value]).check()
    old = RunConfig.from_json({"init": "random", "out": "x"})
    assert (old.grow_blocks, old.grow_width, old.value_weight) == (0, 0, 1.0), "runs from before the flags"


def test_a_run_resumes_from_another_folder_with_its_init_named_another_way(tmp_path, monkeypatch):
    """config.json saves --init absolute, so a resume from another folder compares
    the right file; an older run's path, saved relative to a folder it did not
    record, is matched by the file's name where it names no file from here."""
    from othello_learn.models.nets import NetConfig, build_network, save_network

    for stage in ("self_play", "train", "gate"):
        monkeypatch.setattr(rl_loop, stage, lambda cfg, gen: None)
    monkeypatch.setattr(rl_loop, "commit", lambda cfg, gen, log=None: rl_records.read_state(cfg.out / "state.json"))
    repo, elsewhere, out = tmp_path / "repo", tmp_path / "elsewhere", tmp_path / "rl"
    (repo / "checkpoints").mkdir(parents=True)
    elsewhere.mkdir()
    net = build_network(NetConfig("resnet", encoder="raw", blocks=1, width=8, value_head=True))
    for folder in (repo, elsewhere):
        save_network(net, folder / "checkpoints" / "warm.pt" if folder == repo else folder / "warm.pt")
    save_network(net, elsewhere / "other.pt")

    def loop(init):
        return rl_loop.main(["--init", init, "--out", str(out), "--generations", "1", "--logger", "none", "--quiet"])

    monkeypatch.chdir(repo)
    assert loop("checkpoints/warm.pt") == 0
    assert json.loads((out / "config.json").read_text())["init"] == str(repo / "checkpoints" / "warm.pt")
    monkeypatch.chdir(elsewhere)
    assert loop(str(repo / "checkpoints" / "warm.pt")) == 0 and loop("../repo/checkpoints/warm.pt") == 0
    with pytest.raises(UserError, match=r"different init \(init='/"):
        loop("warm.pt")  # the same name, but the saved file is there to compare: another file

    # A run folder from before: its init as given, relative to the folder it was started from.
    saved = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**saved, "init": "checkpoints/warm.pt"}))
    assert loop(str(repo / "checkpoints" / "warm.pt")) == 0 and loop("warm.pt") == 0
    with pytest.raises(UserError, match=r"different init \(init='checkpoints/warm.pt'\)"):
        loop("other.pt")
    monkeypatch.chdir(repo)  # from where the saved path names a file, that file it is
    with pytest.raises(UserError, match="different init"):
        loop(str(elsewhere / "warm.pt"))
    assert loop("checkpoints/warm.pt") == 0


def _record(generation: int) -> dict:
    """The least history record state.json holds (what the Elo plot reads)."""
    return {"generation": generation, "promoted": False, "elo_best": 0.0}


def _generation_2_to_commit(tmp_path, score: float, elo: float):
    """A run folder committed through generation 1 (best gen_0001 at Elo +40, resign threshold
    -0.9) with generation 2's games, net, training and gate files written, ready to commit.
    Its 200 games are played out, two samples each (black to move, then white), values 0.3, but:
    in games 0-19 black's value fell to -0.975 and black won (false resigns at thresholds above
    it); games 20-119 white won, 120-199 were drawn."""
    from othello_learn.models.nets import NetConfig, build_network, save_network
    from othello_learn.rl.selfplay import SelfPlayGames

    out = tmp_path / "rl"
    for d in ("nets", "games", "stats"):
        (out / d).mkdir(parents=True)
    save_network(build_network(NetConfig(arch="resnet", encoder="raw", blocks=1, width=8, value_head=True)),
                 out / "nets" / "gen_0002.pt")
    n = 200
    winner = np.zeros(n, np.int8)
    winner[:20], winner[20:120] = 1, -1
    game = np.repeat(np.arange(n), 2)
    black = np.tile([True, False], n)
    value = np.full(2 * n, 0.3, np.float16)
    value[0:40:2] = -0.975
    empty = np.zeros(2 * n)
    SelfPlayGames(player=empty.astype(np.uint64), opponent=empty.astype(np.uint64), history=np.zeros((2 * n, 4), np.int8),
                  black_to_move=black, policy=np.zeros((2 * n, 64), np.float16),
                  outcome=(winner[game] * np.where(black, 1, -1)).astype(np.int8), ply=game.astype(np.uint8) * 0,
                  game=game.astype(np.int32), value=value, winner=winner, disc_diff=winner * 2,
                  resigned=np.zeros(n, bool), no_resign=np.ones(n, bool), length=np.full(n, 60, np.int16),
                  ).save(out / "games" / "gen_0002.npz")
    (out / "stats" / "gen_0002_train.json").write_text(json.dumps({"loss": 1.5}))
    (out / "stats" / "gen_0002_gate.json").write_text(json.dumps({"games": 20, "score": score, "elo": elo}))
    (out / "state.json").write_text(json.dumps({
        "generation": 1, "best": "nets/gen_0001.pt", "trainee": "nets/gen_0001.pt", "elo_best": 40.0,
        "history": [{"generation": 1, "promoted": True, "elo_best": 40.0}], "wandb_id": "x", "resign_threshold": -0.9}))
    return RunConfig.from_args(["--init", "random", "--out", str(out)])


@pytest.mark.parametrize("score, elo, promoted", [(0.55, 34.9, False), (0.6, 70.4, True)])
def test_a_commit_promotes_above_the_gate_threshold_and_recalibrates_resignation(tmp_path, monkeypatch, score, elo,
                                                                                   promoted):
    """The candidate becomes the best only with a gate score strictly above --gate-threshold
    (0.55); the curve's best Elo moves with it, the candidate's always. The record counts the
    results by colour and the false resigns at the threshold the generation played with
    (20 of 200 at -0.9); the next threshold is the highest of the grid whose Wilson bound stays
    under 5 %: -0.98, just above the falls to -0.975 (at 10 % false resigns, the bound is 0.14)."""
    published = []
    monkeypatch.setattr(rl_stages, "publish", lambda cfg, state: published.append(state))
    cfg = _generation_2_to_commit(tmp_path, score, elo)
    state = rl_loop.commit(cfg, 2)
    assert published == [state] and state == json.loads((cfg.out / "state.json").read_text())
    assert state["generation"] == 2 and state["trainee"] == "nets/gen_0002.pt"
    assert state["best"] == ("nets/gen_0002.pt" if promoted else "nets/gen_0001.pt")
    assert state["elo_best"] == pytest.approx(40.0 + elo if promoted else 40.0)
    assert state["resign_threshold"] == pytest.approx(-0.98)
    record = state["history"][-1]
    assert record == json.loads((cfg.out / "stats" / "gen_0002.json").read_text())
    assert record["promoted"] is promoted and record["elo_candidate"] == pytest.approx(40.0 + elo)
    assert (record["games"], record["positions"], record["resigned"], record["mean_length"]) == (200, 400, 0.0, 60.0)
    assert (record["black_wins"], record["white_wins"], record["draws"]) == (0.1, 0.5, 0.4)
    assert (record["resign_threshold"], record["false_resign_rate"], record["false_resign_sample"]) == (-0.9, 0.1, 200)


@pytest.mark.parametrize("window,gen,expected", [(4, 6, [3, 4, 5]), (4, 2, [1]), (1, 5, []), (2, 3, [2]), (3, 1, [])])
def test_the_window_is_the_generation_and_the_window_minus_one_committed_before_it(window, gen, expected):
    """--window 4 at generation 6: its own games and generations 3, 4, 5 (four in all); never
    generation 0, which has no games."""
    cfg = RunConfig.from_args(BASE + ["--window", str(window)])
    assert rl_records._window_paths(cfg, gen) == [cfg.out / "games" / f"gen_{i:04d}.npz" for i in expected]


def test_an_infinite_value_is_named_as_one():
    """--lr inf read "must be more than 0, got inf"."""
    with pytest.raises(UserError, match="^--lr: must be a finite number, got inf$"):
        RunConfig.from_args(BASE + ["--lr", "inf"]).check_values()
    # a count of 400 digits passed, made the run folder, then overflowed in numpy a generation in
    with pytest.raises(UserError, match="^--train-steps: must be at most 2147483647, got 1000"):
        RunConfig.from_args(BASE + ["--train-steps", "1" + "0" * 400]).check_values()
    with pytest.raises(UserError, match="^--arch-width: must be at most 4096, got 5000$"):
        RunConfig.from_args(BASE + ["--arch-width", "5000"]).check_values()
    with pytest.raises(UserError, match="^--arch-blocks: must be at most 1000, got 1001$"):
        RunConfig.from_args(BASE + ["--arch-blocks", "1001"]).check_values()
    with pytest.raises(UserError, match="^--train-steps: must be at most 2147483647, got 2147483648$"):
        RunConfig.from_args(BASE + ["--train-steps", "2147483648"]).check_values()
    RunConfig.from_args(BASE + ["--train-steps", "2147483647"]).check_values()
    with pytest.raises(UserError, match="^--simulations: must be at most 100000, got 1000"):  # not an overflow
        RunConfig.from_args(BASE + ["--simulations", "1" + "0" * 400]).check_values()


def test_a_diverged_training_names_the_generation_and_the_remedy(tmp_path, monkeypatch):
    from othello_learn.rl.learner import TrainingDiverged

    def diverged(*args, **kwargs):
        raise TrainingDiverged("training diverged at step 3 of 5 (loss nan)")

    monkeypatch.setattr(rl_stages, "train_network", diverged)
    argv = ["--init", "random", "--out", str(tmp_path / "rl"), "--generations", "1", "--games", "2", "--parallel", "2",
            "--simulations", "2", "--train-steps", "5", "--arch-blocks", "1", "--arch-width", "8", "--quiet",
            "--logger", "none"]
    with pytest.raises(UserError, match=r"^generation 1: training diverged at step 3 of 5 \(loss nan\); rerun with "
                                        r"a lower --lr \(it may change on resume\)$"):
        rl_loop.main(argv)


def test_a_network_grown_past_the_size_limits_is_one_line(tmp_path):
    with pytest.raises(UserError, match=r"^--grow-blocks 0 / --grow-width 5000 on --init \S+: the grown network's "
                                        r"width: must be at most 4096, got 5064$"):
        rl_loop.main(["--init", "checkpoints/best_value.pt", "--out", str(tmp_path / "rl"), "--grow-width", "5000"])
    assert not (tmp_path / "rl").exists()
    with pytest.raises(UserError, match=r"^--arch-blocks 1000 --arch-width 4096: blocks 1000 with width 4096: about "
                                        r"301,989,888,000 weights, more than 1,073,741,824"):  # each within its limit
        rl_loop.main(["--init", "random", "--out", str(tmp_path / "rl"), "--arch-blocks", "1000",
                      "--arch-width", "4096"])
    assert not (tmp_path / "rl").exists()


@pytest.mark.parametrize("flag,value", [("--dirichlet-weight", "1"), ("--solve-empties", "14"),
                                        ("--gate-threshold", "1"), ("--resign-threshold", "-1"),
                                        ("--resign-threshold", "1"), ("--no-resign-fraction", "0"), ("--seed", "18446744073709551615")])
def test_a_limit_itself_is_allowed_where_inclusive(flag, value):
    RunConfig.from_args(BASE + [flag, value]).check_values()


def _state(**changes):
    base = {"generation": 1, "best": "nets/gen_0000.pt", "trainee": "nets/gen_0001.pt", "elo_best": 0.0,
            "history": [{"generation": 1, "promoted": False, "elo_best": 0.0}], "wandb_id": "abc",
            "resign_threshold": -0.9}
    return {**base, **changes}


@pytest.mark.parametrize("changes,said", [({"generation": True, "history": [{}]}, "no valid 'generation'"),
                                          ({"elo_best": True}, "no valid 'elo_best'"),
                                          ({"best": "../elsewhere.pt"}, "best '../elsewhere.pt' is not one of"),
                                          ({"trainee": "nets/gen_1.pt"}, "trainee 'nets/gen_1.pt' is not one of"),
                                          ({"resign_threshold": False}, "no valid 'resign_threshold'"),
                                          ({"resign_threshold": float("nan")}, "no valid 'resign_threshold'"),
                                          ({"generation": 2}, "generation 2 with 1 history records"),
                                          # the Elo plot read these after a whole generation, in a traceback
                                          ({"history": [{}]}, "history record 1 lacks its generation"),
                                          ({"history": [{"generation": 1, "promoted": False, "elo_best": "x"}]},
                                           "holds a number that is not one")])
def test_a_state_out_of_shape_is_refused_by_what_is_wrong(tmp_path, changes, said):
    path = tmp_path / "state.json"
    path.write_text(json.dumps(_state()))
    assert rl_records.read_state(path)["generation"] == 1
    path.write_text(json.dumps(_state(**changes)))
    with pytest.raises(UserError, match="corrupt run state") as e:
        rl_records.read_state(path)
    assert said in str(e.value)


def _tiny_games(n: int):
    """``n`` drawn games of two positions each (black to move, then white)."""
    from othello_learn.rl.selfplay import SelfPlayGames

    game = np.repeat(np.arange(n), 2)
    zeros = np.zeros(2 * n)
    return SelfPlayGames(player=zeros.astype(np.uint64), opponent=zeros.astype(np.uint64),
                         history=np.zeros((2 * n, 4), np.int8), black_to_move=np.tile([True, False], n),
                         policy=np.zeros((2 * n, 64), np.float16), outcome=np.zeros(2 * n, np.int8),
                         ply=np.zeros(2 * n, np.uint8), game=game.astype(np.int32), value=np.zeros(2 * n, np.float16),
                         winner=np.zeros(n, np.int8), disc_diff=np.zeros(n, np.int8), resigned=np.zeros(n, bool),
                         no_resign=np.ones(n, bool), length=np.full(n, 60, np.int16))


def _run_at(tmp_path, generation: int, extra=()):
    from othello_learn.models.nets import NetConfig, build_network, save_network

    out = tmp_path / "rl"
    for d in ("nets", "games", "stats"):
        (out / d).mkdir(parents=True, exist_ok=True)
    save_network(build_network(NetConfig(arch="resnet", encoder="raw", blocks=1, width=8, value_head=True)),
                 out / "nets" / "gen_0000.pt")
    (out / "state.json").write_text(json.dumps({
        "generation": generation, "best": "nets/gen_0000.pt", "trainee": "nets/gen_0000.pt", "elo_best": 0.0,
        "history": [_record(g) for g in range(1, generation + 1)], "wandb_id": "x", "resign_threshold": None}))
    return RunConfig.from_args(["--init", "random", "--out", str(out), "--device", "cpu", "--quiet", *extra])


def test_training_reads_the_window_and_records_its_positions(tmp_path, monkeypatch):
    """--window 2 at generation 3: generations 2 and 3 (5 and 7 games: 24 positions), not 1's."""
    cfg = _run_at(tmp_path, 2, ["--window", "2"])
    for gen, n in ((1, 3), (2, 5), (3, 7)):
        _tiny_games(n).save(cfg.out / "games" / f"gen_{gen:04d}.npz")
    seen = []
    monkeypatch.setattr(rl_stages, "train_network", lambda net, games, *a, **k: seen.append(len(games.player)) or {})
    monkeypatch.setattr(rl_stages, "policy_sharpness", lambda *a, **k: {})
    rl_loop.train(cfg, 3)
    stats = json.loads((cfg.out / "stats" / "gen_0003_train.json").read_text())
    assert seen == [24] and stats["window_positions"] == 24


def test_training_takes_its_settings_and_files_from_the_run(tmp_path, monkeypatch):
    """The loop's flags reach the training as one TrainSettings (--train-steps, --batch-size, --lr,
    --l2, --value-weight, the generation's seed), the run's files as one Resume (nets/gen_N.training,
    with --keep-optimizer nets/gen_N.adam), on --device."""
    from othello_learn.rl.learner import Resume, TrainSettings

    cfg = _run_at(tmp_path, 0, ["--train-steps", "3", "--batch-size", "4", "--lr", "2e-3", "--l2", "3e-4",
                                "--value-weight", "0.7", "--keep-optimizer"])
    _tiny_games(3).save(cfg.out / "games" / "gen_0001.npz")
    seen = []
    monkeypatch.setattr(rl_stages, "train_network", lambda *a, **k: seen.append((a[2:], k)) or {})
    monkeypatch.setattr(rl_stages, "policy_sharpness", lambda *a, **k: {})
    rl_loop.train(cfg, 1)
    nets = cfg.out / "nets"
    settings = TrainSettings(steps=3, batch_size=4, lr=2e-3, l2=3e-4, value_weight=0.7,
                             seed=generation_seeds(cfg, 1)["train"])
    assert seen == [((settings,), {"device": torch.device("cpu"), "progress": False, "resume": Resume(
        nets / "gen_0001.training", optimizer_out=nets / "gen_0001.adam")})]


@pytest.mark.parametrize("clock,rate", [((100.0, 100.5), None), ((100.0, 136.0), 300.0)])
def test_self_play_records_games_an_hour_only_over_a_second(tmp_path, monkeypatch, clock, rate):
    """5 games in parts of 2, 2 and 1, the first kept from a killed run: 3 games played, 300 an
    hour in 36 s; under a second the rate is noise: none."""
    import types

    cfg = _run_at(tmp_path, 0, ["--games", "5", "--parallel", "2", "--workers", "1", "--no-resign"])
    (cfg.out / "games" / "gen_0001").mkdir()
    _tiny_games(2).save(cfg.out / "games" / "gen_0001" / "part_000.npz")
    asked = []

    def play_into(ev, search, sp, parts, progress):
        for path, n, _ in parts:
            asked.append((path.name, n))
            _tiny_games(n).save(path)

    monkeypatch.setattr(rl_workers, "_play_into", play_into)
    ticks = iter(clock)
    monkeypatch.setattr(rl_stages, "time", types.SimpleNamespace(time=lambda: next(ticks)))
    rl_loop.self_play(cfg, 1)
    stats = json.loads((cfg.out / "stats" / "gen_0001_selfplay.json").read_text())
    assert asked == [("part_001.npz", 2), ("part_002.npz", 1)]
    assert stats["games_played"] == 3 and stats["games_per_hour"] == rate
    assert len(rl_records.SelfPlayGames.load(cfg.out / "games" / "gen_0001.npz").winner) == 5
    assert not (cfg.out / "games" / "gen_0001").exists()


def test_an_empty_history_draws_the_initial_network_alone():
    assert elo_plot.elo_series([]) == {"best network": ([0], [0.0], None), "candidate (gating match)": ([], [], None),
                                      "promoted": ([], [], None)}


def test_a_kept_optimizer_goes_from_generation_to_generation(tmp_path):
    """--keep-optimizer: generation 1 trains with a fresh Adam and leaves nets/gen_0001.adam;
    generation 2 goes on from it (its step count adds up), leaves its own and drops the one
    it read. A damaged or foreign file is one line naming it, with the remedy."""
    from othello_learn.models.nets import NetConfig, build_network, read_checkpoint
    from othello_learn.rl.learner import Resume, TrainSettings, train_network

    cfg = _run_at(tmp_path, 0, ["--keep-optimizer", "--train-steps", "2", "--batch-size", "4"])
    nets = cfg.out / "nets"
    for gen in (1, 2):
        _tiny_games(3).save(cfg.out / "games" / f"gen_{gen:04d}.npz")
        rl_loop.train(cfg, gen)
        stats = json.loads((cfg.out / "stats" / f"gen_{gen:04d}_train.json").read_text())
        assert stats["inherited_optimizer"] == (gen == 2)
        assert int(read_checkpoint(nets / f"gen_{gen:04d}.adam")["state"][0]["step"]) == 2 * gen
        _committed(cfg, gen)
    assert not (nets / "gen_0001.adam").exists()

    _tiny_games(3).save(cfg.out / "games" / "gen_0003.npz")
    (nets / "gen_0002.adam").write_text("not a checkpoint")
    with pytest.raises(UserError, match=r"gen_0002\.adam: not a checkpoint.*fresh Adam"):
        rl_loop.train(cfg, 3)
    other = build_network(NetConfig(arch="resnet", encoder="raw", blocks=1, width=16, value_head=True))
    train_network(other, _tiny_games(3), TrainSettings(steps=1, batch_size=4),
                  resume=Resume(optimizer_out=nets / "gen_0002.adam"))
    with pytest.raises(UserError, match=r"gen_0002\.adam: the saved optimizer state does not fit.*fresh Adam"):
        rl_loop.train(cfg, 3)
    (nets / "gen_0002.adam").unlink()
    rl_loop.train(cfg, 3)  # the remedy: a fresh Adam
    assert not json.loads((cfg.out / "stats" / "gen_0003_train.json").read_text())["inherited_optimizer"]


def _committed(cfg, gen):
    """state.json as commit leaves it after generation ``gen``: its candidate is the trainee."""
    state = json.loads((cfg.out / "state.json").read_text())
    (cfg.out / "state.json").write_text(json.dumps({**state, "generation": gen, "trainee": f"nets/gen_{gen:04d}.pt",
                                                   "history": [_record(g) for g in range(1, gen + 1)]}))


def test_keep_optimizer_may_be_turned_on_and_off_mid_run(tmp_path, capsys):
    """--keep-optimizer is resumable. Turned off, a training writes no Adam state and reads
    none the generation before left (which goes all the same); turned on again, the trainee
    has none, so its training starts a fresh Adam and says so once. The first generation
    never has one (the initial net was never trained here) and says nothing."""
    from othello_learn.models.nets import read_checkpoint

    on = _run_at(tmp_path, 0, ["--keep-optimizer", "--train-steps", "2", "--batch-size", "4"])
    off = dataclasses.replace(on, keep_optimizer=False)
    assert off.fixed_changes(on) == [] and on.fixed_changes(off) == []
    nets = on.out / "nets"
    said = []
    for gen, cfg in ((1, on), (2, off), (3, on)):
        _tiny_games(3).save(cfg.out / "games" / f"gen_{gen:04d}.npz")
        capsys.readouterr()
        rl_loop.train(cfg, gen)
        said.append([line for line in capsys.readouterr().err.splitlines() if "--keep-optimizer" in line])
        assert not json.loads((cfg.out / "stats" / f"gen_{gen:04d}_train.json").read_text())["inherited_optimizer"]
        assert not (nets / f"gen_{gen - 1:04d}.adam").exists()
        assert (nets / f"gen_{gen:04d}.adam").exists() == cfg.keep_optimizer
        _committed(cfg, gen)
    assert said == [[], [], ["--keep-optimizer: no gen_0002.adam beside the trainee: its training starts a fresh Adam"]]
    assert int(read_checkpoint(nets / "gen_0003.adam")["state"][0]["step"]) == 2


def test_a_damaged_adam_state_is_found_before_the_generations_self_play(tmp_path, monkeypatch):
    """With --keep-optimizer the training reads the trainee's Adam state (nets/gen_N.adam): like
    the other files a generation trains on, a damaged one stops the rerun before its self-play
    (it was found only once the generation's games were played: an hour at scale)."""
    cfg = _run_at(tmp_path, 1, ["--keep-optimizer"])
    _tiny_games(2).save(cfg.out / "games" / "gen_0001.npz")
    (cfg.out / "nets" / "gen_0000.adam").write_text("garbage")
    monkeypatch.setattr(rl_workers, "play_games", lambda *a, **k: pytest.fail("self-play began"))
    with pytest.raises(UserError, match=r"gen_0000\.adam.*delete it to train the next generation with a fresh Adam"):
        rl_loop.self_play(cfg, 2)


def test_a_kill_before_the_leftovers_went_leaves_none_after_the_rerun(tmp_path, monkeypatch):
    """Killed once generation 2's net and statistics are written but before the Adam state
    it read (gen_0001.adam) is removed: the rerun, which trains nothing, removes it, and
    keeps generation 2's own for generation 3."""
    cfg = _run_at(tmp_path, 0, ["--keep-optimizer", "--train-steps", "2", "--batch-size", "4"])
    nets = cfg.out / "nets"
    for gen in (1, 2):
        _tiny_games(3).save(cfg.out / "games" / f"gen_{gen:04d}.npz")
    rl_loop.train(cfg, 1)
    _committed(cfg, 1)

    def killed(cfg, gen):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(rl_stages, "_drop_training_leftovers", killed)
        with pytest.raises(KeyboardInterrupt):
            rl_loop.train(cfg, 2)
    assert (nets / "gen_0001.adam").exists() and (nets / "gen_0002.adam").exists()
    written = (nets / "gen_0002.pt").read_bytes()
    monkeypatch.setattr(rl_stages, "train_network", lambda *a, **k: pytest.fail("trained again"))
    assert rl_loop.train(cfg, 2) == nets / "gen_0002.pt" and (nets / "gen_0002.pt").read_bytes() == written
    assert not (nets / "gen_0001.adam").exists() and (nets / "gen_0002.adam").exists()


def test_the_temporary_copy_of_an_adam_state_a_kill_left_is_removed(tmp_path):
    """kill -9 while nets/gen_N.adam was written leaves atomic_path's temporary copy: it is
    one of the run's own files, removed on resume like a .training's."""
    nets = tmp_path / "nets"
    nets.mkdir()
    ours, theirs = nets / ".gen_0002.adam.0123abcd.tmp", nets / ".gen_0002.adamw.0123abcd.tmp"
    for path in (ours, theirs):
        path.write_bytes(b"half")
    rl_loop.remove_killed_writes(tmp_path)
    assert not ours.exists() and theirs.exists()


@pytest.mark.parametrize("folder, kind", [("best.pt", "a folder"), ("elo.png", "a folder"), ("stats", "a file")])
def test_a_run_file_of_the_wrong_kind_is_refused_before_a_generation(tmp_path, folder, kind):
    """It was found when the generation, an hour of self-play, came to write there."""
    out = tmp_path / "rl"
    out.mkdir()
    if kind == "a folder":
        (out / folder).mkdir()
    else:
        (out / folder).write_text("x")
    with pytest.raises(UserError, match=f"{folder}: {kind}, where the run"):
        rl_loop.main(["--init", "random", "--out", str(out), "--generations", "1", "--arch-blocks", "1",
                      "--arch-width", "8", "--logger", "none", "--quiet"])
    assert sorted(p.name for p in out.iterdir()) == [folder]


def test_a_self_play_record_with_a_bad_resign_threshold_is_named_at_the_commit(tmp_path, monkeypatch):
    """The threshold the games were played with comes from the generation's self-play record; a
    damaged one was a numpy traceback inside the false-resign count, not a line naming the file."""
    monkeypatch.setattr(rl_stages, "publish", lambda cfg, state: None)
    cfg = _generation_2_to_commit(tmp_path, 0.6, 70.4)
    stats = cfg.out / "stats" / "gen_0002_selfplay.json"
    for bad in ("-0.9", True, float("nan")):
        stats.write_text(json.dumps({"games_per_hour": None, "resign_threshold": bad}))
        with pytest.raises(UserError, match=r"gen_0002_selfplay\.json: not a resign threshold: .*rerun the same"):
            rl_loop.commit(cfg, 2)
        assert json.loads((cfg.out / "state.json").read_text())["generation"] == 1  # nothing committed
