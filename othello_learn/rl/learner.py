"""Training the network on self-play samples: value MSE + policy cross-entropy
against the search's policy target (PUCT's visit distribution, Gumbel's improved
policy) + L2, with a random D4 symmetry per
sample applied on the device (boards, history and the policy target alike).
On the fast path where the hardware has it (bf16 autocast + channels_last,
``othello_learn.models.fastpath``), as supervised training; the weights and the
optimizer stay fp32."""

from __future__ import annotations

import copy
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from othello_learn.cli import bar_pacing
from othello_learn.models import fastpath
from othello_learn.models.batch import augment, from_arrays
from othello_learn.models.losses import entropy, l2_penalty, move_losses
from othello_learn.models.nets import read_checkpoint, save_checkpoint_file

from othello_learn.rl.selfplay import SelfPlayGames

if TYPE_CHECKING:
    from othello_learn.rl.settings import RunConfig


def to_device_batch(games: SelfPlayGames, idx: np.ndarray, device) -> dict:
    """Samples ``idx`` of ``games`` as a model batch with the self-play targets
    (``policy``: the search's policy target, ``outcome``: the game's result)."""
    batch = from_arrays(games.player[idx], games.opponent[idx], games.black_to_move[idx], games.history[idx], device)
    batch["policy"] = torch.from_numpy(games.policy[idx].astype(np.float32)).to(device)
    batch["outcome"] = torch.from_numpy(games.outcome[idx].astype(np.float32)).to(device)
    return batch


def losses(net, batch: dict, l2: float, value_weight: float = 1.0) -> dict:
    """AlphaZero's loss: value and policy weighted alike by default, no label smoothing,
    and the L2 term written out (plain Adam, no decoupled weight decay). A
    ``value_weight`` below 1 slows the value head's fit to the few thousand games'
    outcomes of a replay window, which otherwise pull a head trained on millions of
    expert results towards them (the loop's ``--value-weight``)."""
    parts = move_losses(net(batch), batch["policy"], batch["outcome"], value_weight=value_weight)
    reg = l2_penalty(net)
    return {"loss": parts["loss"] + l2 * reg, "policy_loss": parts["policy_loss"], "value_loss": parts["value_loss"],
            "l2": reg}


@torch.no_grad()
def policy_sharpness(net, games: SelfPlayGames, n: int = 4096, seed: int = 0, device="cpu") -> dict:
    """Mean entropy (nats) of the net's policy and of the recorded targets on ``n`` random positions
    of ``games``. Why: Gumbel self-play trains the policy on improved-policy targets sharper than
    the prior, generation after generation; the net's 1-ply moves do not show it, but its search
    does (a prior sure of more than it knows leaves a small search less to correct:
    docs/results/selfplay.md#over-confident-priors-and-calibration). Watching the two numbers is the cheap check."""
    idx = np.sort(np.random.default_rng(seed).choice(len(games.player), min(n, len(games.player)), replace=False))
    batch = to_device_batch(games, idx, device)
    was_training = net.training
    net.eval()
    probs = torch.softmax(net(batch)["policy"].float(), -1)
    net.train(was_training)
    return {"policy_entropy": float(entropy(probs).mean()), "target_entropy": float(entropy(batch["policy"]).mean())}


# A training batch's ceiling, as the training config's data.batch_size: the loop's --batch-size 2**31-1
# drew a 16 GiB index array before its first step.
MAX_BATCH = 2**20


@dataclass(frozen=True)
class TrainSettings:
    """What a training computes: the same settings, games and device train the same weights,
    and a saved training state is resumed only under the same (its fingerprint).
    ``precision``: "auto" (the fast path where supported), or a Lightning precision string."""

    steps: int
    batch_size: int = 256
    lr: float = 1e-3
    l2: float = 1e-4
    value_weight: float = 1.0
    symmetries: bool = True
    precision: str = "auto"
    seed: int = 0

    @classmethod
    def from_run(cls, cfg: RunConfig, steps: int, seed: int) -> TrainSettings:
        """The loop's training (--batch-size, --lr, --l2, --value-weight) of ``steps`` steps
        from the generation's ``seed``."""
        return cls(steps, cfg.batch_size, cfg.lr, cfg.l2, cfg.value_weight, seed=seed)


@dataclass(frozen=True)
class Resume:
    """What carries a training over a kill and from one generation to the next.

    ``state_path``: the training state (weights, Adam's moments, both samplers, the step,
    the running losses) is saved there every ``save_every_s`` seconds, and a call that finds
    it goes on from it: a kill costs at most that much training, and the resumed call draws
    the same batches and ends with the same weights as one that was never stopped. A state
    saved for other settings, other games or another kind of device (a resume with another
    --device) is ignored (and replaced at the next save). The caller deletes the file once it
    has kept the result.

    ``optimizer_state``: Adam's state from the net's previous training, to go on from its
    moments (KataGo's loop keeps its optimizer across generations) instead of a fresh Adam,
    whose first steps move every weight by about ``lr`` whatever its gradient's noise. Its
    step size is replaced by ``lr``. ``optimizer_out``: a file the final state is written to
    (whole), for the next call."""

    state_path: Path | None = None
    save_every_s: float = 60.0
    optimizer_state: dict | None = None
    optimizer_out: Path | None = None


def train_network(net, games: SelfPlayGames, settings: TrainSettings, *, device="cpu", progress: bool = False,
                  resume: Resume = Resume()) -> dict:
    """``settings.steps`` Adam steps on uniform samples of ``games``; returns mean losses and
    the training's ``seconds`` (across resumes, ``resume.state_path``)."""
    steps, batch_size, lr, l2, seed = settings.steps, settings.batch_size, settings.lr, settings.l2, settings.seed
    state_path = resume.state_path
    if getattr(net, "value_head", None) is None:
        raise ValueError("self-play training needs a network with a value head (arch: resnet, value_head: true)")
    precision = fastpath.resolve(settings.precision, device)
    fastpath.prepare(net, device, precision)
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    totals: dict[str, float] = {}
    start, seconds_before = 0, 0.0
    fingerprint = {"steps": steps, "batch_size": batch_size, "lr": lr, "l2": l2, "seed": seed,
                   "symmetries": settings.symmetries, "samples": len(games.player), "precision": precision}
    if settings.value_weight != 1.0:  # a state saved before the option existed trained with 1 and still matches
        fingerprint["value_weight"] = settings.value_weight
    if resume.optimizer_state is not None:
        load_optimizer_state(opt, resume.optimizer_state, lr)
        fingerprint["inherited_optimizer"] = True
    if state_path is not None and Path(state_path).exists():
        saved = read_checkpoint(state_path)
        # A state saved on another kind of device (--device may change on resume) holds that device's
        # generator state (CPU: 5056 bytes, CUDA: 16), which set_state refused with a traceback on every rerun.
        saved_gen = saved.get("torch_rng")
        fits = isinstance(saved_gen, torch.Tensor) and saved_gen.shape == gen.get_state().shape
        if saved.get("fingerprint") == fingerprint and fits:
            net.load_state_dict(saved["net"])
            opt.load_state_dict(saved["optimizer"])
            rng.bit_generator.state = saved["numpy_rng"]
            gen.set_state(saved["torch_rng"])
            start, totals, seconds_before = saved["step"], dict(saved["totals"]), saved["seconds"]
            print(f"training goes on from step {start} of {steps} ({state_path})", file=sys.stderr)
        else:
            print(f"{state_path}: saved for other training settings, games or device: training from the start",
                  file=sys.stderr)
    from tqdm.auto import trange

    t0 = last_save = time.monotonic()
    for step in trange(start, steps, initial=start, total=steps, disable=not progress, desc="training",
                       leave=False, file=sys.stderr, **bar_pacing()):
        idx = rng.integers(0, len(games.player), batch_size)
        batch = to_device_batch(games, idx, device)
        if settings.symmetries:
            batch = augment(batch, generator=gen)
        with fastpath.autocast(device, precision):
            parts = losses(net, batch, l2, settings.value_weight)
        opt.zero_grad(set_to_none=True)
        parts["loss"].backward()
        opt.step()
        for k, v in parts.items():
            totals[k] = totals.get(k, 0.0) + float(v.detach())
        if not math.isfinite(totals["loss"]):  # its NaN weights would be saved, then refused on every load
            loss = float(parts["loss"].detach())
            raise TrainingDiverged(f"training diverged at step {step + 1} of {steps} (loss {loss})")
        if state_path is not None and step + 1 < steps and time.monotonic() - last_save >= resume.save_every_s:
            save_checkpoint_file({"fingerprint": fingerprint, "step": step + 1, "net": net.state_dict(),
                                  "optimizer": opt.state_dict(), "numpy_rng": rng.bit_generator.state,
                                  "torch_rng": gen.get_state(), "totals": totals,
                                  "seconds": seconds_before + time.monotonic() - t0}, state_path)
            last_save = time.monotonic()
    net.eval()
    if resume.optimizer_out is not None:
        save_checkpoint_file(opt.state_dict(), resume.optimizer_out)
    return {**{k: v / max(steps, 1) for k, v in totals.items()}, "seconds": seconds_before + time.monotonic() - t0}


class TrainingDiverged(ArithmeticError):
    """The loss stopped being a number: nothing of the training is saved."""


class OptimizerStateError(ValueError):
    """A saved optimizer state that belongs to another network."""


def load_optimizer_state(opt: torch.optim.Optimizer, state: dict, lr: float) -> None:
    """``state`` into ``opt``, its step size replaced by ``lr`` (a resumed run may change
    it). A state of another network's shape is refused in one line, not half loaded."""
    try:  # a copy: the optimizer would otherwise train the caller's tensors in place
        opt.load_state_dict(copy.deepcopy(state))
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise OptimizerStateError(f"the saved optimizer state does not fit this network: {e}") from None
    shapes = [(p.shape, opt.state[p].get("exp_avg", p).shape) for g in opt.param_groups for p in g["params"]]
    if any(a != b for a, b in shapes):
        raise OptimizerStateError("the saved optimizer state does not fit this network: its moments have other "
                                  "shapes")
    for group in opt.param_groups:
        group["lr"] = lr
