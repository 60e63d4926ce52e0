"""What a question is: its text, gold aliases, and per hop the document and what it tells.

``verify_question`` is the last check of the quality gate every generated question
passes: each hop's answer appears in its supporting document, and the final answer in
a supporting document. The generators and the rest of the gate are in
``tasks.search.generators`` and ``tasks.search.quality``.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from dataclasses import dataclass

from tasks.search.corpus import Corpus

__all__ = ["Hop", "Question", "contains_answer", "verify_question"]


@dataclass(frozen=True)
class Hop:
    """One retrieval step: the document to find and what it tells."""

    doc_id: str
    answer: str


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    golden_answers: tuple[str, ...]
    hops: tuple[Hop, ...]
    template: str

    @property
    def answer(self) -> str:
        return self.golden_answers[0]

    @property
    def supporting_doc_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(h.doc_id for h in self.hops))

    @property
    def num_hops(self) -> int:
        """Number of distinct documents the question needs (its retrieval hops)."""
        return len(self.supporting_doc_ids)

    def to_json(self, split: str | None = None) -> dict:
        row = {
            "id": self.id,
            "question": self.question,
            "golden_answers": list(self.golden_answers),
            "supporting_doc_ids": list(self.supporting_doc_ids),
            "hops": [{"doc_id": h.doc_id, "answer": h.answer} for h in self.hops],
            "template": self.template,
            "num_hops": self.num_hops,
        }
        if split is not None:
            row["split"] = split
        return row

    @classmethod
    def from_json(cls, row: dict) -> Question:
        return cls(
            id=str(row["id"]),
            question=str(row["question"]),
            golden_answers=tuple(str(a) for a in row["golden_answers"]),
            hops=tuple(Hop(str(h["doc_id"]), str(h["answer"])) for h in row.get("hops", ())),
            template=str(row.get("template", "")),
        )


@functools.lru_cache(maxsize=1 << 15)  # the gate checks every document many times over
def _containment_key(text: str) -> str:
    """Lowercase, punctuation to spaces, collapsed: "(1913–1960)" keeps both years."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(
        " " if ch in string.punctuation or unicodedata.category(ch).startswith("P") else ch
        for ch in text
    )
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def contains_answer(document_text: str, answer: str) -> bool:
    """Whether ``answer`` occurs in ``document_text`` as whole words."""
    needle = _containment_key(answer)
    return bool(needle) and f" {needle} " in f" {_containment_key(document_text)} "


def verify_question(question: Question, corpus: Corpus) -> bool:
    """Every hop's answer is in its document; the final answer is in a supporting one."""
    if not question.hops or not question.golden_answers:
        return False
    docs = {}
    for hop in question.hops:
        doc = corpus.get(hop.doc_id)
        if doc is None or not contains_answer(doc.contents, hop.answer):
            return False
        docs[hop.doc_id] = doc.contents
    return any(contains_answer(text, question.answer) for text in docs.values())
