"""The retriever service's HTTP/1.1 connections: uvicorn's h11 protocol plus two limits.

uvicorn parses HTTP and applies flow control (it stops reading a body it holds 64 KiB
of until the app asks for more, and waits for the client to read before writing past
the transport's high-water mark), caps the headers at ``h11_max_incomplete_event_size``
(400 beyond) and discards the unread body of a kept-alive request. Two of the service's
limits need the connection itself, which an ASGI app never sees:

* **The connection limit answers 429, not uvicorn's 503.** ``limit_concurrency`` says
  "Service Unavailable", which a client takes for a failure; the service is only full
  for now, and a Search-R1 client retries a 429 after ``Retry-After``.
* **A request's headers must arrive within ``read_timeout_s``** of the connection's
  start or of the previous response, idle keep-alive included. uvicorn's keep-alive
  timeout stops at the first byte, so a client that sends one header line a minute
  (slowloris) would hold its connection forever.

The app running behind :class:`LimitedH11Protocol` raises :class:`ConnectionTimeout`
when a body or a response takes too long; the protocol then drops the connection
(``abort``: what the client did not read is freed at once, not flushed first).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

__all__ = ["ConnectionTimeout", "LimitedH11Protocol", "LimitedService", "uvicorn_config"]

MAX_HEADER_BYTES = 16 * 1024
REFUSED_LINGER_S = 1.0
"""A connection refused for the connection limit is read (and dropped) this long at most,
so a client that sends its request before reading sees the 429 instead of a reset."""

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class ConnectionTimeout(Exception):
    """Raised by the app: the client was too slow to send its body or read the reply."""


class LimitedService(Protocol):
    """What a connection needs of the service: ``limits.max_connections`` and
    ``limits.read_timeout_s``, and the ``stats.busy`` and ``stats.timeouts`` counters."""

    limits: Any
    stats: Any


def _refusal(max_connections: int) -> bytes:
    body = json.dumps({"error": f"the service has {max_connections} connections open; retry later"}).encode()
    return (b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def uvicorn_config(app: ASGIApp, read_timeout_s: float) -> uvicorn.Config:
    """uvicorn's settings for the service: h11, no lifespan, no logging set up (a library
    configures no logging), no ``Server``/``Date`` headers. Its own keep-alive timeout
    is a backstop behind :class:`LimitedH11Protocol`'s header deadline, which counts
    the timeout and fires first."""
    return uvicorn.Config(app, http="h11", interface="asgi3", lifespan="off", log_config=None, access_log=False,
                          proxy_headers=False, server_header=False, date_header=False,
                          timeout_keep_alive=math.ceil(read_timeout_s) + 1,
                          h11_max_incomplete_event_size=MAX_HEADER_BYTES)


class LimitedH11Protocol(H11Protocol):
    """One connection: uvicorn's ``H11Protocol`` with the connection limit (429) and the
    header deadline; turns the app's :class:`ConnectionTimeout` into a dropped connection."""

    def __init__(self, service: LimitedService, config: uvicorn.Config, server_state: ServerState,
                 app_state: dict[str, Any], _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._service = service
        self._service_app: ASGIApp = self.app
        self.app = self._serve  # uvicorn calls this once a request's headers are in
        self._refused = False
        self._awaiting_headers = False
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self._service.limits.max_connections:
            self._refuse(transport)
            return
        super().connection_made(transport)
        self._expect_headers()

    def data_received(self, data: bytes) -> None:
        if not self._refused:  # a refused connection's request is dropped unread
            super().data_received(data)

    def eof_received(self) -> bool | None:
        return None if self._refused else super().eof_received()  # None: the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        if not self._refused:
            super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._expect_headers()

    def _refuse(self, transport: asyncio.Transport) -> None:
        self._refused = True
        self.transport = transport
        self._service.stats.busy += 1
        transport.write(_refusal(self._service.limits.max_connections))
        self._deadline = self.loop.call_later(REFUSED_LINGER_S, transport.close)

    def _expect_headers(self) -> None:
        self._awaiting_headers = True
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self._service.limits.read_timeout_s, self._headers_late)

    def _headers_late(self) -> None:
        if self._awaiting_headers and not self.transport.is_closing():
            self._drop()

    def _drop(self) -> None:
        self._service.stats.timeouts += 1
        if self.cycle is not None:
            self.cycle.disconnected = True  # nothing more goes out: uvicorn must not answer
        self.transport.abort()

    async def _serve(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self._awaiting_headers = False
        try:
            await self._service_app(scope, receive, send)
        except ConnectionTimeout:
            self._drop()
