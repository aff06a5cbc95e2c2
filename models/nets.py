"""Move-prediction networks. Each takes the compact batch (bitboards, history,
colour), encodes it on its own device, and returns policy logits over the 64
squares with illegal moves masked, plus a value in [-1, 1] when it has a value
head. Training, evaluation and self-play all call the same ``forward``."""

from __future__ import annotations

import io
import os
import pickle

import numpy as np
import torch
from torch import nn

from othello import bitboard as bb
from othello.files import UserError, atomic_path

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
        if encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {sorted(ENCODERS)}, got {encoder!r}")
        self.encoder = encoder
        self.encode_fn, self.in_planes = ENCODERS[encoder]

    def trunk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        x = self.encode_fn(batch)
        logits, value = self.trunk(x)
        out = {"policy": masked(logits, legal_mask(batch["player"], batch["opponent"]))}
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


def build_network(arch: str = "reference", encoder: str = "raw", width: int = 64, depth: int = 10,
                  blocks: int = 6, value_head: bool = False, **_ignored) -> MoveNet:
    """A network from flat hyperparameters (what checkpoints store); keys that
    belong to training (lr, ...) are ignored."""
    if arch == "reference":
        return ReferenceNet(encoder=encoder, depth=depth, width=width)
    if arch == "resnet":
        return ResNet(encoder=encoder, blocks=blocks, width=width, value_head=value_head)
    raise ValueError(f"arch must be one of {sorted(ARCHITECTURES)}, got {arch!r}")


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    line = lines[0] if lines else type(e).__name__
    return line.split(". ")[0] if len(line) > 120 else line  # torch appends paragraphs of advice


def read_checkpoint(path, map_location="cpu") -> dict:
    """A checkpoint file's contents, loaded with ``weights_only=True``: only tensors and
    plain values are ever unpickled, so a crafted file cannot run code on load.

    Anything else (a file that is not a checkpoint, a truncated one, one holding
    Python objects) is a ``UserError`` naming the file."""
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        blocked = [ln.strip() for ln in str(e).splitlines() if "GLOBAL" in ln or "Unsupported" in ln]
        raise UserError(f"{path}: refused to load: the file holds Python objects, not only tensors and plain "
                        f"values, and loading it could run code ({blocked[0] if blocked else _first_line(e)})") from e
    except OSError:
        raise  # missing file, permissions: run_main names the file
    except Exception as e:  # torch reports a truncated or foreign file as EOFError, RuntimeError, KeyError...
        raise UserError(f"{path}: not a readable checkpoint, truncated or corrupt "
                        f"({type(e).__name__}: {_first_line(e) if str(e) else 'unexpected end of file'})") from e
    if not isinstance(ckpt, dict):
        raise UserError(f"{path}: not a checkpoint (holds a {type(ckpt).__name__}, not a dict)")
    return ckpt


def load_network(path, map_location="cpu") -> MoveNet:
    """A network from a Lightning ``.ckpt`` or an exported ``.pt`` (see ``export``), in eval mode."""
    ckpt = read_checkpoint(path, map_location)
    hparams = ckpt.get("hyper_parameters") or ckpt.get("hparams")
    if not isinstance(hparams, dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise UserError(f"{path}: not a move-prediction checkpoint (no hyperparameters / state_dict)")
    try:
        net = build_network(**hparams)
        state = {k.removeprefix("net."): v for k, v in ckpt["state_dict"].items()
                 if not k.startswith(("metrics.", "phases."))}
        net.load_state_dict(state)
    except (TypeError, ValueError, RuntimeError) as e:
        raise UserError(f"{path}: weights do not fit the network its hyperparameters describe ({_first_line(e)})") from e
    net.hparams = dict(hparams)
    return net.eval()


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
    ENOSPC, which ``run_main`` words as "no space left on device", here naming ``path``.)"""
    buf = io.BytesIO()
    torch.save(plain(obj, str(path)), buf)
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            f.write(buf.getbuffer())
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        if e.filename is None or str(e.filename) != str(path):
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e
        raise


def export(net: MoveNet, hparams: dict, path, **extra) -> None:
    """A small checkpoint: weights and hyperparameters only (no optimizer), for shipping."""
    save_checkpoint_file({"hparams": dict(hparams), "state_dict": net.state_dict(), **extra}, path)
