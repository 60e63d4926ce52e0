"""Shared behaviour of sandboxes that run the in-sandbox supervisor.

A deployment (container, local process) only has to say how to start the supervisor and
hand back its stdin/stdout as a stream, whether it is still alive, and how to kill it;
everything else (the key handshake, requests, error mapping, anomaly tracking, close)
lives here once.
"""

from __future__ import annotations

import abc
import asyncio
import builtins
import hashlib
import logging
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from sandboxes.client import SupervisorClient, SupervisorStream, new_key
from sandboxes.errors import (
    SandboxClosedError,
    SandboxCrashedError,
    SandboxInfraError,
    SandboxMemoryKilledError,
)
from sandboxes.protocol import ExecResult, Sandbox, SandboxConfig

__all__ = ["SupervisedSandbox", "RUNTIME_DIR", "runtime_digest"]

log = logging.getLogger(__name__)

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
STARTUP_TIMEOUT_S = 120.0
"""How long a new sandbox may take to start and import its preload modules."""
MEMORY_CHECK_TIMEOUT_S = 10.0
"""How long a dead sandbox's backend may take to say whether its memory limit killed it."""

_FILE_ERRORS = {
    cls.__name__: cls
    for cls in (
        FileNotFoundError,
        PermissionError,
        IsADirectoryError,
        NotADirectoryError,
        FileExistsError,
    )
}


@lru_cache(maxsize=1)
def runtime_digest() -> str:
    """Hash of the supervisor and worker source, for fingerprints."""
    h = hashlib.sha256()
    for path in sorted(RUNTIME_DIR.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


class SupervisedSandbox(Sandbox):
    """A :class:`Sandbox` backed by the in-sandbox supervisor, reached over its stdin/stdout."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._client: SupervisorClient | None = None
        self._closed = False
        self._anomaly: str | None = None
        self._answered_at = time.time()  # the supervisor's last answer (wall time: engine events use it)
        self.ended = False
        """Set when agent code's memory ended the sandbox: its ``oom`` result is the last it gives."""
        self.versions: dict[str, Any] = {}
        self.episodes = 0
        """Episodes served since the last fresh start; the pool recycles after K."""
        self.reusable = True
        """Whether a reset can be checked complete here; when not (gVisor lists no SysV IPC
        objects), the pool gives each episode a fresh sandbox instead of a reset one."""

    # -- what a deployment provides ------------------------------------------------
    @abc.abstractmethod
    async def _launch(self, key: str) -> SupervisorStream:
        """Start the supervisor and hand it ``key`` where agent code can never read it
        (never an environment block: ``/proc/<pid>/environ`` outlives ``os.environ.pop``,
        and gVisor shows it to every uid); return the stream to its stdin/stdout."""

    @abc.abstractmethod
    def _alive(self) -> bool:
        """Best-effort liveness check after a request failed. It may block (a container
        asks its engine), so it is called from a worker thread, never on the loop."""

    def _killed_by_memory(self, since: float) -> bool:
        """Whether the sandbox's memory limit killed something after ``since`` (wall
        time of its last answer): then a death is agent code's memory, not the
        infrastructure. Called from a worker thread. A backend that cannot tell says
        False, and the death stays the infrastructure's (the pool replaces and replays)."""
        return False

    def _note_answer(self) -> None:
        """Called on the loop after each answer from the supervisor: a backend that tells
        a memory death apart by a counter (the process backend's cgroup) reads it here,
        cheaply. The default keeps nothing (a container's engine keeps timed events)."""

    async def _asked_killed_by_memory(self) -> bool:
        """:meth:`_killed_by_memory` off the loop, bounded: an engine that does not
        answer in :data:`MEMORY_CHECK_TIMEOUT_S` leaves the death the infrastructure's."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(self._killed_by_memory, self._answered_at),
                                          MEMORY_CHECK_TIMEOUT_S)
        except asyncio.TimeoutError:
            return False

    @abc.abstractmethod
    async def _terminate(self) -> None:
        """Kill the sandbox from outside and free its resources. Idempotent."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill the sandbox as the infrastructure might (see :meth:`Sandbox.kill`)."""

    @property
    @abc.abstractmethod
    def workdir(self) -> str:
        """Where relative paths point inside the sandbox."""

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> "SupervisedSandbox":
        """Start the sandbox and wait until its interpreter has imported its modules."""
        key = new_key()
        try:
            stream = await self._launch(key)
            self._client = SupervisorClient(
                stream, key=key, name=f"sandbox {self.id}", silence_s=self.config.transport_slack_s
            )
            hello = await self._client.handshake(STARTUP_TIMEOUT_S)
        except BaseException:
            await self._terminate()
            raise
        self._answered_at = time.time()
        self._note_answer()  # the baseline a death in the very first call is told apart by
        self.versions = hello.get("versions", {})
        self.reusable = hello.get("reset_verifiable", True) is True
        return self

    async def __aenter__(self) -> "SupervisedSandbox":
        if self._client is None:
            await self.start()
        return self

    @property
    def healthy(self) -> bool:
        return not self._closed and self._anomaly is None

    @property
    def anomaly(self) -> str | None:
        """Why this sandbox should not be reused (None while it is healthy)."""
        return self._anomaly

    def mark_anomaly(self, reason: str) -> None:
        self._anomaly = self._anomaly or reason

    async def _request(
        self, op: str, fields: dict | None = None, payload: bytes = b"", *, deadline_s: float
    ) -> tuple[dict, bytes]:
        if self._closed:
            raise SandboxClosedError(f"sandbox {self.id} is closed; acquire a new one")
        if self._client is None:
            raise SandboxClosedError(f"sandbox {self.id} was never started; call start()")
        try:
            answer = await self._client.request(op, fields, payload, deadline_s=deadline_s)
            self._answered_at = time.time()
            self._note_answer()
            return answer
        except SandboxInfraError as e:
            self.mark_anomaly(f"{op}: {e}")
            # Off the loop: for a container this asks the engine, and a stalled engine
            # would hold every other sandbox's episode for the client timeout.
            try:
                alive = await asyncio.to_thread(self._alive)
            finally:
                await self._terminate()  # hung or half-dead: kill it from outside
            if not alive:
                if await self._asked_killed_by_memory():
                    raise SandboxMemoryKilledError(
                        f"sandbox {self.id} died during {op}: its memory limit was reached (the "
                        "out-of-memory killer ended its machinery)") from e
                raise SandboxCrashedError(f"sandbox {self.id} died during {op}: {e}") from e
            raise
        except asyncio.CancelledError:
            # The caller gave up mid-request: the connection may hold a stale reply.
            self.mark_anomaly(f"{op} cancelled")
            raise

    # -- the Sandbox protocol -------------------------------------------------------
    async def run(self, code: str, timeout: float | None = None) -> ExecResult:
        timeout = float(timeout or self.config.default_timeout_s)
        deadline = timeout + self.config.grace_s + self.config.transport_slack_s + STARTUP_TIMEOUT_S
        try:
            header, _ = await self._request(
                "run", {"code": code, "timeout": timeout}, deadline_s=deadline
            )
        except SandboxMemoryKilledError as e:  # the agent's memory, during or after its last cell
            self.ended = True
            return ExecResult(status="oom", error=str(e), state_lost=True, state_lost_reason=e.reason)
        if "status" not in header:
            self.mark_anomaly(header.get("error", "bad run response"))
            raise SandboxInfraError(f"sandbox {self.id} could not run code: {header.get('error')}")
        result = ExecResult.from_dict(header)
        if result.state_lost or result.status in ("oom", "crash"):
            self.mark_anomaly(f"run ended with {result.status}, state_lost={result.state_lost}")
        return result

    async def upload(self, path: str, data: bytes) -> None:
        header, _ = await self._request(
            "upload", {"path": path}, bytes(data), deadline_s=STARTUP_TIMEOUT_S
        )
        _raise_file_error(header)

    async def download(self, path: str) -> bytes:
        header, payload = await self._request(
            "download", {"path": path}, deadline_s=STARTUP_TIMEOUT_S
        )
        _raise_file_error(header)
        return payload

    async def reset(self) -> None:
        header, _ = await self._request("reset", deadline_s=STARTUP_TIMEOUT_S)
        if not header.get("ok"):
            self.mark_anomaly(header.get("error", "reset failed"))
            raise SandboxInfraError(f"sandbox {self.id} could not reset: {header.get('error')}")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            self._client.close()
        await self._terminate()

    def describe(self) -> dict[str, Any]:
        return {
            "backend": type(self).__name__,
            "runtime": runtime_digest(),
            "versions": dict(self.versions),
        }


def _raise_file_error(header: dict) -> None:
    error = header.get("error")
    if not error:
        return
    name, _, message = error.partition(": ")
    if name in _FILE_ERRORS:
        raise _FILE_ERRORS[name](message)
    if name == "SupervisorError" or not hasattr(builtins, name):
        raise SandboxInfraError(error)
    raise OSError(error)
