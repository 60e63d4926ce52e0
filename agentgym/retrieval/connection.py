"""The retriever client's sockets: httpx's transport on asyncio streams closed at EOF.

httpx (through httpcore and anyio) keeps a kept-alive socket half-open after the
service closed its end, for protocols that still write after that. HTTP/1.1 never does:
a kept-alive connection the service closed (idle timeout, restart, stop) is dead. Left
half-open it sits in the pool as an open socket (CLOSE_WAIT) until the next call finds
it, or, in a client nobody uses again (an env that is never closed), until the process
ends, where it is reported as ``ResourceWarning: unclosed <socket ...>``. So the pool's
network backend here closes a socket as soon as the service closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import ssl
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import httpcore
import httpx

__all__ = ["Connections"]


_COALESCE_BYTES = 1 << 16


class _ClosedByEitherSide(asyncio.StreamReaderProtocol):
    """The reader still sees the end of stream (and any buffered data); the transport
    closes itself instead of staying half-open."""

    def eof_received(self) -> bool:
        super().eof_received()
        return False


@contextlib.contextmanager
def _mapped(timeout_error: type[Exception], os_error: type[Exception]) -> Iterator[None]:
    """asyncio's errors as the httpcore errors httpx turns into ``httpx.TransportError``."""
    try:
        yield
    except TimeoutError as e:
        raise timeout_error(str(e) or "timed out") from e
    except OSError as e:
        raise os_error(str(e)) from e


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._unsent: list[bytes] = []
        self._unsent_bytes = 0

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._flush(timeout)
        with _mapped(httpcore.ReadTimeout, httpcore.ReadError):
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Held until the next read (or 64 KiB): httpcore writes a request's head and body
        separately, and one segment per request is half the system calls and wake-ups."""
        self._unsent.append(buffer)
        self._unsent_bytes += len(buffer)
        if self._unsent_bytes >= _COALESCE_BYTES:
            await self._flush(timeout)

    async def _flush(self, timeout: float | None) -> None:
        if not self._unsent:
            return
        data = b"".join(self._unsent)
        self._unsent.clear()
        self._unsent_bytes = 0
        with _mapped(httpcore.WriteTimeout, httpcore.WriteError):
            self._writer.write(data)
            async with asyncio.timeout(timeout):
                await self._writer.drain()

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):  # the peer reset it first: closed all the same
            await self._writer.wait_closed()

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # httpcore's test for "the peer closed this idle connection"
            return self._peer_closed()
        return self._writer.get_extra_info({"client_addr": "sockname", "server_addr": "peername"}.get(info, info))


    def _peer_closed(self) -> bool:
        """Closed, or readable while idle (an end of stream the loop has not handled yet:
        the caller may have kept the loop busy since the service closed the socket)."""
        sock = self._writer.get_extra_info("socket")
        if sock is None or self._writer.is_closing() or self._reader.at_eof():
            return True
        return bool(select.select([sock], [], [], 0)[0])


class _Backend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(loop=loop)
        with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    lambda: _ClosedByEitherSide(reader, loop=loop), host, port,
                    local_addr=(local_address, 0) if local_address else None)
        return _Stream(reader, asyncio.StreamWriter(transport, protocol, reader, loop))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise NotImplementedError("the retriever client speaks plain TCP")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


_NO_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
"""Given to the transports so that each does not load the CA bundle (the client speaks
plain HTTP only); with no CA it could verify no certificate anyway."""


class _OneConnection(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` (HTTP/1.1, no proxy) that keeps one connection, on the
    closing backend. httpx takes no network backend, so the pool it built is replaced by
    an equal one that has it."""

    def __init__(self) -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        super().__init__(verify=_NO_TLS, limits=limits, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=_NO_TLS, max_connections=1, max_keepalive_connections=1,
            keepalive_expiry=limits.keepalive_expiry, network_backend=_Backend())


class Connections:
    """Up to ``size`` kept-alive connections to one service on one event loop, each used
    by one request at a time; waiting for one is how the client bounds its concurrency.

    Each is an httpx transport of one connection rather than slots of one shared httpx
    pool of ``size``: httpcore's pool re-scans its queued requests and connections
    whenever one frees up (encode/httpcore#1035), which cost about 2 ms of CPU per
    request at 32 in flight here, against about 0.3 ms for a transport of its own.
    Last in, first out: under light load the same few connections serve and the rest
    go idle, and the service closes those.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: asyncio.LifoQueue[_OneConnection] = asyncio.LifoQueue()
        self._all: list[_OneConnection] = []

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[httpx.AsyncBaseTransport]:
        if self._idle.empty() and len(self._all) < self.size:
            transport = _OneConnection()
            self._all.append(transport)
        else:
            transport = await self._idle.get()
        try:
            yield transport
        finally:
            self._idle.put_nowait(transport)

    async def aclose(self) -> None:
        """Close every connection (one in use fails its request, a transport error)."""
        for transport in self._all:
            await transport.aclose()
