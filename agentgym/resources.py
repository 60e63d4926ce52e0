"""The process's shared resources, with one owner: sandbox pools (per runtime loop and
backend) and retriever-service clients (per URL and settings).

Families that need a resource shared by many envs (a warm sandbox pool) ask
:func:`shared_resources` for it; whoever owns the process (``agentgym run``, the stress
harness, a trainer, a test) closes everything with one call, ``await
shared_resources().aclose()`` (or ``run_sync(...)`` from sync code). A pool starts on first
use, on the loop that uses it; nothing here starts for a fingerprint: :meth:`sandbox_facts`
answers from the backend's description (the image's recorded versions, the installed
libraries) without starting a sandbox.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from agentgym.errors import ConfigError, InfraError

__all__ = ["SharedResources", "shared_resources"]

POOL_SIZE = 2
"""Warm sandboxes kept per pool; envs beyond it wait for creations (4 in parallel)."""


@dataclass
class SharedResources:
    """Sandbox pools keyed by (runtime loop, backend), created lazily, closed together."""

    _pools: dict[tuple[asyncio.AbstractEventLoop, str | None], Any] = field(default_factory=dict)
    _locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = field(default_factory=dict)
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

    async def sandbox_pool(self, backend: str | None) -> Any:
        """The started ``sandboxes.SandboxPool`` for ``backend`` on the running loop.

        Raises:
            ConfigError: the backend cannot work here (unknown name, no isolation possible).
            InfraError: the pool could not start (engine down, image build failed).
        """
        from sandboxes import PoolConfig, make_pool
        from sandboxes.errors import SandboxConfigError, SandboxError

        loop = asyncio.get_running_loop()
        async with self._locks.setdefault(loop, asyncio.Lock()):
            pool = self._pools.get((loop, backend))
            if pool is None:
                try:
                    pool = make_pool(backend, pool=PoolConfig(size=POOL_SIZE, max_parallel_creations=4))
                    await pool.start()
                except SandboxConfigError as e:  # the user's setup, never an infrastructure failure
                    raise ConfigError(str(e)) from e
                except SandboxError as e:
                    raise InfraError(f"could not start a sandbox pool: {e}") from e
                self._pools[(loop, backend)] = pool
        return pool

    def sandbox_facts(self, backend: str | None) -> dict[str, Any]:
        """What a sandbox of ``backend`` would be (backend, isolation, image or library
        versions, settings), for fingerprints: from descriptions, never by starting one."""
        if backend not in self._facts:
            self._facts[backend] = _describe_backend(backend)
        return self._facts[backend]

    def register_pool(self, pool: Any, backend: str | None) -> None:
        """Make a pool built elsewhere (a custom backend, a test's fake) the one that
        ``backend`` names on the running loop: used by envs, closed and fault-injected
        with the rest."""
        self._pools[(asyncio.get_running_loop(), backend)] = pool

    def pools(self) -> list[Any]:
        """Every pool this owner holds (all loops), for reports."""
        return list(self._pools.values())

    async def aclose(self) -> None:
        """Close every pool on the running loop and every retriever client. Idempotent;
        pools start again on next use."""
        loop = asyncio.get_running_loop()
        for key in [k for k in self._pools if k[0] is loop]:
            await self._pools.pop(key).close()
        for key in list(self._retrievers):
            client, _ = self._retrievers.pop(key)
            await client.aclose()


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
