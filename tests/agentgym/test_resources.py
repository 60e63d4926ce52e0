"""The process's shared resources (agentgym/resources.py): a sandbox pool that failed to
start fails fast for a while, then is tried again. (On a real engine that stalls:
tests/sandboxes/test_engine_stall.py.)"""

from __future__ import annotations

import asyncio

import pytest

from agentgym.errors import InfraError
from agentgym.resources import SharedResources
from sandboxes import PoolConfig, SandboxPool


async def test_a_pool_that_failed_to_start_is_tried_again_after_a_while(monkeypatch):
    """The fail-fast window closes: once it has passed, the next env tries the engine
    again (and a pool starts when the engine is back)."""
    from agentgym import resources as resources_module
    from sandboxes.errors import SandboxInfraError as Down

    attempts: list[str] = []

    class Backend:
        name = "fake"

        async def remove_orphans(self):
            attempts.append("start")
            if len(attempts) == 1:
                raise Down("the engine did not answer")
            return 0

        async def create(self):
            raise AssertionError("a pool of size 0 starts nothing")

        def describe(self):
            return {}

        async def close(self):
            pass

    monkeypatch.setattr("sandboxes.make_pool", lambda backend, pool: SandboxPool(Backend(), PoolConfig(size=0)))
    monkeypatch.setattr(resources_module, "POOL_RETRY_AFTER_S", 0.3)
    resources = SharedResources()
    with pytest.raises(InfraError, match="the engine did not answer"):
        await resources.sandbox_pool("fake", user=object())
    with pytest.raises(InfraError, match="ago"):
        await resources.sandbox_pool("fake", user=object())
    await asyncio.sleep(0.35)
    pool = await resources.sandbox_pool("fake", user=object())
    assert attempts == ["start", "start"] and not pool.closed
    await resources.aclose()
