"""Which numeric path a network runs on: bf16 autocast and channels_last
where the hardware has fast kernels for them, fp32 elsewhere.

On a CPU with AVX512-BF16 (or AMX) oneDNN runs bf16 convolutions in
channels_last at 2-4x the fp32 NCHW speed for training and batched inference
(docs/results/speed.md#the-training-fast-path, ``benchmarks/train_throughput.py --compare``); at batch 1 the
format conversions cost more than they save, so single-position play stays
fp32. On CUDA, bf16 autocast where the GPU supports it. Detected at run time,
never assumed: a CPU without the instructions gets fp32 NCHW.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os

import torch

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
