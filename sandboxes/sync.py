"""A blocking wrapper for scripts and notebooks: ``with SyncSandbox() as sb: sb.run("1+1")``.

It runs a private event loop in a daemon thread, so it also works where a loop is
already running (Jupyter). Use the async API in servers and trainers.

A ``SyncSandbox`` still open when the interpreter exits is closed then, before Python
stops its thread pools (closing needs them), so a script that forgets ``close()`` exits
quietly and leaves nothing running.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any, Coroutine, TypeVar

from sandboxes.protocol import ExecResult, Sandbox, SandboxConfig

__all__ = ["SyncSandbox"]

T = TypeVar("T")

CLOSE_TIMEOUT_S = 30.0
"""How long ``close`` (and interpreter exit) waits for the sandbox to close."""


class SyncSandbox:
    """Blocking twin of :class:`~sandboxes.Sandbox`.

    Args:
        sandbox: an unstarted or started sandbox to wrap; by default one is made on the
            backend :func:`~sandboxes.pool.choose_backend` picks (docker, else process).
        config: settings for the default sandbox.
    """

    def __init__(self, sandbox: Sandbox | None = None, *, config: SandboxConfig | None = None) -> None:
        self._close_lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="SyncSandbox", daemon=True)
        self._thread.start()
        if sandbox is None:
            sandbox = _default_sandbox(config)
        self.sandbox = sandbox
        _close_at_exit(self)
        start = getattr(sandbox, "start", None)
        if start is not None and getattr(sandbox, "_client", True) is None:
            self._call(start())

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def run(self, code: str, timeout: float | None = None) -> ExecResult:
        return self._call(self.sandbox.run(code, timeout))

    def upload(self, path: str, data: bytes) -> None:
        self._call(self.sandbox.upload(path, data))

    def download(self, path: str) -> bytes:
        return self._call(self.sandbox.download(path))

    def reset(self) -> None:
        self._call(self.sandbox.reset())

    def close(self) -> None:
        """Close the sandbox and stop the private loop. Idempotent, from any thread."""
        with self._close_lock:
            if self._loop.is_closed():
                return
            try:
                future = asyncio.run_coroutine_threadsafe(self.sandbox.close(), self._loop)
                future.result(CLOSE_TIMEOUT_S)
            finally:
                _open.discard(self)
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=10)
                if not self._loop.is_running():
                    self._loop.close()

    def __enter__(self) -> "SyncSandbox":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_open: "weakref.WeakSet[SyncSandbox]" = weakref.WeakSet()
_hooked = False
_hook_lock = threading.Lock()


def _close_at_exit(sandbox: SyncSandbox) -> None:
    global _hooked
    _open.add(sandbox)
    with _hook_lock:
        if _hooked:
            return
        _hooked = True
    from sandboxes.reaper import before_executors_stop

    before_executors_stop(_close_open_sandboxes)


def _close_open_sandboxes() -> None:
    """Interpreter exit: close every SyncSandbox the program left open, quietly (what
    fails here is left to the reaper, which reports it in one line)."""
    for sandbox in list(_open):
        try:
            sandbox.close()
        except Exception:  # noqa: BLE001 - exit goes on; containers are reaped at exit
            pass


def _default_sandbox(config: SandboxConfig | None) -> Sandbox:
    from sandboxes.pool import choose_backend

    if choose_backend() == "docker":
        from sandboxes.docker import DockerSandbox

        return DockerSandbox(config)
    from sandboxes.process import ProcessSandbox

    return ProcessSandbox(config)
