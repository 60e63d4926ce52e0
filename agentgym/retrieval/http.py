"""The few HTTP/1.1 pieces the retriever service and client need, on asyncio streams.

Why not a web framework: the service has three JSON endpoints, and the stdlib keeps the
install light and the hot path short. Bodies are always sized by ``Content-Length``
(no chunked encoding); connections are kept alive unless a side says ``close``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["HTTPMessage", "MalformedHTTP", "read_message", "encode_request", "encode_response"]

MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}


class MalformedHTTP(ValueError):
    """The peer sent something that is not the HTTP/1.1 this module speaks."""


@dataclass(frozen=True, slots=True)
class HTTPMessage:
    start_line: str
    headers: dict[str, str]
    body: bytes

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise MalformedHTTP(f"body is not JSON: {e}") from e


async def read_message(reader: asyncio.StreamReader) -> HTTPMessage | None:
    """Read one request or response; ``None`` when the peer closed between messages."""
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
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError as e:
        raise MalformedHTTP("bad Content-Length") from e
    if length < 0 or length > MAX_BODY_BYTES:
        raise MalformedHTTP(f"Content-Length {length} out of range")
    body = await reader.readexactly(length) if length else b""
    return HTTPMessage(lines[0], headers, body)


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
