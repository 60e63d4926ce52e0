"""Connecting to Docker engines, with errors that say what to do."""

from __future__ import annotations

import functools
import os
from typing import Any

from sandboxes.errors import EngineUnreachableError

__all__ = ["default_engine_url", "connect", "engine_reachable"]

_DEFAULT_URL = "unix:///var/run/docker.sock"


def default_engine_url() -> str:
    """``DOCKER_HOST`` if set, else the local engine's socket."""
    return os.environ.get("DOCKER_HOST") or _DEFAULT_URL


def connect(url: str | None = None, *, timeout: float = 60.0) -> Any:
    """A ``docker.DockerClient`` for ``url`` that has answered a ping.

    Raises:
        EngineUnreachableError: nothing answered; the message says how to fix it.
    """
    import docker
    import docker.errors
    import requests.exceptions

    url = url or default_engine_url()
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
