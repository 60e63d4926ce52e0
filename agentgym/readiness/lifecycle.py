"""Closing what envs share across instances, so a readiness run ends with nothing alive.

Some envs keep process-wide resources (a warm sandbox pool) that outlive any one env
object; such an env module exposes ``async close_shared_pools()``. The readiness tools
call it after their envs are closed, so idle warm sandboxes are not mistaken for leaks
and no pool is left for interpreter shutdown to tear down.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from typing import Any

__all__ = ["aclose_shared_resources"]


async def aclose_shared_resources(env: Any, timeout_s: float = 120.0) -> str | None:
    """Await the env module's ``close_shared_pools()`` if it has one; return an error text."""
    module = importlib.import_module(type(getattr(env, "unwrapped", env)).__module__)
    closer = getattr(module, "close_shared_pools", None)
    if closer is None or not inspect.iscoroutinefunction(closer):
        return None
    try:
        await asyncio.wait_for(closer(), timeout_s)
    except Exception as e:  # noqa: BLE001 - reported by the caller
        return f"closing shared pools failed: {type(e).__name__}: {e}"
    return None
