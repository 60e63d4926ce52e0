"""The PPO-EWMA policy loss (Hilton, Cobbe and Schulman 2021), per token.

Three policies appear:

* ``pi_b``: the *behaviour* policy that generated the tokens (the rollout engine's
  log-probs, or, when a mismatch correction handles the engine separately, the trainer's
  log-probs under the weights of the version that sampled each token, see
  :mod:`baselines.mismatch` and :mod:`baselines.update`);
* ``pi_prox``: the *proximal* policy, centre of the trust region: an EWMA of the policy
  weights (:class:`baselines.ewma.EWMAModel`), or ``pi_b`` itself for plain PPO;
* ``pi_theta``: the policy being optimised.

For a token with advantage ``A`` the loss is::

    r      = pi_theta / pi_prox
    pi_b'  = max(pi_b, pi_theta / imp_samp_max)                         (detached)
    l      = -(pi_prox / pi_b') * min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) * w

The factor ``pi_prox / pi_b'`` corrects for the data being off-policy with respect to the
proximal policy; capping ``pi_b`` from below at ``pi_theta / imp_samp_max`` bounds the
importance weight ``pi_theta / pi_b'`` by ``imp_samp_max`` so rare behaviour tokens cannot
dominate the batch. ``w`` is the optional train/inference mismatch weight (TIS/MIS).

An optional KL penalty anchors the policy to a frozen *reference* ``pi_ref`` (the weights
RL started from, e.g. the SFT start), per token, with Schulman's k3 estimator (non-negative,
unbiased for ``KL(pi_theta || pi_ref)`` on tokens drawn from ``pi_theta``)::

    d      = log pi_ref - log pi_theta
    l_kl   = kl_coef * (exp(d) - d - 1)                    d l_kl / d log pi_theta = kl_coef * (1 - exp(d))

It is added to ``l`` unweighted: the penalty is about where the policy is, not about the
data's advantage, so no importance or mismatch weight applies to it.

With asynchronous data the two corrections stay apart: ``pi_prox / pi_b'`` is the
*staleness* factor (the policy moved since version ``v`` sampled the token) and ``w``
the *engine* factor ``pi_trainer_v / pi_engine_v`` (same weights, two stacks); their
product is ``pi_prox / pi_engine_v`` up to the caps. MIS masking therefore only ever
removes tokens the engine computed differently, never tokens that are merely old.

Aggregation is the *token mean*: the sum of ``l`` over every generated token of the
(global) minibatch divided by the number of those tokens. Pass ``num_tokens`` when a
minibatch is split into micro-batches or across processes, so that each piece divides
by the same global count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["PPOLossOutput", "ppo_ewma_loss"]


@dataclass
class PPOLossOutput:
    """The scalar loss and detached statistics, each a mean over this call's tokens."""

    loss: torch.Tensor
    stats: dict[str, float]
    num_tokens: int


def ppo_ewma_loss(
    logp: torch.Tensor,
    logp_prox: torch.Tensor,
    logp_behav: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    imp_samp_max: float = 2.0,
    weights: torch.Tensor | None = None,
    num_tokens: float | None = None,
    logp_ref: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> PPOLossOutput:
    """Compute the PPO-EWMA loss (module docstring) over ``[B, T]`` token tensors.

    Args:
        logp: ``log pi_theta`` of the taken tokens, with gradient.
        logp_prox: ``log pi_prox``; pass ``logp_behav`` for plain PPO.
        logp_behav: ``log pi_b``.
        advantages: ``[B]`` (one per sequence) or ``[B, T]``.
        mask: 1 on generated tokens, 0 on prompt, tool output and padding.
        weights: optional detached per-token mismatch weights ``w``.
        num_tokens: the token-mean denominator; defaults to ``mask.sum()``.
        logp_ref: ``log pi_ref`` of a frozen reference policy, for the KL penalty.
        kl_coef: the penalty's weight (module docstring); needs ``logp_ref`` when > 0.
    """
    if kl_coef > 0 and logp_ref is None:
        raise ValueError("kl_coef > 0 needs logp_ref, the reference policy's log-probs")
    mask = mask.to(logp.dtype)
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logp)
    advantages = advantages.to(logp.dtype)
    logp_prox = logp_prox.detach()
    logp_behav_capped = torch.maximum(logp_behav.detach(), logp.detach() - math.log(imp_samp_max))
    prox_weight = (logp_prox - logp_behav_capped).exp()

    ratio = (logp - logp_prox).exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * advantages
    token_loss = -prox_weight * torch.minimum(unclipped, clipped)
    if weights is not None:
        token_loss = token_loss * weights.detach()
    kl_ref = None
    if logp_ref is not None:
        d = logp_ref.detach() - logp
        kl_ref = d.exp() - d - 1.0
        if kl_coef > 0:
            token_loss = token_loss + kl_coef * kl_ref

    denom = float(mask.sum()) if num_tokens is None else float(num_tokens)
    loss = (token_loss * mask).sum() / max(denom, 1.0)
    capped = logp_behav.detach() < logp.detach() - math.log(imp_samp_max)
    stats = _loss_stats(logp, logp_prox, ratio, advantages, prox_weight, capped, mask, eps_low, eps_high)
    if kl_ref is not None:
        stats["kl_ref"] = float((kl_ref.detach() * mask).sum() / mask.sum().clamp_min(1.0))
    return PPOLossOutput(loss=loss, stats=stats, num_tokens=int(mask.sum()))


@torch.no_grad()
def _loss_stats(logp, logp_prox, ratio, advantages, prox_weight, capped, mask, eps_low, eps_high) -> dict[str, float]:
    n = mask.sum().clamp_min(1.0)

    def mean(x: torch.Tensor) -> float:
        return float((x.to(mask.dtype) * mask).sum() / n)

    log_r = (logp - logp_prox).detach()
    return {
        "clip_frac_low": mean((ratio < 1.0 - eps_low) & (advantages < 0)),
        "clip_frac_high": mean((ratio > 1.0 + eps_high) & (advantages > 0)),
        "approx_kl_prox": mean(log_r.exp() - 1.0 - log_r),
        "prox_weight_mean": mean(prox_weight),
        "prox_weight_max": float((prox_weight * mask).max()) if mask.any() else 0.0,
        "imp_samp_capped_frac": mean(capped),
    }
