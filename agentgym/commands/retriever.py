"""``agentgym serve-retriever``: serve a BM25 index over HTTP until interrupted."""

from __future__ import annotations

import asyncio
import signal
import sys

from agentgym.retrieval import IndexBuildError, LocalRetriever, RetrieverService, ServiceLimits
from tasks.search import Corpus, CorpusFormatError, load_default_dataset

__all__ = ["serve_retriever_command"]


def _progress(stage: str, fraction: float) -> None:
    sys.stderr.write(f"\r{stage}: {fraction:5.0%}")
    if fraction >= 1.0:
        sys.stderr.write("\n")
    sys.stderr.flush()


async def _serve(service: RetrieverService, host: str, port: int) -> None:
    await service.start(host, port)
    sys.stderr.write(
        f"retriever serving {len(service.index.corpus)} documents (corpus {service.index.corpus.version}) "
        f"on {service.url}: POST /retrieve, POST /documents, GET /health\n"
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # also when started in the background
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await service.stop()
        sys.stderr.write("retriever stopped\n")


def serve_retriever_command(host: str = "127.0.0.1", port: int = 8000, corpus: str | None = None,
                            limits: ServiceLimits | None = None) -> int:
    """Serve the bundled corpus (or ``corpus``, a Search-R1 jsonl) on ``host:port``.

    Returns the process exit code: 0 after Ctrl-C, 2 when the corpus file is unusable
    (missing, not UTF-8, malformed: one line naming the file and line), 1 when the index
    or the port is.
    """
    try:
        docs = Corpus.read_jsonl(corpus) if corpus else load_default_dataset(progress=_progress).corpus
    except (OSError, CorpusFormatError) as e:
        sys.stderr.write(f"error: could not load the corpus: {e}\n")
        return 2
    try:
        retriever = LocalRetriever.for_corpus(docs, progress=_progress)
    except (OSError, ValueError, IndexBuildError) as e:
        sys.stderr.write(f"error: could not build the index: {e}\n")
        return 1
    try:
        asyncio.run(_serve(RetrieverService(retriever.index, limits=limits), host, port))
    except KeyboardInterrupt:
        return 0
    except OSError as e:
        sys.stderr.write(f"error: could not serve on {host}:{port}: {e}\n")
        return 1
    return 0
