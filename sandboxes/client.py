"""Host side of the supervisor protocol: one Unix-socket connection per sandbox.

Every request gets a sequence number. If the connection breaks, the client reconnects
and resends the *same* number; the supervisor answers a repeated number from its cache,
so a retry never runs the agent's code twice. While it works the supervisor sends a
heartbeat every second; silence for longer than ``silence_s`` means it is hung, and the
caller kills the sandbox from outside.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sandboxes.errors import SandboxCrashedError, SandboxTransportError
from sandboxes.runtime import wire

__all__ = ["SupervisorClient"]

_RECONNECTS = 3


class SupervisorClient:
    """Async, one-request-at-a-time client for a supervisor listening on ``socket_path``."""

    def __init__(self, socket_path: str, *, silence_s: float = 5.0) -> None:
        self.socket_path = socket_path
        self.silence_s = silence_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._seq = 0
        self._lock = asyncio.Lock()

    async def connect(self, timeout: float, alive: Any = None) -> None:
        """Connect, waiting up to ``timeout`` for the supervisor to create its socket.

        ``alive`` is an optional zero-argument callable; when it returns False the wait
        ends early with :class:`SandboxCrashedError`.
        """
        end = time.monotonic() + timeout
        delay = 0.005
        next_check = time.monotonic() + 0.5
        while True:
            try:
                await self._open()
                return
            except (FileNotFoundError, ConnectionRefusedError) as e:
                # ``alive`` may cost an engine round trip: ask twice a second at most
                if alive is not None and time.monotonic() >= next_check and not alive():
                    raise SandboxCrashedError(
                        f"the sandbox exited before its supervisor listened on {self.socket_path}"
                    ) from e
                if time.monotonic() > end:
                    raise SandboxTransportError(
                        f"no supervisor listening on {self.socket_path} after {timeout:g}s"
                    ) from e
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + 0.5
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.1)

    async def _open(self) -> None:
        self._reader, self._writer = await asyncio.open_unix_connection(
            self.socket_path, limit=wire.MAX_HEADER_BYTES
        )

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def request(
        self, op: str, fields: dict | None = None, payload: bytes = b"", *, deadline_s: float
    ) -> tuple[dict, bytes]:
        """Send one request and return the supervisor's ``(header, payload)``.

        ``deadline_s`` bounds the whole exchange. Raises :class:`SandboxTransportError`
        when the supervisor stays silent, the deadline passes, or reconnecting fails.
        """
        async with self._lock:
            self._seq += 1
            header = {"op": op, "seq": self._seq, **(fields or {})}
            frame = wire.encode(header, payload)
            end = time.monotonic() + deadline_s
            last_error: BaseException | None = None
            for attempt in range(_RECONNECTS + 1):
                try:
                    if self._writer is None:
                        await self._open()
                    return await self._exchange(frame, header["seq"], end)
                except SandboxTransportError:
                    raise
                except (OSError, EOFError, asyncio.IncompleteReadError, wire.FrameError) as e:
                    last_error = e
                    self.close()
                    if time.monotonic() >= end:
                        break
                    await asyncio.sleep(0.01 * 2**attempt)
            raise SandboxTransportError(
                f"lost the connection to the supervisor at {self.socket_path} "
                f"({op} request, {_RECONNECTS} reconnects): {last_error!r}"
            ) from last_error

    async def _exchange(self, frame: bytes, seq: int, end: float) -> tuple[dict, bytes]:
        assert self._writer is not None and self._reader is not None
        self._writer.write(frame)
        await self._writer.drain()
        while True:
            wait = min(self.silence_s, end - time.monotonic())
            if wait <= 0:
                raise SandboxTransportError(f"supervisor at {self.socket_path} missed its deadline")
            try:
                header, payload = await asyncio.wait_for(self._read_frame(), wait)
            except asyncio.TimeoutError as e:
                self.close()
                raise SandboxTransportError(
                    f"supervisor at {self.socket_path} silent for {wait:.1f}s (hung or dead)"
                ) from e
            if header.get("seq") == seq and not header.get("heartbeat"):
                return header, payload

    async def _read_frame(self) -> tuple[dict, bytes]:
        assert self._reader is not None
        prefix = await self._reader.readexactly(wire.PREFIX.size)
        header_len, payload_len = wire.PREFIX.unpack(prefix)
        wire.check_lengths(header_len, payload_len)
        header = wire.decode_header(await self._reader.readexactly(header_len))
        payload = await self._reader.readexactly(payload_len) if payload_len else b""
        return header, payload
