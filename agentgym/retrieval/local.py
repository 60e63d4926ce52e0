"""The embedded retrieval backend: the BM25 index searched in-process."""

from __future__ import annotations

import os
from pathlib import Path

from agentgym.retrieval.base import RetrievedDocument
from agentgym.retrieval.index import BM25Index, ProgressCallback
from tasks.search import Corpus, cache_root

__all__ = ["LocalRetriever", "default_index_dir"]


def default_index_dir() -> Path:
    """Where cached indexes live: ``$AGENTGYM_CACHE_DIR/search/index``."""
    return cache_root() / "search" / "index"


class LocalRetriever:
    """In-process search; a query costs well under a millisecond, so it runs inline on
    the event loop (a thread hop would cost more than the search)."""

    def __init__(self, index: BM25Index) -> None:
        self.index = index

    @classmethod
    def for_corpus(cls, corpus: Corpus, cache_dir: str | os.PathLike[str] | None = None,
                   progress: ProgressCallback | None = None) -> LocalRetriever:
        """Open (or build once and cache) the index of ``corpus``'s version."""
        return cls(BM25Index.open_or_build(corpus, cache_dir or default_index_dir(), progress))

    def search_sync(self, queries: list[str], topk: int) -> list[list[RetrievedDocument]]:
        corpus = self.index.corpus
        return [
            [RetrievedDocument(h.doc_id, corpus[h.position].contents, h.score) for h in hits]
            for hits in self.index.search_many(queries, topk)
        ]

    async def search(self, queries: list[str], topk: int) -> list[list[RetrievedDocument]]:
        return self.search_sync(queries, topk)

    async def get_documents(self, ids: list[str]) -> list[RetrievedDocument | None]:
        docs = [self.index.corpus.get(i) for i in ids]
        return [None if d is None else RetrievedDocument(d.id, d.contents) for d in docs]
