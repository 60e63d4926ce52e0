"""Staleness of asynchronous rollout data: per-token tensors and the metrics split by it.

A token sampled by policy version ``v`` and trained on at version ``V`` has staleness
``V - v`` (versions count weight syncs). PPO-EWMA's decoupled objective is what makes
such data usable: the clipped ratio is taken against the proximal (EWMA) policy, and the
behaviour policy enters only through the capped weight ``pi_prox / pi_behav``, with
``pi_behav`` the engine's per-token log-prob under the version that sampled the token.
Two things separate the trainer's current policy from the engine's log-prob of a stale
token, and they are measured apart:

* **policy drift** (staleness): ``log pi_trainer(theta_V) - log pi_trainer(theta_v)``,
  the weights having moved ``V - v`` syncs; :func:`staleness_metrics` reports it as
  ``staleness/*`` (and ``staleness/lag_<s>/*`` per lag);
* **engine mismatch**: ``log pi_trainer(theta_v) - log pi_engine(theta_v)``, the same
  weights computed by two stacks; reported as ``mismatch/*`` and, per lag,
  ``mismatch/staleness_<s>/*`` (:func:`mismatch_by_staleness`), which should not grow
  with the lag.

Both need the trainer's log-prob under the sampling version ``theta_v``
(:mod:`baselines.policy_versions`), computed when a TIS/MIS correction is on. Without
one, ``mismatch/*`` compare the trainer's *current* log-probs with the engine's and fold
the drift in; ``mismatch/staleness_0/*`` (fresh tokens) is the engine mismatch alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from baselines.mismatch import mismatch_metrics
from baselines.trajectory import Trajectory

__all__ = ["mismatch_by_staleness", "staleness_metrics", "staleness_stats", "token_staleness"]


def token_staleness(trajectories: Sequence[Trajectory], current_version: int) -> torch.Tensor:
    """``[N, T]`` right-padded like :func:`~baselines.trajectory.collate`: staleness of each
    generated token, 0 elsewhere."""
    width = max((len(t.token_ids) for t in trajectories), default=0)
    out = torch.zeros((len(trajectories), width), dtype=torch.long)
    for i, t in enumerate(trajectories):
        versions = torch.as_tensor(t.token_versions, dtype=torch.long)
        out[i, : len(versions)] = torch.where(versions >= 0, current_version - versions, torch.zeros_like(versions))
    return out


def staleness_stats(trajectories: Sequence[Trajectory], current_version: int) -> dict[str, float]:
    """``rollout/staleness_mean`` and ``_max`` over generated tokens; ``_episode_max_mean``
    is the mean over episodes of their oldest token's staleness."""
    per_token = [current_version - v for t in trajectories for v in t.token_versions if v >= 0]
    oldest = [max((current_version - v for v in t.token_versions if v >= 0), default=0) for t in trajectories]
    return {
        "rollout/staleness_mean": sum(per_token) / len(per_token) if per_token else 0.0,
        "rollout/staleness_max": float(max(per_token, default=0)),
        "rollout/staleness_episode_max_mean": sum(oldest) / len(oldest) if oldest else 0.0,
    }


@torch.no_grad()
def mismatch_by_staleness(logp_trainer: torch.Tensor, logp_engine: torch.Tensor, mask: torch.Tensor,
                          staleness: torch.Tensor) -> dict[str, float]:
    """:func:`~baselines.mismatch.mismatch_metrics` over the tokens of each staleness
    level present, plus the fraction of generated tokens at that level."""
    mask = mask.to(torch.bool)
    staleness = staleness.to(mask.device)
    total = max(int(mask.sum()), 1)
    out: dict[str, float] = {}
    for level in sorted(int(s) for s in staleness[mask].unique().tolist()):
        sel = mask & (staleness == level)
        for k, v in mismatch_metrics(logp_trainer, logp_engine, sel).items():
            out[f"mismatch/staleness_{level}/{k}"] = v
        out[f"mismatch/staleness_{level}/token_frac"] = float(sel.sum()) / total
    return out


@torch.no_grad()
def staleness_metrics(logp_now: torch.Tensor, logp_sampling_version: torch.Tensor, mask: torch.Tensor,
                      staleness: torch.Tensor) -> dict[str, float]:
    """Policy drift over the stale generated tokens (staleness > 0): ``staleness/*`` are
    :func:`~baselines.mismatch.mismatch_metrics` of the trainer's current log-probs
    against its log-probs at the version that sampled each token (``kl_k3`` estimates
    ``KL(pi_v || pi_V)`` over the sampled tokens), overall and per lag
    (``staleness/lag_<s>/*``), plus ``staleness/token_frac``, the stale share of
    generated tokens."""
    mask = mask.to(torch.bool)
    staleness = staleness.to(mask.device)
    stale = mask & (staleness > 0)
    out = {"staleness/token_frac": float(stale.sum()) / max(int(mask.sum()), 1)}
    if not stale.any():
        return out
    out.update({f"staleness/{k}": v for k, v in mismatch_metrics(logp_now, logp_sampling_version, stale).items()})
    for lag in sorted(int(s) for s in staleness[stale].unique().tolist()):
        sel = stale & (staleness == lag)
        out.update({f"staleness/lag_{lag}/{k}": v for k, v in mismatch_metrics(logp_now, logp_sampling_version, sel).items()})
    return out
