"""The shortcut audit: how much of a question one search with the whole question already solves.

A question's hop count is a claim about the search it needs. The audit checks it per
template with two numbers, both from one query (the question text, top ``k`` documents):

* ``final_doc_in_top_k``: the share of questions whose final hop's document (the one that
  states the answer) is among the results;
* ``reader_solved``: the share a one-query reader (``tasks.search.reader``) answers right
  from those documents alone, graded by the task's own grader.

A template of two or more hops that the reader solves often needs fewer documents than it
claims. The search function is passed in (``agentgym dataset-report`` passes the env's
BM25 index), so this module stays free of any retrieval code.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from tasks.search.questions import Question
from tasks.search.reader import read_answer

__all__ = ["Grader", "SearchFn", "TemplateShortcut", "by_hops", "default_grader", "shortcut_audit"]

SearchFn = Callable[[str, int], Sequence[tuple[str, str]]]
"""``(query, k) -> [(doc_id, contents), ...]`` in rank order."""
Grader = Callable[[str, Question], float]
"""``(answer, question) -> reward``: the task's own scorer."""

TOP_K = 5


def default_grader(answer: str, question: Question) -> float:
    """Search-v1's scorer, for questions without an env (an env passes its family's ``grade``)."""
    from tasks.search.grading import grade_answer

    return grade_answer(answer, question.golden_answers).reward


@dataclass(frozen=True)
class TemplateShortcut:
    """One template's audit: its hop counts, size, and the two one-query rates."""

    template: str
    hops: int
    questions: int
    final_doc_in_top_k: float
    reader_solved: float
    distinct_answers: int

    def to_json(self) -> dict:
        return asdict(self)


def shortcut_audit(questions: Sequence[Question], search: SearchFn, grade: Grader = default_grader,
                   k: int = TOP_K) -> list[TemplateShortcut]:
    """Per template (sorted by hops, then name), the one-query rates over ``questions``.

    >>> from tasks.search.questions import Hop
    >>> q = Question("q", "What is the capital of Iran?", ("Tehran",), (Hop("country-IR", "Tehran"),), "t")
    >>> docs = [("country-IR", '"Iran (country profile)"\\nThe capital of Iran is Tehran.')]
    >>> shortcut_audit([q], lambda text, k: docs)[0].reader_solved
    1.0
    """
    found: Counter = Counter()
    solved: Counter = Counter()
    total: Counter = Counter()
    hops: dict[str, int] = {}
    answers: dict[str, set[str]] = defaultdict(set)
    for q in questions:
        results = list(search(q.question, k))[:k]
        total[q.template] += 1
        hops[q.template] = q.num_hops
        answers[q.template].add(q.answer)
        if q.hops and q.hops[-1].doc_id in {doc_id for doc_id, _ in results}:
            found[q.template] += 1
        if grade(read_answer(q.question, [contents for _, contents in results]), q) > 0:
            solved[q.template] += 1
    return [TemplateShortcut(t, hops[t], total[t], round(found[t] / total[t], 4), round(solved[t] / total[t], 4),
                             len(answers[t]))
            for t in sorted(total, key=lambda t: (hops[t], t))]


def by_hops(rows: Sequence[TemplateShortcut]) -> dict[int, dict[str, float]]:
    """The audit per hop count, weighted by questions."""
    out: dict[int, dict[str, float]] = {}
    for h in sorted({r.hops for r in rows}):
        group = [r for r in rows if r.hops == h]
        n = sum(r.questions for r in group)
        out[h] = {"questions": n,
                  "final_doc_in_top_k": round(sum(r.final_doc_in_top_k * r.questions for r in group) / n, 4),
                  "reader_solved": round(sum(r.reader_solved * r.questions for r in group) / n, 4)}
    return out
