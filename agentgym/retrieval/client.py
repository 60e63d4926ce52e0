"""An async client of a Search-R1-compatible retriever service.

Every call has a deadline, is retried with exponential backoff on transport failures,
429 (the service is at its memory limit) and 5xx answers, and waits for one of
``max_concurrency`` slots, so a fleet of envs cannot flood the service. When the
service stays unreachable the call raises ``RetrieverUnavailableError`` — an
``agentgym.errors.InfraError`` — so the executor flags the episode ``infra_failed``
instead of blaming the agent.

Connections are kept alive and pooled per event loop (a pooled connection cannot move
between loops).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

from agentgym.errors import ConfigError, InfraError
from agentgym.reliability import RetryPolicy, call_with_retries, current_budget, remaining_s
from agentgym.retrieval.base import RetrievedDocument
from agentgym.retrieval.http import HTTPMessage, MalformedHTTP, encode_request, read_message

__all__ = ["RemoteRetriever", "RetrieverProtocolError", "RetrieverUnavailableError"]



class _ClosedByEitherSide(asyncio.StreamReaderProtocol):
    """A connection the service closes is closed on our side too, at once.

    ``asyncio.open_connection``'s protocol keeps a socket half-open after the peer's end
    of stream, for protocols that still write after it. HTTP/1.1 never does: a kept-alive
    connection the service closed (idle timeout, restart, stop) is dead. Left half-open,
    it sits in the pool as an open socket (CLOSE_WAIT) until the next call finds it, or,
    in a client nobody uses again, until the process ends, where it is reported as
    ``ResourceWarning: unclosed <StreamWriter ...>``.
    """

    def eof_received(self) -> bool:
        super().eof_received()  # the reader sees the end of stream (buffered data stays readable)
        return False  # and the transport closes itself


async def _open_connection(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """``asyncio.open_connection`` with :class:`_ClosedByEitherSide` (its docstring invites
    exactly this copy: a reader, a protocol, a connection, a writer)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 22, loop=loop)
    protocol = _ClosedByEitherSide(reader, loop=loop)
    transport, _ = await loop.create_connection(lambda: protocol, host, port)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


class RetrieverUnavailableError(InfraError):
    """The retriever service could not be reached or kept failing; retried, then infra_failed."""


class RetrieverProtocolError(InfraError):
    """The service answered something that is not the Search-R1 retrieval format.

    ``status`` is the HTTP status when the service answered with a non-200 code.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _Transient(Exception):
    """Internal: a failure worth retrying; ``retry_after_s`` from a 429's header."""

    def __init__(self, message: str, retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


_TRANSIENT = (_Transient, OSError, TimeoutError, asyncio.IncompleteReadError, MalformedHTTP)


def _retry_after_s(value: str | None) -> float:
    try:
        return max(0.0, float(value or 0))
    except ValueError:  # an HTTP date: not sent by this service; back off as usual
        return 0.0


def _error_text(body: bytes) -> str:
    """The service's ``{"error": ...}`` message, or the start of whatever it sent."""
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    return str(payload["error"]) if isinstance(payload, dict) and "error" in payload else repr(body[:200])


def _document(item: Any) -> RetrievedDocument:
    """One result item, with or without scores (both Search-R1 shapes)."""
    if isinstance(item, dict) and "document" in item:
        doc, score = item["document"], item.get("score")
    else:
        doc, score = item, None
    if not isinstance(doc, dict) or "contents" not in doc:
        raise RetrieverProtocolError(f"expected a document with 'contents', got {str(item)[:120]!r}")
    return RetrievedDocument(str(doc.get("id", "")), str(doc["contents"]), None if score is None else float(score))


def _close_on(loop: asyncio.AbstractEventLoop, idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    """Close connections that belong to another loop, on that loop (transports are not
    thread-safe). Once their loop is closed nothing can close them any more: call
    :meth:`RemoteRetriever.aclose` before closing a loop the client used."""
    if loop.is_closed():
        return
    for _, writer in idle:
        loop.call_soon_threadsafe(writer.close)


class RemoteRetriever:
    """Client of ``agentgym serve-retriever`` or any Search-R1 retrieval server.

    Args:
        url: base URL, e.g. ``http://127.0.0.1:8000``.
        timeout_s: deadline of one attempt (connect + request + response).
        max_retries: retries after the first attempt, for transport errors, 5xx and 429
            (inside a caller's budget, such as a tool call's, the caller's count holds).
        max_concurrency: requests in flight at once per event loop.
        backoff_s: first backoff; doubles per retry, with full jitter, at most
            ``max_wait_s`` (a 429's ``Retry-After`` is waited instead, within the same cap
            and the call's deadline). See :mod:`agentgym.reliability`.
    """

    def __init__(self, url: str, *, timeout_s: float = 5.0, max_retries: int = 2,
                 max_concurrency: int = 32, backoff_s: float = 0.05, max_wait_s: float = 2.0) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ConfigError(f"Expected a retriever URL like 'http://127.0.0.1:8000', actual value: {url!r}")
        if timeout_s <= 0 or max_retries < 0 or max_concurrency < 1:
            raise ConfigError("Expected timeout_s > 0, max_retries >= 0 and max_concurrency >= 1, actual values: "
                              f"{timeout_s}, {max_retries}, {max_concurrency}")
        self.url = url.rstrip("/")
        self._host, self._port = parts.hostname, parts.port or 80
        self._base_path = parts.path.rstrip("/")
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.policy = RetryPolicy(attempts=max_retries + 1, initial_s=backoff_s, max_wait_s=max_wait_s)
        self.max_concurrency = max_concurrency
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._slots: asyncio.Semaphore | None = None

    # ----------------------------------------------------------------- API
    async def search(self, queries: list[str], topk: int) -> list[list[RetrievedDocument]]:
        """Top-``topk`` documents per query, in the service's ranking order."""
        answer = await self._call("POST", "/retrieve", {"queries": queries, "topk": topk, "return_scores": True})
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            raise RetrieverProtocolError(f"expected 'result' with one list per query, got {str(answer)[:120]!r}")
        return [[_document(item) for item in per_query] for per_query in result]

    async def get_documents(self, ids: list[str]) -> list[RetrievedDocument | None] | None:
        """Documents by id, or ``None`` when the service has no ``/documents`` route."""
        try:
            answer = await self._call("POST", "/documents", {"ids": ids})
        except RetrieverProtocolError as e:
            if e.status == 404:  # a plain Search-R1 server: only /retrieve exists
                return None
            raise
        docs = answer.get("documents") if isinstance(answer, dict) else None
        if not isinstance(docs, list) or len(docs) != len(ids):
            raise RetrieverProtocolError(f"expected 'documents' with one entry per id, got {str(answer)[:120]!r}")
        return [None if d is None else _document(d) for d in docs]

    async def health(self) -> dict[str, Any]:
        answer = await self._call("GET", "/health", None)
        return answer if isinstance(answer, dict) else {}

    async def aclose(self) -> None:
        """Close the kept-alive connections and wait until their sockets are closed.

        Call it on the loop the client used; a connection left open until garbage
        collection is a ``ResourceWarning: unclosed transport``. The client stays usable
        (the next call opens a new connection). Idempotent.
        """
        idle, self._idle = self._idle, []
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            _close_on(self._loop, idle)
            return
        for _, writer in idle:
            writer.close()
        for _, writer in idle:
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):  # the peer reset it first: closed all the same
                pass

    # ------------------------------------------------------------ internals
    def _bind_loop(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None:  # connections cannot move between loops: close them on theirs
                _close_on(self._loop, self._idle)
            self._loop, self._idle = loop, []
            self._slots = asyncio.Semaphore(self.max_concurrency)
        assert self._slots is not None
        return self._slots

    async def _call(self, method: str, path: str, payload: Any) -> Any:
        slots = self._bind_loop()
        attempts = 0

        async def attempt() -> Any:
            nonlocal attempts
            attempts += 1
            budget = current_budget()
            try:
                return await asyncio.wait_for(self._exchange(method, path, payload), remaining_s(self.timeout_s))
            except _Transient as e:
                if e.retry_after_s and budget is not None and not budget.spent:  # the service said when
                    await asyncio.sleep(min(e.retry_after_s, self.policy.max_wait_s, budget.remaining_s()))
                raise

        async with slots:
            try:
                return await call_with_retries(attempt, _TRANSIENT, self.policy)
            except _TRANSIENT as e:
                raise RetrieverUnavailableError(
                    f"retriever service at {self.url} failed {attempts} attempt(s): "
                    f"{type(e).__name__}: {e or 'timed out'}. Is `agentgym serve-retriever` running?"
                ) from e

    async def _connection(self, pooled: bool) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
        """A connection and whether it was reused from the pool (``pooled``: may be)."""
        while pooled and self._idle:
            reader, writer = self._idle.pop()
            if not writer.is_closing() and not reader.at_eof():
                return reader, writer, True
            writer.close()
        reader, writer = await _open_connection(self._host, self._port)
        return reader, writer, False

    async def _round_trip(self, method: str, path: str, payload: Any) -> HTTPMessage:
        """One request and its response; the connection goes back to the pool if kept alive.

        The service closes connections idle past its read timeout; a pooled connection it
        closed just before we used it is retried once on a new one, without counting as
        a failed attempt.
        """
        request = encode_request(method, self._base_path + path, f"{self._host}:{self._port}", payload)
        for pooled in (True, False):
            reader, writer, reused = await self._connection(pooled)
            try:
                writer.write(request)
                await writer.drain()
                response = await read_message(reader)
            except ConnectionError:
                writer.close()
                if reused:
                    continue
                raise
            except BaseException:
                writer.close()
                raise
            if response is None:
                writer.close()
                if reused:
                    continue
                raise _Transient("the service closed the connection without answering")
            if response.keep_alive:
                self._idle.append((reader, writer))
            else:
                writer.close()
            return response
        raise AssertionError("unreachable: the second try uses a new connection")

    async def _exchange(self, method: str, path: str, payload: Any) -> Any:
        response = await self._round_trip(method, path, payload)
        try:
            status = int(response.start_line.split(" ", 2)[1])
        except (IndexError, ValueError) as e:
            raise MalformedHTTP(f"bad status line {response.start_line[:80]!r}") from e
        if status >= 500 or status == 429:  # 429: the service is at its memory limit for now
            raise _Transient(f"HTTP {status}: {_error_text(response.body)}",
                             _retry_after_s(response.headers.get("retry-after")) if status == 429 else 0.0)
        if status != 200:
            raise RetrieverProtocolError(f"HTTP {status} from {self.url}{path}: {_error_text(response.body)}", status)
        return response.json()
