"""The trainer's weights at the policy versions that sampled asynchronous rollout data.

With ``rollout.max_staleness = k > 0`` a token may have been sampled ``s <= k`` weight
syncs ago, by version ``v = V - s`` of the policy, ``V`` the current one. Separating the
engine's numerical mismatch from that policy drift (:mod:`baselines.update`) needs the
*trainer's* log-prob of the token under version ``v``: the same weights the engine
sampled with, computed by the trainer. So the trainer records its weights at every sync
(:meth:`PolicyVersions.record`, version = the engine's after the sync) and the update
swaps a recorded version into the live model for one no-grad pass
(:meth:`PolicyVersions.swapped_in`).

Cost: ``k + 1`` copies of this process's parameters (its shards under FSDP2) in host
memory, and per update one extra forward per stale lag present, over the rows that have
tokens of that lag. Held only when a TIS/MIS correction is on (without one, the engine's
log-probs are the behaviour policy and nothing needs the old weights).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator

import torch
from torch import nn

from baselines.distributed import local_shard, reshard
from baselines.errors import BaselinesError

__all__ = ["PolicyVersionError", "PolicyVersions"]


class PolicyVersionError(BaselinesError, LookupError):
    """A version that data needs is not held (more stale than ``keep`` allows)."""


class PolicyVersions:
    """Host copies of the policy's parameters at the last ``keep`` recorded versions.

    Args:
        keep: versions to hold; ``max_staleness + 1`` covers every lag the async
            rollout lets through (the newest is the live weights at the next update).
    """

    def __init__(self, keep: int) -> None:
        if keep < 1:
            raise ValueError(f"Expected keep >= 1 versions, actual value: {keep}")
        self.keep = keep
        self._params: OrderedDict[int, list[torch.Tensor]] = OrderedDict()

    @property
    def latest(self) -> int:
        """The newest recorded version: the trainer's current one."""
        if not self._params:
            raise PolicyVersionError("No policy version recorded yet: the trainer records one at each weight sync.")
        return next(reversed(self._params))

    def held(self) -> list[int]:
        return list(self._params)

    @torch.no_grad()
    def record(self, version: int, module: nn.Module) -> None:
        """Copy ``module``'s parameters (this process's shards) as ``version``; drop the oldest beyond ``keep``."""
        self._params[version] = _host_copy(module)
        self._params.move_to_end(version)
        while len(self._params) > self.keep:
            self._params.popitem(last=False)

    def memory_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for params in self._params.values() for t in params)

    @contextlib.contextmanager
    def swapped_in(self, module: nn.Module, lag: int) -> Iterator[None]:
        """Inside, ``module`` holds version ``latest - lag``; its own weights come back after."""
        version = self.latest - lag
        if version not in self._params:
            raise PolicyVersionError(
                f"Data sampled {lag} versions ago needs policy version {version}; held: {self.held()}. "
                "Expected keep >= rollout.max_staleness + 1 and a record at every weight sync."
            )
        live = _host_copy(module)
        _load(module, self._params[version])
        try:
            yield
        finally:
            _load(module, live)


def _host_copy(module: nn.Module) -> list[torch.Tensor]:
    reshard(module)
    return [local_shard(p.detach()).to("cpu", copy=True) for p in module.parameters()]


@torch.no_grad()
def _load(module: nn.Module, params: list[torch.Tensor]) -> None:
    reshard(module)
    for p, saved in zip(module.parameters(), params, strict=True):
        local_shard(p).copy_(saved)
