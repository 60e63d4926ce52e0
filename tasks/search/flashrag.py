"""FlashRAG-format QA files: the standard evaluation sets Search-R1 reports on.

FlashRAG ships NQ, HotpotQA, 2WikiMultihopQA, MuSiQue and Bamboogle (among others) as
one jsonl file per split, one question a line::

    {"id": "test_0", "question": "...", "golden_answers": ["...", "..."], "metadata": {...}}

``golden_answers`` lists every accepted answer (NQ's several annotations, MuSiQue's
aliases, HotpotQA's "yes"/"no"); ``metadata`` is per data set (HotpotQA's ``type`` and
``level``, MuSiQue's decomposition, ...) and is kept but never read by scoring.

The same files load as Search env questions (``gym.make(..., qa_path=...)``): rows
without a ``split`` serve every split, and the env's reward on them is Search-R1's exact
match over ``golden_answers`` (``tasks.search.search_r1_metrics``). Score a file of
predictions with ``mean_scores(predictions, golden_answers_by_id(read_flashrag_jsonl(p)))``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tasks.search.jsonl import RowReader, jsonl_rows

__all__ = ["FLASHRAG_DATASETS", "FlashRAGExample", "FlashRAGFormatError", "golden_answers_by_id", "read_flashrag_jsonl"]

FLASHRAG_DATASETS = ("nq", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
"""The FlashRAG data sets Search-R1 evaluates on (its other two, TriviaQA and PopQA, share the format)."""

_EXPECTED = 'a JSON object with "id", "question" and "golden_answers" (FlashRAG QA format)'


class FlashRAGFormatError(ValueError):
    """A line of a FlashRAG QA file is not ``{"id", "question", "golden_answers", ...}``."""


@dataclass(frozen=True)
class FlashRAGExample:
    id: str
    question: str
    golden_answers: tuple[str, ...]
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)


def _example(row: RowReader, lineno: int) -> FlashRAGExample:
    metadata = row.row.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise row.fail(f'expected "metadata" to be an object, actual value: {type(metadata).__name__}')
    return FlashRAGExample(
        id=row.optional_string("id") or f"qa-{lineno}",
        question=row.string("question"),
        golden_answers=tuple(row.string_list("golden_answers", allow_single=True)),
        metadata=metadata or {},
    )


def read_flashrag_jsonl(path: str | os.PathLike[str]) -> tuple[FlashRAGExample, ...]:
    """Every question of a FlashRAG QA file, in file order.

    Strict like the env's reader: a wrong type, a blank answer or a repeated id is a
    ``FlashRAGFormatError`` naming the file and line (a row without an id gets ``qa-<line>``).
    """
    examples: list[FlashRAGExample] = []
    seen: dict[str, int] = {}
    for lineno, raw in jsonl_rows(path, FlashRAGFormatError, _EXPECTED):
        row = RowReader(raw, path, lineno, FlashRAGFormatError)
        example = _example(row, lineno)
        if example.id in seen:
            raise row.fail(f"id {example.id!r} is already used on line {seen[example.id]}; ids must be unique")
        seen[example.id] = lineno
        examples.append(example)
    if not examples:
        raise FlashRAGFormatError(f"{path}: no questions; expected one {_EXPECTED} per line")
    return tuple(examples)


def golden_answers_by_id(examples: Sequence[FlashRAGExample]) -> dict[str, tuple[str, ...]]:
    """``{id: golden_answers}``, what ``mean_scores`` takes."""
    return {e.id: e.golden_answers for e in examples}
