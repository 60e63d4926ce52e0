"""The contract between the asynchronous rollout and its engines, and what they share.

:class:`AsyncEngine` is what :mod:`baselines.async_rollout` needs of an engine:
:class:`~baselines.engines.hf_async.BatchingEngine` (transformers, any device) and
:class:`~baselines.engines.vllm_async.AsyncVLLMEngine` both implement it. Each generation
comes back as a :class:`VersionedGeneration`, stamped with the policy version that sampled
it (what the staleness bound counts); :class:`Lockstep` is the turn-by-turn batching that
makes ``max_staleness=0`` sample exactly what the synchronous loop samples, and
:class:`BusyClock` measures how long the engine was busy (for utilisation metrics).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from baselines.engines.base import Generation, SamplingConfig

__all__ = ["AsyncEngine", "BusyClock", "Lockstep", "VersionedGeneration"]


@dataclass
class VersionedGeneration:
    """A :class:`Generation` and the policy version (weight syncs so far) that sampled it."""

    generation: Generation
    version: int


@runtime_checkable
class AsyncEngine(Protocol):
    """What the asynchronous rollout needs of an engine (this module's
    :class:`BatchingEngine`, or :class:`~baselines.engines.vllm_async.AsyncVLLMEngine`),
    besides the synchronous :class:`RolloutEngine` methods."""

    version: int

    async def agenerate(self, prompt: Sequence[int], sampling: SamplingConfig, order: int = 0,
                        seed: int | None = None) -> VersionedGeneration:
        """One completion; ``order`` sorts a lockstep call's requests; ``seed``, the
        request's own, makes its draw independent of the requests beside it (else the
        call's seed, ``seed + turn`` in lockstep, decides)."""
        ...

    def begin_lockstep(self, barrier: int, seed: int | None) -> None: ...

    def lower_barrier(self, by: int = 1) -> None: ...

    def end_lockstep(self) -> None: ...

    def busy_seconds(self) -> float: ...

    def sync_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None: ...


class BusyClock:
    """Seconds during which at least one holder was inside (callers on one event loop)."""

    def __init__(self) -> None:
        self.inside = 0
        self.busy_s = 0.0
        self._since = 0.0

    def enter(self) -> None:
        if self.inside == 0:
            self._since = time.perf_counter()
        self.inside += 1

    def exit(self) -> None:
        self.inside -= 1
        if self.inside == 0:
            self.busy_s += time.perf_counter() - self._since

    def seconds(self) -> float:
        return self.busy_s + (time.perf_counter() - self._since if self.inside else 0.0)


@dataclass
class Lockstep:
    """Turn-by-turn batching for ``max_staleness=0``: a call waits until ``barrier``
    requests (one per episode still running) are pending; call ``n`` is seeded
    ``seed + n``, as the synchronous loop seeds turn ``n``. ``barrier`` None: off."""

    barrier: int | None = None
    seed: int | None = None
    turn: int = 0

    def begin(self, barrier: int, seed: int | None) -> None:
        self.barrier, self.seed, self.turn = barrier, seed, 0

    def lower(self, by: int = 1) -> None:
        if self.barrier is not None:
            self.barrier -= by

    def end(self) -> None:
        self.barrier = None

    @property
    def on(self) -> bool:
        return self.barrier is not None

    def ready(self, pending: int) -> bool:
        return pending > 0 and (self.barrier is None or pending >= self.barrier)

    def next_seed(self) -> int | None:
        seed = None if self.seed is None else self.seed + self.turn
        self.turn += 1
        return seed
