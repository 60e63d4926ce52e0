"""Train / validation / test splits drawn alike, disjoint by question and by final answer.

Questions are grouped by answer: two questions share a group when any of their
normalised gold aliases coincide ("Euro" and "EUR" land together), and a group goes to
one split whole, so no final answer of one split is an accepted answer in another. For
the splits to be drawn from the same distribution, a group keeps at most
``max_per_answer`` questions *per template* (so "English" or "Moscow" cannot dominate a
template), and groups are dealt, largest first, each to the split whose template counts
are furthest below their target share: every template, and so every hop count, ends up
in train, validation and test in the same proportions. ``split_balance`` measures
that (the largest gap in percentage points between two splits' shares).
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Literal

from tasks.search.grading import normalize_answer
from tasks.search.questions import Question

__all__ = ["SPLITS", "Split", "answer_groups", "shares", "split_balance", "split_questions"]

Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")
DEFAULT_FRACTIONS: dict[Split, float] = {"train": 0.8, "validation": 0.1, "test": 0.1}


def answer_groups(questions: Sequence[Question]) -> list[list[Question]]:
    """Connected components of questions linked by a shared normalised alias."""
    parent = list(range(len(questions)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, q in enumerate(questions):
        for alias in q.golden_answers:
            key = normalize_answer(alias)
            if key in owner:
                parent[find(i)] = find(owner[key])
            else:
                owner[key] = i
    groups: dict[int, list[Question]] = {}
    for i, q in enumerate(questions):
        groups.setdefault(find(i), []).append(q)
    return list(groups.values())


def _stable_rank(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def _capped(group: list[Question], max_per_answer: int, rng: random.Random) -> list[Question]:
    by_template: dict[str, list[Question]] = {}
    for q in sorted(group, key=lambda q: q.id):
        by_template.setdefault(q.template, []).append(q)
    out: list[Question] = []
    for template in sorted(by_template):
        qs = by_template[template]
        out.extend(qs if len(qs) <= max_per_answer else rng.sample(qs, max_per_answer))
    return sorted(out, key=lambda q: q.id)


def _best_split(group: list[Question], placed: Counter, counts: dict[Split, Counter], totals: Counter,
                fractions: dict[Split, float]) -> Split:
    """The split that most needs this group's templates, each template's need scaled by its size."""
    sizes = Counter(q.template for q in group)

    def need(split: Split) -> float:
        f = fractions[split]
        return sum(n * (f * (placed[t] + n) - counts[split][t]) / (f * totals[t]) for t, n in sizes.items())

    return max(SPLITS, key=need)


def split_questions(
    questions: Sequence[Question],
    seed: int = 0,
    max_per_answer: int = 12,
    fractions: dict[Split, float] = DEFAULT_FRACTIONS,
) -> dict[Split, list[Question]]:
    """Deal capped answer groups to splits so every template keeps its share; deterministic in ``seed``."""
    rng = random.Random(seed)
    groups = [_capped(g, max_per_answer, rng) for g in answer_groups(questions)]
    groups.sort(key=lambda g: (-len(g), _stable_rank(seed, g[0].id)))
    totals = Counter(q.template for g in groups for q in g)
    placed: Counter = Counter()
    counts: dict[Split, Counter] = {s: Counter() for s in SPLITS}
    out: dict[Split, list[Question]] = {s: [] for s in SPLITS}
    for group in groups:
        split = _best_split(group, placed, counts, totals, fractions)
        out[split].extend(group)
        for q in group:
            placed[q.template] += 1
            counts[split][q.template] += 1
    for split in SPLITS:
        out[split].sort(key=lambda q: q.id)
    return out


def shares(questions: Sequence[Question], key: Callable[[Question], object]) -> dict[object, float]:
    """Each value's share of the questions (``key`` is e.g. the template or the hop count)."""
    counts = Counter(key(q) for q in questions)
    total = sum(counts.values()) or 1
    return {k: n / total for k, n in counts.items()}


def split_balance(splits: dict[str, Sequence[Question]], key: Callable[[Question], object]) -> float:
    """The largest gap, in percentage points, between two splits' shares of one value of ``key``."""
    per_split = [shares(qs, key) for qs in splits.values() if qs]
    values = {v for s in per_split for v in s}
    return max((100 * (max(s.get(v, 0.0) for s in per_split) - min(s.get(v, 0.0) for s in per_split))
                for v in values), default=0.0)
