"""The public fault seams: ``FaultyBackend``, ``Sandbox.kill()`` and the owned-container count."""

from __future__ import annotations

import pytest

from sandboxes import (
    ContainerCount,
    EngineUnreachableError,
    FaultyBackend,
    InjectedFaultError,
    PoolConfig,
    ProcessSandbox,
    Sandbox,
    SandboxClosedError,
    SandboxConfigError,
    SandboxInfraError,
    SandboxPool,
    count_owned_containers,
)
from sandboxes.fake import FakeBackend
from sandboxes.reliability import RetryPolicy

FAST = dict(retry=RetryPolicy(initial_s=0.001, max_wait_s=0.002), reap_on_start=False)


async def _outcomes(backend: FaultyBackend, n: int) -> list[bool]:
    """Whether each of ``n`` creations succeeded."""
    out = []
    for _ in range(n):
        try:
            await backend.create()
            out.append(True)
        except InjectedFaultError:
            out.append(False)
    return out


async def test_scheduled_creations_fail_with_an_infra_error_and_are_counted():
    inner = FakeBackend()
    backend = FaultyBackend(inner, fail_on={0, 2})
    assert await _outcomes(backend, 4) == [False, True, False, True]
    assert backend.attempts == 4 and backend.injected == 2 and len(inner.created) == 2
    assert issubclass(InjectedFaultError, SandboxInfraError)


async def test_random_failures_follow_the_seed_and_the_rate():
    first = await _outcomes(FaultyBackend(FakeBackend(), rate=0.5, seed=7), 200)
    again = await _outcomes(FaultyBackend(FakeBackend(), rate=0.5, seed=7), 200)
    other = await _outcomes(FaultyBackend(FakeBackend(), rate=0.5, seed=8), 200)
    assert first == again and first != other
    assert 60 < first.count(False) < 140
    assert all(await _outcomes(FaultyBackend(FakeBackend(), rate=0.0), 20))
    with pytest.raises(SandboxConfigError):
        FaultyBackend(FakeBackend(), rate=1.5)


def test_the_wrapper_keeps_the_backends_name_and_facts():
    inner = FakeBackend()
    backend = FaultyBackend(inner, rate=1.0)
    assert backend.name == inner.name and backend.describe() == inner.describe()


async def test_the_pools_retries_face_injected_failures():
    backend = FaultyBackend(FakeBackend(), fail_on={0, 1})
    async with SandboxPool(backend, PoolConfig(size=0, **FAST)) as pool:
        lease = await pool.acquire()
        assert (await lease.run("1 + 1")).value == "2"
        await pool.release(lease)
    assert backend.injected == 2
    always = FaultyBackend(FakeBackend(), rate=1.0)
    async with SandboxPool(always, PoolConfig(size=0, **FAST)) as pool:
        with pytest.raises(SandboxInfraError, match="injected"):
            await pool.acquire()


async def test_killing_a_lease_kills_the_sandbox_under_it_and_the_episode_survives():
    async with SandboxPool(FakeBackend(), PoolConfig(size=1, **FAST)) as pool:
        lease = await pool.acquire()
        await lease.run("x = 41")
        victim = lease.inner
        lease.kill()
        assert not victim.healthy
        result = await lease.run("x + 1")  # a fresh sandbox, the episode replayed onto it
        assert result.value == "42" and lease.inner is not victim and pool.stats.replaced == 1
        await pool.release(lease)
        with pytest.raises(SandboxClosedError):
            lease.kill()


async def test_kill_stops_a_process_sandbox():
    sb = await ProcessSandbox().start()
    try:
        sb.kill()
        with pytest.raises(SandboxInfraError):
            await sb.run("1 + 1", timeout=10)
    finally:
        await sb.close()


def test_a_sandbox_that_cannot_be_killed_says_so():
    class Bare(Sandbox):
        id = "bare"

        async def run(self, code, timeout=None): ...
        async def upload(self, path, data): ...
        async def download(self, path): ...
        async def reset(self): ...
        async def close(self): ...

    with pytest.raises(NotImplementedError, match="Bare cannot be killed"):
        Bare().kill()


def test_counting_containers_on_an_engine_that_does_not_answer_raises():
    with pytest.raises(EngineUnreachableError):
        count_owned_containers(["unix:///nonexistent/docker.sock"])


@pytest.mark.docker
async def test_count_sees_this_process_container_come_and_go(docker_engine):
    from sandboxes import DockerSandbox

    before = count_owned_containers()
    assert isinstance(before, ContainerCount) and before.total >= before.mine
    sb = await DockerSandbox().start()
    try:
        assert count_owned_containers().mine == before.mine + 1
    finally:
        await sb.close()
