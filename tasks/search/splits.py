"""Train / validation / test splits disjoint by question and by final answer.

Questions are grouped by answer: two questions share a group when any of their
normalised gold aliases coincide ("Euro" and "EUR" land together), so no final answer
of one split is an accepted answer in another. Each group is capped at
``max_per_answer`` questions (so "Euro" cannot dominate a split, and a policy cannot
score by always answering it), then whole groups are dealt to the splits in a
seed-determined order, each to the split furthest below its target share.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Literal

from tasks.search.grading import normalize_answer
from tasks.search.questions import Question

__all__ = ["SPLITS", "Split", "answer_groups", "split_questions"]

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


def split_questions(
    questions: Sequence[Question],
    seed: int = 0,
    max_per_answer: int = 20,
    fractions: dict[Split, float] = DEFAULT_FRACTIONS,
) -> dict[Split, list[Question]]:
    """Deal answer groups to splits; deterministic in ``seed``."""
    rng = random.Random(seed)
    groups = []
    for group in answer_groups(questions):
        group = sorted(group, key=lambda q: q.id)
        if len(group) > max_per_answer:
            group = sorted(rng.sample(group, max_per_answer), key=lambda q: q.id)
        groups.append(group)
    groups.sort(key=lambda g: _stable_rank(seed, g[0].id))
    out: dict[Split, list[Question]] = {s: [] for s in SPLITS}
    for group in groups:
        placed = sum(len(v) for v in out.values()) + len(group)
        split = max(SPLITS, key=lambda s: fractions[s] * placed - len(out[s]))
        out[split].extend(group)
    for split in SPLITS:
        out[split].sort(key=lambda q: q.id)
    return out
