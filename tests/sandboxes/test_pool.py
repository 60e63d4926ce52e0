"""The warm pool: leasing, background reset, recycling, retries and replay."""

from __future__ import annotations

import asyncio
import time
import warnings

import pytest

from sandboxes import PoolConfig, SandboxInfraError, SandboxPool
from sandboxes.fake import FakeBackend
from sandboxes.process import ProcessBackend, SandboxIsolationWarning
from sandboxes.reliability import RetryPolicy

FAST = dict(retry=RetryPolicy(initial_s=0.001, max_wait_s=0.002), reap_on_start=False)


async def test_acquire_hands_out_fresh_state_and_release_resets():
    async with SandboxPool(FakeBackend(), PoolConfig(size=1, **FAST)) as pool:
        sb = await pool.acquire()
        await sb.run("x = 1")
        await pool.release(sb)
        again = await pool.acquire()
        assert (await again.run("x")).status == "error"
        assert pool.backend.created[0].resets == 1  # reused, after a reset
        await pool.release(again)


async def test_released_lease_cannot_be_used():
    from sandboxes import SandboxClosedError

    async with SandboxPool(FakeBackend(), PoolConfig(size=1, **FAST)) as pool:
        sb = await pool.acquire()
        await pool.release(sb)
        with pytest.raises(SandboxClosedError, match="released"):
            await sb.run("1")


async def test_sandbox_is_recycled_after_k_episodes():
    async with SandboxPool(FakeBackend(), PoolConfig(size=1, max_episodes=2, **FAST)) as pool:
        for _ in range(3):
            async with pool.sandbox() as sb:
                await sb.run("1")
        await pool.wait_ready(1)
        assert len(pool.backend.created) >= 2
        assert pool.stats.recycled == 1


async def test_dead_sandbox_is_replaced_and_the_episode_replayed():
    async with SandboxPool(FakeBackend(), PoolConfig(size=2, **FAST)) as pool:
        sb = await pool.acquire()
        await sb.upload("in.txt", b"data")
        await sb.run("x = 41")
        await sb.run("1 / 0")  # failed cells are not replayed
        first = sb.inner
        first.die()
        result = await sb.run("x + 1")
        assert result.status == "ok" and result.value == "42" and not result.state_lost
        assert sb.inner is not first
        assert await sb.download("in.txt") == b"data"
        assert sb.inner.calls.count("run") == 2  # the replayed `x = 41`, then `x + 1`
        assert pool.stats.replaced == 1
        await pool.release(sb)


async def test_code_that_kills_its_sandbox_twice_is_a_crash_not_an_infra_error():
    backend = FakeBackend(die_on="KILL")
    async with SandboxPool(backend, PoolConfig(size=1, **FAST)) as pool:
        sb = await pool.acquire()
        await sb.run("x = 1")
        result = await sb.run("'KILL'")
        assert result.status == "crash" and not result.state_lost
        assert (await sb.run("x")).value == "1"  # replayed onto the third sandbox
        assert pool.stats.replaced == 2
        await pool.release(sb)


async def test_creation_failures_are_retried():
    backend = FakeBackend(fail_creations=2)
    async with SandboxPool(backend, PoolConfig(size=1, **FAST)) as pool:
        sb = await pool.acquire()
        assert (await sb.run("1 + 1")).value == "2"
        assert sb.inner is backend.created[0]  # made on the third attempt
        assert pool.stats.creation_failures == 2  # each failed start counted once, retried by the acquirer
        await pool.release(sb)


async def test_persistent_creation_failure_raises_sandbox_infra_error():
    backend = FakeBackend(fail_creations=10**9)
    async with SandboxPool(backend, PoolConfig(size=1, **FAST)) as pool:
        with pytest.raises(SandboxInfraError, match="could not start a sandbox"):
            await pool.acquire()


async def test_sixty_four_concurrent_acquirers_get_distinct_sandboxes():
    async with SandboxPool(FakeBackend(), PoolConfig(size=64, max_parallel_creations=64, **FAST)) as pool:
        await pool.wait_ready()
        leases = await asyncio.gather(*(pool.acquire() for _ in range(64)))
        assert len({lease.inner.id for lease in leases}) == 64
        await asyncio.gather(*(pool.release(lease) for lease in leases))


async def test_max_live_caps_the_pool():
    async with SandboxPool(FakeBackend(), PoolConfig(size=4, max_live=2, acquire_timeout_s=0.2, **FAST)) as pool:
        a, b = await pool.acquire(), await pool.acquire()
        with pytest.raises(SandboxInfraError, match="no sandbox became ready"):
            await pool.acquire()
        await pool.release(a)
        c = await pool.acquire()
        await pool.release(b)
        await pool.release(c)


async def test_close_closes_every_sandbox_including_leased_ones():
    pool = SandboxPool(FakeBackend(), PoolConfig(size=2, **FAST))
    await pool.start()
    await pool.wait_ready()
    lease = await pool.acquire()
    await pool.close()
    assert all(not sb.healthy for sb in pool.backend.created)
    assert lease.healthy is False


@pytest.fixture
def process_backend():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxIsolationWarning)
        yield ProcessBackend()


async def test_no_state_leaks_between_episodes_with_real_sandboxes(process_backend):
    async with SandboxPool(process_backend, PoolConfig(size=1, **FAST)) as pool:
        async with pool.sandbox() as sb:
            await sb.run("import os\nsecret = 42\nopen('left.txt', 'w').write('x')\nos.environ['LEAK'] = '1'")
        start = time.monotonic()
        async with pool.sandbox() as sb:
            acquired_ms = (time.monotonic() - start) * 1000
            assert (await sb.run("secret")).status == "error"
            assert (await sb.run("import os\n(os.listdir('.'), os.environ.get('LEAK'))")).value == "([], None)"
        assert acquired_ms < 2000


async def test_killed_process_sandbox_is_replaced_and_replayed(process_backend):
    async with SandboxPool(process_backend, PoolConfig(size=2, **FAST)) as pool:
        async with pool.sandbox() as sb:
            await sb.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})")
            running = asyncio.create_task(sb.run("import time\ntime.sleep(1)\nint(df.a.sum())"))
            await asyncio.sleep(0.3)
            sb.inner._proc.kill()
            result = await running
            assert result.status == "ok" and result.value == "6" and not result.state_lost
            assert pool.stats.replaced == 1


class _StopsStarting(FakeBackend):
    """Starts sandboxes until ``allowed`` is used up, then fails every start (an engine gone)."""

    allowed = 10**6

    async def create(self):
        if len(self.created) >= self.allowed:
            self.attempts += 1
            from sandboxes.errors import SandboxCrashedError

            raise SandboxCrashedError("injected: the engine stopped starting containers")
        return await super().create()


async def test_a_replay_that_comes_out_differently_never_waits_on_the_pool_for_the_agent():
    """A replay that comes out differently needs a fresh sandbox for the episode to go on.
    It was taken inside the call: with the pool starved, the wait ran into the executor's
    deadline and the call became the agent's ``timeout``, and with the call's time spent
    on replayed cells it raised infrastructure. Now the call answers at once (code not
    run, state lost); getting the fresh sandbox is the next call's, under its own budget,
    where a pool that cannot start one is the infrastructure's."""
    backend = _StopsStarting()
    async with SandboxPool(backend, PoolConfig(size=1, max_live=2, **FAST)) as pool:
        sb = await pool.acquire()
        await sb.upload("t.csv", b"a\n1\n")
        # True the first time, false when replayed: a cell that is not deterministic.
        flag = f"_agentgym_runs_{id(sb)}"
        ran = await sb.run(f"import builtins\nn = builtins.__dict__.setdefault({flag!r}, [0])\nn[0] += 1\nassert n[0] == 1\nx = 5")
        assert ran.status == "ok"
        await pool.wait_ready(1)
        backend.allowed = len(backend.created)  # the warm one replaces; then the engine is gone
        sb.inner.die()
        result = await asyncio.wait_for(sb.run("x"), 5)
        assert result.status == "error" and "not run" in result.error, result
        assert result.state_lost and "not deterministic" in result.state_lost_reason, result
        assert pool.stats.replays_failed == 1 and pool.stats.replaced == 1, pool.stats
        with pytest.raises(SandboxInfraError):  # the starved pool, in the call that needs a sandbox
            await sb.run("x")
        backend.allowed = 10**6
        after = await sb.run("'x' in globals()")
        assert after.value == "False" and not after.state_lost, after  # a fresh sandbox; the loss told once
        assert await sb.download("t.csv") == b"a\n1\n"  # uploads restored
        await pool.release(sb)


async def test_retries_do_not_multiply_down_the_stack():
    """The engine dies under a leased sandbox: the tool call above the pool, the lease's
    crash replacement and the pool's starts share one budget, so one call makes at most
    ``attempts`` tries in all (it was executor 3 x run 2 x replace 3 x start 3)."""
    from sandboxes.reliability import call_budget, retrying

    backend = FakeBackend()
    async with SandboxPool(backend, PoolConfig(size=0, max_parallel_creations=1, **FAST)) as pool:
        lease = await pool.acquire()
        await lease.run("x = 1")
        backend.fail_creations = 10**9  # the engine is gone: every start fails from now on
        starts_before = backend.attempts
        lease.kill()
        with call_budget(RetryPolicy(attempts=3, initial_s=0.001, max_wait_s=0.002)) as budget:
            with pytest.raises(SandboxInfraError):
                async for attempt in retrying(SandboxInfraError):
                    with attempt:  # what the tool executor does around the python tool
                        await lease.run("x")
        assert backend.attempts - starts_before <= 3
        assert budget.retries == 2
        await pool.release(lease)
