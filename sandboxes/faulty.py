"""A backend wrapper that makes sandbox creation fail on purpose.

Readiness checks and recovery tests need creation failures that look exactly like real
ones (an engine that refuses, an image that will not start), without patching methods of
a live object. :class:`FaultyBackend` wraps any :class:`~sandboxes.pool.SandboxBackend`
and fails chosen creations with :class:`~sandboxes.errors.InjectedFaultError`, a
:class:`~sandboxes.errors.SandboxInfraError`, so the pool's retries face them as they
would face the real thing. Everything else (``name``, ``describe``, ``forget``) is the
wrapped backend's, so fingerprints do not change.

>>> import asyncio
>>> from sandboxes.fake import FakeBackend
>>> backend = FaultyBackend(FakeBackend(), fail_on={0})
>>> asyncio.run(backend.create())
Traceback (most recent call last):
...
sandboxes.errors.InjectedFaultError: injected sandbox creation failure (creation 0)
>>> asyncio.run(backend.create()).id.startswith("fake-"), backend.injected
(True, 1)
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from sandboxes.errors import InjectedFaultError, SandboxConfigError
from sandboxes.pool import SandboxBackend

__all__ = ["FaultyBackend"]


class FaultyBackend:
    """A :class:`~sandboxes.pool.SandboxBackend` whose ``create`` fails on a schedule.

    Args:
        inner: the backend that makes the sandboxes when no fault is drawn.
        rate: probability that a creation fails, drawn per creation.
        fail_on: creations (counted from 0) that fail whatever the draw.
        seed: seeds the draws, so a run's faults can be replayed.

    Attributes:
        attempts: creations asked for so far.
        injected: creations failed on purpose so far.
    """

    def __init__(self, inner: SandboxBackend, *, rate: float = 0.0, fail_on: Iterable[int] = (),
                 seed: int | None = 0) -> None:
        if not 0.0 <= rate <= 1.0:
            raise SandboxConfigError(f"Expected a creation failure rate in [0, 1], actual value: {rate}")
        self.inner = inner
        self.rate = rate
        self.fail_on = frozenset(fail_on)
        self._rng = random.Random(seed)
        self.attempts = 0
        self.injected = 0

    @property
    def name(self) -> str:
        return self.inner.name

    async def create(self) -> Any:
        attempt, self.attempts = self.attempts, self.attempts + 1
        if attempt in self.fail_on or (self.rate > 0 and self._rng.random() < self.rate):
            self.injected += 1
            raise InjectedFaultError(f"injected sandbox creation failure (creation {attempt})")
        return await self.inner.create()

    async def remove_orphans(self) -> int:
        return await self.inner.remove_orphans()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def forget(self, sandbox: Any) -> None:
        """Pass the pool's notice that ``sandbox`` was closed on to the wrapped backend."""
        forget = getattr(self.inner, "forget", None)
        if forget is not None:
            forget(sandbox)

    async def close(self) -> None:
        await self.inner.close()
