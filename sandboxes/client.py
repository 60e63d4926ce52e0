"""Host side of the supervisor protocol: one stream per sandbox, never re-opened.

The stream is the supervisor's stdin/stdout (attached through the engine for containers,
a pipe for local processes). Every request gets a sequence number and every reply must
carry it; while it works the supervisor sends a heartbeat every second, and silence for
longer than ``silence_s`` means it is hung.

Any anomaly — a frame that does not decode, a reply to another request, a broken stream
— raises :class:`SandboxTransportError`, and the caller retires the sandbox. The client
never reconnects: a second connection is exactly what an impostor would wait for.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from typing import Protocol

from sandboxes.errors import SandboxTransportError
from sandboxes.runtime import wire

__all__ = ["SupervisorClient", "SupervisorStream", "new_key"]


class SupervisorStream(Protocol):
    """What the client needs from a transport (an attached container, a pipe pair)."""

    reader: asyncio.StreamReader

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


def new_key() -> str:
    """A fresh per-sandbox key: given to the supervisor at start, proved in ``hello``."""
    return secrets.token_hex(32)


class SupervisorClient:
    """Async, one-request-at-a-time client for the supervisor at the end of ``stream``."""

    def __init__(self, stream: SupervisorStream, *, key: str, name: str, silence_s: float = 5.0) -> None:
        self.stream = stream
        self.key = key.encode()
        self.name = name
        self.silence_s = silence_s
        self._seq = 0
        self._lock = asyncio.Lock()
        self._broken: str | None = None

    def close(self) -> None:
        self._broken = self._broken or "closed"
        self.stream.close()

    async def handshake(self, deadline_s: float) -> dict:
        """``hello`` with a fresh nonce; the reply must prove it knows this sandbox's key."""
        nonce = secrets.token_hex(16)
        header, _ = await self.request("hello", {"wait_ready": True, "nonce": nonce}, deadline_s=deadline_s)
        expected = hmac.new(self.key, nonce.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(str(header.get("proof", "")), expected):
            self._fail("the peer could not prove it is this sandbox's supervisor")
        return header

    async def request(
        self, op: str, fields: dict | None = None, payload: bytes = b"", *, deadline_s: float
    ) -> tuple[dict, bytes]:
        """Send one request and return the supervisor's ``(header, payload)``.

        Raises :class:`SandboxTransportError` when the stream breaks or misbehaves, the
        supervisor stays silent, or ``deadline_s`` passes; the sandbox is then unusable.
        """
        async with self._lock:
            if self._broken is not None:
                raise SandboxTransportError(f"the channel to {self.name} is unusable: {self._broken}")
            self._seq += 1
            seq = self._seq
            try:
                self.stream.write(wire.encode({"op": op, "seq": seq, **(fields or {})}, payload))
                await self.stream.drain()
                return await self._reply(seq, time.monotonic() + deadline_s)
            except SandboxTransportError:
                raise
            except (OSError, EOFError, asyncio.IncompleteReadError, wire.FrameError, ValueError) as e:
                self._fail(f"{op} request: {e!r}")
                raise AssertionError("unreachable")  # _fail raises

    def _fail(self, why: str) -> None:
        self._broken = why
        self.stream.close()
        raise SandboxTransportError(f"the channel to {self.name} broke: {why}")

    async def _reply(self, seq: int, end: float) -> tuple[dict, bytes]:
        while True:
            wait = min(self.silence_s, end - time.monotonic())
            if wait <= 0:
                self._fail("the supervisor missed its deadline")
            try:
                header, payload = await asyncio.wait_for(self._read_frame(), wait)
            except asyncio.TimeoutError:
                self._fail(f"the supervisor was silent for {wait:.1f}s (hung or dead)")
            if header.get("seq") != seq:
                self._fail(f"a reply to request {header.get('seq')!r} arrived while waiting for {seq}")
            if not header.get("heartbeat"):
                return header, payload

    async def _read_frame(self) -> tuple[dict, bytes]:
        reader = self.stream.reader
        prefix = await reader.readexactly(wire.PREFIX.size)
        header_len, payload_len = wire.PREFIX.unpack(prefix)
        wire.check_lengths(header_len, payload_len)
        header = wire.decode_header(await reader.readexactly(header_len))
        payload = await reader.readexactly(payload_len) if payload_len else b""
        return header, payload
