"""Verifiable grading of a single final answer against a list of gold aliases.

The reward is exact match after SQuAD-style normalisation, nothing else: F1 is reported
as a diagnostic only, and there is no format bonus. Two guards close the obvious
reward hacks on exact match with aliases:

* *spraying*: an answer that lists several candidates ("A, B or C", "A/B", "A and B")
  scores 0 unless a gold alias itself has that form ("Antigua and Barbuda");
* *length*: an answer longer than ``max_answer_chars`` scores 0.
"""

from __future__ import annotations

import collections
import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_MAX_ANSWER_CHARS",
    "Grade",
    "exact_match",
    "f1_score",
    "grade_answer",
    "list_separators",
    "normalize_answer",
]

DEFAULT_MAX_ANSWER_CHARS = 100

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = set(string.punctuation)

# Each separator kind an answer can use to list several candidates. The key is what a
# gold alias must also contain for the form to be allowed.
_LIST_SEPARATORS: dict[str, re.Pattern[str]] = {
    ",": re.compile(r","),
    "/": re.compile(r"/"),
    ";": re.compile(r";"),
    "|": re.compile(r"\|"),
    "&": re.compile(r"&"),
    "+": re.compile(r"\+"),
    "newline": re.compile(r"\n"),
    "or": re.compile(r"\bor\b", re.IGNORECASE),
    "and": re.compile(r"\band\b", re.IGNORECASE),
    "vs": re.compile(r"\bvs\b|\bversus\b", re.IGNORECASE),
}

GuardName = Literal["multiple_candidates", "too_long", "empty"]


def _is_punctuation(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and articles, collapse spaces.

    Unicode punctuation (en dashes, curly quotes) is dropped like ASCII punctuation, so
    a copy-pasted "Pa’anga" and a typed "Pa'anga" agree. Never raises on any ``str``.

    >>> normalize_answer("  The  Eiffel-Tower! ")
    'eiffeltower'
    """
    text = text.lower()
    text = "".join(ch for ch in text if not _is_punctuation(ch))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def list_separators(text: str) -> set[str]:
    """The list-separator kinds ("," "/" "or" ...) that occur in ``text``."""
    return {name for name, pattern in _LIST_SEPARATORS.items() if pattern.search(text)}


def exact_match(prediction: str, golds: Sequence[str]) -> bool:
    """True when the normalised prediction equals any normalised gold alias."""
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(gold) for gold in golds)


def _token_f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: Sequence[str]) -> float:
    """Best SQuAD token F1 of the prediction over the gold aliases (0.0 without golds)."""
    return max((_token_f1(prediction, gold) for gold in golds), default=0.0)


@dataclass(frozen=True)
class Grade:
    """The outcome of grading one final answer.

    ``reward`` is what the learner sees (1.0 or 0.0); everything else is a diagnostic.
    ``guard`` names the guard that zeroed the reward, if any.
    """

    reward: float
    exact_match: bool
    f1: float
    guard: GuardName | None
    normalized_answer: str


def _spraying(prediction: str, golds: Sequence[str]) -> bool:
    used = list_separators(prediction)
    if not used:
        return False
    allowed: set[str] = set()
    for gold in golds:
        allowed |= list_separators(gold)
    return not used <= allowed


def grade_answer(
    prediction: str | None,
    golds: Sequence[str],
    *,
    single_entity: bool = True,
    max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
) -> Grade:
    """Grade one final answer.

    Args:
        prediction: the agent's single final answer (``None`` when it gave none).
        golds: gold aliases of the one correct entity.
        single_entity: apply the spraying guard (all built-in questions are single-entity).
        max_answer_chars: answers longer than this (after stripping) score 0.
    """
    answer = (prediction or "").strip()
    normalized = normalize_answer(answer)
    em = exact_match(answer, golds) if normalized else False
    f1 = f1_score(answer, golds) if normalized else 0.0
    guard: GuardName | None = None
    if not normalized:
        guard = "empty"
    elif len(answer) > max_answer_chars:
        guard = "too_long"
    elif single_entity and _spraying(answer, golds):
        guard = "multiple_candidates"
    reward = 1.0 if em and guard is None else 0.0
    return Grade(reward=reward, exact_match=em, f1=f1, guard=guard, normalized_answer=normalized)
