"""Staleness of asynchronous rollout data: per-token tensors and the metrics split by it.

A token sampled by policy version ``v`` and trained on at version ``V`` has staleness
``V - v`` (versions count weight syncs). PPO-EWMA's decoupled objective is what makes
such data usable: the clipped ratio is taken against the proximal (EWMA) policy, and the
behaviour policy enters only through the capped weight ``pi_prox / pi_behav``, with
``pi_behav`` the engine's per-token log-prob under the version that sampled the token.
The train/inference mismatch metrics grow with staleness (the trainer's current weights
drift away from the sampling ones), so they are reported per staleness level:
``mismatch/staleness_<s>/<metric>``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from baselines.mismatch import mismatch_metrics
from baselines.trajectory import Trajectory

__all__ = ["mismatch_by_staleness", "staleness_stats", "token_staleness"]


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
