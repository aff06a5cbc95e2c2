"""The losses of both trainings, in one place: supervised (othello_learn/train/module.py: the
expert's move, label smoothing, value weight 0.5 against the sign of the disc
difference) and self-play (othello_learn/rl/learner.py: the search's policy target,
value weight 1, an explicit L2 term since it steps plain Adam). What differs
between them is only the arguments."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def policy_loss(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0,
                legal: torch.Tensor | None = None) -> torch.Tensor:
    """Mean cross-entropy of the policy ``logits`` [N, 64] against ``target``: move indices
    [N] (int) or distributions over the squares [N, 64] (float).

    Illegal squares are out of the softmax (the networks mask them; ``legal`` [N, 64]
    says which they are, by default the unmasked logits), and label smoothing spreads
    its share over the legal squares only: spread over all 64 it would put weight on
    the masked logits' huge negative log-probabilities. The default mask is read before
    the cast to fp32: under bf16 autocast the networks mask with bf16's minimum, which is
    above fp32's, so read after the cast every square would look legal."""
    if legal is None:
        legal = logits > torch.finfo(logits.dtype).min
    logits = logits.float()
    if target.dtype in (torch.int64, torch.int32) and not label_smoothing:
        return F.cross_entropy(logits, target.long())  # the common case, one fused kernel
    logp = torch.log_softmax(logits.masked_fill(~legal, torch.finfo(logits.dtype).min), -1)
    logp = torch.where(legal, logp, torch.zeros_like(logp))  # 0 * a huge negative is 0, never NaN
    if target.dtype in (torch.int64, torch.int32):
        target = F.one_hot(target.long(), logits.shape[-1]).float()
    if label_smoothing:
        uniform = legal.float() / legal.sum(-1, keepdim=True).clamp(min=1)
        target = (1 - label_smoothing) * target + label_smoothing * uniform
    return -(target * logp).sum(-1).mean()


def value_loss(value: torch.Tensor, outcome: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the value head's output against the game's outcome for the
    side to move, in [-1, 1]."""
    return F.mse_loss(value.float(), outcome.float())


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Per row, the entropy (nats) of a move distribution; squares of probability 0 add 0.
    The one measure of how sure a policy or a target is (the loop's train_policy_entropy)."""
    return -(probs * probs.clamp_min(1e-30).log()).sum(-1)


def l2_penalty(net: torch.nn.Module) -> torch.Tensor:
    """Sum of squared weights of the convolutions and linear layers (not biases, not norms)."""
    return sum((p ** 2).sum() for p in net.parameters() if p.ndim > 1)


def move_losses(out: dict, policy_target: torch.Tensor, outcome: torch.Tensor | None = None, *,
                value_weight: float, label_smoothing: float = 0.0) -> dict[str, torch.Tensor]:
    """``loss`` = policy loss + ``value_weight`` x value loss (when the network has a
    value head and ``outcome`` is given), with its parts."""
    parts = {"policy_loss": policy_loss(out["policy"], policy_target, label_smoothing)}
    parts["loss"] = parts["policy_loss"]
    if "value" in out and outcome is not None:
        parts["value_loss"] = value_loss(out["value"], outcome)
        parts["loss"] = parts["loss"] + value_weight * parts["value_loss"]
    return parts
