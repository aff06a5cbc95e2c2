"""Which numeric path a network runs on: bf16 autocast and channels_last
where the hardware has fast kernels for them, fp32 elsewhere.

On a CPU with AVX512-BF16 (or AMX) oneDNN runs bf16 convolutions in
channels_last at 2-4x the fp32 NCHW speed for training and batched inference
(docs/results/speed.md#the-training-fast-path, ``benchmarks/train_throughput.py --compare``); at batch 1 the
format conversions cost more than they save, so single-position play stays
fp32. On CUDA, bf16 autocast where the GPU supports it. Detected at run time,
never assumed: a CPU without the instructions gets fp32 NCHW.

Inference (self-play's ``Evaluator``) runs an inference-only copy of the network
with its batch norms folded into the convolutions before them (``fold_batchnorm``):
the same function with fewer operations, on every path but "plain". ``inference_path`` picks
how that copy runs; ``torch.compile`` is offered but never picked by itself (see
``AUTO_PATHS``).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import os

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from othello_learn.files import UserError, one_line

FP32 = "32-true"
BF16 = "bf16-mixed"


def default_device() -> str:
    """The device a network runs on when the user names none: the GPU where torch sees
    one, else the CPU (every command's ``--device`` default, and the arena's players)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_has_bf16() -> bool:
    """True when this CPU has native bf16 dot products (AVX512-BF16 or AMX)."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except AttributeError:  # an older torch without the probes: be safe
        return False


def usable_device(name: str, flag: str = "--device") -> torch.device:
    """``name`` as a device this machine has, tried with a one-element tensor: a typo,
    or ``cuda`` where torch has no CUDA or there is no GPU, is a one-line error naming
    ``flag`` before any work, rather than a traceback (or a misread checkpoint) later."""
    try:
        device = torch.device(name)
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError, ValueError) as e:
        raise UserError(f"{flag} {name}: not usable on this machine ({one_line(e)})") from None
    if device.type == "meta":  # tensors of shapes only: a network there computes nothing
        raise UserError(f"{flag} {name}: holds no data (torch's meta device); give cpu or cuda")
    return device


def device_memory(device: torch.device) -> int | None:
    """Bytes of memory ``device`` has: a GPU's own, else this machine's (a CPU, and Apple's MPS,
    which shares it); None where it cannot be told. What a command checks its sizes against."""
    try:
        if device.type == "cuda":
            return int(torch.cuda.get_device_properties(device).total_memory)
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError, RuntimeError):  # no sysconf (Windows), or no such name
        return None


def auto_precision(device: str | torch.device) -> str:
    """The Lightning precision string of the fast path on ``device`` ("cpu", "cuda", "auto", ...)."""
    name = str(device).lower()
    try:
        # what Lightning's "auto" and "gpu" pick: Apple's MPS (fp32 below), else CUDA, else the CPU
        kind = ("mps" if torch.backends.mps.is_available() else "cuda" if torch.cuda.is_available() else "cpu") \
            if name in ("auto", "gpu") else torch.device(name).type
    except RuntimeError:  # a name torch does not know (Lightning's "tpu", a typo): the caller's check names it
        return FP32
    if kind == "cuda":
        return BF16 if torch.cuda.is_bf16_supported() else "16-mixed"
    if kind == "cpu":
        return BF16 if cpu_has_bf16() else FP32
    return FP32


def resolve(precision, device: str | torch.device) -> str:
    """A precision setting as the Lightning string every caller passes on: "auto" (or
    None) is the fast path on ``device``; "32" and "bf16" are short for "32-true" and
    "bf16-mixed"; any other Lightning string stands as given."""
    p = "auto" if precision is None else str(precision)
    if p == "auto":
        return auto_precision(device)
    p = {"32": FP32, "bf16": BF16, "16": "16-mixed", "64": "64-true"}.get(p, p)
    if p not in LIGHTNING_PRECISIONS:  # "fp16" would otherwise run as fp32 without a word
        raise ValueError(f"precision {precision!r}: expected auto, 32, bf16 or one of {', '.join(LIGHTNING_PRECISIONS)}")
    if p == "16-true":  # measured: NaN weights after 3 steps of a tiny net
        raise ValueError(f"precision {precision!r}: fp16 weights diverge at once here (Adam's epsilon, 1e-8, is 0 "
                         "in fp16); use 16-mixed, bf16-mixed or bf16-true")
    if p.startswith("transformer-engine") and importlib.util.find_spec("transformer_engine") is None:
        raise ValueError(f"precision {precision!r}: needs NVIDIA's transformer_engine package, which is not installed")
    return p


# Lightning's precision strings (lightning.fabric.connector._PRECISION_INPUT_STR), as the trainer takes them.
LIGHTNING_PRECISIONS = ("32-true", "bf16-mixed", "bf16-true", "16-mixed", "16-true", "64-true",
                        "transformer-engine", "transformer-engine-float16")


def is_bf16(precision) -> bool:
    return "bf16" in str(precision)


def prepare(net: torch.nn.Module, device: str | torch.device, precision) -> torch.nn.Module:
    """Put ``net`` in the memory format its path wants: channels_last for bf16 on CPU."""
    if torch.device(device).type == "cpu" and is_bf16(precision):
        net.to(memory_format=torch.channels_last)
    return net


def autocast(device: str | torch.device, precision) -> contextlib.AbstractContextManager:
    """The autocast context for inference on ``device`` under ``precision``."""
    kind = torch.device(device).type
    if is_bf16(precision):
        return torch.autocast(kind, dtype=torch.bfloat16)
    if str(precision).startswith("16"):
        return torch.autocast(kind, dtype=torch.float16)
    return contextlib.nullcontext()


# How the Evaluator's network runs: "plain" the caller's network as it is (no copy); the others
# an inference copy with its batch norms folded: "folded" NCHW, "channels_last" in channels_last,
# "compiled" compiled by inductor with frozen weights.
INFERENCE_PATHS = ("plain", "folded", "channels_last", "compiled")
# What "auto" picks on the CPU, by precision: folded in channels_last for both. oneDNN's bf16
# convolutions want channels_last; in fp32 it measured fastest of plain, folded and channels_last at
# self-play's batches (32 and 256 positions) with oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2,
# ATEN_CPU_CAPABILITY=avx2), the CPUs this path is for, and within noise of folded NCHW with AVX-512
# (README, the self-play section). torch.compile is never picked by itself: it took over 3 minutes per
# process (dynamic batch sizes) and ran slower than folded eager (benchmarks/selfplay.py), so it
# does not pay for itself within a self-play part.
AUTO_PATHS = {"bf16": "channels_last", "fp32": "channels_last"}


def inference_path(path: str, device: str | torch.device, precision) -> str:
    """The inference path ``path`` ("auto" or one of ``INFERENCE_PATHS``) names on ``device``
    under ``precision`` (a Lightning string from ``resolve``): "auto" is the fastest measured here
    that keeps the plain network's values (to fp32 rounding; bf16 where ``precision`` is bf16)."""
    if path != "auto":
        if path not in INFERENCE_PATHS:
            raise ValueError(f"inference path {path!r}: expected auto or one of {', '.join(INFERENCE_PATHS)}")
        return path
    if torch.device(device).type != "cpu":
        return "folded"
    return AUTO_PATHS["bf16" if is_bf16(precision) else "fp32"]


def describe(path: str, precision) -> str:
    """One line saying how a network runs: what the benchmark and the loop print."""
    numbers = "bf16 autocast" if is_bf16(precision) else "fp16 autocast" if str(precision).startswith("16") \
        else "fp32"
    how = {"plain": "plain network, batch norms unfolded", "folded": "batch norms folded",
           "channels_last": "batch norms folded, channels_last", "compiled": "batch norms folded, torch.compile"}
    return f"{numbers}, {how[path]}"


def auto_path(device: str | torch.device) -> str:
    """What an ``Evaluator`` on ``device`` with its defaults runs, in words (the loop says it)."""
    precision = resolve("auto", device)
    return f"{describe(inference_path('auto', device, precision), precision)} ({torch.device(device).type})"


def fold_batchnorm(net: nn.Module) -> nn.Module:
    """An inference-only copy of ``net`` in eval mode, each batch norm that follows a
    convolution folded into that convolution's weights and bias (the batch norm becomes an
    identity): the same function with one operation fewer per layer. ``net`` is unchanged.
    Folded are the pairs in a ``Sequential`` and a residual block's ``convN``/``bnN``; a batch
    norm anywhere else stays as it is (in eval mode: still the same function)."""
    out = copy.deepcopy(net).eval()
    for module in list(out.modules()):
        if isinstance(module, nn.Sequential):
            pairs = [(str(i), str(i + 1)) for i in range(len(module) - 1)]
        else:
            pairs = [(f"conv{i}", f"bn{i}") for i in range(1, 10)]
        for conv_name, bn_name in pairs:
            conv, bn = getattr(module, conv_name, None), getattr(module, bn_name, None)
            if isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d) and bn.track_running_stats:
                setattr(module, conv_name, fuse_conv_bn_eval(conv, bn))
                setattr(module, bn_name, nn.Identity())
    return out.requires_grad_(False)


def inference_copy(net: nn.Module, path: str) -> nn.Module:
    """``net`` as ``path`` runs it: ``net`` itself for "plain", else a folded copy
    (``fold_batchnorm``), in channels_last or with its trunk compiled where ``path`` says.
    The copy is taken now: training ``net`` later does not reach it."""
    has_bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in net.modules())
    if path == "plain" or (path == "folded" and not has_bn):  # nothing to fold: no copy
        return net.eval()
    out = fold_batchnorm(net)
    if path == "channels_last":
        out.to(memory_format=torch.channels_last)
    elif path == "compiled":
        # The trunk only (the encoders run numpy); frozen weights let inductor fold constants,
        # dynamic shapes serve every batch size with one compilation.
        out.trunk = torch.compile(out.trunk, dynamic=True, options={"freezing": True})
    return out
