"""Ray, imported lazily, and the one place that knows how to reach a cluster.

Ray is an optional extra: a user on one machine needs nothing new, and ``import
agentgym.fleet`` never imports Ray. Everything that needs it calls :func:`require_ray`,
which says what to install when it is missing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from agentgym.errors import ConfigError
from agentgym.reliability import apolling, polling

__all__ = ["RayMissingError", "require_ray", "ClusterSession", "connect", "worker_lost_errors", "wait_restarted",
           "await_restarted"]

RAY_HINT = "pip install 'agentgym[ray]'"


class RayMissingError(ConfigError, ImportError):
    """Ray is not installed; the message says how to get it."""


def require_ray() -> ModuleType:
    """The ``ray`` module, or :class:`RayMissingError` naming the extra to install."""
    try:
        import ray
    except ImportError as e:
        raise RayMissingError(f"Environment fleets run on Ray, which is not installed: {RAY_HINT}") from e
    return ray


def worker_lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors that mean the worker (its process or its node) is gone, as opposed to
    an exception raised by our code inside it: the episode it was running never finished,
    so it is re-run or reported ``infra_failed``, never blamed on the agent."""
    exc = require_ray().exceptions
    return (exc.RayActorError, exc.WorkerCrashedError, exc.NodeDiedError, exc.ObjectLostError,
            exc.LocalRayletDiedError, exc.OutOfMemoryError)


@dataclass
class ClusterSession:
    """A connection to a Ray cluster. ``started_here``: this process started a local
    instance (``shutdown`` stops it); otherwise it joined one and only disconnects."""

    address: str
    started_here: bool

    def shutdown(self) -> None:
        ray = require_ray()
        if ray.is_initialized():
            ray.shutdown()


def connect(address: str = "auto", *, num_cpus: int | None = None,
            resources: dict[str, float] | None = None) -> ClusterSession:
    """Join or start a Ray cluster.

    Args:
        address: ``auto``: the cluster in ``RAY_ADDRESS`` or the last one ``ray start``
            launched on this machine, else a local instance for this process; ``local``:
            always a new local instance; anything else: the address of a running cluster
            (``host:port`` or ``ray://host:port``).
        num_cpus, resources: what a local instance offers (ignored when joining).
    """
    ray = require_ray()
    if ray.is_initialized():
        return ClusterSession(ray.get_runtime_context().gcs_address, started_here=False)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if address != "local":
        try:
            ray.init(address=address, **kwargs)
            return ClusterSession(ray.get_runtime_context().gcs_address, started_here=False)
        except ConnectionError as e:
            if address != "auto":
                raise ConfigError(f"Expected a running Ray cluster at {address!r}, but none answered: {e}") from e
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, resources=resources, **kwargs)
    return ClusterSession(ray.get_runtime_context().gcs_address, started_here=True)


RESTART_POLL_S = 0.2


def wait_restarted(handle: Any, timeout_s: float = 180.0) -> Any | None:
    """The ``ready()`` answer of an actor Ray is restarting, or None if it is dead for good.

    While it restarts Ray answers calls with ``ActorUnavailableError`` at once instead of
    queueing them, so ask again until it answers, Ray gives up on it (``ActorDiedError``),
    or ``timeout_s`` passes.
    """
    import time

    ray = require_ray()
    deadline = time.monotonic() + timeout_s
    try:
        for attempt in polling(ray.exceptions.ActorUnavailableError, deadline_s=timeout_s, interval_s=RESTART_POLL_S):
            with attempt:
                return ray.get(handle.ready.remote(), timeout=max(0.1, deadline - time.monotonic()))
    except (ray.exceptions.ActorUnavailableError, *worker_lost_errors(), ray.exceptions.GetTimeoutError):
        return None
    raise AssertionError("unreachable: polling re-raises when it gives up")


async def await_restarted(handle: Any, timeout_s: float = 180.0) -> bool:
    """:func:`wait_restarted` for a coroutine: True once the actor answers again."""
    ray = require_ray()
    try:
        async for attempt in apolling(ray.exceptions.ActorUnavailableError, deadline_s=timeout_s,
                                      interval_s=RESTART_POLL_S):
            with attempt:
                await handle.ready.remote()
                return True
    except (ray.exceptions.ActorUnavailableError, *worker_lost_errors()):
        return False
    raise AssertionError("unreachable: polling re-raises when it gives up")
    return False
