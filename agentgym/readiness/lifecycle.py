"""Closing what envs share across instances, so a readiness run ends with nothing alive.

Warm sandbox pools and retriever clients outlive any one env object; their owner is
:func:`agentgym.resources.shared_resources`. The readiness tools close it after their envs
are closed, so idle warm sandboxes are not mistaken for leaks and nothing is left for
interpreter shutdown to tear down.
"""

from __future__ import annotations

import asyncio

from agentgym.resources import shared_resources

__all__ = ["aclose_shared_resources"]


async def aclose_shared_resources(timeout_s: float = 120.0) -> str | None:
    """Close the process's shared resources on the running loop; return an error text."""
    try:
        await asyncio.wait_for(shared_resources().aclose(), timeout_s)
    except Exception as e:  # noqa: BLE001 - reported by the caller
        return f"closing shared resources failed: {type(e).__name__}: {e}"
    return None
