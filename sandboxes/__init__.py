"""Isolated, persistent Python interpreters for tool-using agents.

Public API::

    from sandboxes import make_pool

    async with make_pool() as pool:          # docker if an engine answers, else process
        sb = await pool.acquire()            # fresh state, from a warm pool
        r = await sb.run("import pandas as pd\\n1 + 1", timeout=10)
        r.status, r.value                    # ('ok', '2')
        await pool.release(sb)               # reset in the background, then reused

- :class:`Sandbox` / :class:`ExecResult` / :class:`SandboxConfig`: the contract.
- :class:`DockerSandbox`: one container with a supervisor and a pre-imported worker.
- :class:`ProcessSandbox`: the same supervisor as a local subprocess (weaker isolation).
- :class:`SandboxPool` / :class:`PoolConfig` / :func:`make_pool`: warm pool, retries,
  replay of an episode's cells onto a replacement sandbox.
- :func:`default_image`: build-or-get the local sandbox image (tag, id, versions).
- :func:`reap_orphans`: remove containers whose owning process is gone;
  :func:`count_owned_containers`: this process's containers and everyone's (leak checks).
- :class:`FaultyBackend`: wraps a backend so chosen creations fail (fault injection);
  ``Sandbox.kill()`` kills a sandbox from outside.

Nothing here imports ``agentgym``, ``tasks`` or ``baselines``. Heavy modules (the
Docker client) load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sandboxes.errors import (
    EngineUnreachableError,
    ImageBuildError,
    InjectedFaultError,
    SandboxClosedError,
    SandboxConfigError,
    SandboxCrashedError,
    SandboxError,
    SandboxInfraError,
    SandboxTransportError,
)
from sandboxes.protocol import ExecResult, ExecStatus, Sandbox, SandboxConfig

if TYPE_CHECKING:  # pragma: no cover
    from sandboxes.docker import DockerBackend, DockerSandbox
    from sandboxes.fake import FakeBackend, FakeSandbox
    from sandboxes.faulty import FaultyBackend
    from sandboxes.image import ImageInfo, default_image
    from sandboxes.pool import PoolConfig, SandboxBackend, SandboxPool, make_pool
    from sandboxes.process import ProcessBackend, ProcessSandbox
    from sandboxes.reaper import ContainerCount, count_owned_containers, reap_orphans
    from sandboxes.sync import SyncSandbox

__all__ = [
    "Sandbox",
    "ExecResult",
    "ExecStatus",
    "SandboxConfig",
    "ProcessSandbox",
    "ProcessBackend",
    "DockerSandbox",
    "DockerBackend",
    "SandboxPool",
    "SandboxBackend",
    "PoolConfig",
    "make_pool",
    "default_image",
    "ImageInfo",
    "reap_orphans",
    "count_owned_containers",
    "ContainerCount",
    "SyncSandbox",
    "FakeSandbox",
    "FakeBackend",
    "FaultyBackend",
    "SandboxError",
    "SandboxInfraError",
    "EngineUnreachableError",
    "SandboxTransportError",
    "SandboxCrashedError",
    "InjectedFaultError",
    "SandboxClosedError",
    "SandboxConfigError",
    "ImageBuildError",
]

_LAZY = {
    "ProcessSandbox": "sandboxes.process",
    "ProcessBackend": "sandboxes.process",
    "DockerSandbox": "sandboxes.docker",
    "DockerBackend": "sandboxes.docker",
    "SandboxPool": "sandboxes.pool",
    "SandboxBackend": "sandboxes.pool",
    "PoolConfig": "sandboxes.pool",
    "make_pool": "sandboxes.pool",
    "default_image": "sandboxes.image",
    "ImageInfo": "sandboxes.image",
    "reap_orphans": "sandboxes.reaper",
    "count_owned_containers": "sandboxes.reaper",
    "ContainerCount": "sandboxes.reaper",
    "SyncSandbox": "sandboxes.sync",
    "FakeSandbox": "sandboxes.fake",
    "FakeBackend": "sandboxes.fake",
    "FaultyBackend": "sandboxes.faulty",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sandboxes' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
