"""The process's shared resources, with one owner: sandbox pools (per runtime loop and
backend) and retriever-service clients (per URL and settings).

Families that need a resource shared by many envs (a warm sandbox pool) ask
:func:`shared_resources` for it; whoever owns the process (``agentgym run``, the stress
harness, a trainer, a test) closes everything with one call, ``await
shared_resources().aclose()`` (or ``run_sync(...)`` from sync code). A pool starts on first
use, on the loop that uses it; nothing here starts for a fingerprint: :meth:`sandbox_facts`
answers from the backend's description (the image's recorded versions, the installed
libraries) without starting a sandbox.

A pool asked for with a ``user`` (a family) is closed when its last user lets go
(:meth:`SharedResources.release_sandbox_pool`, from the family's ``aclose``), so closing
the last env stops the pool's background resets and refills. A pool whose loop has ended
(an ``asyncio.run`` returned) is never handed out again: its sandboxes are killed and a
new pool starts. At interpreter exit the runtime loop closes what is left on it
(:mod:`agentgym.runtime`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from agentgym.errors import ConfigError, InfraError

__all__ = ["SharedResources", "shared_resources"]

log = logging.getLogger(__name__)

POOL_SIZE = 2
"""Warm sandboxes kept per pool; envs beyond it wait for creations (4 in parallel)."""

POOL_RETRY_AFTER_S = 30.0
"""After a pool failed to start, asking for it again within this many seconds fails at
once with the same cause. Why: envs ask one after another under a lock, and each try on
an engine that stalls costs a whole client timeout (60 s): a 64-episode evaluation would
spend an hour learning 64 times that the engine is stuck."""


@dataclass
class SharedResources:
    """Sandbox pools keyed by (runtime loop, backend), created lazily, closed together."""

    _pools: dict[tuple[asyncio.AbstractEventLoop, str | None], Any] = field(default_factory=dict)
    _locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = field(default_factory=dict)
    _users: dict[tuple[asyncio.AbstractEventLoop, str | None], set[int]] = field(default_factory=dict)
    """Pool key -> ids of the users (families) holding it."""
    _pinned: set[tuple[asyncio.AbstractEventLoop, str | None]] = field(default_factory=set)
    """Pools someone asked for without a user (a server, a test): they live until :meth:`aclose`."""
    _start_failures: dict[tuple[asyncio.AbstractEventLoop, str | None], tuple[float, str]] = field(default_factory=dict)
    """Pool key -> (loop time, cause) of its last failed start (see :data:`POOL_RETRY_AFTER_S`)."""
    _facts: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    _retrievers: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)
    """(url, settings) -> [client, users]: a client is shared by every env that asks for it
    and closed when the last one lets go."""

    def retriever(self, url: str, *, timeout_s: float, max_retries: int, max_concurrency: int) -> Any:
        """A ``RemoteRetriever`` for ``url``, shared; give it back with :meth:`release_retriever`."""
        from agentgym.retrieval import RemoteRetriever

        key = (url, timeout_s, max_retries, max_concurrency)
        entry = self._retrievers.get(key)
        if entry is None:
            client = RemoteRetriever(url, timeout_s=timeout_s, max_retries=max_retries,
                                     max_concurrency=max_concurrency)
            entry = self._retrievers[key] = [client, 0]
        entry[1] += 1
        return entry[0]

    async def release_retriever(self, client: Any) -> None:
        """One user fewer; the last one's release closes the client's connections."""
        for key, entry in list(self._retrievers.items()):
            if entry[0] is client:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._retrievers[key]
                    await client.aclose()
                return

    async def sandbox_pool(self, backend: str | None, *, user: object | None = None) -> Any:
        """The started ``sandboxes.SandboxPool`` for ``backend`` on the running loop.

        With ``user`` (the family asking), the pool counts it until
        :meth:`release_sandbox_pool` and closes when its last user lets go; without one
        it lives until :meth:`aclose`.

        Raises:
            ConfigError: the backend cannot work here (unknown name, no isolation possible).
            InfraError: the pool could not start (engine down, image build failed).
        """
        from sandboxes import PoolConfig, make_pool
        from sandboxes.errors import SandboxConfigError, SandboxError

        loop = asyncio.get_running_loop()
        self._forget_ended_loops()
        key = (loop, backend)
        async with self._locks.setdefault(loop, asyncio.Lock()):
            pool = self._pools.get(key)
            if pool is not None and getattr(pool, "closed", False):
                self._pools.pop(key, None)  # closed by someone else (a test, a fault): start afresh
                self._forget(key)
                pool = None
            if pool is None:
                failed = self._start_failures.get(key)
                if failed is not None and loop.time() - failed[0] < POOL_RETRY_AFTER_S:
                    ago = loop.time() - failed[0]
                    raise InfraError(f"could not start a sandbox pool {ago:.0f}s ago ({failed[1]}); "
                                     f"the next try is in {POOL_RETRY_AFTER_S - ago:.0f}s")
                try:
                    pool = make_pool(backend, pool=PoolConfig(size=POOL_SIZE, max_parallel_creations=4))
                    await pool.start()
                except SandboxConfigError as e:  # the user's setup, never an infrastructure failure
                    raise ConfigError(str(e)) from e
                except SandboxError as e:
                    self._start_failures[key] = (loop.time(), str(e))
                    if pool is not None:
                        await pool.close()  # its backend's clients; it started no sandbox
                    raise InfraError(f"could not start a sandbox pool: {e}") from e
                self._start_failures.pop(key, None)
                self._pools[key] = pool
            if user is not None:
                self._users.setdefault(key, set()).add(id(user))
            else:
                self._pinned.add(key)  # someone holds it without counting: keep it open
        return pool

    async def release_sandbox_pool(self, user: object) -> None:
        """``user`` no longer needs its pools; a pool whose last user this was is closed
        (on its own loop), so nothing of it keeps running in the background."""
        for key, users in list(self._users.items()):
            if id(user) not in users:
                continue
            users.discard(id(user))
            if users or key in self._pinned:
                continue
            del self._users[key]
            pool = self._pools.pop(key, None)
            if pool is not None:
                await _close_pool(pool, key[0])

    def _forget_ended_loops(self) -> None:
        """Drop what belongs to loops that have ended: their pools' tasks died with them,
        so those pools can only be abandoned (sandboxes killed), never reused."""
        for key in [k for k in self._pools if k[0].is_closed()]:
            abandon = getattr(self._pools.pop(key), "abandon", None)
            self._forget(key)
            killed = abandon() if abandon is not None else 0
            if killed:
                log.info("killed %d sandboxes of a pool whose event loop had ended", killed)
        for loop in [l for l in self._locks if l.is_closed()]:
            del self._locks[loop]
        for key in [k for k in self._start_failures if k[0].is_closed()]:
            del self._start_failures[key]

    def sandbox_facts(self, backend: str | None) -> dict[str, Any]:
        """What a sandbox of ``backend`` would be (backend, isolation, image or library
        versions, settings), for fingerprints: from descriptions, never by starting one."""
        if backend not in self._facts:
            self._facts[backend] = _describe_backend(backend)
        return self._facts[backend]

    def register_pool(self, pool: Any, backend: str | None) -> None:
        """Make a pool built elsewhere (a custom backend, a test's fake) the one that
        ``backend`` names on the running loop: used by envs, closed and fault-injected
        with the rest (and, like any pool asked for without a user, only by :meth:`aclose`)."""
        key = (asyncio.get_running_loop(), backend)
        self._pools[key] = pool
        self._pinned.add(key)

    def _forget(self, key: tuple[asyncio.AbstractEventLoop, str | None]) -> None:
        self._users.pop(key, None)
        self._pinned.discard(key)

    def pools(self) -> list[Any]:
        """Every pool this owner holds (all loops), for reports."""
        return list(self._pools.values())

    async def aclose(self) -> None:
        """Close every pool on the running loop and every retriever client, and kill the
        sandboxes of pools whose loop has ended. Idempotent; pools start again on next use."""
        loop = asyncio.get_running_loop()
        self._forget_ended_loops()
        for key in [k for k in self._pools if k[0] is loop]:
            self._forget(key)
            await self._pools.pop(key).close()
        for key in list(self._retrievers):
            client, _ = self._retrievers.pop(key)
            await client.aclose()


async def _close_pool(pool: Any, loop: asyncio.AbstractEventLoop, timeout_s: float = 60.0) -> None:
    """Close ``pool`` on ``loop``, from whichever loop is running now."""
    if loop is asyncio.get_running_loop():
        await pool.close()
    elif loop.is_closed() or not loop.is_running():
        pool.abandon()  # nothing will run its close there (now, or ever)
    else:
        future = asyncio.run_coroutine_threadsafe(pool.close(), loop)
        try:
            await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
        except asyncio.TimeoutError:
            pool.abandon()


def _describe_backend(backend: str | None) -> dict[str, Any]:
    import warnings

    from sandboxes.errors import SandboxError
    from sandboxes.pool import choose_backend, default_config

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chosen = choose_backend(backend)  # type: ignore[arg-type]
    except SandboxError as e:
        raise ConfigError(str(e)) from e
    config = default_config()  # what sandbox_pool's make_pool will use
    if chosen == "docker":
        from sandboxes.docker import DockerBackend
        from sandboxes.errors import ImageBuildError
        from sandboxes.image import default_image, image_tag

        facts = DockerBackend(config).describe()
        try:
            facts["image"] = default_image(build=False).fingerprint()
        except ImageBuildError:
            facts["image"] = {"tag": image_tag(), "unresolved": "not built yet"}
        facts["versions"] = dict(facts["image"].get("versions") or {})  # what agent code imports
        return facts
    from sandboxes.process import ProcessBackend

    return ProcessBackend(config, isolation="unsafe" if chosen == "unsafe-process" else "auto").describe()


_shared = SharedResources()


def shared_resources() -> SharedResources:
    """This process's owner of shared resources."""
    return _shared
