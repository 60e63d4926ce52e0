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

Bounded memory (``limits.py`` has the rules): 413 for a request over the per-request
caps, 429 when the bytes in flight or the open connections are at their limit, 400 for
any malformed body; a request must arrive within ``read_timeout_s`` and its response be
read within ``write_timeout_s``. Above its idle size, the process holds at most
``max_bytes_in_flight`` for requests and responses, plus the connections' read buffers
(``max_connections`` x about 0.3 MiB at worst) and the one response being encoded.
Responses are encoded one query at a time and written piece by piece, so the bytes
counted are the bytes held.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agentgym.retrieval.http import (
    MAX_HEADER_BYTES,
    HTTPHead,
    MalformedHTTP,
    encode_head,
    parse_json,
    read_body,
    read_head,
)
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
    parse_retrieve,
)

__all__ = ["RetrieverService", "RunningService", "ServiceLimits", "ServiceStats", "start_service_in_thread"]

log = logging.getLogger(__name__)

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_DISCARD_CHUNK = 1 << 16
_REFUSED_LINGER_S = 1.0  # a connection refused for the connection limit is drained this long at most
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


@dataclass
class _Pending:
    queries: list[str]
    topk: int
    future: asyncio.Future = field(repr=False)


@dataclass
class _Reply:
    """A response: a JSON body in pieces that are written one at a time."""

    status: int
    pieces: list[bytes]
    keep_alive: bool = True
    unread_body: int = 0
    """Bytes of the request body left unread: discarded (bounded by time) before closing."""

    @classmethod
    def json(cls, status: int, payload: Any, keep_alive: bool = True, unread_body: int = 0) -> _Reply:
        return cls(status, [json.dumps(payload, ensure_ascii=False).encode("utf-8")], keep_alive, unread_body)

    @property
    def size(self) -> int:
        return sum(len(p) for p in self.pieces)


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
        self._batcher: asyncio.Task | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="retriever-search")
        self.host, self.port = "", 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        """Bind and start serving (``port=0`` picks a free port; see ``self.port``)."""
        self._queue = asyncio.Queue()
        self._batcher = asyncio.create_task(self._run_batches())
        # The stream limit bounds what a connection buffers while looking for the end of
        # the headers; bodies are read only after their size was admitted.
        self._server = await asyncio.start_server(self._handle, host, port, limit=MAX_HEADER_BYTES)
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    async def serve_forever(self) -> None:
        assert self._server is not None, "call start() first"
        await self._server.serve_forever()

    async def stop(self) -> None:
        """Stop accepting, drop open connections, fail queued work."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._batcher is not None:
            self._batcher.cancel()
        while self._queue is not None and not self._queue.empty():
            pending = self._queue.get_nowait()
            if not pending.future.done():
                pending.future.set_exception(ConnectionAbortedError("retriever service stopped"))
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------ connections
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._writers) >= self.limits.max_connections:
            self.stats.busy += 1
            reply = _Reply.json(429, {"error": f"the service has {self.limits.max_connections} connections open; "
                                                "retry later"}, keep_alive=False)
            await self._send_quietly(writer, reply)
            await self._discard(reader, self.limits.max_body_bytes, within_s=_REFUSED_LINGER_S)
            writer.close()
            return
        self._writers.add(writer)
        try:
            while await self._exchange(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except TimeoutError:
            self.stats.timeouts += 1
            writer.transport.abort()  # drops what the client did not read, too
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the connection is done."""
        try:
            async with asyncio.timeout(self.limits.read_timeout_s):
                head = await read_head(reader)
        except MalformedHTTP as e:
            await self._send(writer, _Reply.json(400, {"error": str(e)}, keep_alive=False))
            return False
        if head is None:
            return False
        self.stats.requests += 1
        reservation = self.budget.reservation()
        try:
            reply = await self._reply(reader, writer, head, reservation)
            await self._send(writer, reply)
        finally:
            reservation.release()
        if reply.unread_body:
            await self._discard(reader, reply.unread_body)
        return reply.keep_alive

    async def _reply(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: HTTPHead,
                     reservation: Reservation) -> _Reply:
        try:
            body = await self._admit_body(reader, writer, head, reservation)
            return await self._route(head, body, reservation)
        except ServiceError as e:
            self._count(e)
            return _Reply.json(e.status, {"error": str(e)}, keep_alive=head.keep_alive and not e.unread_body,
                               unread_body=e.unread_body)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            raise  # the connection is gone or dropped: nothing to answer
        except MalformedHTTP as e:
            self.stats.errors += 1
            return _Reply.json(400, {"error": str(e)}, keep_alive=head.keep_alive)
        except Exception as e:  # noqa: BLE001 - a service answers 500 rather than dropping the client
            self.stats.errors += 1
            log.exception("retriever request failed")
            return _Reply.json(500, {"error": f"{type(e).__name__}: {e}"}, keep_alive=head.keep_alive)

    def _count(self, error: ServiceError) -> None:
        if error.status == 413:
            self.stats.too_large += 1
        elif error.status == 429:
            self.stats.busy += 1
        else:
            self.stats.errors += 1

    async def _admit_body(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: HTTPHead,
                          reservation: Reservation) -> bytes:
        """Read the body only once its size is allowed and reserved (twice: the stream's
        buffer and the bytes object both exist while it is read)."""
        length = head.content_length
        if length > self.limits.max_body_bytes:
            raise RequestTooLarge(f"the body is {length} bytes; at most {self.limits.max_body_bytes} are accepted, "
                                  "split the request", unread_body=length)
        try:
            _grow(reservation, 2 * length)
        except ServiceError as e:
            raise type(e)(str(e), unread_body=length) from None
        if head.expects_continue and length:
            writer.write(_CONTINUE)
        async with asyncio.timeout(self.limits.read_timeout_s):
            return await read_body(reader, head)

    async def _send(self, writer: asyncio.StreamWriter, reply: _Reply) -> None:
        """Write the reply piece by piece within ``write_timeout_s`` (TimeoutError beyond).

        Pieces go out as memoryviews and drain in between, so the transport copies at most
        one piece beyond its 64 KiB high-water mark.
        """
        extra = "Retry-After: 1\r\n" if reply.status == 429 else ""
        async with asyncio.timeout(self.limits.write_timeout_s):
            writer.write(encode_head(reply.status, reply.size, reply.keep_alive, extra))
            for piece in reply.pieces:
                writer.write(memoryview(piece))
                await writer.drain()

    async def _send_quietly(self, writer: asyncio.StreamWriter, reply: _Reply) -> None:
        try:
            await self._send(writer, reply)
        except (ConnectionError, TimeoutError):
            pass

    async def _discard(self, reader: asyncio.StreamReader, length: int, within_s: float | None = None) -> None:
        """Read and drop up to ``length`` unread bytes (for ``read_timeout_s`` at most), so
        a client that sends its whole request before reading sees our answer instead of a
        connection reset (closing a socket with unread input resets it)."""
        try:
            async with asyncio.timeout(within_s or self.limits.read_timeout_s):
                while length > 0:
                    chunk = await reader.read(min(length, _DISCARD_CHUNK))
                    if not chunk:
                        return
                    length -= len(chunk)
        except (TimeoutError, ConnectionError):
            pass

    # ------------------------------------------------------------------ routes
    async def _route(self, head: HTTPHead, body: bytes, reservation: Reservation) -> _Reply:
        method, _, rest = head.start_line.partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        keep_alive = head.keep_alive
        if path == "/retrieve" and method == "POST":
            return await self._retrieve(parse_json(body), reservation, keep_alive)
        if path == "/documents" and method == "POST":
            return self._documents(parse_json(body), reservation, keep_alive)
        if path == "/health" and method == "GET":
            return _Reply.json(200, {"status": "ok", "corpus_version": self.index.corpus.version,
                                     "num_docs": len(self.index.corpus)}, keep_alive)
        return _Reply.json(404, {"error": f"no route {method} {path}; use POST /retrieve, POST /documents, "
                                          "GET /health"}, keep_alive)

    async def _retrieve(self, payload: Any, reservation: Reservation, keep_alive: bool) -> _Reply:
        """Reserve an estimate before searching (so a busy service says 429 before doing
        the work), then settle on the exact size of the encoded reply."""
        request = parse_retrieve(payload, self.limits)
        estimate = request.docs * (HIT_BYTES + self._doc_bytes)
        _grow(reservation, estimate)
        per_query = await self._search(request)
        reply = _Reply(200, _result_pieces(self.index, per_query, request.return_scores), keep_alive)
        del per_query
        _grow(reservation, reply.size - estimate)
        return reply

    def _documents(self, payload: Any, reservation: Reservation, keep_alive: bool) -> _Reply:
        ids = parse_documents(payload, self.limits).ids
        docs = [self.index.corpus.get(i) for i in ids]
        reply = _Reply.json(200, {"documents": [None if d is None else d.to_json() for d in docs]}, keep_alive)
        _grow(reservation, reply.size)
        return reply

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
