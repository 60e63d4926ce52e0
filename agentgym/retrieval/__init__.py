"""Retrieval for search environments: an embedded BM25 index and a shared HTTP service.

* ``BM25Index`` — tantivy BM25 over a ``tasks.search.Corpus``, cached on disk by corpus
  version; ``LocalRetriever`` searches it in-process.
* ``RetrieverService`` — a Search-R1-compatible ``POST /retrieve`` service with request
  batching and bounded memory (``ServiceLimits``; ``agentgym serve-retriever``);
  ``RemoteRetriever`` is its async client, with timeouts, retries and a concurrency
  limit, raising ``InfraError`` when it is down.
"""

from agentgym.retrieval.base import RetrievedDocument, Retriever
from agentgym.retrieval.client import RemoteRetriever, RetrieverProtocolError, RetrieverUnavailableError
from agentgym.retrieval.index import INDEX_FORMAT, BM25Index, IndexBuildError, SearchHit
from agentgym.retrieval.local import LocalRetriever, default_index_dir
from agentgym.retrieval.limits import ServiceLimits
from agentgym.retrieval.service import RetrieverService, RunningService, start_service_in_thread

__all__ = [
    "INDEX_FORMAT",
    "BM25Index",
    "IndexBuildError",
    "LocalRetriever",
    "RemoteRetriever",
    "RetrievedDocument",
    "Retriever",
    "RetrieverProtocolError",
    "RetrieverService",
    "RetrieverUnavailableError",
    "RunningService",
    "SearchHit",
    "ServiceLimits",
    "default_index_dir",
    "start_service_in_thread",
]
