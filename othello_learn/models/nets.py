"""Move-prediction networks. Each takes the compact batch (bitboards, history,
colour), encodes it on its own device, and returns policy logits over the 64
squares with illegal moves masked, plus a value in [-1, 1] when it has a value
head. Training, evaluation and self-play all call the same ``forward``."""

from __future__ import annotations

import errno
import io
import os
import pickle
import re
import warnings
from dataclasses import asdict, dataclass, fields

import numpy as np
import torch
from torch import nn

from othello import bitboard as bb
from othello_learn.files import UserError, atomic_write, one_line
from othello_learn.settings import Setting, SettingError, check_table

from .encoders import ENCODERS


def legal_mask(player: torch.Tensor, opponent: torch.Tensor) -> torch.Tensor:
    """(N, 64) bool of the legal squares, computed on the boards' device
    (through numpy on CPU, where its per-op cost is a fraction of torch's)."""
    if player.device.type != "cpu":
        return bb.bits(bb.legal_moves(player, opponent))
    p, o = player.contiguous().numpy().view(np.uint64), opponent.contiguous().numpy().view(np.uint64)
    if p.size <= 4:  # a few positions (interactive play): plain ints beat numpy's per-call cost
        legal = np.array([bb.legal_moves(int(a), int(b)) for a, b in zip(p, o)], dtype=np.uint64)
    else:
        legal = bb.legal_moves(p, o)
    return torch.from_numpy(bb.bits(legal))


def masked(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    # The dtype's lowest finite value, not -inf: a position with no legal move
    # (a pass) then gives a uniform softmax instead of NaNs.
    return logits.masked_fill(~legal, torch.finfo(logits.dtype).min)


class MoveNet(nn.Module):
    """Shared plumbing: encoder, legality mask, output dict."""

    def __init__(self, encoder: str):
        super().__init__()
        NET_SETTINGS["encoder"].check(encoder, "encoder")
        self.encoder = encoder
        self.encode_fn, self.in_planes = ENCODERS[encoder]

    def trunk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch``: a ``othello_learn.models.batch`` dict; its optional ``legal`` mask is used as given."""
        x = self.encode_fn(batch)
        weights = next(self.parameters())
        if x.dtype != weights.dtype:  # a net cast whole (Lightning's 64-true, bf16-true): the planes are fp32
            x = x.to(weights.dtype)  # (under autocast the weights are fp32 too: nothing to do)
        logits, value = self.trunk(x)
        legal = batch.get("legal")
        out = {"policy": masked(logits, legal if legal is not None else legal_mask(batch["player"], batch["opponent"]))}
        if value is not None:
            out["value"] = value
        return out


class ReferenceNet(MoveNet):
    """Hlynsson (2017): ``depth`` 3x3 conv layers of ``width`` filters with ReLU,
    then a 1x1 conv to one plane of 64 move logits. Fully convolutional."""

    def __init__(self, encoder: str = "raw", depth: int = 10, width: int = 64):
        super().__init__(encoder)
        layers, c = [], self.in_planes
        for _ in range(depth):
            layers += [nn.Conv2d(c, width, 3, padding=1), nn.ReLU(inplace=True)]
            c = width
        self.body = nn.Sequential(*layers)
        self.head = nn.Conv2d(c, 1, 1)

    def trunk(self, x):
        return self.head(self.body(x)).flatten(1), None


class ResidualBlock(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class ResNet(MoveNet):
    """Residual tower with batch norm (AlphaZero style): a 1x1-conv policy head
    and an optional value head trained on the game's final result, so one
    checkpoint can warm-start self-play."""

    def __init__(self, encoder: str = "raw", blocks: int = 6, width: int = 64, value_head: bool = True):
        super().__init__(encoder)
        self.stem = nn.Sequential(nn.Conv2d(self.in_planes, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(*[ResidualBlock(width) for _ in range(blocks)])
        self.policy_head = nn.Sequential(nn.Conv2d(width, 32, 1, bias=False), nn.BatchNorm2d(32),
                                         nn.ReLU(inplace=True), nn.Conv2d(32, 1, 1))
        self.value_head = (
            nn.Sequential(nn.Conv2d(width, 4, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                          nn.Flatten(), nn.Linear(4 * 64, 128), nn.ReLU(inplace=True), nn.Linear(128, 1), nn.Tanh())
            if value_head else None
        )

    def trunk(self, x):
        h = self.blocks(self.stem(x))
        value = self.value_head(h).squeeze(-1) if self.value_head is not None else None
        return self.policy_head(h).flatten(1), value


ARCHITECTURES = {"reference": ReferenceNet, "resnet": ResNet}


# The largest sizes a config may ask for: beyond them a typo's extra digits would allocate until
# memory runs out and end in a traceback (the training config's check, othello_learn/train/config.py, reads them).
SIZE_LIMITS = {"depth": 1000, "blocks": 1000, "width": 4096}
# And together: the 3x3 convolutions' weights, at most 4 GiB of fp32 (the largest nets trained here
# have under 3 M; 1000 blocks of 4096 channels, each size within its limit, would be 1.2 TB).
MAX_WEIGHTS = 2**30


class NetConfigError(UserError, ValueError):
    """A network setting out of range or of the wrong kind: one line naming it from every command
    (a checkpoint's stored config, train.py's model section, the loop's --arch-*, a benchmark's sizes)."""


# The settings only one architecture reads (train.py refuses one given for the other).
ARCH_ONLY = {"depth": "reference", "blocks": "resnet", "value_head": "resnet"}


# Each setting's kind and range (a bool is no integer; a size's typo would allocate until memory runs out).
NET_SETTINGS = {"arch": Setting(str, choices=sorted(ARCHITECTURES)), "encoder": Setting(str, choices=sorted(ENCODERS)),
                **{key: Setting(int, low=1, high=high) for key, high in SIZE_LIMITS.items()}, "value_head": Setting(bool)}


@dataclass(frozen=True)
class NetConfig:
    """What a network is: stored with its weights (as a plain dict) so it can be rebuilt.
    ``depth`` is the reference net's, ``blocks`` and ``value_head`` the ResNet's; the other
    architecture's are held at their defaults, so a config never claims what its net lacks
    (a reference net "with a value head" was built, saved and reported without one)."""

    arch: str = "reference"
    encoder: str = "raw"
    depth: int = 10
    width: int = 64
    blocks: int = 6
    value_head: bool = False

    def __post_init__(self):
        """Checked here, the one place every config passes (a training recipe,
        othello_learn.train.config; a checkpoint's stored dict; the loop's --init random): a stored
        ``"value_head": "yes"`` or a bad encoder is an error naming the setting, not a net built
        wrong or a misleading misfit."""
        try:
            check_table({key: getattr(self, key) for key in NET_SETTINGS}, NET_SETTINGS)
        except SettingError as e:
            raise NetConfigError(str(e)) from None
        layers = self.depth if self.arch == "reference" else 2 * self.blocks
        weights = 9 * self.width ** 2 * layers
        if weights > MAX_WEIGHTS:
            sizes = f"depth {self.depth}" if self.arch == "reference" else f"blocks {self.blocks}"
            raise NetConfigError(f"{sizes} with width {self.width}: about {weights:,} weights, more "
                                 f"than {MAX_WEIGHTS:,} (4 GiB in fp32); a typo?")
        for key, owner in ARCH_ONLY.items():
            if self.arch != owner:
                object.__setattr__(self, key, getattr(NetConfig, key))  # frozen: set once, here

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "NetConfig":
        """Only the network's own keys: a misspelt or foreign one is an error naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise NetConfigError(f"unknown network setting(s) {', '.join(map(str, unknown))} "
                             f"(known: {', '.join(sorted(known))})")
        return cls(**d)

    @classmethod
    def from_hparams(cls, d: dict) -> "NetConfig":
        """The network part of the flat hyperparameters older checkpoints store (exported
        ``hparams``, Lightning ``hyper_parameters`` before the module took a net config):
        exactly the known training keys are dropped, anything else is still refused."""
        return cls.from_dict({k: v for k, v in d.items() if k not in TRAINING_KEYS})


# MovePredictor's training settings, stored beside the network's in older flat hyperparameters.
TRAINING_KEYS = ("lr", "weight_decay", "scheduler", "value_weight", "label_smoothing")


def build_network(cfg: NetConfig) -> MoveNet:
    """A fresh network for ``cfg``; it carries ``net.config`` (what ``save_network`` stores)."""
    if not isinstance(cfg, NetConfig):
        raise TypeError(f"build_network takes a NetConfig, got {type(cfg).__name__}")
    if cfg.arch == "reference":
        net = ReferenceNet(encoder=cfg.encoder, depth=cfg.depth, width=cfg.width)
    else:  # NetConfig checked the name
        net = ResNet(encoder=cfg.encoder, blocks=cfg.blocks, width=cfg.width, value_head=cfg.value_head)
    net.config = cfg
    return net


def _first_line(e: BaseException) -> str:
    line = one_line(e)
    return line.split(". ")[0] if len(line) > 120 else line  # torch appends paragraphs of advice


def _sniff_checkpoint(path) -> None:
    """torch.save writes a zip archive (``PK``) or, before torch 1.6, a pickle (protocol
    byte 0x80). A file that starts otherwise is named for what it is; fed to the
    unpickler, text reads as opcodes and fails with messages such as ``KeyError: 101``."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except IsADirectoryError:
        raise UserError(f"{path}: a folder, not a checkpoint file") from None
    if head.startswith(b"PK") or head[:1] == b"\x80":
        return
    if not head:
        raise UserError(f"{path}: an empty file, not a checkpoint")
    try:
        head.decode("utf-8")
        what = "a text file"
    except UnicodeDecodeError as e:
        what = "a text file" if e.start >= len(head) - 3 else "another format"  # a character cut at 512 bytes
    raise UserError(f"{path}: not a checkpoint ({what}; torch.save writes a zip archive)")


def read_checkpoint(path, map_location="cpu") -> dict:
    """A checkpoint file's contents, loaded with ``weights_only=True``: only tensors and
    plain values are ever unpickled, so a crafted file cannot run code on load.

    Anything else (a file that is not a checkpoint, a truncated one, one holding
    Python objects) is a ``UserError`` naming the file."""
    _sniff_checkpoint(path)
    try:
        with warnings.catch_warnings():  # a bare pickle draws torch's protocol warning before our one line
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        lines = [ln.strip() for ln in str(e).splitlines()]
        operand = [ln for ln in lines if ln.startswith("Unsupported operand")]
        if operand:  # text, another format, random bytes: nothing that names Python objects
            raise UserError(f"{path}: not a checkpoint (the safe loader cannot read it: {operand[0]})") from e
        blocked = [ln for ln in lines if "GLOBAL" in ln or "Unsupported" in ln]
        # torch's own line goes on to advise allowlisting the object "if you trust" it: not ours to give
        why = re.sub(r"\s*Please use `torch\.serialization.*$", "", blocked[0] if blocked else _first_line(e))
        raise UserError(f"{path}: refused to load: the file holds Python objects, not only tensors and plain "
                        f"values, and loading it could run code ({why})") from e
    except OSError as e:
        if isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError)) or e.errno == errno.ENOSPC:
            raise  # missing file, permissions: run_main names the file
        # torch's zip reader reports a cut archive as EINVAL, with no file name
        raise UserError(f"{path}: not a readable checkpoint, truncated or corrupt ({_first_line(e)})") from e
    except Exception as e:  # torch reports a truncated or foreign file as EOFError, RuntimeError, KeyError...
        raise UserError(f"{path}: not a readable checkpoint, truncated or corrupt "
                        f"({type(e).__name__}: {_first_line(e) if str(e) else 'unexpected end of file'})") from e
    if not isinstance(ckpt, dict):
        raise UserError(f"{path}: not a checkpoint (holds a {type(ckpt).__name__}, not a dict)")
    return ckpt


def is_training_checkpoint(ckpt: dict) -> bool:
    """A Lightning ``.ckpt`` of train.py (weights under hyper_parameters / state_dict), not an exported network."""
    return "hyper_parameters" in ckpt


class TrainingCheckpointError(UserError):
    """A Lightning ``.ckpt`` where an exported network was wanted; the message gives the export command."""


def load_network(path, map_location="cpu") -> MoveNet:
    """A network from an exported ``.pt`` (``save_network``; also the older ones that
    store flat ``hparams``), in eval mode. A Lightning training checkpoint (``.ckpt``)
    is train/'s to read (``othello_learn.train.module.network_from_checkpoint``): here it is an error
    saying so."""
    ckpt = read_checkpoint(path, map_location)
    if is_training_checkpoint(ckpt):
        raise TrainingCheckpointError(f"{path}: a Lightning training checkpoint, not an exported network: export "
                                      f"it first: othello-eval --checkpoint {path} --export NET.pt "
                                      "(a finished othello-train run writes OUT/model.pt)")
    return network_from_export(ckpt, path)


def network_from_export(ckpt: dict, path) -> MoveNet:
    """The network of an exported checkpoint's contents (``read_checkpoint``); ``path`` names it in errors."""
    stored = ckpt.get("config", ckpt.get("hparams"))
    if not isinstance(stored, dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise UserError(f"{path}: not a move-prediction checkpoint (no network config / state_dict)")
    try:
        cfg = NetConfig.from_dict(stored) if "config" in ckpt else NetConfig.from_hparams(stored)
    except (TypeError, ValueError) as e:
        raise UserError(f"{path}: {e}") from e
    return network_from_state(cfg, ckpt["state_dict"], path)


def network_from_state(cfg: NetConfig, state_dict: dict, path) -> MoveNet:
    """``cfg``'s network with ``state_dict``'s weights, in eval mode; a UserError naming
    ``path`` when they do not fit."""
    try:
        net = build_network(cfg)
        net.load_state_dict(state_dict)
    except (TypeError, ValueError, RuntimeError) as e:
        raise UserError(f"{path}: weights do not fit the network its config describes ({_first_line(e)})") from e
    for name, tensor in net.state_dict().items():  # a diverged run's weights would play, silently, at random
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise UserError(f"{path}: weight {name} holds NaN or infinite values (saved from a run that diverged?)")
    return net.eval()


def check_carried(have: NetConfig, model: dict, where="the network") -> None:
    """Refuse a warm start from ``have`` into ``model`` (a config's model settings, in part) that
    changes what cannot change: the architecture or the encoder (a UserError naming ``where``)."""
    for key in ("arch", "encoder"):
        if key in model and getattr(have, key) != model[key]:
            raise UserError(f"{where}: model.{key} is {getattr(have, key)!r} there and {model[key]!r} in the "
                            f"config; a warm start keeps {key} (it can add residual blocks, layers or width)")


def grow_network(source: MoveNet, cfg: NetConfig, where="the network") -> MoveNet:
    """``cfg``'s network starting as ``source``: a warm start that may be deeper or wider.

    Every weight of ``source`` is copied; the residual blocks (or reference layers) that
    ``cfg`` adds at the top of the tower start as identities (a block's last batch norm at
    zero, a layer's kernel a Dirac on ReLU outputs), and added channels are read by the old
    ones with weight 0 and add nothing to a block's output (its last batch norm is zero
    there), so the grown net plays as ``source`` does and training adds capacity instead
    of starting over. A value head that ``source`` lacks starts fresh; one that ``cfg``
    drops is left behind. Anything else that differs (architecture, encoder, fewer layers
    or channels) cannot be carried over: a UserError naming ``where`` and the setting."""
    have = source.config
    check_carried(have, cfg.to_dict(), where)
    depth_key = "blocks" if cfg.arch == "resnet" else "depth"
    for key in (depth_key, "width"):
        if getattr(cfg, key) < getattr(have, key):
            raise UserError(f"{where}: has model.{key}={getattr(have, key)}, more than the config's "
                            f"{getattr(cfg, key)}; a warm start can add to model.{key}, not take from it")
    net = build_network(cfg)
    if cfg.arch == "resnet":
        for block in list(net.blocks)[len(source.blocks):]:
            nn.init.zeros_(block.bn2.weight)
            nn.init.zeros_(block.bn2.bias)
    else:
        convs = [m for m in net.body if isinstance(m, nn.Conv2d)]
        for conv in convs[have.depth:]:
            nn.init.dirac_(conv.weight)
            nn.init.zeros_(conv.bias)
    state = net.state_dict()  # the source's keys name the same layers here (the heads sit after the tower)
    for key, value in source.state_dict().items():
        if key.startswith("value_head.") and not cfg.value_head:
            continue
        state[key] = _widen(state[key], value.detach())
    if cfg.arch == "resnet" and cfg.width > have.width:
        for i in range(len(source.blocks)):  # the added channels' residual branch starts at zero
            for name in ("weight", "bias"):
                state[f"blocks.{i}.bn2.{name}"][have.width:] = 0
    net.load_state_dict(state)
    return net


def average_networks(nets: list[MoveNet]) -> MoveNet:
    """A new network whose weights and batch-norm statistics are the element-wise mean of
    ``nets``' (one architecture: a ValueError otherwise); integer buffers (batch norm's step
    count) are the first net's. Why: the mean of consecutive self-play generations, or of
    fine-tunes of one net ("model soups"), is a cheap candidate player; on this project's
    nets it plays about as well as its parts (docs/results/one-ply.md#weight-averages)."""
    if not nets:
        raise ValueError("average_networks: no networks to average")
    cfg = nets[0].config
    for i, net in enumerate(nets[1:], 2):
        if net.config != cfg:
            raise ValueError(f"average_networks: network {i} is {net.config}, not {cfg} as the first")
    states = [net.state_dict() for net in nets]
    with torch.no_grad():
        mean = {k: torch.stack([s[k].float() for s in states]).mean(0).to(v.dtype) if v.is_floating_point()
                else v.clone() for k, v in states[0].items()}
    out = build_network(cfg).to(next(iter(states[0].values())).device)
    out.load_state_dict(mean)
    return out.train(nets[0].training)


def temper_policy(net: MoveNet, temperature: float) -> MoveNet:
    """Divide the net's move logits by ``temperature``, in place, by scaling the policy's last
    layer (a 1x1 conv, linear in its weights): the argmax, so the 1-ply player, is unchanged,
    while a search reads softmax(logits / T) as its priors. Why: self-play trains the policy on
    search targets sharper than the prior, generation after generation, and a prior sure of
    more than it knows leaves a small search less to correct (``evaluate.py --calibrate``)."""
    Setting(float, low=0, low_open=True).check(temperature, "the policy temperature")  # a ValueError
    layer = net.policy_head[-1] if isinstance(net, ResNet) else net.head
    with torch.no_grad():
        layer.weight.div_(temperature)
        layer.bias.div_(temperature)
    return net


def _widen(fresh: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """``old`` in the leading corner of ``fresh`` (the same when the shapes agree). Inputs
    ``old`` lacks (dim 1 of a weight) get weight 0, so its outputs are unchanged; the
    outputs it lacks (dim 0) keep their fresh initialisation, so the new channels learn."""
    out = fresh.clone()
    if out.dim() >= 2 and out.shape[1] > old.shape[1]:
        out[: old.shape[0], old.shape[1]:] = 0
    out[tuple(slice(0, n) for n in old.shape)] = old
    return out


def plain(obj, where: str = "checkpoint"):
    """``obj`` as what ``torch.load(weights_only=True)`` accepts: tensors, dicts, lists,
    tuples, str, numbers, bool and None. Dict subclasses (Lightning's ``AttributeDict``),
    paths and numpy scalars are converted; anything else is a bug and raises TypeError,
    so we never write a file our own loader would refuse."""
    if obj is None or isinstance(obj, (bool, int, float, str, bytes, torch.Tensor, torch.dtype, torch.device)):
        return obj
    if isinstance(obj, dict):
        return {k: plain(v, f"{where}[{k!r}]") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [plain(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return items if isinstance(obj, list) else tuple(items)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"{where}: {type(obj).__name__} cannot be stored in a weights-only checkpoint")


def save_checkpoint_file(obj: dict, path) -> None:
    """``torch.save`` of plain contents, atomically: serialized in memory, then written to a
    temporary file beside ``path`` and renamed, so a kill or a full disk leaves the old file.
    (torch's own file writer reports a full disk as a RuntimeError; Python's write gives
    ENOSPC, which ``run_main`` words as "no space left on device", naming ``path``.)"""
    buf = io.BytesIO()
    torch.save(plain(obj, str(path)), buf)
    atomic_write(path, buf.getbuffer())


def save_network(net: MoveNet, path, **metadata) -> None:
    """A small checkpoint for shipping: the network's config as a plain dict, its weights,
    and ``metadata`` (plain values: metrics, generation...), no optimizer."""
    if {"config", "state_dict", "hparams"} & set(metadata):
        raise TypeError("save_network: config, state_dict and hparams are the network's own keys")
    save_checkpoint_file({"config": net.config.to_dict(), "state_dict": net.state_dict(), **metadata}, path)
