"""Rubrics: what a judge checks, criterion by criterion, and what it knows to check it.

A rubric is a list of yes/no criteria with weights. The judge marks each one met or not
(with a short quote as evidence); the score is computed *by code* from those marks, so a
judge never states a number that could be read off a quoted answer. Each criterion may
carry reference notes (``reference``): what a correct answer says, for the judge's eyes
only (the agent never sees the rubric's references).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field

__all__ = ["Criterion", "Rubric"]

_ID = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


@dataclass(frozen=True)
class Criterion:
    """One yes/no criterion.

    Attributes:
        id: a short snake_case name (the verdict's key).
        description: what must be true of the answer, as the judge reads it.
        weight: its share of the score (positive).
        reference: what a correct answer states for this criterion (terms, ``|`` between
            alternatives); shown to the judge, never to the agent.
    """

    id: str
    description: str
    weight: float = 1.0
    reference: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _ID.match(self.id):
            raise ValueError(f"Expected a snake_case criterion id of at most 40 characters, actual value: {self.id!r}")
        if not self.weight > 0:
            raise ValueError(f"Expected a positive weight for criterion {self.id!r}, actual value: {self.weight}")


@dataclass(frozen=True)
class Rubric:
    """The criteria of one question (their ids are unique)."""

    criteria: tuple[Criterion, ...]
    name: str = "rubric"
    notes: tuple[str, ...] = field(default=())
    """General grading notes shown to the judge (e.g. "numbers are checked by code")."""

    def __post_init__(self) -> None:
        ids = [c.id for c in self.criteria]
        if not ids or len(set(ids)) != len(ids):
            raise ValueError(f"Expected at least one criterion and unique ids, actual ids: {ids}")

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.criteria)

    def score(self, met: dict[str, bool]) -> float:
        """The weighted share of criteria met (``met`` must name every criterion)."""
        total = sum(c.weight for c in self.criteria)
        return sum(c.weight for c in self.criteria if met[c.id]) / total

    def text(self) -> str:
        """The text any answer could echo: every description and note."""
        return "\n".join([*(c.description for c in self.criteria), *self.notes])

    def digest(self) -> str:
        """A hash of the rubric *without* its references (those change per task): the
        fingerprint records the rubric's shape this way."""
        shape = [[c.id, c.description, c.weight] for c in self.criteria] + [list(self.notes)]
        return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
