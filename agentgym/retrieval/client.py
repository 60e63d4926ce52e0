"""An async client of a Search-R1-compatible retriever service, on httpx.

Every call waits for one of ``max_concurrency`` slots (so a fleet of envs cannot flood
the service), has a deadline per attempt, and is retried through
:mod:`agentgym.reliability` on transient failures only: transport errors (refused,
reset, timed out), 5xx answers and 429 (the service is at its memory or connection
limit; its ``Retry-After`` is waited for, up to the policy's longest backoff and the
call's deadline). Called inside a tool call's budget, the client joins it: its retries
are the call's retries, not more. When the service stays unreachable the call raises
``RetrieverUnavailableError`` — an ``agentgym.errors.InfraError`` — so the executor
flags the episode ``infra_failed`` instead of blaming the agent. Any other answer that
is not 200 is not retried: ``RetrieverProtocolError`` with the status and the
service's message.

Connections are kept alive per event loop (a connection cannot move between loops),
each an httpx transport used by one request at a time (``connection.py`` says why not
one shared httpx pool); a connection the service closes (idle timeout, restart) is
closed on our side at once and never reused.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import httpx

from agentgym.errors import ConfigError, InfraError
from agentgym.reliability import RetryPolicy, call_budget, remaining_s, retrying
from agentgym.retrieval.base import RetrievedDocument
from agentgym.retrieval.connection import Connections

__all__ = ["RemoteRetriever", "RetrieverProtocolError", "RetrieverUnavailableError"]


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
    """Internal: an answer worth retrying (5xx, 429)."""


_TRANSIENT = (_Transient, httpx.TransportError, TimeoutError, OSError)


def _document(item: Any) -> RetrievedDocument:
    if isinstance(item, dict) and "document" in item:
        doc, score = item["document"], item.get("score")
    else:
        doc, score = item, None
    if not isinstance(doc, dict) or "contents" not in doc:
        raise RetrieverProtocolError(f"expected a document with 'contents', got {str(item)[:120]!r}")
    return RetrievedDocument(str(doc.get("id", "")), str(doc["contents"]), None if score is None else float(score))


def _close_on(loop: asyncio.AbstractEventLoop, connections: Connections) -> None:
    """Close connections that belong to another loop, on that loop (they are not
    thread-safe). Once their loop is closed nothing can close them any more: call
    :meth:`RemoteRetriever.aclose` before closing a loop the client used."""
    if not loop.is_closed():
        asyncio.run_coroutine_threadsafe(connections.aclose(), loop)


def _retry_after_s(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", "0")))
    except ValueError:  # an HTTP date: not sent by this service; back off as usual
        return 0.0


def _error_text(response: httpx.Response) -> str:
    """The service's ``{"error": ...}`` message, or the start of whatever it sent."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    return str(payload["error"]) if isinstance(payload, dict) and "error" in payload else repr(response.content[:200])


class RemoteRetriever:
    """Client of ``agentgym serve-retriever`` or any Search-R1 retrieval server.

    Args:
        url: base URL, e.g. ``http://127.0.0.1:8000``.
        timeout_s: deadline of one attempt (connect + request + response), capped by
            the deadline of the operation the call runs under.
        max_retries: retries after the first attempt, for transport errors, 429 and 5xx
            (when the call runs under a caller's budget, that budget counts instead).
        max_concurrency: requests in flight at once per event loop.
        backoff_s: first backoff; doubles per retry, with full jitter.
    """

    def __init__(self, url: str, *, timeout_s: float = 5.0, max_retries: int = 2,
                 max_concurrency: int = 32, backoff_s: float = 0.05) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ConfigError(f"Expected a retriever URL like 'http://127.0.0.1:8000', actual value: {url!r}")
        if timeout_s <= 0 or max_retries < 0 or max_concurrency < 1:
            raise ConfigError("Expected timeout_s > 0, max_retries >= 0 and max_concurrency >= 1, actual values: "
                              f"{timeout_s}, {max_retries}, {max_concurrency}")
        self.url = url.rstrip("/")
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.max_concurrency = max_concurrency
        self.policy = RetryPolicy(attempts=max_retries + 1, initial_s=backoff_s)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections: Connections | None = None
        self._urls: dict[str, httpx.URL] = {}

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
            if e.status in (404, 405):  # a plain Search-R1 server: only /retrieve exists
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
        connections, loop = self._connections, self._loop
        self._connections = self._loop = None
        if connections is None or loop is None:
            return
        if loop is not asyncio.get_running_loop():
            _close_on(loop, connections)
            return
        await connections.aclose()

    # ------------------------------------------------------------ internals
    def _bind_loop(self) -> Connections:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._connections is None:
            if self._loop is not None and self._connections is not None:  # they cannot move between loops
                _close_on(self._loop, self._connections)
            self._loop, self._connections = loop, Connections(self.max_concurrency)
        return self._connections

    async def _call(self, method: str, path: str, payload: Any) -> Any:
        connections = self._bind_loop()
        attempts = 0
        with call_budget(self.policy) as budget:
            try:
                async for attempt in retrying(_TRANSIENT):
                    with attempt:
                        attempts += 1
                        async with connections.connection() as transport:  # waiting for one is not the attempt
                            response = await self._attempt(transport, method, path, payload)
                        if response.status_code == 429 and not budget.spent:
                            await asyncio.sleep(min(_retry_after_s(response), self.policy.max_wait_s,
                                                    budget.remaining_s()))
                        return self._answer(response, path)
            except _TRANSIENT as e:
                raise RetrieverUnavailableError(
                    f"retriever service at {self.url} failed {attempts} attempt(s): "
                    f"{type(e).__name__}: {e or 'timed out'}. Is `agentgym serve-retriever` running?"
                ) from e
        raise AssertionError("unreachable: retrying() returns or raises")

    async def _attempt(self, transport: httpx.AsyncBaseTransport, method: str, path: str,
                       payload: Any) -> httpx.Response:
        """One request and its whole response, within the attempt's deadline."""
        async with asyncio.timeout(remaining_s(self.timeout_s)):
            request = httpx.Request(method, self._url(path), json=payload)
            response = await transport.handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
        return response

    def _url(self, path: str) -> httpx.URL:
        """The route's URL, parsed once (parsing is a good part of httpx's cost per call)."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self.url + path)
        return url

    def _answer(self, response: httpx.Response, path: str) -> Any:
        status = response.status_code
        if status >= 500 or status == 429:  # 429: the service is at its limit for now
            raise _Transient(f"HTTP {status}: {_error_text(response)}")
        if status != 200:
            raise RetrieverProtocolError(f"HTTP {status} from {self.url}{path}: {_error_text(response)}", status)
        try:
            return response.json()
        except ValueError as e:
            raise RetrieverProtocolError(f"the answer from {self.url}{path} is not JSON: {e}") from e
