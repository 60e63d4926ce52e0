"""DataAnalysis-v2's scoring: v1's rules with a tolerance tied to the precision asked for.

v1 accepted ``max(0.5 * 10**-d, 1e-4 * |truth|)``: for a large answer the relative term
wins, so a question asking for 4 decimals of 13293.93 accepted +-1.33. v2 accepts exactly
what rounding to ``d`` decimals can change, half a unit of the last decimal, plus
float64's own error on the value (1e-14 relative, about 50 ulps): 13293.93 asked to 4 decimals accepts
+-0.00005. Everything else (integers exact, strings after NFKC and casefold, lists as sets
without duplicates, all-or-nothing fields, exact keys) is v1's
(:mod:`tasks.data_analysis.grading`).

The generator keeps this tolerance honest: v2 questions whose truth lies within 1e-4 of a
unit of the last decimal from a rounding half-way point are dropped
(:mod:`tasks.data_analysis.generator_v2`), so a correctly rounded answer computed with
another numpy or pandas version always scores.
"""

from __future__ import annotations

from typing import Any

from tasks.data_analysis.grading import Score, score_answer
from tasks.data_analysis.schema import AnswerSchema

__all__ = ["FLOAT64_SLACK", "float_tolerance_v2", "score_answer_v2"]

FLOAT64_SLACK = 1e-14
"""Relative slack for float64 arithmetic (summation order differs between versions)."""


def float_tolerance_v2(truth: float, decimals: int) -> float:
    """Half a unit of the last decimal asked for, plus float64's error on ``truth``."""
    return 0.5 * 10.0 ** (-decimals) + FLOAT64_SLACK * max(1.0, abs(truth))


def score_answer_v2(schema: AnswerSchema, answer: Any, truth: Any) -> Score:
    """:func:`~tasks.data_analysis.grading.score_answer` with :func:`float_tolerance_v2`.

    >>> four = AnswerSchema("float", decimals=4)
    >>> score_answer_v2(four, {"value": 13293.93004}, 13293.93).reward
    1.0
    >>> score_answer_v2(four, {"value": 13293.9301}, 13293.93).reward
    0.0
    """
    return score_answer(schema, answer, truth, tolerance=float_tolerance_v2)
