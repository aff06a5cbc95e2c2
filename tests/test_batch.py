"""The one model batch (othello_learn.models.batch), the network config and exported format
(othello_learn.models.nets), and the one loss home (othello_learn.models.losses), against slow references."""

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from othello_learn.files import UserError
from othello.states import States
from othello_learn.data.replay import POSITION_DTYPE
from othello_learn.models.batch import SYMMETRY_GROUPS, augment, from_arrays, from_records, from_states
from othello_learn.models.losses import l2_penalty, move_losses, policy_loss, value_loss
from othello_learn.models.nets import NetConfig, build_network, legal_mask, load_network, masked, save_network, save_checkpoint_file


def _states(n=24, seed=3) -> States:
    """numpy States of positions from random games, with their histories."""
    rng, s = np.random.default_rng(seed), States.initial(n)
    for _ in range(int(rng.integers(5, 30))):
        legal = s.legal_actions() & ~s.is_over()[:, None]
        if not legal.any():
            break
        a = np.array([rng.choice(np.flatnonzero(row)) if row.any() else 64 for row in legal])
        keep = ~s.is_over()
        if not keep.all():
            break
        s = s.step(a)
    return s


def test_batch_builders_agree():
    s = _states()
    a = from_states(s)
    t = from_states(States(*(torch.from_numpy(np.ascontiguousarray(x).view(np.int64) if x.dtype == np.uint64 else x)
                             for x in (s.player, s.opponent, s.black_to_move, s.history))))
    py = from_arrays([int(p) for p in s.player], [int(o) for o in s.opponent], s.black_to_move.tolist(),
                     s.history.tolist())
    rec = np.zeros(len(s.player), dtype=POSITION_DTYPE)  # the dataset's own records
    rec["player"], rec["opponent"], rec["history"], rec["black_to_move"] = s.player, s.opponent, s.history, s.black_to_move
    r = from_records(rec)
    for b in (t, py, r):
        for k in ("player", "opponent", "history", "black_to_move"):
            assert b[k].dtype == a[k].dtype and torch.equal(b[k], a[k]), k
    assert a["player"].dtype == torch.int64 and a["history"].shape == (len(s.player), 4)
    none = from_arrays(s.player, s.opponent, s.black_to_move)
    assert (none["history"] == -1).all()


def test_given_legal_mask_is_used_and_matches_the_computed_one():
    s = _states()
    torch.manual_seed(0)
    net = build_network(NetConfig("reference", depth=1, width=4)).eval()
    legal = torch.from_numpy(s.legal_actions())  # [N, 65] with the pass
    b = from_states(s, legal=legal)
    assert b["legal"].shape == (len(s.player), 64)
    assert torch.equal(b["legal"], legal_mask(b["player"], b["opponent"]))
    with torch.no_grad():
        assert torch.equal(net(b)["policy"], net(from_states(s))["policy"])
        only_a1 = dict(b, legal=torch.zeros_like(b["legal"]).index_fill_(1, torch.tensor([0]), True))
        assert (net(only_a1)["policy"].argmax(-1) == 0).all()  # the mask given, not recomputed


@pytest.mark.parametrize("group", sorted(SYMMETRY_GROUPS))
def test_augment_moves_the_legal_mask_and_policy_with_the_board(group):
    s = _states(64, seed=5)
    b = from_states(s, legal=torch.from_numpy(s.legal_actions()))
    b["policy"] = b["legal"].float() / b["legal"].sum(-1, keepdim=True).clamp(min=1)
    aug = augment(b, SYMMETRY_GROUPS[group], torch.Generator().manual_seed(1))
    assert torch.equal(aug["legal"], legal_mask(aug["player"], aug["opponent"]))
    assert torch.equal(aug["policy"] > 0, aug["legal"])


@pytest.mark.parametrize("group", sorted(SYMMETRY_GROUPS))
def test_augment_moves_the_history_with_the_board(group):
    """Every square in a history was played, so it holds a disc on the augmented board
    too: a history mapped by another symmetry than the board's (its inverse, say) fails."""
    s = _states(256, seed=9)
    b = augment(from_states(s), SYMMETRY_GROUPS[group], torch.Generator().manual_seed(2))
    occupied = (b["player"] | b["opponent"])
    h = b["history"]
    played = (h >= 0) & (h < 64)
    assert played.any()
    bits = torch.bitwise_right_shift(occupied[:, None].expand_as(h), h.clamp(0, 63)) & 1
    assert bool((bits[played] == 1).all())


def _slow_policy_loss(logits, target, eps):
    """Per sample, in Python floats: cross-entropy over the legal squares only."""
    total = 0.0
    for row, t in zip(logits.tolist(), target):
        legal = [i for i, x in enumerate(row) if x > -1e30]
        lse = math.log(sum(math.exp(row[i]) for i in legal))
        dist = [0.0] * 64
        if isinstance(t, int):
            dist[t] = 1.0
        else:
            dist = list(t)
        dist = [(1 - eps) * d + (eps / len(legal) if i in legal else 0.0) for i, d in enumerate(dist)]
        total += -sum(dist[i] * (row[i] - lse) for i in legal)
    return total / len(target)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_policy_loss_against_a_slow_reference(eps):
    g = torch.Generator().manual_seed(0)
    legal = torch.rand(16, 64, generator=g) < 0.2
    legal[:, 7] = True
    logits = masked(torch.randn(16, 64, generator=g), legal)
    moves = torch.stack([torch.multinomial(row.float(), 1, generator=g)[0] for row in legal])
    dist = torch.rand(16, 64, generator=g) * legal
    dist = dist / dist.sum(-1, keepdim=True)
    assert policy_loss(logits, moves, eps).item() == pytest.approx(_slow_policy_loss(logits, moves.tolist(), eps), rel=1e-5)
    assert policy_loss(logits, dist, eps).item() == pytest.approx(_slow_policy_loss(logits, dist.tolist(), eps), rel=1e-5)
    if eps == 0:  # the supervised loss is still torch's cross-entropy
        assert policy_loss(logits, moves).item() == pytest.approx(F.cross_entropy(logits, moves).item(), rel=1e-6)
    else:  # regression: smoothing over all 64 squares put weight on the masked logits (a loss of ~1e36)
        assert F.cross_entropy(logits, moves, label_smoothing=eps).item() > 1e30
        assert policy_loss(logits, moves, eps).item() < 10


def test_label_smoothing_under_bf16_autocast_reads_the_mask_of_the_logits_dtype():
    """A network under bf16 autocast masks with bf16's minimum: the loss must still see
    those squares as illegal (regression: read after the cast to fp32, every square looked
    legal, smoothing put weight on the masked ones, and the run learned nothing useful)."""
    net = build_network(NetConfig("reference", depth=2, width=8))
    b = from_states(_states(8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = net(b)["policy"]
    assert logits.dtype == torch.bfloat16
    moves = logits.float().argmax(-1)
    smoothed = policy_loss(logits, moves, 0.1).item()
    assert smoothed < 10
    assert smoothed == pytest.approx(_slow_policy_loss(logits.float(), moves.tolist(), 0.1), rel=1e-4)


def test_move_losses_weigh_the_value_and_match_the_old_self_play_formula():
    torch.manual_seed(0)
    net = build_network(NetConfig("resnet", blocks=1, width=4, value_head=True))
    s = _states(8)
    b = from_states(s)
    legal = legal_mask(b["player"], b["opponent"]).float()
    target, outcome = legal / legal.sum(-1, keepdim=True).clamp(min=1), torch.tensor([1., -1, 0, 1, 1, -1, 0, 0])
    out = net(b)
    parts = move_losses(out, target, outcome, value_weight=0.5)
    old_policy = -(target * torch.log_softmax(out["policy"].float(), -1)).sum(-1).mean()
    assert parts["policy_loss"].item() == pytest.approx(old_policy.item(), rel=1e-6)
    assert parts["value_loss"].item() == pytest.approx(((out["value"] - outcome) ** 2).mean().item(), rel=1e-6)
    assert parts["loss"].item() == pytest.approx(parts["policy_loss"].item() + 0.5 * parts["value_loss"].item(), rel=1e-6)
    assert value_loss(out["value"], outcome).item() == pytest.approx(parts["value_loss"].item())
    assert l2_penalty(net).item() == pytest.approx(sum((p ** 2).sum().item() for n, p in net.named_parameters()
                                                        if "weight" in n and p.ndim > 1), rel=1e-5)
    assert "value_loss" not in move_losses({"policy": out["policy"]}, target, outcome, value_weight=1.0)


def test_net_config_reads_only_its_own_keys():
    assert NetConfig.from_dict({"arch": "resnet", "blocks": 2}) == NetConfig("resnet", blocks=2)
    with pytest.raises(ValueError, match="unknown network setting.*dpeth"):
        NetConfig.from_dict({"dpeth": 3})
    with pytest.raises(ValueError, match="lr"):
        NetConfig.from_dict({"depth": 3, "lr": 0.1})  # training keys only through from_hparams
    old = {"arch": "reference", "depth": 3, "width": 8, "lr": 0.1, "weight_decay": 0.0, "scheduler": "none",
           "value_weight": 0.5, "label_smoothing": 0.0}
    assert NetConfig.from_hparams(old) == NetConfig(depth=3, width=8)
    with pytest.raises(ValueError, match="unknown network setting.*batch_size"):
        NetConfig.from_hparams({**old, "batch_size": 64})
    with pytest.raises(TypeError):
        build_network({"arch": "reference"})
    assert build_network(NetConfig(depth=1, width=4)).config == NetConfig(depth=1, width=4)


def test_a_config_holds_the_other_architectures_settings_at_their_defaults(tmp_path):
    """A stored reference net "with a value head" (or blocks) is built, saved and reported as the
    net it is, without: evaluate.py recorded model.value_head true for a net that had none."""
    odd = NetConfig("reference", depth=2, width=4, blocks=3, value_head=True)
    assert odd == NetConfig("reference", depth=2, width=4) and not odd.value_head and odd.blocks == 6
    assert NetConfig("resnet", depth=3, blocks=2).depth == 10
    net = build_network(NetConfig("reference", depth=2, width=4))
    save_checkpoint_file({"config": {**net.config.to_dict(), "value_head": True, "blocks": 3},
                          "state_dict": net.state_dict()}, tmp_path / "odd.pt")
    back = load_network(tmp_path / "odd.pt")
    assert back.config == net.config and not any("value" in k for k in back.state_dict())


def test_exported_networks_round_trip_and_old_exports_load(tmp_path):
    torch.manual_seed(0)
    net = build_network(NetConfig("resnet", blocks=1, width=4, value_head=True))
    save_network(net, tmp_path / "n.pt", metrics={"acc": 0.5})
    stored = torch.load(tmp_path / "n.pt", weights_only=True)
    assert stored["config"] == net.config.to_dict() and stored["metrics"] == {"acc": 0.5}
    back = load_network(tmp_path / "n.pt")
    assert back.config == net.config and not back.training
    assert all(torch.equal(v, back.state_dict()[k]) for k, v in net.state_dict().items())
    # the format before NetConfig: flat "hparams", maybe with training keys, missing defaults
    save_checkpoint_file({"hparams": {"arch": "resnet", "blocks": 1, "width": 4, "value_head": True, "lr": 1e-3},
                          "state_dict": net.state_dict()}, tmp_path / "old.pt")
    assert load_network(tmp_path / "old.pt").config == net.config
    save_checkpoint_file({"config": {**net.config.to_dict(), "colour": 1}, "state_dict": net.state_dict()},
                         tmp_path / "bad.pt")
    with pytest.raises(UserError, match="bad.pt: unknown network setting.*colour"):
        load_network(tmp_path / "bad.pt")


@pytest.mark.parametrize("change, message", [
    ({"value_head": "yes"}, "value_head: expected true or false, got 'yes'"),  # would have built a net with a head
    ({"encoder": "planes"}, "encoder: expected one of handcrafted, raw, got 'planes'"),
    ({"arch": "transformer"}, "arch: expected one of reference, resnet, got 'transformer'"),
    ({"width": 0}, "width: must be at least 1, got 0"),
    ({"blocks": 10**6}, "blocks: must be at most 1000, got 1000000"),  # an allocation, not a net
    ({"depth": True}, "depth: expected an integer, got True"),
    ({"width": 4.0}, "width: expected an integer, got 4.0"),
])
def test_a_stored_config_is_checked_setting_by_setting(tmp_path, change, message):
    """Every way in (a checkpoint's stored dict, train.py's model section, the code) passes
    NetConfig, which names the setting; a bad encoder used to read as weights that do not fit."""
    with pytest.raises(ValueError, match=re.escape(message)):
        NetConfig(**{**NetConfig("resnet", blocks=1, width=4).to_dict(), **change})
    NetConfig("resnet", depth=1000, blocks=1000, width=64)  # the limits themselves are allowed, each alone
    NetConfig("resnet", blocks=1, width=4096)
    with pytest.raises(UserError, match=r"blocks 1000 with width 4096: about 301,989,888,000 weights, more than "
                                        r"1,073,741,824 \(4 GiB in fp32\); a typo\?"):
        NetConfig("resnet", blocks=1000, width=4096)  # 1.2 TB: it allocated until memory ran out, or hung
    net = build_network(NetConfig("resnet", blocks=1, width=4, value_head=True))
    save_checkpoint_file({"config": {**net.config.to_dict(), **change}, "state_dict": net.state_dict()},
                         tmp_path / "odd.pt")
    with pytest.raises(UserError, match=re.escape(f"odd.pt: {message}")):
        load_network(tmp_path / "odd.pt")


def test_weights_that_are_not_finite_are_refused_on_load(tmp_path):
    """A run that diverged saves NaN weights; loaded silently they play every move at random."""
    net = build_network(NetConfig("resnet", blocks=1, width=4, value_head=True))
    state = net.state_dict()
    state["value_head.6.bias"] = torch.full_like(state["value_head.6.bias"], float("inf"))
    state["value_head.4.weight"][0, 0] = float("nan")  # one value among many is enough
    save_checkpoint_file({"config": net.config.to_dict(), "state_dict": state}, tmp_path / "diverged.pt")
    with pytest.raises(UserError, match=r"diverged.pt: weight value_head.4.weight holds NaN or infinite values"):
        load_network(tmp_path / "diverged.pt")


def test_load_network_sends_training_checkpoints_to_train(tmp_path):
    from othello_learn.train.module import load_any_network
    from othello_learn.train.module import MovePredictor

    model = MovePredictor(NetConfig(depth=1, width=4))
    ckpt = {"hyper_parameters": dict(model.hparams), "state_dict": model.state_dict(), "loops": {}}
    save_checkpoint_file(ckpt, tmp_path / "run.ckpt")
    with pytest.raises(UserError, match=r"run.ckpt: a Lightning training checkpoint.*export it first: "
                                        r"othello-eval --checkpoint \S*run.ckpt --export NET.pt \(a finished othello-train run"):
        load_network(tmp_path / "run.ckpt")
    net = load_any_network(tmp_path / "run.ckpt")  # evaluate.py still reads them, through train/
    assert net.config == NetConfig(depth=1, width=4)
    assert all(torch.equal(v, model.net.state_dict()[k]) for k, v in net.state_dict().items())


def test_from_records_carries_the_targets_as_recorded():
    """move, ply and result of the dataset's records reach the batch unchanged (the result's
    sign is the record's: the value target), as int64 / float32."""
    rec = np.zeros(4, dtype=POSITION_DTYPE)
    rec["move"], rec["ply"], rec["result"] = [37, 0, 63, 19], [0, 1, 59, 30], [-64, 12, 0, 64]
    b = from_records(rec)
    assert b["move"].tolist() == [37, 0, 63, 19] and b["move"].dtype == torch.int64
    assert b["ply"].tolist() == [0, 1, 59, 30] and b["ply"].dtype == torch.int64
    assert b["result"].tolist() == [-64.0, 12.0, 0.0, 64.0] and b["result"].dtype == torch.float32


def test_a_turned_sample_keeps_its_move_only_when_its_history_is_unchanged_too():
    """The start board is fixed by rot180 (k = 2). Without a history the sample is the same
    input, so f5 stays f5; with f5 in its history the turned input differs (the history
    reads c4), so the label turns with it: f5 = (row 4, col 5) -> (7-4, 7-5) = c4."""
    from othello import bitboard as bb
    from othello_learn.models.batch import transform_batch

    f5, c4 = 37, 26
    black, white = np.array([bb.BLACK_START] * 2, dtype=np.uint64), np.array([bb.WHITE_START] * 2, dtype=np.uint64)
    batch = from_arrays(black, white, [True, True], [[-1, -1, -1, -1], [f5, -1, -1, -1]])
    batch["move"] = torch.tensor([f5, f5])
    out = transform_batch(batch, torch.tensor([2, 2]))
    assert torch.equal(out["player"], batch["player"]) and out["history"][1].tolist() == [c4, -1, -1, -1]
    assert out["move"].tolist() == [f5, c4]


_COORDS = [lambda r, c: (r, c), lambda r, c: (c, 7 - r), lambda r, c: (7 - r, 7 - c), lambda r, c: (7 - c, r),
           lambda r, c: (7 - r, c), lambda r, c: (r, 7 - c), lambda r, c: (c, r), lambda r, c: (7 - c, 7 - r)]


def _image(board: int, k: int) -> int:
    """Board ``board`` under symmetry ``k``, square by square from the coordinates (module doc of symmetry)."""
    return sum(1 << (8 * r + c) for r, c in (_COORDS[k](s // 8, s % 8) for s in range(64) if board >> s & 1))


@pytest.mark.parametrize("group", sorted(SYMMETRY_GROUPS))
def test_augment_draws_every_member_of_its_group_and_no_other(group):
    """A position no symmetry fixes, 400 times: the symmetry each copy got is read back
    from its image, and the set of them is the group, "start" being the symmetries
    that fix the start position, found here by the coordinates."""
    import reference_engine as ref

    s = _states(24, seed=5)
    p, o = next((int(a), int(b)) for a, b in zip(s.player, s.opponent)
                if len({(_image(int(a), k), _image(int(b), k)) for k in range(8)}) == 8)
    images = {(_image(p, k), _image(o, k)): k for k in range(8)}
    b = from_arrays(np.array([p] * 400, dtype=np.uint64), np.array([o] * 400, dtype=np.uint64), [True] * 400)
    aug = augment(b, SYMMETRY_GROUPS[group], torch.Generator().manual_seed(0))
    used = {images[(int(x) & (2**64 - 1), int(y) & (2**64 - 1))] for x, y in zip(aug["player"], aug["opponent"])}
    start = ref.start_board()
    expected = {"all": set(range(8)), "none": {0},
                "start": {k for k in range(8) if all(start[r][c] == start[_COORDS[k](r, c)[0]][_COORDS[k](r, c)[1]]
                                                     for r in range(8) for c in range(8))}}[group]
    assert used == expected
    assert len(expected) == {"all": 8, "none": 1, "start": 4}[group]


def _bn(h, sd, name):
    shape = (1, -1, 1, 1) if h.dim() == 4 else (1, -1)
    mean, var = sd[f"{name}.running_mean"].view(shape), sd[f"{name}.running_var"].view(shape)
    return (h - mean) / torch.sqrt(var + 1e-5) * sd[f"{name}.weight"].view(shape) + sd[f"{name}.bias"].view(shape)


def _slow_resnet(sd, blocks, x):
    """AlphaZero's tower written out from the stored weights: stem conv-BN-ReLU; each block
    relu(x + BN(conv(relu(BN(conv(x)))))); policy 1x1 conv-BN-ReLU then 1x1 conv with bias;
    value 1x1 conv-BN-ReLU, linear-ReLU, linear, tanh."""
    h = torch.relu(_bn(F.conv2d(x, sd["stem.0.weight"], padding=1), sd, "stem.1"))
    for i in range(blocks):
        y = torch.relu(_bn(F.conv2d(h, sd[f"blocks.{i}.conv1.weight"], padding=1), sd, f"blocks.{i}.bn1"))
        h = torch.relu(h + _bn(F.conv2d(y, sd[f"blocks.{i}.conv2.weight"], padding=1), sd, f"blocks.{i}.bn2"))
    p = torch.relu(_bn(F.conv2d(h, sd["policy_head.0.weight"]), sd, "policy_head.1"))
    policy = F.conv2d(p, sd["policy_head.3.weight"], sd["policy_head.3.bias"]).flatten(1)
    v = torch.relu(_bn(F.conv2d(h, sd["value_head.0.weight"]), sd, "value_head.1")).flatten(1)
    v = torch.relu(v @ sd["value_head.4.weight"].T + sd["value_head.4.bias"])
    return policy, torch.tanh(v @ sd["value_head.6.weight"].T + sd["value_head.6.bias"]).squeeze(-1)


def test_the_networks_compute_their_documented_formulas():
    """The ResNet (eval mode, batch norms with non-default statistics) and the reference FCN
    against their formulas written with torch.nn.functional from the state_dict: the layout
    the exported checkpoints store."""
    from othello_learn.models.encoders import encode

    b = from_states(_states(16, seed=4))
    torch.manual_seed(0)
    net = build_network(NetConfig("resnet", encoder="handcrafted", blocks=2, width=8, value_head=True))
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d | torch.nn.BatchNorm1d):
            m.running_mean.uniform_(-0.5, 0.5), m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 1.5), m.bias.data.uniform_(-0.5, 0.5)
    net.eval()
    with torch.no_grad():  # values across tanh's range, not only its linear middle: tanh's inputs standardised
        z = net.value_head[:-1](net.blocks(net.stem(encode("handcrafted", b)))).squeeze(-1)
        last = net.value_head[-2]
        last.weight.div_(z.std()), last.bias.sub_(z.mean()).div_(z.std())
    legal = legal_mask(b["player"], b["opponent"])
    with torch.no_grad():
        out = net(b)
        policy, value = _slow_resnet(net.state_dict(), 2, encode("handcrafted", b))
    assert torch.allclose(out["policy"][legal], policy[legal], atol=1e-5)
    assert torch.allclose(out["value"], value, atol=1e-5)
    assert ((value.abs() > 0.4) & (value.abs() < 0.95)).any()

    fcn = build_network(NetConfig("reference", encoder="raw", depth=3, width=8)).eval()
    sd = fcn.state_dict()
    with torch.no_grad():
        h = encode("raw", b)
        for i in range(3):
            h = torch.relu(F.conv2d(h, sd[f"body.{2 * i}.weight"], sd[f"body.{2 * i}.bias"], padding=1))
        want = F.conv2d(h, sd["head.weight"], sd["head.bias"]).flatten(1)
        assert torch.allclose(fcn(b)["policy"][legal], want[legal], atol=1e-6)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_a_policy_temperature_must_be_positive_and_finite(bad):
    from othello_learn.models.nets import temper_policy

    with pytest.raises(ValueError, match="^the policy temperature: must be (above 0|a finite number), got"):
        temper_policy(build_network(NetConfig(depth=1, width=4)), bad)


def test_a_grown_resnet_initialises_what_it_adds_as_its_doc_says():
    """Wider and deeper: the added block is an identity (its last batch norm zero), the old
    blocks' residual branch is zero on the added channels, old channels read added ones
    with weight 0, and added channels read added ones with fresh (live) weights."""
    from othello_learn.models.nets import grow_network

    torch.manual_seed(0)
    source = build_network(NetConfig("resnet", blocks=1, width=8, value_head=True))
    net = grow_network(source, NetConfig("resnet", blocks=2, width=12, value_head=True))
    new_bn = net.blocks[1].bn2
    assert not new_bn.weight.any() and not new_bn.bias.any()
    old_bn = net.blocks[0].bn2
    assert not old_bn.weight[8:].any() and not old_bn.bias[8:].any()
    assert torch.equal(old_bn.weight[:8], source.blocks[0].bn2.weight)
    for name in ("conv1", "conv2"):
        w, was = getattr(net.blocks[0], name).weight, getattr(source.blocks[0], name).weight
        assert torch.equal(w[:8, :8], was) and not w[:8, 8:].any()
        assert w[8:, 8:].abs().sum() > 0


@pytest.mark.parametrize("n", [0, 1, 2])
def test_from_records_of_one_record_and_of_none(n):
    """A batch of one record (an evaluation's last batch when the positions are one more than
    a multiple of the batch size) used to fail in torch on the record's 28-byte stride."""
    from othello_learn.data.replay import POSITION_DTYPE
    from othello_learn.models.batch import from_records

    rec = np.zeros(3, POSITION_DTYPE)
    rec["player"], rec["opponent"] = [1 << 63, 5, 7], [2, 1 << 62, 9]
    rec["black_to_move"], rec["move"] = [True, False, True], [19, 37, 44]
    batch = from_records(rec[1:1 + n])
    assert batch["player"].shape == (n,) and batch["history"].shape == (n, 4)
    assert batch["player"].view(torch.int64).numpy().view(np.uint64).tolist() == rec["player"][1:1 + n].tolist()
    assert batch["opponent"].numpy().view(np.uint64).tolist() == rec["opponent"][1:1 + n].tolist()
    assert batch["black_to_move"].tolist() == rec["black_to_move"][1:1 + n].tolist()
    assert batch["move"].tolist() == rec["move"][1:1 + n].tolist()


def test_the_mean_of_identical_nets_is_the_net_and_of_two_is_elementwise():
    """Weight averaging (``average_networks``): batch-norm statistics averaged too, the
    step count the first net's, and nets of two architectures refused."""
    from othello_learn.models.nets import average_networks

    cfg = NetConfig("resnet", blocks=1, width=8, value_head=True)
    torch.manual_seed(0)
    a, b = build_network(cfg), build_network(cfg)
    with torch.no_grad():  # buffers unlike a fresh net's, so their mean is checked too
        for net, shift in ((a, 1.0), (b, 3.0)):
            net.blocks[0].bn1.running_mean.add_(shift)
            net.blocks[0].bn1.num_batches_tracked.fill_(int(shift))
    same = average_networks([a, a, a])
    assert same is not a and same.config == cfg
    for k, v in a.state_dict().items():
        assert torch.allclose(same.state_dict()[k], v, atol=1e-6), k
    mean = average_networks([a, b]).state_dict()
    for k, v in a.state_dict().items():
        want = (v + b.state_dict()[k]) / 2 if v.is_floating_point() else v
        assert torch.allclose(mean[k], want, atol=1e-6), k
    assert mean["blocks.0.bn1.running_mean"].mean() == pytest.approx(2.0, abs=0.1)
    assert mean["blocks.0.bn1.num_batches_tracked"] == 1
    b_before = {k: v.clone() for k, v in b.state_dict().items()}
    average_networks([a, b])
    assert all(torch.equal(b.state_dict()[k], v) for k, v in b_before.items())  # the parts are left alone
    with pytest.raises(ValueError, match="network 2"):
        average_networks([a, build_network(NetConfig("resnet", blocks=2, width=8, value_head=True))])
