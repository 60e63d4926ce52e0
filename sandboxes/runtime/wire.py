"""Framing shared by the host, the supervisor and the worker (stdlib only).

A frame is ``>II`` (header length, payload length), a UTF-8 JSON header, then raw
payload bytes. JSON keeps the protocol debuggable; the separate payload carries file
contents without base64. This file is copied nowhere: the supervisor and worker import
it from the same directory (bind-mounted read-only into containers).
"""

from __future__ import annotations

import json
import struct

PREFIX = struct.Struct(">II")
MAX_HEADER_BYTES = 64 * 1024 * 1024
MAX_PAYLOAD_BYTES = 1024 * 1024 * 1024


class FrameError(ValueError):
    """A frame could not be decoded (bad length or JSON): the peer is broken."""


def encode(header: dict, payload: bytes = b"") -> bytes:
    body = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return PREFIX.pack(len(body), len(payload)) + body + payload


def check_lengths(header_len: int, payload_len: int, max_bytes: int | None = None) -> None:
    if max_bytes is not None and header_len + payload_len > max_bytes:
        raise FrameError(f"frame of {header_len + payload_len} bytes is over the limit of {max_bytes}")
    if header_len > MAX_HEADER_BYTES or payload_len > MAX_PAYLOAD_BYTES:
        raise FrameError(f"frame too large: header {header_len}, payload {payload_len}")


def decode_header(body: bytes) -> dict:
    """The JSON object in ``body``, or :class:`FrameError`.

    Every exception decoding can raise becomes a ``FrameError`` (``Exception``, not a list:
    ``json.loads`` raises ``RecursionError`` for ``[[[[...``, ``MemoryError`` for huge
    input, ``ValueError`` for 5000-digit integers), so a hostile peer can only ever produce
    "a malformed frame", which each reader knows how to blame.
    """
    try:
        header = json.loads(body.decode("utf-8"))
    except Exception as e:  # noqa: BLE001 - see the docstring
        raise FrameError(f"bad frame header: {type(e).__name__}: {str(e)[:200]}") from e
    if not isinstance(header, dict):
        raise FrameError("frame header is not a JSON object")
    return header


class FrameDecoder:
    """Incremental decoder for non-blocking readers: ``feed`` bytes, get whole frames.

    ``max_bytes`` bounds one frame (header + payload) for peers that may be hostile.
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self._buf = bytearray()
        self.max_bytes = max_bytes

    @property
    def pending(self) -> int:
        """Bytes of an unfinished frame held back."""
        return len(self._buf)

    def feed(self, data: bytes) -> list:
        self._buf += data
        frames = []
        while len(self._buf) >= PREFIX.size:
            header_len, payload_len = PREFIX.unpack_from(self._buf)
            check_lengths(header_len, payload_len, self.max_bytes)
            end = PREFIX.size + header_len + payload_len
            if len(self._buf) < end:
                break
            header = decode_header(bytes(self._buf[PREFIX.size : PREFIX.size + header_len]))
            payload = bytes(self._buf[PREFIX.size + header_len : end])
            del self._buf[:end]
            frames.append((header, payload))
        return frames


def read_exact(read, n: int) -> bytes:
    """Read exactly ``n`` bytes with ``read(k)``; raise EOFError on a short read."""
    chunks = []
    while n:
        chunk = read(n)
        if not chunk:
            raise EOFError("peer closed the stream")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(read) -> tuple:
    """Blocking read of one frame with a ``read(k) -> bytes`` callable."""
    header_len, payload_len = PREFIX.unpack(read_exact(read, PREFIX.size))
    check_lengths(header_len, payload_len)
    header = decode_header(read_exact(read, header_len))
    payload = read_exact(read, payload_len) if payload_len else b""
    return header, payload
