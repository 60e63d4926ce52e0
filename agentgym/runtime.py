"""One background asyncio loop per process, where every tool coroutine runs.

Why: tools hold loop-bound resources (sandbox pools, HTTP clients, semaphores that limit
concurrency per tool across all envs). If each env ran its own loop, those resources
could not be shared, and a batch of envs could not overlap their tool calls. The sync
``ToolEnv.step`` therefore submits ``astep`` to this loop and waits; the vector runner
schedules many ``astep`` coroutines on it at once.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["get_loop", "run_sync", "in_runtime_loop"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    loop.run_forever()


def get_loop() -> asyncio.AbstractEventLoop:
    """Return the process-wide tool loop, starting its daemon thread on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(
                target=_serve, args=(_loop,), name="agentgym-runtime", daemon=True
            )
            _thread.start()
        return _loop


def in_runtime_loop() -> bool:
    """True when called from a coroutine already running on the runtime loop."""
    try:
        return asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the runtime loop and block until it finishes.

    Raises:
        RuntimeError: when called from the runtime loop itself (that would deadlock);
            use the async API (``areset``/``astep``) there.
    """
    if in_runtime_loop():
        coro.close()
        raise RuntimeError(
            "run_sync was called from the agentgym runtime loop; await the async API "
            "(areset/astep) instead of the sync one inside coroutines."
        )
    future = asyncio.run_coroutine_threadsafe(coro, get_loop())
    return future.result(timeout)


def _shutdown() -> None:
    loop = _loop
    if loop is not None and loop.is_running():
        loop.call_soon_threadsafe(loop.stop)


atexit.register(_shutdown)
