"""The proximal policy of PPO-EWMA: an exponentially weighted moving average of weights.

Hilton, Cobbe and Schulman (2021), "Batch size-invariance for policy optimization",
decouple the *proximal* policy (the centre of the PPO trust region) from the *behaviour*
policy (the one that generated the data) and take the proximal policy to be an EWMA of
the policy's past weights::

    theta_prox_t = sum_{i<=t} beta^(t-i) theta_i / sum_{i<=t} beta^(t-i)

This is the *bias-corrected* average: the initial copy counts as one observation, so
right after construction ``theta_prox == theta_0`` instead of being pulled towards zero.
It is maintained incrementally with ``W_t = beta W_{t-1} + 1`` (``W_0 = 1``) and
``theta_prox += (theta_t - theta_prox) / W_t``.

The decay is given as an *age* in optimiser steps: an EWMA with decay ``beta`` averages
weights that are on average ``beta / (1 - beta)`` steps old, so ``beta = age / (age + 1)``.
To keep training invariant to the batch size, scale the age with the number of optimiser
steps per unit of data: halving the batch doubles the steps, so double the age
(:func:`ewma_age_for_batch_size`).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from baselines.distributed import local_shard, reshard

__all__ = ["EWMAModel", "ewma_decay_from_age", "ewma_age_for_batch_size"]


def ewma_decay_from_age(age: float) -> float:
    """Return ``beta`` such that the EWMA's mean age is ``age`` optimiser steps."""
    if age < 0:
        raise ValueError(f"Expected an EWMA age >= 0 optimiser steps, actual value: {age}")
    return age / (age + 1.0)


def ewma_age_for_batch_size(age: float, reference_batch_size: int, batch_size: int) -> float:
    """Scale an age tuned at ``reference_batch_size`` to another batch size.

    The age is measured in optimiser steps; a smaller batch takes proportionally more
    steps per episode, so the age grows by ``reference_batch_size / batch_size``.
    """
    return age * reference_batch_size / batch_size


class EWMAModel:
    """A frozen copy of a policy whose weights track the EWMA of the policy's weights.

    Args:
        policy: the (unwrapped) policy module; it is deep-copied once.
        age: mean age of the average in optimiser steps (see module docstring).
        device: where the copy lives; ``"cpu"`` keeps GPU memory for training at the
            cost of moving the copy to the policy's device for each proximal forward.
    """

    def __init__(self, policy: nn.Module, age: float, device: torch.device | str | None = None):
        self.decay = ewma_decay_from_age(age)
        self.age = age
        self.module = copy.deepcopy(policy)
        if device is not None:
            self.module.to(device)
        self.module.requires_grad_(False)
        self.module.eval()
        self.total_weight = 1.0  # the initial copy counts as one observation
        self.num_updates = 0

    @torch.no_grad()
    def update(self, policy: nn.Module) -> None:
        """Fold the policy's current weights into the average (call after each step)."""
        self.total_weight = self.decay * self.total_weight + 1.0
        step = 1.0 / self.total_weight
        reshard(self.module)  # FSDP2 may leave the root gathered after a forward: policy and
        reshard(policy)  # average must hold matching local shards
        for mine, theirs in zip(self.module.parameters(), policy.parameters(), strict=True):
            mine, theirs = local_shard(mine), local_shard(theirs.detach())
            mine.lerp_(theirs.to(device=mine.device, dtype=mine.dtype), step)
        self.num_updates += 1

    def memory_bytes(self) -> int:
        """Bytes held by the average's parameters on this process."""
        total = 0
        for p in self.module.parameters():
            local = local_shard(p)
            total += local.numel() * local.element_size()
        return total

    def state_dict(self) -> dict:
        return {
            "module": self.module.state_dict(),
            "total_weight": self.total_weight,
            "num_updates": self.num_updates,
            "age": self.age,
        }

    def load_state_dict(self, state: dict) -> None:
        self.module.load_state_dict(state["module"])
        self.total_weight = float(state["total_weight"])
        self.num_updates = int(state["num_updates"])
