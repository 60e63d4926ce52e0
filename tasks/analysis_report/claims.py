"""Checking a report's claims against the table, by code.

Two kinds of check, both on the report's text:

* **every figure is a fact** — each number in the report must be one of the table's
  facts: some column's r with the target (to 2 decimals, sign included when written),
  some row count, the table's row count, or the report's word limit;
* **the required claims are made** — the driver named, its r stated, its row count stated.

A report with any figure that is not a fact fails outright (score 0); otherwise its
score is the share of required claims it makes. A number that is part of a name
(``s1``, ``bill_length_mm``) is not a figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tasks.analysis_report.generator import MAX_REPORT_WORDS, ReportQuestion

__all__ = ["ClaimCheck", "check_claims", "numbers_in"]

_NUMBER = re.compile(r"(?<![\w.])[-\u2212]?\d+(?:\.\d+)?(?![\w]|\.\d)")
_R_TOLERANCE = 0.0051


@dataclass(frozen=True)
class ClaimCheck:
    """The outcome: ``score`` in [0, 1], the claims made, and what was wrong."""

    score: float
    made: tuple[str, ...]
    failed: tuple[str, ...]


def numbers_in(text: str) -> list[float]:
    """The figures in ``text`` (not digits inside names).

    >>> numbers_in("s1 has r = -0.45 over 120 rows; bill_length_mm 3.")
    [-0.45, 120.0, 3.0]
    """
    return [float(m.group(0).replace("\u2212", "-")) for m in _NUMBER.finditer(text)]


def _is_fact(x: float, q: ReportQuestion) -> bool:
    if float(x).is_integer() and (int(x) in {f.n for f in q.facts} or int(x) in (q.rows, MAX_REPORT_WORDS)):
        return True
    return any(abs(x - f.r) <= _R_TOLERANCE or (x > 0 and abs(x - abs(f.r)) <= _R_TOLERANCE) for f in q.facts)


def _names(text: str, column: str) -> bool:
    flat = re.sub(r"[\s_]+", " ", text.casefold())
    return re.search(rf"(?<!\w){re.escape(column.casefold().replace('_', ' '))}(?!\w)", flat) is not None


def check_claims(report: str, q: ReportQuestion) -> ClaimCheck:
    """Check ``report`` against ``q``'s facts (see the module docstring)."""
    numbers = numbers_in(report)
    wrong = [x for x in numbers if not _is_fact(x, q)]
    if wrong:
        return ClaimCheck(0.0, (), tuple(f"{x:g} is not a figure of the table" for x in wrong))
    d = q.driver
    claims = {"names the driver": _names(report, d.column),
              "states its r": any(abs(abs(x) - abs(d.r)) <= _R_TOLERANCE and not float(x).is_integer() for x in numbers),
              "states its row count": d.n in [int(x) for x in numbers if float(x).is_integer()]}
    made = tuple(k for k, v in claims.items() if v)
    return ClaimCheck(len(made) / len(claims), made, tuple(f"{k}: missing" for k, v in claims.items() if not v))
