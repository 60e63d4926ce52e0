"""The Docker engine stalls: it answers ``/_ping`` but never answers calls on containers.

Docker 20.10 did this on this machine kind when a training run's close removed its 63
sandbox containers at once (every ``DELETE /containers`` waited on a container lock; see
docs/reliability.md). What it did then, and what each test here holds to instead:

- the run's ``close()`` waited one 60 s client timeout after another and never printed its
  summary: a pool's close now ends by ``PoolConfig.close_timeout_s``;
- the next run's pool start raised the HTTP client's raw ``ReadTimeout`` out of the
  orphan sweep, which no layer classified, and it ended the run: every engine call now
  fails as :class:`~sandboxes.errors.SandboxInfraError`, which envs flag as ``infra_failed``;
- a sandbox whose channel broke asked the engine whether its container lived from the
  event loop's own thread, freezing every other episode for the client timeout: that
  question is now asked from a worker thread;
- (next in line) every env of an evaluation would have retried the pool start, one client
  timeout each: a failed start now fails fast for ``POOL_RETRY_AFTER_S``.

The engine is reached through :class:`~tests.sandboxes.engine_relay.EngineRelay`, which
holds the matching requests unanswered; each test checks that its requests were held.
(The fail-fast window's expiry is tested without an engine: tests/agentgym/test_resources.py.)
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from agentgym.errors import InfraError
from agentgym.resources import SharedResources
from sandboxes import PoolConfig, SandboxPool
from sandboxes.docker import DockerBackend, DockerSandbox
from sandboxes.engine import ENGINE_TIMEOUT_ENV
from sandboxes.errors import EngineUnreachableError, SandboxInfraError
from tests.sandboxes.conftest import TEST_CONFIG, require_engine
from tests.sandboxes.engine_relay import EngineRelay

pytestmark = pytest.mark.docker

ENGINE_TIMEOUT_S = 3.0
"""The client timeout these tests give the engine (``AGENTGYM_ENGINE_TIMEOUT_S``)."""


@pytest.fixture
def relay(monkeypatch):
    url = require_engine()
    monkeypatch.setenv(ENGINE_TIMEOUT_ENV, str(ENGINE_TIMEOUT_S))
    relay = EngineRelay(url.removeprefix("unix://"))
    yield relay
    relay.unstall()
    _forget_engine(relay.url)


def _forget_engine(url: str) -> None:
    """The relay goes with the test: its containers were the real engine's, and their
    own stdin closing already made them exit (``auto_remove``)."""
    from sandboxes import reaper

    reaper._engines.discard(url)


async def _own_containers_gone(engine_url: str, ids: list[str], within_s: float = 30.0) -> bool:
    import docker

    client = docker.DockerClient(base_url=engine_url)
    try:
        end = time.monotonic() + within_s
        while time.monotonic() < end:
            names = {c.id for c in client.containers.list(all=True, ignore_removed=True)}
            if not any(cid in names for cid in ids):
                return True
            await asyncio.sleep(0.5)
        return False
    finally:
        client.close()


async def test_a_pool_closes_by_its_deadline_when_the_engine_stops_removing_containers(relay, caplog):
    backend = DockerBackend(TEST_CONFIG, engine_urls=[relay.url])
    pool = SandboxPool(backend, PoolConfig(size=2, reap_on_start=False, close_timeout_s=2.0))
    await pool.wait_ready(2, timeout=120)
    ids = [sb.container_id for sb in pool._owned]
    relay.stall("DELETE", r"^/containers/")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="sandboxes.pool"):
        await asyncio.wait_for(pool.close(), 30)
    elapsed = time.monotonic() - started
    print(f"pool of 2 closed in {elapsed:.2f} s on an engine that stalls removals")
    assert relay.stalled, "the engine was never asked to remove a container"
    assert elapsed < 2.0 + 2.0, elapsed
    assert pool.stats.close_left == 2
    assert "did not close within 2s" in caplog.text and "removes them at exit" in caplog.text
    # Their supervisors lost stdin, so the containers exit and the engine removes them.
    assert await _own_containers_gone(require_engine(), ids)


async def test_a_stalled_engine_fails_a_pool_start_as_infrastructure(relay):
    relay.stall("GET", r"^/containers/")
    backend = DockerBackend(TEST_CONFIG, engine_urls=[relay.url])
    pool = SandboxPool(backend, PoolConfig(size=0, reap_on_start=True))
    try:
        with pytest.raises(EngineUnreachableError, match="did not answer"):
            await asyncio.wait_for(pool.start(), 30)
    finally:
        await pool.close()
    assert relay.stalled


async def test_an_env_that_cannot_start_a_pool_on_a_stalled_engine_gets_an_infra_error(relay, monkeypatch):
    """The path that ended two training runs: an env's first reset starts the shared
    pool, whose orphan sweep meets the stalled engine. It must be an ``InfraError`` (the
    episode is flagged and dropped), not an exception no layer expects."""
    relay.stall("GET", r"^/containers/")
    monkeypatch.setenv("DOCKER_HOST", relay.url)
    resources = SharedResources()
    with pytest.raises(InfraError, match="could not start a sandbox pool"):
        await asyncio.wait_for(resources.sandbox_pool("docker", user=object()), 30)
    assert relay.stalled
    # The next env asking (a 64-episode evaluation asks 64 times, one after another)
    # learns it at once, not after another client timeout.
    started = time.monotonic()
    with pytest.raises(InfraError, match=r"could not start a sandbox pool \d+s ago .*the next try is in"):
        await resources.sandbox_pool("docker", user=object())
    assert time.monotonic() - started < 0.5
    assert len(relay.stalled) == 1
    await resources.aclose()


async def test_a_stalled_engine_never_blocks_the_event_loop(relay):
    sandbox = await DockerSandbox(TEST_CONFIG, engine_url=relay.url).start()
    ids = [sandbox.container_id]
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.05)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.ensure_future(tick())
    try:
        relay.stall("GET", r"^/containers/[0-9a-f]+/json")  # "is the container alive?"
        await asyncio.sleep(0.2)
        relay.cut_attached()  # the sandbox's channel breaks
        with pytest.raises(SandboxInfraError):
            await asyncio.wait_for(sandbox.run("1 + 1", timeout=5), 60)
    finally:
        ticker.cancel()
        await sandbox.close()
    print(f"longest event-loop pause while the engine stalled: {max(gaps):.3f} s")
    assert relay.stalled, "nobody asked the engine whether the container lived"
    assert gaps and max(gaps) < 1.0, f"the event loop stood still for {max(gaps):.1f} s"
    assert await _own_containers_gone(require_engine(), ids)
