"""Pools end cleanly (issue 29): nothing starts or resets after ``close`` or after the
loop that ran the pool ended; a later pool never trips over an earlier one; the reaper
counts a container that is already gone as removed."""

from __future__ import annotations

import asyncio
import socket
import threading
import warnings

import pytest

from sandboxes import PoolConfig, SandboxClosedError, SandboxConfig, SandboxPool, make_pool
from sandboxes.fake import FakeBackend
from sandboxes.process import SandboxIsolationWarning, isolation_support
from sandboxes.reaper import OWNER_LABEL, reap_orphans
from sandboxes.reliability import RetryPolicy

FAST = dict(retry=RetryPolicy(initial_s=0.001, max_wait_s=0.002), reap_on_start=False)
SMALL = SandboxConfig(mem_limit="512m", tmpfs_size="128m", pids_limit=64, output_limit_bytes=4096)


class SlowBackend(FakeBackend):
    """Creations and resets take a while, like real ones; ``hold`` blocks creations."""

    def __init__(self, create_s: float = 0.05, reset_s: float = 0.3) -> None:
        super().__init__()
        self.create_s, self.reset_s = create_s, reset_s
        self.hold = asyncio.Event()
        self.hold.set()
        self.resets_started = 0

    async def create(self):
        await self.hold.wait()
        await asyncio.sleep(self.create_s)
        sandbox = await super().create()
        backend = self
        plain_reset = sandbox.reset

        async def slow_reset() -> None:
            backend.resets_started += 1
            await asyncio.sleep(backend.reset_s)
            await plain_reset()

        sandbox.reset = slow_reset  # type: ignore[method-assign]
        return sandbox


async def test_an_acquirer_still_waiting_when_the_pool_closes_is_told_so():
    backend = SlowBackend()
    backend.hold.clear()  # no sandbox will ever come up
    pool = SandboxPool(backend, PoolConfig(size=1, **FAST))
    await pool.start()
    waiting = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0.05)
    await pool.close()
    with pytest.raises(SandboxClosedError):
        await asyncio.wait_for(waiting, 2.0)


async def test_nothing_is_started_or_reset_after_close():
    backend = SlowBackend()
    pool = SandboxPool(backend, PoolConfig(size=2, **FAST))
    await pool.start()
    await pool.wait_ready(2)
    lease = await pool.acquire()
    await pool.release(lease)  # its reset is under way in the background
    await pool.close()
    attempts, resets = backend.attempts, backend.resets_started
    await asyncio.sleep(0.5)
    assert (backend.attempts, backend.resets_started) == (attempts, resets)
    assert all(not sb.healthy for sb in backend.created)  # every one closed
    with pytest.raises(SandboxClosedError):
        await pool.acquire()


def test_a_pool_left_open_when_asyncio_run_returns_starts_nothing_in_the_teardown():
    """``asyncio.run`` cancels the pool's background reset; that must not start a new
    sandbox on a loop that is ending (it used to, and died as 'Task was destroyed but
    it is pending')."""
    backend = SlowBackend()
    returned: dict[str, int] = {}

    async def forget_to_close() -> SandboxPool:
        pool = SandboxPool(backend, PoolConfig(size=2, **FAST))
        await pool.start()
        await pool.wait_ready(2)
        lease = await pool.acquire()
        await pool.release(lease)  # reset in flight when the loop ends
        await asyncio.sleep(0.05)
        returned["attempts"] = backend.attempts
        return pool

    pool = asyncio.run(forget_to_close())
    assert backend.attempts == returned["attempts"]

    async def use_again() -> None:
        await pool.acquire()

    with pytest.raises(SandboxClosedError, match="event loop has ended"):
        asyncio.run(use_again())
    assert pool.abandon() == len(backend.created)
    assert all(not sb.healthy for sb in backend.created)


# ---------------------------------------------------------------- Docker and process


def _require_bwrap() -> None:
    support = isolation_support()
    if support.bwrap is None:
        pytest.skip(f"the process backend cannot isolate here: {support.reason}")


async def _acquire_many(backend: str, n: int) -> int:
    """Acquire, run and release ``n`` times on a fresh pool; how many acquires worked."""
    ok = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxIsolationWarning)
        pool = make_pool(backend, config=SMALL, pool=PoolConfig(size=2))
    async with pool:
        for _ in range(n):
            async with pool.sandbox() as sb:
                result = await sb.run("1 + 1", timeout=30)
                assert (result.status, result.value) == ("ok", "2"), result
                ok += 1
    return ok


async def _churn_docker(replacements: int) -> SandboxPool:
    """Kill the sandbox under one lease ``replacements`` times (each call replaces it and
    replays the episode); return the pool warm and still open, as a script that forgets
    to close it leaves it when its ``asyncio.run`` returns."""
    pool = make_pool("docker", config=SMALL, pool=PoolConfig(size=4))
    await pool.start()
    async with pool.sandbox() as sb:
        await sb.run("x = 41")
        for _ in range(replacements):
            sb.kill()
            result = await sb.run("x + 1", timeout=30)
            assert (result.status, result.value) == ("ok", "42"), result
    assert pool.stats.replaced >= replacements
    await pool.wait_ready(4)
    return pool


def _own_container_ids(engine_url: str) -> set[str]:
    from sandboxes.engine import connect
    from sandboxes.reaper import owner_id

    client = connect(engine_url)
    try:
        listed = client.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={owner_id()}"})
    finally:
        client.close()
    return {c["Id"] for c in listed}


def _remove_all_at_once(engine_url: str, ids: set[str]) -> list[threading.Thread]:
    """Remove containers from outside, all at once (``docker rm -f`` in a fault storm)."""
    from sandboxes.engine import connect

    client = connect(engine_url)

    def remove(cid: str) -> None:
        try:
            client.api.remove_container(cid, force=True)
        except Exception:  # noqa: BLE001 - auto-removal may win
            pass

    storm = [threading.Thread(target=remove, args=(cid,)) for cid in ids]
    for thread in storm:
        thread.start()
    return storm


@pytest.mark.docker
def test_after_heavy_churn_new_docker_and_process_pools_start_every_sandbox(engine_url):
    """One process, three things in a row: 10 replacements on Docker (that pool is left
    open when its asyncio.run returns, and its containers are then removed from outside
    all at once), a Docker pool in a new asyncio.run while they go, then a process pool in
    another; every acquire works, 20 times in a row each. The new Docker pool lists
    labelled containers while the churned ones disappear: that used to fail with
    docker's NotFound."""
    _require_bwrap()
    before = _own_container_ids(engine_url)
    churned = asyncio.run(_churn_docker(10))
    storm = _remove_all_at_once(engine_url, _own_container_ids(engine_url) - before)
    try:
        assert asyncio.run(_acquire_many("docker", 20)) == 20
    finally:
        for thread in storm:
            thread.join()
        churned.abandon()
    assert asyncio.run(_acquire_many("process", 20)) == 20
    assert _own_container_ids(engine_url) <= before


@pytest.fixture
def orphan_container(engine_url):
    """A created (never started) container labelled as owned by a dead process here."""
    from sandboxes.engine import connect
    from sandboxes.errors import ImageBuildError
    from sandboxes.image import default_image

    try:
        image = default_image(build=False).tag
    except ImageBuildError as e:
        pytest.skip(f"no sandbox image: {e}")
    client = connect(engine_url)
    dead_owner = f"{socket.gethostname()}:1:0"  # pid 1 never started at tick 0: dead
    container = client.containers.create(image, command=["true"], labels={OWNER_LABEL: dead_owner})
    yield container
    try:
        container.remove(force=True)
    except Exception:  # noqa: BLE001 - the test removed it
        pass
    client.close()


@pytest.mark.docker
def test_reaping_counts_a_container_removed_meanwhile_as_removed(orphan_container, monkeypatch):
    from docker.models.containers import ContainerCollection

    listed = ContainerCollection.list

    def list_then_lose_ours(self, *args, **kwargs):
        found = listed(self, *args, **kwargs)
        orphan_container.remove(force=True)  # someone else (auto-remove) got there first
        return found

    monkeypatch.setattr(ContainerCollection, "list", list_then_lose_ours)
    assert orphan_container.id in reap_orphans()


@pytest.mark.docker
def test_reaping_ignores_a_container_that_vanishes_while_it_is_listed(orphan_container, monkeypatch):
    import docker.errors
    from docker.models.containers import ContainerCollection

    inspect = ContainerCollection.get

    def gone_when_inspected(self, container_id):
        if container_id == orphan_container.id:
            orphan_container.remove(force=True)
            raise docker.errors.NotFound(f"No such container: {container_id}")
        return inspect(self, container_id)

    monkeypatch.setattr(ContainerCollection, "get", gone_when_inspected)
    assert orphan_container.id not in reap_orphans()  # gone before the reaper saw it: no error
