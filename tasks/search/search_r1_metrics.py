"""The QA metrics Search-R1 and FlashRAG publish numbers with: EM, cover-EM and token F1.

Same semantics as Search-R1's ``verl/utils/reward_score/qa_em.py`` (``normalize_answer``,
``em_check``, ``subem_check``) and FlashRAG's ``flashrag/evaluator/metrics.py``
(``F1_Score``), so a score here is comparable to a score there:

* normalisation: ``str.lower``; drop ASCII punctuation (``string.punctuation`` only:
  an en dash or a curly quote stays, unlike ``tasks.search.grading``); replace the words
  a/an/the by a space; collapse whitespace. The order matters ("the." loses its dot
  before the article goes);
* EM: the normalised prediction equals a normalised gold;
* cover-EM (Search-R1's "subem", FlashRAG's "acc"): a normalised gold is a *substring*
  of the normalised prediction, by characters, not words ("1954" covers "19540");
* F1: the best token F1 over the golds, except that "yes", "no" and "noanswer" only
  match themselves (F1 0 otherwise).

This is a re-implementation from those semantics, checked on fixtures in the FlashRAG
formats (``tests/tasks/search/test_search_r1_metrics.py``).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["QAScores", "cover_exact_match", "exact_match_r1", "mean_scores", "normalize_r1", "qa_scores", "token_f1"]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})


def normalize_r1(text: str) -> str:
    """Search-R1's normalisation.

    >>> normalize_r1("The  Eiffel-Tower!"), normalize_r1("Lomé"), normalize_r1("1914–1918")
    ('eiffeltower', 'lomé', '1914–1918')
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _golds(golden_answers: str | Sequence[str]) -> list[str]:
    return [golden_answers] if isinstance(golden_answers, str) else list(golden_answers)


def exact_match_r1(prediction: str, golden_answers: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold (Search-R1's ``em_check``)."""
    pred = normalize_r1(prediction)
    return float(any(normalize_r1(gold) == pred for gold in _golds(golden_answers)))


def cover_exact_match(prediction: str, golden_answers: str | Sequence[str]) -> float:
    """1.0 when a normalised gold is a substring of the normalised prediction (``subem_check``)."""
    pred = normalize_r1(prediction)
    return float(any(normalize_r1(gold) in pred for gold in _golds(golden_answers)))


def token_f1(prediction: str, golden_answers: str | Sequence[str]) -> float:
    """Best token F1 over the golds, with FlashRAG's rule for yes/no/noanswer."""
    pred = normalize_r1(prediction)
    best = 0.0
    for gold in map(normalize_r1, _golds(golden_answers)):
        if (pred in _CLOSED_ANSWERS or gold in _CLOSED_ANSWERS) and pred != gold:
            continue
        pred_tokens, gold_tokens = pred.split(), gold.split()
        same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
        if same:
            precision, recall = same / len(pred_tokens), same / len(gold_tokens)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


@dataclass(frozen=True)
class QAScores:
    """One prediction's scores; ``em`` is the reward a Search-R1 run trains on."""

    em: float
    cover_em: float
    f1: float


def qa_scores(prediction: str, golden_answers: str | Sequence[str]) -> QAScores:
    return QAScores(exact_match_r1(prediction, golden_answers), cover_exact_match(prediction, golden_answers),
                    token_f1(prediction, golden_answers))


def mean_scores(predictions: Mapping[str, str], golden_answers: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Mean EM, cover-EM and F1 over every question of ``golden_answers`` (by id).

    A question without a prediction scores 0 on all three, as an unanswered question
    does in Search-R1's evaluation; a prediction for an unknown id is an error.
    """
    unknown = sorted(set(predictions) - set(golden_answers))
    if unknown:
        raise KeyError(f"Expected predictions for ids of the QA file, actual unknown ids: {unknown[:5]}")
    if not golden_answers:
        raise ValueError("Expected at least one question, actual value: none")
    rows = [qa_scores(predictions[i], golds) if i in predictions else QAScores(0.0, 0.0, 0.0)
            for i, golds in golden_answers.items()]
    n = len(rows)
    return {"em": sum(r.em for r in rows) / n, "cover_em": sum(r.cover_em for r in rows) / n,
            "f1": sum(r.f1 for r in rows) / n, "n": float(n)}
