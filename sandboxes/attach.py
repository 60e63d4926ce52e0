"""The host's channel to a container's supervisor: the container's own stdin and stdout.

Why not a Unix socket in a shared directory (what earlier versions did): anything on a
path that agent code can reach, it can replace — unlink the socket, listen in its place,
and answer the host's next reconnect with forged results. A container's stdin/stdout are
held only by its init process and the supervisor (root inside the container; agent code
runs under another uid and cannot open another user's ``/proc/<pid>/fd``), and the host
reaches them through the engine's attach endpoint. So there is no shared host directory
at all, the peer cannot be impersonated, and the same code works with a remote engine.

The container is created with ``OpenStdin`` and ``StdinOnce``: when this one attached
connection closes (the host process exits or is killed), the engine closes the
supervisor's stdin, the supervisor exits, and the auto-removed container goes away.

Engine API reference: ``POST /containers/{id}/attach`` with ``Upgrade: tcp`` hijacks the
HTTP connection; without a TTY, the engine frames output as an 8-byte header
(stream type, 3 zero bytes, big-endian length) followed by that many bytes.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from urllib.parse import urlsplit

from sandboxes.errors import EngineUnreachableError, SandboxConfigError, SandboxTransportError

__all__ = ["attach_container", "AttachedStream"]

_FRAME = struct.Struct(">BxxxI")
_STDOUT, _STDERR = 1, 2
_MAX_RESPONSE_HEAD = 64 * 1024
STDERR_KEEP_BYTES = 16 * 1024
"""Tail of the supervisor's stderr kept for error messages (it is never parsed)."""


class _AttachProtocol(asyncio.Protocol):
    """Parses the HTTP upgrade response, then demultiplexes stdout into a StreamReader."""

    def __init__(self, reader: asyncio.StreamReader, upgraded: asyncio.Future[None]) -> None:
        self.reader = reader
        self.upgraded = upgraded
        self.transport: asyncio.Transport | None = None
        self.stderr: deque[bytes] = deque()
        self._stderr_bytes = 0
        self._head = bytearray()
        self._buf = bytearray()
        self._in_body = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.reader.set_transport(transport)

    def data_received(self, data: bytes) -> None:
        if not self._in_body:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                if len(self._head) > _MAX_RESPONSE_HEAD:
                    self._fail(SandboxTransportError("the engine's attach response has no end of headers"))
                return
            status_line = bytes(self._head[: self._head.find(b"\r\n")]).decode("latin-1")
            parts = status_line.split(" ", 2)
            if len(parts) < 2 or parts[1] not in ("101", "200"):
                body = bytes(self._head[end + 4 :]).decode("utf-8", "replace")[:500]
                self._fail(SandboxTransportError(f"the engine refused to attach: {status_line} {body}"))
                return
            data = bytes(self._head[end + 4 :])
            self._head.clear()
            self._in_body = True
            if not self.upgraded.done():
                self.upgraded.set_result(None)
        self._buf += data
        while len(self._buf) >= _FRAME.size:
            kind, size = _FRAME.unpack_from(self._buf)
            if len(self._buf) < _FRAME.size + size:
                break
            chunk = bytes(self._buf[_FRAME.size : _FRAME.size + size])
            del self._buf[: _FRAME.size + size]
            if kind == _STDOUT:
                self.reader.feed_data(chunk)
            elif kind == _STDERR:
                self._keep_stderr(chunk)

    def _keep_stderr(self, chunk: bytes) -> None:
        self.stderr.append(chunk)
        self._stderr_bytes += len(chunk)
        while self._stderr_bytes > STDERR_KEEP_BYTES and len(self.stderr) > 1:
            self._stderr_bytes -= len(self.stderr.popleft())

    def _fail(self, error: Exception) -> None:
        if not self.upgraded.done():
            self.upgraded.set_exception(error)
        self.reader.set_exception(error)
        if self.transport is not None:
            self.transport.close()

    def eof_received(self) -> bool:
        self.reader.feed_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.upgraded.done():
            self.upgraded.set_exception(
                SandboxTransportError(f"the engine closed the attach connection ({exc})")
            )
        if exc is None:
            self.reader.feed_eof()
        else:
            self.reader.set_exception(exc)


class AttachedStream:
    """A container's stdin (``write``) and stdout (``reader``) over one hijacked connection."""

    def __init__(self, reader: asyncio.StreamReader, protocol: _AttachProtocol) -> None:
        self.reader = reader
        self._protocol = protocol

    def write(self, data: bytes) -> None:
        transport = self._protocol.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the attach connection is closed")
        transport.write(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)  # writes are buffered by the transport; frames are small

    def stderr_tail(self) -> str:
        """The last few KiB the supervisor wrote to stderr (for error messages)."""
        return b"".join(self._protocol.stderr).decode("utf-8", "replace")

    def close(self) -> None:
        transport = self._protocol.transport
        if transport is not None:
            transport.close()


async def attach_container(engine_url: str, container_id: str, *, limit: int, timeout: float = 30.0) -> AttachedStream:
    """Attach to ``container_id``'s stdin, stdout and stderr through the engine at ``engine_url``.

    Raises:
        SandboxConfigError: the URL's scheme is not ``unix://`` or ``tcp://``.
        EngineUnreachableError: the engine did not accept the connection.
        SandboxTransportError: the engine refused or broke the attach.
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    upgraded: asyncio.Future[None] = loop.create_future()
    url = urlsplit(engine_url)

    def factory() -> _AttachProtocol:
        return _AttachProtocol(reader, upgraded)

    try:
        if url.scheme in ("unix", "http+unix"):
            transport, protocol = await asyncio.wait_for(
                loop.create_unix_connection(factory, url.path), timeout
            )
        elif url.scheme in ("tcp", "http"):
            transport, protocol = await asyncio.wait_for(
                loop.create_connection(factory, url.hostname, url.port or 2375), timeout
            )
        else:
            raise SandboxConfigError(
                f"Expected an engine URL starting with unix:// or tcp:// for attaching to "
                f"sandboxes, actual value: {engine_url!r}"
            )
    except (OSError, asyncio.TimeoutError) as e:
        raise EngineUnreachableError(f"could not connect to the engine at {engine_url}: {e}") from e
    request = (
        f"POST /containers/{container_id}/attach?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\n"
        "Host: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n"
    )
    transport.write(request.encode("ascii"))
    try:
        await asyncio.wait_for(upgraded, timeout)
    except BaseException:
        transport.close()
        raise
    return AttachedStream(reader, protocol)
