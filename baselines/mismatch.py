"""Train/inference mismatch: measuring it and correcting for it.

The rollout engine (vLLM kernels, bf16, batch-dependent reductions) and the trainer
assign slightly different probabilities to the same tokens under the same weights. Let
``rho = pi_trainer_old / pi_engine`` be the ratio for a sampled token, where
``pi_trainer_old`` is the trainer's probability under the weights that produced the
rollout: for a token sampled ``s`` weight syncs ago, the weights of *that* version, not
the current ones, so that ``rho`` measures the engine alone and policy drift stays with
PPO-EWMA's decoupled weight (:mod:`baselines.update`, *Staleness and engine mismatch*).
Two corrections re-weight the loss by ``rho``:

* **TIS**, truncated importance sampling: ``w = min(rho, tis_cap)``.
* **MIS**, masked importance sampling: ``w = rho`` if ``mis_low <= rho <= mis_high``
  else ``0``; tokens (or sequences) the engine sampled far off the trainer's
  distribution are excluded rather than down-weighted. By default
  (``mis_denominator="kept"``) they are also left out of the loss's token-mean
  denominator (:func:`mis_kept_mask`).

At ``level="token"`` the ratio is per token. At ``level="sequence"`` it is the product
over the sequence's generated tokens, ``rho_seq = exp(sum_t log rho_t)``, broadcast to
all its tokens. All weights are detached: they are constants of the objective.

The metrics (:func:`mismatch_metrics`) are reported whether or not a correction is on:
mean and max ``|log pi_trainer - log pi_engine|`` and the K3 estimator of
``KL(pi_engine || pi_trainer)``, ``E[(rho - 1) - log rho]`` over engine samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

__all__ = ["MismatchConfig", "MismatchMode", "MismatchLevel", "MisDenominator", "mismatch_weights", "mismatch_metrics", "mis_kept_mask"]

MismatchMode = Literal["none", "tis", "mis"]
MismatchLevel = Literal["token", "sequence"]
MisDenominator = Literal["kept", "all"]

# exp() of a sequence's summed log-ratio overflows float32 beyond ~88; clamp well below.
_MAX_LOG_RATIO = 20.0


@dataclass
class MismatchConfig:
    """How to correct for the rollout engine and the trainer disagreeing."""

    mode: MismatchMode = "none"
    """``none``: the engine's log-probs are the behaviour policy of PPO-EWMA directly.
    ``tis``/``mis``: the trainer's own log-probs at rollout weights are the behaviour
    policy and the engine/trainer ratio is truncated or masked (module docstring)."""
    level: MismatchLevel = "token"
    """Ratio per token or per sequence (product over its generated tokens)."""
    tis_cap: float = 2.0
    """TIS truncates the ratio at this value."""
    mis_low: float = 0.5
    """MIS drops tokens/sequences whose ratio is below this value."""
    mis_high: float = 2.0
    """MIS drops tokens/sequences whose ratio is above this value."""
    mis_denominator: MisDenominator = "kept"
    """Which tokens the loss's token mean divides by under MIS: ``kept`` (the default,
    as in verl) leaves the rejected tokens out, so rejecting tokens does not shrink the
    remaining tokens' step; ``all`` counts every generated token."""

    def __post_init__(self) -> None:
        if self.mode not in ("none", "tis", "mis"):
            raise ValueError(f"Expected mismatch mode 'none', 'tis' or 'mis', actual value: {self.mode!r}")
        if self.mis_denominator not in ("kept", "all"):
            raise ValueError(f"Expected mis_denominator 'kept' or 'all', actual value: {self.mis_denominator!r}")
        if self.level not in ("token", "sequence"):
            raise ValueError(f"Expected mismatch level 'token' or 'sequence', actual value: {self.level!r}")
        if not self.tis_cap > 0 or not 0 <= self.mis_low < 1 < self.mis_high:  # NaN fails both
            raise ValueError(
                "Expected tis_cap > 0 and mis_low < 1 < mis_high, actual values: "
                f"tis_cap={self.tis_cap}, mis_low={self.mis_low}, mis_high={self.mis_high}"
            )


def _log_ratio(logp_trainer: torch.Tensor, logp_engine: torch.Tensor, mask: torch.Tensor, level: MismatchLevel) -> torch.Tensor:
    log_ratio = (logp_trainer - logp_engine).detach() * mask
    if level == "sequence":
        log_ratio = log_ratio.sum(-1, keepdim=True).expand_as(mask)
    return log_ratio.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)


@torch.no_grad()
def mismatch_weights(
    logp_trainer: torch.Tensor,
    logp_engine: torch.Tensor,
    mask: torch.Tensor,
    config: MismatchConfig,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Return detached per-token weights ``[B, T]`` and statistics over masked tokens.

    With ``mode="none"`` the weights are all ones (masked positions zero).
    """
    mask = mask.to(logp_trainer.dtype)
    n = mask.sum().clamp_min(1.0)
    if config.mode == "none":
        return mask.clone(), {}
    rho = _log_ratio(logp_trainer, logp_engine, mask, config.level).exp()
    if config.mode == "tis":
        weights = rho.clamp(max=config.tis_cap)
        changed = (rho > config.tis_cap).to(mask.dtype)
    else:
        keep = ((rho >= config.mis_low) & (rho <= config.mis_high)).to(mask.dtype)
        weights = rho * keep
        changed = 1.0 - keep
    weights = weights * mask
    stats = {
        "is_weight_mean": float((weights * mask).sum() / n),
        "is_weight_max": float((rho * mask).max()) if mask.any() else 0.0,
        f"is_frac_{'clipped' if config.mode == 'tis' else 'masked'}": float((changed * mask).sum() / n),
    }
    return weights, stats


@torch.no_grad()
def mismatch_metrics(logp_trainer: torch.Tensor, logp_engine: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Mean/max absolute log-prob difference and K3 KL(engine || trainer) over masked tokens."""
    mask = mask.to(torch.bool)
    if not mask.any():
        return {"logprob_abs_diff_mean": 0.0, "logprob_abs_diff_max": 0.0, "kl_k3": 0.0}
    diff = (logp_trainer - logp_engine).float()[mask]
    rho = diff.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO).exp()
    return {
        "logprob_abs_diff_mean": float(diff.abs().mean()),
        "logprob_abs_diff_max": float(diff.abs().max()),
        "kl_k3": float(((rho - 1.0) - diff).mean()),
    }


@torch.no_grad()
def mis_kept_mask(logp_trainer: torch.Tensor, logp_engine: torch.Tensor, mask: torch.Tensor, config: MismatchConfig) -> torch.Tensor:
    """The loss mask whose sum is the token-mean denominator.

    ``mask`` itself, except under MIS with ``mis_denominator="kept"``, where the tokens
    MIS rejects are removed from it too (their weight is already 0).
    """
    if config.mode != "mis" or config.mis_denominator == "all":
        return mask
    rho = _log_ratio(logp_trainer, logp_engine, mask.to(logp_trainer.dtype), config.level).exp()
    keep = (rho >= config.mis_low) & (rho <= config.mis_high)
    return mask * keep.to(mask.dtype)
