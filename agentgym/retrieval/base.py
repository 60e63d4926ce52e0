"""What every retrieval backend returns and offers, so the env treats them alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["RetrievedDocument", "Retriever"]


@dataclass(frozen=True, slots=True)
class RetrievedDocument:
    """A document as a retriever returns it: Search-R1 ``contents`` plus the score."""

    doc_id: str
    contents: str
    score: float | None = None

    @property
    def title(self) -> str:
        first = self.contents.partition("\n")[0].strip()
        return first[1:-1] if len(first) >= 2 and first[0] == first[-1] == '"' else first

    @property
    def text(self) -> str:
        return self.contents.partition("\n")[2].strip()


class Retriever(Protocol):
    """A search backend: the in-process BM25 index or a remote retriever service."""

    async def search(self, queries: list[str], topk: int) -> list[list[RetrievedDocument]]:
        """Top-``topk`` documents per query. Raises ``InfraError`` on infrastructure failure."""
        ...

    async def get_documents(self, ids: list[str]) -> list[RetrievedDocument | None] | None:
        """Documents by id (``None`` entries for unknown ids), or ``None`` if unsupported."""
        ...
