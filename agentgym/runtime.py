"""One background asyncio loop per process, where every tool coroutine runs.

Why: tools hold loop-bound resources (sandbox pools, HTTP clients, semaphores that limit
concurrency per tool across all envs). If each env ran its own loop, those resources
could not be shared, and a batch of envs could not overlap their tool calls. The sync
``ToolEnv.step`` therefore submits ``astep`` to this loop and waits; the vector runner
schedules many ``astep`` coroutines on it at once.

At interpreter exit the loop closes the shared resources on it (sandbox pools) and stops,
*before* Python shuts its thread pools down: closing a sandbox needs
``asyncio.to_thread``, which fails after that point (see
:func:`sandboxes.reaper.before_executors_stop`). Exit is silent unless something could
not be closed in time; then one warning line says what, and how to clean it up.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["get_loop", "run_sync", "in_runtime_loop"]

T = TypeVar("T")

log = logging.getLogger(__name__)

EXIT_CLOSE_TIMEOUT_S = 30.0
"""How long interpreter exit waits for the runtime loop to close its sandbox pools."""

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


async def _close_everything() -> None:
    """Close the shared resources on this loop, then cancel whatever else still runs here
    (an env close scheduled from a coroutine, a runner's episodes), so nothing starts,
    resets or logs after exit has begun."""
    from agentgym.resources import shared_resources

    try:
        await shared_resources().aclose()
    finally:
        me = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)


def _shutdown() -> None:
    """Stop the runtime loop at exit, closing what runs on it first (bounded in time)."""
    loop, thread = _loop, _thread
    if loop is None or loop.is_closed() or not loop.is_running():
        return
    problem: str | None = None
    future = asyncio.run_coroutine_threadsafe(_close_everything(), loop)
    try:
        future.result(EXIT_CLOSE_TIMEOUT_S)
    except TimeoutError:
        future.cancel()
        problem = f"closing sandbox pools took over {EXIT_CLOSE_TIMEOUT_S:g} s"
    except BaseException as e:  # noqa: BLE001 - exit must go on; reported in one line
        problem = f"closing sandbox pools failed ({type(e).__name__}: {e})"
    loop.call_soon_threadsafe(loop.stop)
    if thread is not None:
        thread.join(5.0)
    if not loop.is_running():
        # Closed, so that an atexit handler's env.close() gets a fresh loop from
        # get_loop() instead of waiting forever on this stopped one.
        loop.close()
    if problem is not None:
        log.warning("agentgym: %s at exit; sandboxes may be left behind: run `agentgym reap` "
                    "to remove any that remain", problem)


def _register_shutdown() -> None:
    from sandboxes.reaper import before_executors_stop

    before_executors_stop(_shutdown)


_register_shutdown()
