"""The ambiguity filter: keep a question only if every plausible reading agrees.

For a drafted question and its ground truth the filter

1. rejects answers that are not proper answers (NaN, infinities, empty lists or
   strings) — e.g. a filter that matched no row of this variant;
2. rejects float answers within 1e-6 of a rounding half-way point at the stated
   decimals, where two honest roundings differ;
3. runs the reference code with each knob's alternatives (ddof 0 vs 1, skipna, strict
   vs inclusive bounds, first vs last among ties) and rejects the question if any
   alternative gives a *valid* answer that does not score as correct against the truth.
   An alternative that raises or gives NaN is not a competing answer (nobody could
   submit it), so it is recorded and ignored;
4. re-runs the canonical code on a copy of the files whose float measurements carry
   relative noise of 1e-9 and rejects the question if the answer flips — this catches
   exact ties between float values and thresholds that sit on a data value.
"""

from __future__ import annotations

import io
import math
import pathlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from tasks.data_analysis.errors import ReferenceCodeError
from tasks.data_analysis.grading import score_answer
from tasks.data_analysis.reference import answer_arguments, is_valid_answer, run_reference
from tasks.data_analysis.schema import AnswerSchema
from tasks.data_analysis.tables import table_csv
from tasks.data_analysis.templates import RenderedQuestion
from tasks.data_analysis.variants import TableVariant

__all__ = ["Verdict", "check_question", "near_rounding_boundary", "noisy_copy", "NOISE"]

NOISE = 1e-9
"""Relative float noise of the stability check (far above float64's 1e-16 and the
differences between numpy/pandas versions, far below any stated tolerance)."""


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str
    alternatives_checked: int = 0
    alternatives_invalid: int = 0


def near_rounding_boundary(schema: AnswerSchema, truth: Any, width: float = 1e-6) -> bool:
    """Whether a float answer sits within ``width`` (in units of its last decimal) of a
    half-way point, where rounding direction depends on noise."""
    pairs: list[tuple[float, int]] = []
    if schema.kind == "float":
        pairs.append((float(truth), schema.decimals or 0))
    elif schema.kind == "fields":
        pairs += [(float(truth[f.name]), f.decimals or 0) for f in schema.fields if f.kind == "float"]
    for value, decimals in pairs:
        scaled = abs(value) * 10.0**decimals
        if abs(scaled - math.floor(scaled) - 0.5) < width:
            return True
    return False


Scorer = Callable[[AnswerSchema, Any, Any], Any]
"""A scorer like :func:`~tasks.data_analysis.grading.score_answer` (result has ``reward``)."""


def _agrees(schema: AnswerSchema, candidate: Any, truth: Any, score: Scorer = score_answer) -> bool:
    return score(schema, answer_arguments(schema, candidate), truth).reward == 1.0


def noisy_copy(variant: TableVariant, rng: np.random.Generator, noise: float = NOISE) -> bytes:
    """The variant's CSV with its float measurement columns jittered by ``noise`` (relative)."""
    df = pd.read_csv(io.BytesIO(variant.data))
    spec = variant.spec
    skip = {variant.col(c) for c in (*spec.no_missing(), *spec.category)}
    for col in df.columns:
        if col not in skip and pd.api.types.is_float_dtype(df[col]):
            df[col] = df[col] * (1.0 + noise * rng.standard_normal(len(df)))
    return table_csv(df)


def _try(code: str) -> tuple[bool, Any]:
    try:
        return True, run_reference(code)
    except ReferenceCodeError:
        return False, None


def check_question(
    question: RenderedQuestion,
    truth: Any,
    data_dir: pathlib.Path,
    variants: tuple[TableVariant, ...],
    rng: np.random.Generator,
    *,
    score: Scorer = score_answer,
    noise: float = NOISE,
    boundary: float = 1e-6,
) -> Verdict:
    """Apply the four checks above; ``data_dir`` holds the variant files.

    ``score``, ``noise`` and ``boundary`` (the half-way band, in units of the last decimal)
    let a task version with a stricter scorer (DataAnalysis-v2) check with its own."""
    schema = question.template.schema
    if not is_valid_answer(schema, truth):
        return Verdict(False, f"not a proper answer: {truth!r}")
    if near_rounding_boundary(schema, truth, boundary):
        return Verdict(False, "float answer sits on a rounding half-way point")
    checked = invalid = 0
    for knobs in question.template.knob_alternatives():
        checked += 1
        ran, alt = _try(question.code(str(data_dir), knobs))
        if not ran or not is_valid_answer(schema, alt):
            invalid += 1
            continue
        if not _agrees(schema, alt, truth, score):
            changed = {k: v for k, v in knobs.items() if v != question.template.knobs[k][0]}
            return Verdict(False, f"alternative reading {changed} gives {alt!r}", checked, invalid)
    noisy_dir = data_dir / "noisy"
    noisy_dir.mkdir(exist_ok=True)
    for v in variants:
        (noisy_dir / v.file).write_bytes(noisy_copy(v, rng, noise))
    ran, noisy = _try(question.code(str(noisy_dir)))
    if not ran or not is_valid_answer(schema, noisy) or not _agrees(schema, noisy, truth, score):
        return Verdict(False, f"answer flips under float noise: {noisy!r}", checked, invalid)
    return Verdict(True, "ok", checked, invalid)
