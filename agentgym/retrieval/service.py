"""A Search-R1-compatible retriever service that batches concurrent queries.

``POST /retrieve`` takes ``{"queries": [...], "topk": k, "return_scores": bool}`` and
answers ``{"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}``, one
list per query, as Search-R1's retrieval server does (without ``return_scores`` each
list holds the documents themselves). Two extensions: ``POST /documents`` with
``{"ids": [...]}`` returns ``{"documents": [doc or null, ...]}`` (for an ``open`` tool),
and ``GET /health`` reports the corpus version.

Batching: requests put their queries on one queue; a single batcher drains everything
queued at that moment (up to ``max_batch`` queries) and searches it in one worker-thread
hop, so many concurrent clients cost one thread switch per batch, not per query, and
the event loop keeps accepting connections while the index works.

The routes are a Starlette app served by uvicorn's HTTP/1.1 protocol (``http.py`` adds
the connection limit and the header deadline uvicorn lacks). In front of the routes,
:meth:`RetrieverService._admit` applies the body limits (``limits.py`` has the rules):
413 for a request over the per-request caps, refused from its ``Content-Length``
before a body byte is read; 429 when the bytes in flight or the open connections are at
their limit; 400 for any malformed body; a body must arrive within ``read_timeout_s``
and a response be read within ``write_timeout_s``. Above its idle size, the process
holds at most ``max_bytes_in_flight`` for requests and responses, plus the connections'
buffers (uvicorn reads at most 64 KiB of a body ahead of the app) and the one response
being encoded. Responses are encoded one query at a time and written piece by piece
(uvicorn waits for the client to read before writing past the transport's high-water
mark), and a request's bytes are released only once its last piece is written, so the
bytes counted are the bytes held.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from uvicorn.server import ServerState

from agentgym.retrieval.http import ConnectionTimeout, LimitedH11Protocol, uvicorn_config
from agentgym.retrieval.index import BM25Index, SearchHit
from agentgym.retrieval.limits import (
    HIT_BYTES,
    BudgetExceeded,
    ByteBudget,
    RequestTooLarge,
    Reservation,
    RetrieveRequest,
    ServiceBusy,
    ServiceError,
    ServiceLimits,
    parse_documents,
    parse_json,
    parse_retrieve,
)

__all__ = ["RetrieverService", "RunningService", "ServiceLimits", "ServiceStats", "start_service_in_thread"]

_ONE_WRITE_BYTES = 1 << 16  # uvicorn's write high-water mark: a reply this small is written at once
_SCORE_BYTES = 48  # '{"document": ..., "score": 12.345678}, ' around each document


@dataclass
class ServiceStats:
    requests: int = 0
    queries: int = 0
    batches: int = 0
    errors: int = 0
    too_large: int = 0
    """Requests answered 413."""
    busy: int = 0
    """Requests and connections answered 429."""
    timeouts: int = 0
    """Connections dropped because a request or a response took too long."""


class _Admitted:
    """A request's body and its reservation, as the admission hands them to a route.

    The body is taken once: the route parses it and drops it before the reply is
    written, so that a client that reads late holds its reply's bytes, not its
    request's too (the reservation keeps counting both until the reply is out).
    """

    def __init__(self, body: bytes, reservation: Reservation) -> None:
        self._body: bytes | None = body
        self.reservation = reservation

    def take_body(self) -> bytes:
        body, self._body = self._body, None
        if body is None:
            raise RuntimeError("the request body was taken already")
        return body


class _ClientGone(Exception):
    """The client disconnected before its body was in: nothing to answer."""


@dataclass
class _Pending:
    queries: list[str]
    topk: int
    future: asyncio.Future = field(repr=False)


class _Reply(Response):
    """A JSON reply written as pieces, each after the client has read the one before
    (uvicorn drains before writing past the high-water mark); the last, empty message
    waits too, so a reply is done only once it is nearly all out of the process.

    Raises :class:`ConnectionTimeout` when the client takes over ``write_timeout_s``.
    ``close``: the connection ends after it (the request's body was not read).
    """

    def __init__(self, status: int, pieces: list[bytes], write_timeout_s: float, *, close: bool = False) -> None:
        self.status_code, self.pieces, self.write_timeout_s = status, pieces, write_timeout_s
        self.size = sum(len(p) for p in pieces)
        self.background = None
        self.raw_headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % self.size)]
        if status == 429:
            self.raw_headers.append((b"retry-after", b"1"))
        if close:
            self.raw_headers.append((b"connection", b"close"))

    @classmethod
    def json(cls, status: int, payload: Any, write_timeout_s: float, *, close: bool = False) -> _Reply:
        return cls(status, [json.dumps(payload, ensure_ascii=False).encode("utf-8")], write_timeout_s, close=close)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.size <= _ONE_WRITE_BYTES:  # one body message: fewer writes, and it fits the transport's buffer
            self.pieces = [b"".join(self.pieces)] if len(self.pieces) > 1 else self.pieces
        await self.send_start(send)
        await self.send_end(send)

    async def send_start(self, send: Any) -> None:
        """The head and every piece, the response kept open."""
        try:
            async with asyncio.timeout(self.write_timeout_s):
                await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
                for piece in self.pieces:
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
        except TimeoutError:
            raise ConnectionTimeout(f"the client read under {self.size} bytes in {self.write_timeout_s} s") from None

    async def send_end(self, send: Any) -> None:
        try:
            async with asyncio.timeout(self.write_timeout_s):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except TimeoutError:
            raise ConnectionTimeout(f"the client did not read the end of the reply in {self.write_timeout_s} s") from None


def _mean_doc_bytes(index: BM25Index, sample: int = 1000) -> int:
    """Mean encoded size of one result item, from up to ``sample`` evenly spaced documents
    (an estimate: the exact size is reserved once the reply is encoded)."""
    corpus = index.corpus
    if not len(corpus):
        return 0
    step = max(1, len(corpus) // sample)
    sizes = [len(json.dumps(corpus[i].to_json(), ensure_ascii=False).encode("utf-8"))
             for i in range(0, len(corpus), step)]
    return sum(sizes) // len(sizes) + _SCORE_BYTES


def _result_pieces(index: BM25Index, per_query: list[list[SearchHit]], return_scores: bool) -> list[bytes]:
    """The ``{"result": [...]}`` body, encoded one query at a time (the same bytes as one
    ``json.dumps`` of the whole, without holding the whole as Python objects)."""
    corpus = index.corpus
    pieces = [b'{"result": [']
    for i, hits in enumerate(per_query):
        docs = [corpus[h.position].to_json() for h in hits]
        item = [{"document": d, "score": h.score} for d, h in zip(docs, hits)] if return_scores else docs
        pieces.append(((", " if i else "") + json.dumps(item, ensure_ascii=False)).encode("utf-8"))
    pieces.append(b"]}")
    return pieces


class RetrieverService:
    """Serves one ``BM25Index`` over HTTP on an asyncio loop, within ``limits``."""

    def __init__(self, index: BM25Index, max_batch: int = 256, limits: ServiceLimits | None = None) -> None:
        self.index = index
        self.max_batch = max_batch
        self.limits = limits or ServiceLimits()
        self.stats = ServiceStats()
        self.budget = ByteBudget(self.limits.max_bytes_in_flight)
        self._doc_bytes = _mean_doc_bytes(index)
        self._queue: asyncio.Queue[_Pending] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._state = ServerState()
        self._batcher: asyncio.Task | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="retriever-search")
        self._routes = Starlette(
            routes=[Route("/retrieve", self._retrieve, methods=["POST"]),
                    Route("/documents", self._documents, methods=["POST"]),
                    Route("/health", self._health, methods=["GET"])],
            exception_handlers={ServiceError: self._refusal, HTTPException: self._no_route, Exception: self._failure},
        )
        self.host, self.port = "", 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def open_connections(self) -> int:
        """Connections being served now (not those refused for the connection limit)."""
        return len(self._state.connections)

    async def start(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        """Bind and start serving (``port=0`` picks a free port; see ``self.port``).
        Raises ``OSError`` when the address cannot be bound."""
        self._queue = asyncio.Queue()
        self._batcher = asyncio.create_task(self._run_batches())
        config = uvicorn_config(self._admit, self.limits.read_timeout_s)
        config.load()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: LimitedH11Protocol(self, config, self._state, {}, loop), host, port, backlog=config.backlog)
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    async def serve_forever(self) -> None:
        assert self._server is not None, "call start() first"
        await self._server.serve_forever()

    async def stop(self) -> None:
        """Stop accepting, drop open connections, fail queued work."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._state.connections):
            connection.transport.abort()
        if self._batcher is not None:
            self._batcher.cancel()
        while self._queue is not None and not self._queue.empty():
            pending = self._queue.get_nowait()
            if not pending.future.done():
                pending.future.set_exception(ConnectionAbortedError("retriever service stopped"))
        self._pool.shutdown(wait=False, cancel_futures=True)
        await asyncio.sleep(0)  # the aborted connections' connection_lost runs

    # -------------------------------------------------------------- admission
    async def _admit(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Read the body within the limits, then route the request with it and its
        reservation (``request.state.admitted``); the reservation is released once the
        reply is written."""
        self.stats.requests += 1
        reservation = self.budget.reservation()
        try:
            try:
                body = await self._read_body(scope, receive, reservation)
            except ServiceError as e:
                self._count(e)
                await self._refuse_unread(receive, send, e)
                return
            except _ClientGone:
                return
            scope["state"]["admitted"] = _Admitted(body, reservation)
            del body
            await self._routes(scope, receive, send)
        finally:
            reservation.release()

    async def _read_body(self, scope: dict[str, Any], receive: Any, reservation: Reservation) -> bytes:
        """The body, once its size is allowed and reserved (twice: the chunks and the
        joined bytes both exist while it is read). Without a ``Content-Length``
        (chunked), each chunk is checked and reserved as it comes."""
        limit = self.limits.max_body_bytes
        length = _content_length(scope)
        if length is not None:
            if length > limit:
                raise RequestTooLarge(f"the body is {length} bytes; at most {limit} are accepted, split the request")
            _grow(reservation, 2 * length)
        chunks: list[bytes] = []
        size, more = 0, True
        try:
            async with asyncio.timeout(self.limits.read_timeout_s):
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _ClientGone
                    chunk, more = message.get("body", b""), message.get("more_body", False)
                    size += len(chunk)
                    if length is None:
                        if size > limit:
                            raise RequestTooLarge(f"the body is over {limit} bytes, the most accepted; split the "
                                                  "request")
                        _grow(reservation, 2 * len(chunk))
                    chunks.append(chunk)
        except TimeoutError:
            raise ConnectionTimeout(f"the body did not arrive within {self.limits.read_timeout_s} s") from None
        return b"".join(chunks)

    async def _refuse_unread(self, receive: Any, send: Any, error: ServiceError) -> None:
        """Answer ``error`` before the body is read, then read and drop the body (for
        ``read_timeout_s`` at most) before closing, so that a client that sends its whole
        request before reading sees the answer instead of a connection reset."""
        reply = _Reply.json(error.status, {"error": str(error)}, self.limits.write_timeout_s, close=True)
        await reply.send_start(send)
        try:
            async with asyncio.timeout(self.limits.read_timeout_s):
                while (await receive()).get("more_body", False):
                    pass
        except TimeoutError:
            pass
        await reply.send_end(send)

    def _count(self, error: ServiceError) -> None:
        if error.status == 413:
            self.stats.too_large += 1
        elif error.status == 429:
            self.stats.busy += 1
        else:
            self.stats.errors += 1

    # --------------------------------------------------- errors the app answers
    def _refusal(self, request: Request, error: Exception) -> _Reply:
        assert isinstance(error, ServiceError)
        self._count(error)
        return _Reply.json(error.status, {"error": str(error)}, self.limits.write_timeout_s)

    def _no_route(self, request: Request, error: Exception) -> _Reply:
        assert isinstance(error, HTTPException)
        return _Reply.json(error.status_code, {"error": f"no route {request.method} {request.url.path}; use POST "
                                                        "/retrieve, POST /documents, GET /health"},
                           self.limits.write_timeout_s)

    def _failure(self, request: Request, error: Exception) -> _Reply:
        """A service answers 500 rather than dropping the client (uvicorn logs the error)."""
        self.stats.errors += 1
        return _Reply.json(500, {"error": f"{type(error).__name__}: {error}"}, self.limits.write_timeout_s)

    # ------------------------------------------------------------------ routes
    async def _retrieve(self, request: Request) -> _Reply:
        """Reserve an estimate before searching (so a busy service says 429 before doing
        the work), then settle on the exact size of the encoded reply."""
        admitted: _Admitted = request.state.admitted
        reservation = admitted.reservation
        search = parse_retrieve(parse_json(admitted.take_body()), self.limits)
        estimate = search.docs * (HIT_BYTES + self._doc_bytes)
        _grow(reservation, estimate)
        per_query = await self._search(search)
        reply = _Reply(200, _result_pieces(self.index, per_query, search.return_scores), self.limits.write_timeout_s)
        del per_query
        _grow(reservation, reply.size - estimate)
        return reply

    async def _documents(self, request: Request) -> _Reply:
        admitted: _Admitted = request.state.admitted
        ids = parse_documents(parse_json(admitted.take_body()), self.limits).ids
        docs = [self.index.corpus.get(i) for i in ids]
        reply = _Reply.json(200, {"documents": [None if d is None else d.to_json() for d in docs]},
                            self.limits.write_timeout_s)
        _grow(admitted.reservation, reply.size)
        return reply

    async def _health(self, request: Request) -> _Reply:
        return _Reply.json(200, {"status": "ok", "corpus_version": self.index.corpus.version,
                                 "num_docs": len(self.index.corpus)}, self.limits.write_timeout_s)

    # ---------------------------------------------------------------- batching
    async def _search(self, request: RetrieveRequest) -> list[list[SearchHit]]:
        assert self._queue is not None
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Pending(request.queries, request.topk, future))
        return await future

    async def _run_batches(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            size = len(batch[0].queries)
            while size < self.max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
                size += len(batch[-1].queries)
            try:
                results = await loop.run_in_executor(self._pool, self._search_batch, batch)
            except Exception as e:  # noqa: BLE001 - each waiting request gets the error
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(e)
                continue
            self.stats.batches += 1
            self.stats.queries += size
            for pending, result in zip(batch, results):
                if not pending.future.done():
                    pending.future.set_result(result)

    def _search_batch(self, batch: list[_Pending]) -> list[list[list[SearchHit]]]:
        return [self.index.search_many(p.queries, p.topk) for p in batch]


def _grow(reservation: Reservation, n: int) -> None:
    """Reserve ``n`` more bytes for this request: 429 when they do not fit now, 413 when
    they never could."""
    try:
        reservation.grow(n)
    except BudgetExceeded as e:
        if e.never_fits:
            raise RequestTooLarge(f"serving this request needs {e.wanted} bytes, over the service's "
                                  f"max_bytes_in_flight ({e.capacity}); ask for fewer queries or a smaller "
                                  "topk") from None
        raise ServiceBusy(f"the service holds its limit of {e.capacity} bytes for requests in flight; "
                          "retry shortly") from None


def _content_length(scope: dict[str, Any]) -> int | None:
    """The body's announced size (h11 has checked it is a number), ``None`` if chunked."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value)
    return None


@dataclass
class RunningService:
    """A service running on its own loop in a daemon thread (tests, benchmarks, embedding)."""

    service: RetrieverService
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    @property
    def url(self) -> str:
        return self.service.url

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self.service.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def start_service_in_thread(index: BM25Index, host: str = "127.0.0.1", port: int = 0,
                            max_batch: int = 256, limits: ServiceLimits | None = None) -> RunningService:
    """Start a service in a background thread and return once it accepts connections."""
    service = RetrieverService(index, max_batch=max_batch, limits=limits)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(service.start(host, port))
        except BaseException as e:  # noqa: BLE001 - reported to the starting thread
            failure.append(e)
            started.set()
            return
        started.set()
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name="agentgym-retriever", daemon=True)
    thread.start()
    started.wait(30)
    if failure:
        raise failure[0]
    return RunningService(service, loop, thread)
