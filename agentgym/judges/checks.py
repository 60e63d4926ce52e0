"""Verifiable checks: facts in a judged answer that code can check, gating the judge.

A judge reads fluency; code reads numbers. An answer's checkable claims (the figures a
report quotes from a table, the entity it names) are checked first, by the task, and
the result *caps* the judge: the reward is ``min(judge score, check score)``, so an
answer that fails its checks cannot score above them however well it reads, and an
answer whose check score is 0 is not even sent to the judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["CheckResult", "VerifiableChecks", "gate"]


@dataclass(frozen=True)
class CheckResult:
    """The outcome of an answer's verifiable checks.

    Attributes:
        score: in [0, 1]; the cap on the answer's reward.
        passed: names of the checks that held.
        failed: ``name: why`` for each check that did not.
    """

    score: float
    passed: tuple[str, ...] = ()
    failed: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"Expected a check score in [0, 1], actual value: {self.score}")


class VerifiableChecks(Protocol):
    """Checks of one task's answer; called with the *normalised* answer text."""

    def __call__(self, answer: str) -> CheckResult: ...


def gate(judge_score: float, checks: CheckResult | None) -> float:
    """The reward: the judge's score capped by the checks (no checks: the judge's score).

    >>> gate(0.9, CheckResult(0.0, failed=("number 0.91: not in the table",)))
    0.0
    """
    return judge_score if checks is None else min(judge_score, checks.score)
