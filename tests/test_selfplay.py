"""Self-play, the learner, network players and the resumable RL loop (tiny, on CPU)."""

import json

import numpy as np
import pytest
import torch

from models.nets import build_network, export, legal_mask
from othello import bitboard as bb
from selfplay import loop as rl_loop
from data_tools.datamodule import augment
from selfplay.learner import to_device_batch, train_network
from selfplay.mcts import Evaluator, MCTSConfig
from selfplay.selfplay import SelfPlayConfig, SelfPlayGames, calibrate_resign_threshold, false_resign_rate, play_games

TINY = {"arch": "resnet", "encoder": "raw", "blocks": 1, "width": 8, "value_head": True}


@pytest.fixture(scope="module")
def tiny_net():
    torch.manual_seed(0)
    net = build_network(**TINY).eval()
    net.hparams = dict(TINY)
    return net


@pytest.fixture(scope="module")
def games(tiny_net):
    ev = Evaluator(tiny_net, "cpu")
    return play_games(ev, 12, MCTSConfig(simulations=6), SelfPlayConfig(resign_threshold=-0.5, no_resign_fraction=0.5),
                      seed=1, progress=False)


def test_self_play_records_are_consistent(games):
    n = len(games.player)
    assert n > 12 * 20 and len(games.winner) == 12
    legal = legal_mask(torch.from_numpy(games.player.view(np.int64)), torch.from_numpy(games.opponent.view(np.int64)))
    pi = torch.from_numpy(games.policy.astype(np.float32))
    assert torch.allclose(pi.sum(1), torch.ones(n), atol=1e-2)
    assert (pi[~legal] == 0).all(), "visits only on legal moves"
    colour = np.where(games.black_to_move, 1, -1)
    assert np.array_equal(games.outcome, games.winner[games.game] * colour)
    played_out = ~games.resigned
    assert np.array_equal(np.sign(games.disc_diff[played_out]), games.winner[played_out])
    assert not games.resigned[games.no_resign].any()
    # the first record of each game is the start position, black to move
    first = np.unique(games.game, return_index=True)[1]
    assert (games.player[first] == bb.BLACK_START).all() and games.black_to_move[first].all()
    # discs on the board grow by one per recorded move within a game
    discs = bb.popcount(games.player) + bb.popcount(games.opponent)
    same_game = games.game[1:] == games.game[:-1]
    assert (np.diff(discs.astype(int))[same_game] == 1).all()


def test_resign_calibration():
    n = 40
    g = SelfPlayGames(**{k: np.zeros(0) for k in SelfPlayGames.__dataclass_fields__})
    g.no_resign = np.ones(n, bool)
    g.game = np.repeat(np.arange(n), 2)  # two samples a game: black to move, then white
    g.value = np.full(2 * n, 0.3, np.float16)
    g.outcome = np.zeros(2 * n, np.int8)
    g.outcome[0:40] = np.tile([-1, 1], 20)  # games 0-19: black lost...
    g.value[0:40:2] = -0.95  # ...and looked hopeless: right to resign
    g.outcome[40:44] = [1, -1, 1, -1]  # games 20, 21: black won...
    g.value[40:44:2] = -0.8  # ...though its value fell to -0.8 first
    assert false_resign_rate(g, -0.9) == (0.0, 40)
    assert false_resign_rate(g, -0.7) == (2 / 40, 40)
    assert calibrate_resign_threshold(g, 0.05, -0.99) == pytest.approx(-0.8)  # -0.8 itself is not "< -0.8"
    g.value[1] = -0.99  # white's first sample in game 0 is not what counts: black fell first, in play order
    assert false_resign_rate(g, -0.9) == (0.0, 40)
    g.no_resign[:] = False
    assert calibrate_resign_threshold(g, 0.05, -0.9) == -0.9, "too few played-out games: keep the threshold"


def test_augmented_policy_targets_stay_on_legal_moves(games):
    batch = to_device_batch(games, np.arange(len(games.player)), "cpu")
    aug = augment(batch, generator=torch.Generator().manual_seed(0))
    legal = legal_mask(aug["player"], aug["opponent"])
    assert (aug["policy"][~legal] == 0).all()
    assert torch.allclose(aug["policy"].sum(1), batch["policy"].sum(1))
    assert not torch.equal(aug["player"], batch["player"])


def test_training_lowers_the_loss(games, tiny_net):
    import copy

    net = copy.deepcopy(tiny_net)
    first = train_network(net, games, steps=3, batch_size=64, lr=3e-3, seed=0)
    later = train_network(net, games, steps=40, batch_size=64, lr=3e-3, seed=1)
    assert later["loss"] < first["loss"]
    with pytest.raises(ValueError, match="value head"):
        train_network(build_network("reference", depth=1, width=4), games, steps=1)


def test_network_players_in_the_arena(tmp_path, tiny_net):
    from selfplay.arena import main as arena_main

    ckpt = tmp_path / "tiny.pt"
    export(tiny_net, TINY, ckpt)
    out = tmp_path / "m.json"
    assert arena_main(["--a", f"mcts:{ckpt}:4", "--b", f"policy:{ckpt}", "--games", "4", "--json", str(out), "--quiet"]) == 0
    r = json.loads(out.read_text())
    assert r["games"] == 4 and r["wins"] + r["draws"] + r["losses"] == 4


LOOP = ["--init", "random", "--generations", "2", "--games", "6", "--parallel", "3", "--simulations", "4",
        "--train-steps", "3", "--batch-size", "16", "--gate-games", "2", "--gate-simulations", "2",
        "--arch-blocks", "1", "--arch-width", "8", "--quiet", "--logger", "wandb"]


def test_loop_resumes_after_a_crash_without_losing_or_repeating_games(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "rl"
    real = rl_loop.play_games
    calls = []

    def crashing(*a, **k):
        calls.append(k["seed"])
        if len(calls) == 3:  # generation 1 done (2 parts), die in generation 2's first part
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(rl_loop, "play_games", crashing)
    with pytest.raises(KeyboardInterrupt):
        rl_loop.main(LOOP + ["--out", str(out)])
    assert json.loads((out / "state.json").read_text())["generation"] == 1

    monkeypatch.setattr(rl_loop, "play_games", lambda *a, **k: (calls.append(k["seed"]), real(*a, **k))[1])
    state = rl_loop.main(LOOP + ["--out", str(out)])
    assert state["generation"] == 2 and len(state["history"]) == 2
    assert len(calls) == 5 and len(set(calls)) == 4, "only the interrupted part was played again"
    for g in (1, 2):
        games = SelfPlayGames.load(out / "games" / f"gen_{g:04d}.npz")
        assert len(games.winner) == 6
    assert (out / "elo.png").stat().st_size > 1000 and (out / "best.pt").exists()
    assert list((out / "wandb").glob("offline-run-*"))
    rec = json.loads((out / "stats" / "gen_0002.json").read_text())
    for key in ("black_wins", "resign_threshold", "false_resign_rate", "games_per_hour", "gate_score", "elo_best",
                "train_value_loss", "train_policy_loss"):
        assert key in rec
    # the same command again does nothing more; a different run setting is refused
    assert rl_loop.main(LOOP + ["--out", str(out)])["generation"] == 2
    with pytest.raises(SystemExit, match="games"):
        rl_loop.main([x if x != "6" else "8" for x in LOOP] + ["--out", str(out)])
