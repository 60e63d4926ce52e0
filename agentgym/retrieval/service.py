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
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agentgym.retrieval.http import MalformedHTTP, encode_response, read_message
from agentgym.retrieval.index import BM25Index

__all__ = ["RetrieverService", "RunningService", "ServiceStats", "start_service_in_thread"]

log = logging.getLogger(__name__)

DEFAULT_TOPK = 3  # Search-R1's default when a request names none
MAX_TOPK = 100
MAX_QUERIES_PER_REQUEST = 1024


class BadRequest(ValueError):
    """A request the service rejects with HTTP 400; the message says what to send."""


@dataclass
class ServiceStats:
    requests: int = 0
    queries: int = 0
    batches: int = 0
    errors: int = 0


@dataclass
class _Pending:
    queries: list[str]
    topk: int
    future: asyncio.Future = field(repr=False)


def _parse_retrieve(payload: Any) -> tuple[list[str], int, bool]:
    if not isinstance(payload, dict):
        raise BadRequest('expected a JSON object {"queries": [...], "topk": k, "return_scores": bool}')
    # "query" (one string) is accepted too: some search-agent clients send that form.
    queries = payload.get("queries", payload.get("query"))
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise BadRequest('"queries" must be a list of strings')
    if len(queries) > MAX_QUERIES_PER_REQUEST:
        raise BadRequest(f"at most {MAX_QUERIES_PER_REQUEST} queries per request, got {len(queries)}")
    topk = payload.get("topk")
    topk = DEFAULT_TOPK if topk is None else topk
    if not isinstance(topk, int) or isinstance(topk, bool) or not 1 <= topk <= MAX_TOPK:
        raise BadRequest(f'"topk" must be an integer in [1, {MAX_TOPK}], got {topk!r}')
    return queries, topk, bool(payload.get("return_scores", False))


class RetrieverService:
    """Serves one ``BM25Index`` over HTTP on an asyncio loop."""

    def __init__(self, index: BM25Index, max_batch: int = 256) -> None:
        self.index = index
        self.max_batch = max_batch
        self.stats = ServiceStats()
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
        self._server = await asyncio.start_server(self._handle, host, port, limit=1 << 20)
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    async def serve_forever(self) -> None:
        assert self._server is not None, "call start() first"
        await self._server.serve_forever()

    async def stop(self) -> None:
        """Stop accepting, drop open connections, fail queued work."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._batcher is not None:
            self._batcher.cancel()
        while self._queue is not None and not self._queue.empty():
            pending = self._queue.get_nowait()
            if not pending.future.done():
                pending.future.set_exception(ConnectionAbortedError("retriever service stopped"))
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ serving
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                try:
                    request = await read_message(reader)
                except MalformedHTTP as e:
                    writer.write(encode_response(400, {"error": str(e)}, keep_alive=False))
                    break
                if request is None:
                    break
                status, payload = await self._route(request.start_line, request)
                writer.write(encode_response(status, payload, request.keep_alive))
                await writer.drain()
                if not request.keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _route(self, start_line: str, request: Any) -> tuple[int, Any]:
        method, _, rest = start_line.partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        self.stats.requests += 1
        try:
            if path == "/retrieve" and method == "POST":
                return 200, await self._retrieve(request.json())
            if path == "/documents" and method == "POST":
                return 200, self._documents(request.json())
            if path == "/health" and method == "GET":
                return 200, {"status": "ok", "corpus_version": self.index.corpus.version,
                             "num_docs": len(self.index.corpus)}
            return 404, {"error": f"no route {method} {path}; use POST /retrieve, POST /documents, GET /health"}
        except (BadRequest, MalformedHTTP) as e:
            self.stats.errors += 1
            return 400, {"error": str(e)}
        except Exception as e:  # noqa: BLE001 - a service answers 500 rather than dropping the client
            self.stats.errors += 1
            log.exception("retriever request failed")
            return 500, {"error": f"{type(e).__name__}: {e}"}

    async def _retrieve(self, payload: Any) -> dict[str, Any]:
        queries, topk, return_scores = _parse_retrieve(payload)
        assert self._queue is not None
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Pending(queries, topk, future))
        per_query = await future
        corpus = self.index.corpus
        result = []
        for hits in per_query:
            docs = [corpus[h.position].to_json() for h in hits]
            result.append([{"document": d, "score": h.score} for d, h in zip(docs, hits)] if return_scores else docs)
        return {"result": result}

    def _documents(self, payload: Any) -> dict[str, Any]:
        ids = payload.get("ids") if isinstance(payload, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise BadRequest('expected {"ids": [string, ...]}')
        docs = [self.index.corpus.get(i) for i in ids]
        return {"documents": [None if d is None else d.to_json() for d in docs]}

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

    def _search_batch(self, batch: list[_Pending]) -> list[list[list[Any]]]:
        return [self.index.search_many(p.queries, p.topk) for p in batch]


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
                            max_batch: int = 256) -> RunningService:
    """Start a service in a background thread and return once it accepts connections."""
    service = RetrieverService(index, max_batch=max_batch)
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
