"""Group-normalised outcome advantages.

Every task is sampled ``G`` times (a *group*). An episode's advantage is its reward
relative to the other samples of the same task::

    A_i = (R_i - mean_{j in g(i)} R_j) / (std_{j in g(i)} R_j + eps)

with the population standard deviation. With ``normalize_std=False`` the division is
skipped (``A_i = R_i - mean``), which keeps the scale of rewards and does not blow up
groups whose rewards barely differ. Groups whose rewards are all equal (all solved or
all failed) carry no signal and get ``A = 0`` exactly. Groups may have unequal sizes
because episodes flagged ``infra_failed`` are dropped before this point; a group left
with one episode gets ``A = 0``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["group_normalized_advantages"]


def group_normalized_advantages(
    rewards: torch.Tensor,
    group_ids: Sequence[int] | torch.Tensor,
    *,
    normalize_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Return one advantage per episode, normalised within its group.

    Args:
        rewards: shape ``[N]``, one outcome reward per episode.
        group_ids: shape ``[N]``, episodes with the same id are samples of one task.
        normalize_std: divide by the group's standard deviation (plus ``eps``).
        eps: keeps the division finite for groups with (near) equal rewards.
    """
    rewards = rewards.to(torch.float64)
    ids = torch.as_tensor(group_ids, dtype=torch.long, device=rewards.device)
    if ids.shape != rewards.shape:
        raise ValueError(
            f"Expected one group id per reward, actual shapes: rewards {tuple(rewards.shape)}, "
            f"group_ids {tuple(ids.shape)}"
        )
    _, inverse = torch.unique(ids, return_inverse=True)
    n_groups = int(inverse.max()) + 1 if len(inverse) else 0
    count = torch.zeros(n_groups, dtype=rewards.dtype, device=rewards.device).index_add_(
        0, inverse, torch.ones_like(rewards)
    )
    mean = torch.zeros_like(count).index_add_(0, inverse, rewards) / count
    centered = rewards - mean[inverse]
    if not normalize_std:
        return centered.to(torch.float32)
    var = torch.zeros_like(count).index_add_(0, inverse, centered**2) / count
    std = var.sqrt()[inverse]
    return (centered / (std + eps)).to(torch.float32)
