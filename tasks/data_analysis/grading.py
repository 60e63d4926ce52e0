"""Scoring a final answer against the ground truth, strictly and by code.

Rules (the whole contract; tests pin each one):

- integers: exact. A JSON number with an integral value (``3.0``) counts as that
  integer; ``True``/``False`` and strings never count.
- floats: ``|x - truth| <= max(0.5 * 10**-d, 1e-4 * |truth|)`` where ``d`` is the
  number of decimals the question states. NaN and infinities score 0.
- strings: equal after Unicode NFKC, casefold and strip. NFKC maps compatibility
  forms (full-width letters) to plain ones; look-alike letters from other scripts stay
  different and score 0.
- lists: equal as sets of normalised strings; a duplicate item scores 0 (no spraying).
- several fields: all-or-nothing reward; the fraction right goes to diagnostics.
- the answer object must have exactly the expected keys: a missing, extra or
  duplicated key scores 0; a numeric field must be one JSON number, never text that
  contains numbers and never a list of candidates.
"""

from __future__ import annotations

import json
import math
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable

from tasks.data_analysis.schema import AnswerSchema

Tolerance = Callable[[float, int], float]
"""``(truth, decimals) -> largest accepted |answer - truth|`` for a float answer."""

__all__ = [
    "Score",
    "float_tolerance",
    "normalise_text",
    "score_answer",
    "score_answer_json",
    "parse_answer_json",
    "DuplicateKeyError",
]

_SLACK = 1e-9
"""Relative slack on the float tolerance so a correctly rounded value at exactly the
half-way point (and its binary representation error) still counts."""


class DuplicateKeyError(ValueError):
    """An answer object repeated a key; which occurrence is meant is undefined."""


@dataclass(frozen=True)
class Score:
    reward: float
    correct_fraction: float
    reason: str
    per_field: dict[str, bool] = field(default_factory=dict)

    def diagnostics(self) -> dict[str, Any]:
        return {
            "correct_fraction": self.correct_fraction,
            "score_reason": self.reason,
            "field_correct": dict(self.per_field),
        }


def float_tolerance(truth: float, decimals: int) -> float:
    return max(0.5 * 10.0 ** (-decimals), 1e-4 * abs(truth)) * (1.0 + _SLACK)


def normalise_text(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().strip()


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _match_scalar(kind: str, decimals: int | None, got: Any, truth: Any,
                  tolerance: Tolerance = float_tolerance) -> tuple[bool, str]:
    if kind == "int":
        if not _is_number(got) or not math.isfinite(got) or float(got) != int(got):
            return False, "not an integer"
        return int(got) == int(truth), "compared"
    if kind == "float":
        if not _is_number(got) or not math.isfinite(got):
            return False, "not a finite number"
        return abs(float(got) - float(truth)) <= tolerance(float(truth), decimals or 0), "compared"
    if kind == "str":
        if not isinstance(got, str):
            return False, "not a string"
        return normalise_text(got) == normalise_text(str(truth)), "compared"
    if kind == "list":
        if not isinstance(got, list) or not all(isinstance(x, str) for x in got):
            return False, "not a list of strings"
        items = [normalise_text(x) for x in got]
        if len(set(items)) != len(items):
            return False, "duplicate list items"
        return set(items) == {normalise_text(str(t)) for t in truth}, "compared"
    raise ValueError(f"Expected a scalar answer kind, actual value: {kind!r}")


def score_answer(schema: AnswerSchema, answer: Any, truth: Any, *, tolerance: Tolerance = float_tolerance) -> Score:
    """Score a decoded answer object (a dict) against the truth.

    ``truth`` is the reference value for scalar kinds, a dict for ``fields``; ``tolerance``
    is v1's :func:`float_tolerance` unless a task version brings its own.
    """
    if not isinstance(answer, dict):
        return Score(0.0, 0.0, "answer is not an object")
    expected = set(schema.keys())
    if set(answer) != expected:
        extra = sorted(set(answer) - expected)
        missing = sorted(expected - set(answer))
        return Score(0.0, 0.0, f"wrong keys (extra {extra}, missing {missing})")
    if schema.kind != "fields":
        ok, why = _match_scalar(schema.kind, schema.decimals, answer["value"], truth, tolerance)
        return Score(float(ok), float(ok), "correct" if ok else f"wrong ({why})", {"value": ok})
    per_field = {}
    for f in schema.fields:
        per_field[f.name] = _match_scalar(f.kind, f.decimals, answer[f.name], truth[f.name], tolerance)[0]
    frac = sum(per_field.values()) / len(per_field)
    reward = 1.0 if all(per_field.values()) else 0.0
    return Score(reward, frac, "correct" if reward else "some fields wrong", per_field)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise DuplicateKeyError(f"duplicate keys {dup}")
    return dict(pairs)


def parse_answer_json(text: str) -> Any:
    """Decode JSON, rejecting duplicate keys at any depth (``json`` keeps the last one)."""
    return json.loads(text, object_pairs_hook=_no_duplicates)


def score_answer_json(schema: AnswerSchema, text: str, truth: Any) -> Score:
    """Score the raw JSON text of an answer's arguments (sees duplicate keys)."""
    try:
        answer = parse_answer_json(text)
    except DuplicateKeyError as e:
        return Score(0.0, 0.0, str(e))
    except ValueError:
        return Score(0.0, 0.0, "answer is not valid JSON")
    return score_answer(schema, answer, truth)
