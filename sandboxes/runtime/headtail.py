"""Bounded output: keep the head and tail of a stream, count the rest (stdlib only).

Used by the supervisor for stdout/stderr and by the worker for the value's repr, so the
agent always sees one marker format: ``[... N bytes truncated (of M) ...]``.
"""

from __future__ import annotations


class HeadTail:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.half = limit // 2
        self.limit = self.half * 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 4 * self.half + 65536:
                del self.tail[: -self.half]

    def render(self) -> tuple:
        if self.total <= self.limit:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace"), False
        tail = bytes(self.tail[-self.half :]) if self.half else b""
        omitted = self.total - len(self.head) - len(tail)
        marker = f"\n[... {omitted:,} bytes truncated (of {self.total:,}) ...]\n"
        text = self.head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace")
        return text, True
