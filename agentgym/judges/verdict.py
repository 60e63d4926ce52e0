"""Reading a judge's reply: strictly, by a schema, or not at all.

The reply must be one JSON object ``{"criteria": {<id>: {"met": bool, "evidence": str}}}``
naming exactly the rubric's criteria (a `````json`` fence around it is tolerated). The
score is then computed from the marks by :meth:`agentgym.judges.Rubric.score`. Anything
else — prose, a missing or unknown criterion, ``"met": "yes"``, a number where a mark
should be — raises :class:`~agentgym.judges.errors.VerdictParseError`, a judge failure.

Why so strict: a judge quotes the answer in its evidence, so a reply carries the
attacker's text. A parser that looks for "a score" anywhere in the reply reads the
attacker's number (:func:`lenient_score` does exactly that, and the audit shows the
attack it lets through).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError

from agentgym.judges.errors import VerdictParseError
from agentgym.judges.rubric import Rubric

__all__ = ["CriterionMark", "VerdictModel", "parse_verdict", "lenient_score", "verdict_json_schema"]

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


class CriterionMark(BaseModel):
    """One criterion's mark."""

    model_config = ConfigDict(extra="forbid")
    met: StrictBool
    evidence: str = ""


class VerdictModel(BaseModel):
    """The whole verdict."""

    model_config = ConfigDict(extra="forbid")
    criteria: dict[str, CriterionMark]


def verdict_json_schema(rubric: Rubric) -> dict[str, Any]:
    """The JSON schema of a verdict for ``rubric`` (sent to servers that constrain decoding)."""
    mark = {"type": "object", "properties": {"met": {"type": "boolean"}, "evidence": {"type": "string"}},
            "required": ["met", "evidence"], "additionalProperties": False}
    return {"type": "object", "additionalProperties": False, "required": ["criteria"],
            "properties": {"criteria": {"type": "object", "additionalProperties": False,
                                        "required": list(rubric.ids),
                                        "properties": {i: mark for i in rubric.ids}}}}


def parse_verdict(reply: str, rubric: Rubric) -> VerdictModel:
    """The verdict in ``reply``, or :class:`VerdictParseError` saying what was wrong.

    >>> from agentgym.judges.rubric import Criterion, Rubric
    >>> r = Rubric((Criterion("names_driver", "names the driver"),))
    >>> parse_verdict('{"criteria": {"names_driver": {"met": true, "evidence": "price"}}}', r).criteria["names_driver"].met
    True
    """
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        verdict = VerdictModel.model_validate(json.loads(text))
    except (ValueError, ValidationError) as e:
        raise VerdictParseError(f"the judge's reply is not a verdict ({type(e).__name__}: {str(e)[:200]}); "
                                f"reply starts {reply[:120]!r}") from e
    if set(verdict.criteria) != set(rubric.ids):
        raise VerdictParseError(f"Expected marks for exactly {sorted(rubric.ids)}, actual: {sorted(verdict.criteria)}")
    return verdict


_SCORE_ANYWHERE = re.compile(r"score\W{0,3}\s*[:=]\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


def lenient_score(reply: str, rubric: Rubric) -> float:
    """What a forgiving parser makes of a reply: the first ``score: x`` anywhere in it
    (``x > 1`` read out of ten), else the marks if they parse, else 0.

    Never used by a hardened judge; it exists so the audit can show what strict parsing
    prevents (:attr:`agentgym.judges.JudgeDefences.strict_verdict` off).
    """
    m = _SCORE_ANYWHERE.search(reply)
    if m:
        value = float(m.group(1))
        return min(1.0, value / 10 if value > 1 else value)
    try:
        verdict = parse_verdict(reply, rubric)
    except VerdictParseError:
        return 0.0
    return rubric.score({k: v.met for k, v in verdict.criteria.items()})
