"""BM25 over a corpus with tantivy, built once and cached on disk by corpus version.

The index stores no text, only each document's position in the corpus (a fast field),
so a query costs one BM25 search plus a column read; the texts stay in the ``Corpus``
the caller already holds. The analyzer (lowercase, ASCII folding, English stop words,
Porter-style stemming) is close to Pyserini's default BM25 setup used by Search-R1 and
FlashRAG. Queries are analysed here and turned into a disjunction of term queries, so
any text an agent writes is a valid query (no query-language syntax errors).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import tantivy

from tasks.search import Corpus, reap_stale_staging, staging_dir

__all__ = ["BM25Index", "INDEX_FORMAT", "IndexBuildError", "SearchHit"]

log = logging.getLogger(__name__)

# Bump when the schema or analyzer changes: it is part of the cache directory name.
INDEX_FORMAT = "bm25-v1"
_ANALYZER = "agentgym_en"
_MAX_QUERY_TERMS = 64

ProgressCallback = Callable[[str, float], None]


class IndexBuildError(RuntimeError):
    """The on-disk index could not be built or opened."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked result: the corpus position, the document id and the BM25 score."""

    position: int
    doc_id: str
    score: float


def _analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("contents", stored=False, tokenizer_name=_ANALYZER, index_option="freq")
    builder.add_unsigned_field("position", stored=False, indexed=False, fast=True)
    return builder.build()


class BM25Index:
    """A searchable BM25 index over one corpus. Thread-safe for concurrent searches."""

    def __init__(self, index: tantivy.Index, corpus: Corpus, path: Path | None) -> None:
        self._index = index
        self._corpus = corpus
        self.path = path
        self._analyzer = _analyzer()
        self._schema = index.schema
        self._searcher = index.searcher()
        if self._searcher.num_docs != len(corpus):
            raise IndexBuildError(
                f"Expected an index of {len(corpus)} documents, actual index at {path} has "
                f"{self._searcher.num_docs}; delete that directory to rebuild it."
            )

    @property
    def corpus(self) -> Corpus:
        return self._corpus

    @classmethod
    def build(
        cls,
        corpus: Corpus,
        path: str | os.PathLike[str] | None = None,
        progress: ProgressCallback | None = None,
    ) -> BM25Index:
        """Index ``corpus`` into ``path`` (in memory when ``None``)."""
        index = tantivy.Index(_schema(), path=None if path is None else str(path), reuse=False)
        index.register_tokenizer(_ANALYZER, _analyzer())
        writer = index.writer(heap_size=64_000_000, num_threads=1)
        step = max(1, len(corpus) // 20)
        for position, doc in enumerate(corpus):
            document = tantivy.Document()
            document.add_text("contents", doc.contents)
            document.add_unsigned("position", position)
            writer.add_document(document)
            if progress and position % step == 0:
                progress("bm25 index: adding documents", position / max(1, len(corpus)))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        if progress:
            progress("bm25 index: done", 1.0)
        return cls(index, corpus, None if path is None else Path(path))

    @classmethod
    def open_or_build(
        cls, corpus: Corpus, cache_dir: str | os.PathLike[str], progress: ProgressCallback | None = None
    ) -> BM25Index:
        """Open the cached index of this corpus version, building it first if needed.

        The build goes to a staging directory renamed into place, so concurrent
        processes never see a half-written index; the loser of a race uses the winner's.
        Staging directories of builds that were killed are removed here.
        """
        final = Path(cache_dir) / f"{INDEX_FORMAT}-{corpus.version}"
        reap_stale_staging(final.parent)
        if not final.exists():
            tmp = staging_dir(final)
            start = time.perf_counter()
            try:
                cls.build(corpus, tmp, progress)
                os.rename(tmp, final)
                log.info("built %s in %.2f s", final, time.perf_counter() - start)
            except OSError:
                if not final.exists():
                    raise
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return cls.open(corpus, final)

    @classmethod
    def open(cls, corpus: Corpus, path: str | os.PathLike[str]) -> BM25Index:
        try:
            index = tantivy.Index.open(str(path))
        except (OSError, ValueError) as e:
            raise IndexBuildError(f"Could not open the BM25 index at {path} ({e}); delete it to rebuild.") from e
        index.register_tokenizer(_ANALYZER, _analyzer())
        return cls(index, corpus, Path(path))

    def query_terms(self, query: str) -> list[str]:
        """The analysed, de-duplicated terms of ``query`` (at most 64)."""
        return list(dict.fromkeys(self._analyzer.analyze(query)))[:_MAX_QUERY_TERMS]

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The top ``k`` documents by BM25; empty for a query with no indexable term."""
        terms = self.query_terms(query)
        if not terms or k < 1:
            return []
        subqueries = [
            (tantivy.Occur.Should, tantivy.Query.term_query(self._schema, "contents", t, index_option="freq"))
            for t in terms
        ]
        result = self._searcher.search(tantivy.Query.boolean_query(subqueries), limit=k, count=False)
        if not result.hits:
            return []
        addresses = [address for _, address in result.hits]
        positions = self._searcher.fast_field_values("position", addresses)
        return [
            SearchHit(int(pos), self._corpus[int(pos)].id, float(score))
            for (score, _), pos in zip(result.hits, positions)
        ]

    def search_many(self, queries: Sequence[str], k: int = 5) -> list[list[SearchHit]]:
        return [self.search(q, k) for q in queries]
