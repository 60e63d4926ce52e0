"""Connecting to Docker engines, with errors that say what to do."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any

from sandboxes.errors import EngineUnreachableError, SandboxConfigError, SandboxError, SandboxInfraError

__all__ = [
    "ENGINE_TIMEOUT_ENV", "connect", "default_engine_url", "engine_calls", "engine_error", "engine_reachable",
    "engine_timeout",
]

_DEFAULT_URL = "unix:///var/run/docker.sock"

ENGINE_TIMEOUT_ENV = "AGENTGYM_ENGINE_TIMEOUT_S"
"""Seconds an engine call may wait for its answer (default 60). Every wait on the engine
is bounded by it: an engine that stalls (answers pings, never answers a call on a
container: Docker 20.10 under 63 concurrent removals) fails the call as infrastructure
after this long, instead of holding the caller forever."""


def default_engine_url() -> str:
    """``DOCKER_HOST`` if set, else the local engine's socket."""
    return os.environ.get("DOCKER_HOST") or _DEFAULT_URL


def engine_timeout() -> float:
    """The engine client timeout in seconds: :data:`ENGINE_TIMEOUT_ENV`, else 60.

    Raises:
        SandboxConfigError: the variable is set to something that is not seconds > 0.
    """
    raw = os.environ.get(ENGINE_TIMEOUT_ENV, "").strip()
    if not raw:
        return 60.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise SandboxConfigError(f"Expected {ENGINE_TIMEOUT_ENV} to be a number of seconds > 0, actual value: {raw!r}")
    return value


def connect(url: str | None = None, *, timeout: float | None = None) -> Any:
    """A ``docker.DockerClient`` for ``url`` that has answered a ping; each of its calls
    waits at most ``timeout`` seconds (default :func:`engine_timeout`).

    Raises:
        EngineUnreachableError: nothing answered; the message says how to fix it.
    """
    import docker
    import docker.errors
    import requests.exceptions

    url = url or default_engine_url()
    timeout = engine_timeout() if timeout is None else timeout
    try:
        client = docker.DockerClient(base_url=url, timeout=timeout)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as e:
        raise EngineUnreachableError(
            f"Expected a Docker engine at {url}, but it did not answer ({e}). Start it "
            "(`dockerd &` or `systemctl start docker`), set DOCKER_HOST to a running "
            "engine, or set AGENTGYM_SANDBOX=process to use the weaker process sandbox."
        ) from e
    return client


def engine_error(e: BaseException, url: str, what: str) -> SandboxInfraError:
    """The infrastructure error for an engine call (``what``) that raised ``e``.

    What the Docker SDK raises is the HTTP client's business (``requests`` timeouts and
    connection errors, ``docker.errors.APIError``, plain ``OSError``), and no layer above
    the sandboxes package knows those classes: one that escapes raw is nobody's to
    classify, and it ended two training runs. So every engine call is turned into this.
    """
    import requests.exceptions

    if isinstance(e, SandboxInfraError):
        return e
    if isinstance(e, requests.exceptions.Timeout):
        return EngineUnreachableError(
            f"{what}: the engine at {url} did not answer in time ({e}); it may be overloaded or "
            f"stalled (`docker info` hangs then: restart dockerd). {ENGINE_TIMEOUT_ENV} sets the wait."
        )
    if isinstance(e, (requests.exceptions.ConnectionError, ConnectionError)) or "connection" in str(e).lower():
        return EngineUnreachableError(f"{what}: the engine at {url} stopped answering ({e})")
    return SandboxInfraError(f"{what}: the engine at {url} failed ({type(e).__name__}: {e})")


@contextlib.contextmanager
def engine_calls(url: str, what: str) -> Iterator[None]:
    """Run engine calls; whatever the Docker SDK raises comes out as :func:`engine_error`.

    Errors of this package (a :class:`~sandboxes.errors.SandboxError`) pass unchanged,
    and so does anything that is not the engine's: a ``TypeError`` is a bug to see."""
    import docker.errors
    import requests.exceptions

    try:
        yield
    except SandboxError:
        raise
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as e:
        raise engine_error(e, url, what) from e


@functools.lru_cache(maxsize=8)
def _probe(url: str) -> bool:
    try:
        connect(url, timeout=3.0).close()
    except EngineUnreachableError:
        return False
    return True


def engine_reachable(url: str | None = None, *, cached: bool = True) -> bool:
    """Whether an engine answers at ``url`` (the answer is cached per process)."""
    url = url or default_engine_url()
    if not cached:
        _probe.cache_clear()
    return _probe(url)
