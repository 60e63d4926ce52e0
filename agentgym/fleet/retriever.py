"""The search index as one Ray actor that every Search worker of a fleet queries.

Without it each worker opens its own in-process index: fine on a few nodes, but at scale
every node holds the corpus in memory and every index build is repeated. The actor serves
the same ``RetrieverService`` as ``agentgym serve-retriever`` (Search-R1's HTTP format,
batching, bounded memory) on its node's address, so workers reach it through the
ordinary ``retriever_url`` client, with its timeouts, retries and corpus-version check.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from agentgym.fleet.ray_support import require_ray

__all__ = ["RetrieverActor", "SharedRetriever"]


class RetrieverActor:
    """Builds (or opens the cached) BM25 index of the bundled corpus or ``corpus_path``
    and serves it on this node's IP address."""

    def __init__(self, corpus_path: str | None = None, port: int = 0) -> None:
        import ray

        from agentgym.retrieval import LocalRetriever, start_service_in_thread
        from tasks.search import Corpus, load_default_dataset

        corpus = Corpus.read_jsonl(corpus_path) if corpus_path else load_default_dataset().corpus
        index = LocalRetriever.for_corpus(corpus).index
        self._running = start_service_in_thread(index, host=ray.util.get_node_ip_address(), port=port)

    def url(self) -> str:
        return self._running.url

    def stats(self) -> dict[str, int]:
        """The service's counters (requests, queries, batches, refusals)."""
        return asdict(self._running.service.stats)

    def stop(self) -> None:
        self._running.stop()


class SharedRetriever:
    """A started :class:`RetrieverActor` and its URL; :meth:`stop` ends it.

    Args:
        corpus_path: a Search-R1 corpus (the env's ``corpus_path``), or the bundled one.
        options: Ray actor options (``num_cpus``, ``resources``) to place it.
    """

    def __init__(self, corpus_path: str | None = None, **options: Any) -> None:
        ray = require_ray()
        self.handle = ray.remote(RetrieverActor).options(**{"num_cpus": 0, **options}).remote(corpus_path)
        self.url: str = ray.get(self.handle.url.remote())

    def stats(self) -> dict[str, int]:
        return require_ray().get(self.handle.stats.remote())

    def stop(self) -> None:
        ray = require_ray()
        try:
            ray.get(self.handle.stop.remote(), timeout=30)
        finally:
            ray.kill(self.handle, no_restart=True)
