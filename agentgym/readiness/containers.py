"""The leak check of a stress run: this process's sandbox containers, before and after.

Counting is :func:`sandboxes.count_owned_containers` (the owner label lives in
:mod:`sandboxes.reaper`, in one place); this module only turns "no engine" into "the
check does not apply" and waits for auto-removal, which is asynchronous.
"""

from __future__ import annotations

import time

from sandboxes.errors import SandboxError
from sandboxes.reaper import OWNER_LABEL, ContainerCount, count_owned_containers

__all__ = ["ContainerCount", "count_containers", "wait_for_containers", "OWNER_LABEL"]


def count_containers() -> ContainerCount | None:
    """Count labelled containers (all states), or ``None`` when no Docker engine answers."""
    try:
        return count_owned_containers()
    except (SandboxError, ImportError):  # no engine, or no Docker SDK: the check does not apply
        return None


def wait_for_containers(at_most: int, timeout_s: float = 30.0) -> ContainerCount | None:
    """Poll until this process owns at most ``at_most`` containers (auto-removal is
    asynchronous) or the timeout passes; return the last count."""
    end = time.monotonic() + timeout_s
    count = count_containers()
    while count is not None and count.mine > at_most and time.monotonic() < end:
        time.sleep(0.25)
        count = count_containers()
    return count
