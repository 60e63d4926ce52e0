"""The few HTTP/1.1 pieces the retriever service and client need, on asyncio streams.

Why not a web framework: the service has three JSON endpoints, and the stdlib keeps the
install light and the hot path short. Bodies are always sized by ``Content-Length``
(no chunked encoding); connections are kept alive unless a side says ``close``.

Heads and bodies are read separately so that a server can look at ``Content-Length``
(and refuse an over-large body) before a single body byte is buffered.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "HTTPHead",
    "HTTPMessage",
    "MalformedHTTP",
    "encode_head",
    "encode_request",
    "encode_response",
    "parse_json",
    "read_body",
    "read_head",
    "read_message",
]

MAX_HEADER_BYTES = 16 * 1024
MAX_RESPONSE_BYTES = 1 << 30
"""What a client accepts: the service caps its responses far below this."""
_REASONS = {100: "Continue", 200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Content Too Large", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable"}


class MalformedHTTP(ValueError):
    """The peer sent something that is not the HTTP/1.1 (or JSON) this module speaks."""


@dataclass(frozen=True, slots=True)
class HTTPHead:
    """A start line and headers (names lower-cased); ``content_length`` is validated."""

    start_line: str
    headers: dict[str, str]
    content_length: int

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"

    @property
    def expects_continue(self) -> bool:
        """The client waits for ``100 Continue`` before it sends the body (curl does)."""
        return self.headers.get("expect", "").lower() == "100-continue"


@dataclass(frozen=True, slots=True)
class HTTPMessage:
    start_line: str
    headers: dict[str, str]
    body: bytes

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"

    def json(self) -> Any:
        return parse_json(self.body)


def parse_json(body: bytes) -> Any:
    """The body as JSON (empty is ``null``); anything unparsable is ``MalformedHTTP``.

    ``ValueError`` covers bad syntax, bad UTF-8 and integers past Python's digit limit;
    ``RecursionError`` is what too-deep nesting raises.
    """
    try:
        return json.loads(body or b"null")
    except RecursionError as e:
        raise MalformedHTTP("body is not JSON this service accepts: nested too deeply") from e
    except ValueError as e:
        raise MalformedHTTP(f"body is not JSON: {e}") from e


def _content_length(headers: dict[str, str]) -> int:
    raw = headers.get("content-length", "0")
    if not (raw.isascii() and raw.isdigit()):  # rejects signs, spaces and lists ("5, 5") alike
        raise MalformedHTTP(f"bad Content-Length {raw[:40]!r}; send the body's size in bytes")
    return int(raw)


async def read_head(reader: asyncio.StreamReader) -> HTTPHead | None:
    """Read a start line and headers; ``None`` when the peer closed between messages."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise MalformedHTTP("connection closed in the middle of the headers") from e
    except asyncio.LimitOverrunError as e:
        raise MalformedHTTP("headers too long") from e
    if len(head) > MAX_HEADER_BYTES:
        raise MalformedHTTP("headers too long")
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise MalformedHTTP(f"bad header line {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
    return HTTPHead(lines[0], headers, _content_length(headers))


async def read_body(reader: asyncio.StreamReader, head: HTTPHead) -> bytes:
    return await reader.readexactly(head.content_length) if head.content_length else b""


async def read_message(reader: asyncio.StreamReader, max_body_bytes: int = MAX_RESPONSE_BYTES) -> HTTPMessage | None:
    """Read one whole message (the client's side); ``None`` when the peer closed first."""
    head = await read_head(reader)
    if head is None:
        return None
    if head.content_length > max_body_bytes:
        raise MalformedHTTP(f"Content-Length {head.content_length} is over {max_body_bytes}")
    return HTTPMessage(head.start_line, head.headers, await read_body(reader, head))


def encode_head(status: int, content_length: int, keep_alive: bool = True, extra: str = "") -> bytes:
    """A response head for a JSON body of ``content_length`` bytes (``extra``: more header lines)."""
    connection = "keep-alive" if keep_alive else "close"
    return (f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n{extra}Content-Type: application/json\r\n"
            f"Content-Length: {content_length}\r\nConnection: {connection}\r\n\r\n").encode("latin-1")


def _encode(start_line: str, payload: Any, keep_alive: bool, extra: str = "") -> bytes:
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    connection = "keep-alive" if keep_alive else "close"
    head = (f"{start_line}\r\n{extra}Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: {connection}\r\n\r\n")
    return head.encode("latin-1") + body


def encode_request(method: str, path: str, host: str, payload: Any | None) -> bytes:
    return _encode(f"{method} {path} HTTP/1.1", payload, True, f"Host: {host}\r\n")


def encode_response(status: int, payload: Any, keep_alive: bool = True) -> bytes:
    return _encode(f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}", payload, keep_alive)
