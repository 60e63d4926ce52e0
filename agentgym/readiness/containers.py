"""Counting sandbox containers by their ``agentgym.owner`` label (the leak check).

Every sandbox container carries ``agentgym.owner=<host>:<pid>:<start time>``. A stress run
counts this process's containers before and after; any surplus after the envs and their
pools are closed is a leak. Other processes' containers (a parallel test run, another
trainer) are counted apart and never judged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

__all__ = ["ContainerCount", "count_containers", "wait_for_containers", "OWNER_LABEL"]

OWNER_LABEL = "agentgym.owner"


@dataclass(frozen=True)
class ContainerCount:
    """Containers labelled ``agentgym.owner``: this process's and everyone's."""

    mine: int
    total: int


def _client() -> Any:
    import docker

    return docker.from_env(timeout=10)


def _my_owner() -> str:
    from sandboxes.reaper import owner_id

    return owner_id()


def count_containers() -> ContainerCount | None:
    """Count labelled containers (all states), or ``None`` when no Docker engine answers."""
    try:
        client = _client()
        containers = client.containers.list(all=True, filters={"label": OWNER_LABEL})
    except Exception:  # noqa: BLE001 - no engine (or no SDK): the check does not apply
        return None
    mine = _my_owner()
    owned = sum(1 for c in containers if (c.labels or {}).get(OWNER_LABEL) == mine)
    return ContainerCount(owned, len(containers))


def wait_for_containers(at_most: int, timeout_s: float = 30.0) -> ContainerCount | None:
    """Poll until this process owns at most ``at_most`` containers (auto-removal is
    asynchronous) or the timeout passes; return the last count."""
    end = time.monotonic() + timeout_s
    count = count_containers()
    while count is not None and count.mine > at_most and time.monotonic() < end:
        time.sleep(0.25)
        count = count_containers()
    return count
