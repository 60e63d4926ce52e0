"""What a question dataset is made of, per split: the facts ``agentgym dataset-report`` prints.

A report says, for every split, how many questions each template and each hop count
has, how many distinct answers each hop count has, how far apart the splits' shares are
(percentage points), how many questions of validation and test share an accepted answer
with train (the answer overlap the splits were built to avoid, measured rather than
assumed), which templates are two-way choices (chance 50%) and their share, and what the
quality gate dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from tasks.search.grading import normalize_answer
from tasks.search.quality import QualityAudit
from tasks.search.questions import Question
from tasks.search.splits import split_balance
from tasks.search.templates import TEMPLATES, match_template

__all__ = ["dataset_report"]

_V1_CHOICES = {name: 2 if t.kind == "comparison" else 0 for name, t in TEMPLATES.items()}


def _answer_overlap(splits: Mapping[str, Sequence[Question]], reference: str = "train") -> dict[str, float]:
    seen = {normalize_answer(a) for q in splits.get(reference, ()) for a in q.golden_answers}
    out = {}
    for split, questions in splits.items():
        if split != reference and questions:
            shared = sum(any(normalize_answer(a) in seen for a in q.golden_answers) for q in questions)
            out[split] = shared / len(questions)
    return out


Matcher = Callable[[str], list[str]]


def _broken_wording(splits: Mapping[str, Sequence[Question]], match: Matcher, known: Collection[str]) -> list[str]:
    """Ids of bundled-template questions whose text does not read as their template (and it only)."""
    return [q.id for qs in splits.values() for q in qs if q.template in known and match(q.question) != [q.template]]


def _two_way(splits: Mapping[str, Sequence[Question]], choices: Mapping[str, int]) -> dict[str, Any]:
    """Templates that pick one of two named options: their chance level and share of each split."""
    two = sorted(t for t, n in choices.items() if n == 2)
    return {t: {"chance": 0.5, "share": {s: round(sum(q.template == t for q in qs) / max(len(qs), 1), 4)
                                         for s, qs in splits.items()}} for t in two}


def _distinct_answers(questions: Sequence[Question]) -> dict[int, int]:
    """Per hop count, how many different answers (normalised first gold) the questions have."""
    answers: dict[int, set[str]] = {}
    for q in questions:
        answers.setdefault(q.num_hops, set()).add(normalize_answer(q.answer))
    return {h: len(a) for h, a in sorted(answers.items())}


def dataset_report(splits: Mapping[str, Sequence[Question]], audit: QualityAudit | None = None,
                   match: Matcher = match_template, choices: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Per-split template and hop histograms, their largest gaps, answer overlap, two-way
    choices and the audit.

    ``match`` reads a text's template (v1's by default; Search-v2 passes its own), and
    ``choices`` says how many options each template names (2: a two-way choice; default:
    v1's comparisons).

    >>> from tasks.search.questions import Hop
    >>> q = Question("a", "What?", ("x",), (Hop("d", "x"),), "t")
    >>> dataset_report({"train": [q], "test": [q]})["max_gap_pp"]
    {'template': 0.0, 'hops': 0.0}
    """
    return {
        "sizes": {s: len(qs) for s, qs in splits.items()},
        "templates": {s: dict(sorted(Counter(q.template for q in qs).items())) for s, qs in splits.items()},
        "hops": {s: dict(sorted(Counter(q.num_hops for q in qs).items())) for s, qs in splits.items()},
        "distinct_answers": {s: _distinct_answers(qs) for s, qs in splits.items()},
        "max_gap_pp": {"template": round(split_balance(splits, lambda q: q.template), 2),
                       "hops": round(split_balance(splits, lambda q: q.num_hops), 2)},
        "answer_overlap_with_train": {s: round(v, 4) for s, v in _answer_overlap(splits).items()},
        "broken_wording": _broken_wording(splits, match, TEMPLATES if choices is None else choices),
        "two_way_choices": _two_way(splits, _V1_CHOICES if choices is None else choices),
        "audit": None if audit is None else {"rejected_by_reason": dict(audit.by_reason().most_common()),
                                             **audit.to_json()},
    }
