"""DataAnalysis-v2's tolerance: half a unit of the last decimal asked for, no relative term."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.data_analysis.grading import score_answer
from tasks.data_analysis.grading_v2 import float_tolerance_v2, score_answer_v2
from tasks.data_analysis.schema import AnswerSchema, Field

FOUR = AnswerSchema("float", decimals=4)


@pytest.mark.parametrize("answer, ok", [
    (13293.93, True), (13293.9300, True), (13293.93004, True), (13293.929951, True),
    (13293.93006, False), (13293.92994, False), (13293.94, False), (13295.0, False), (13292.6, False),
])
def test_four_decimals_of_a_large_answer_accept_only_half_a_unit(answer, ok):
    assert score_answer_v2(FOUR, {"value": answer}, 13293.93).reward == float(ok)


def test_v1_accepted_what_v2_refuses():
    """The audit's example: v1's relative term accepted 13293.93 +- 1.33 at 4 decimals."""
    assert score_answer(FOUR, {"value": 13295.0}, 13293.93).reward == 1.0
    assert score_answer_v2(FOUR, {"value": 13295.0}, 13293.93).reward == 0.0


@pytest.mark.parametrize("decimals", [0, 1, 2, 3, 4])
def test_a_correctly_rounded_answer_always_scores(decimals):
    rng = np.random.default_rng(decimals)
    schema = AnswerSchema("float", decimals=decimals)
    for _ in range(2000):
        truth = float(rng.choice([-1, 1]) * 10 ** rng.uniform(-3, 7))
        scaled = abs(truth) * 10**decimals
        if abs(scaled - np.floor(scaled) - 0.5) < 1e-4:  # the generator drops these truths
            continue
        assert score_answer_v2(schema, {"value": round(truth, decimals)}, truth).reward == 1.0
        wrong = round(truth, decimals) + np.sign(truth) * 10.0 ** -decimals
        assert score_answer_v2(schema, {"value": wrong}, truth).reward == 0.0


def test_tolerance_has_only_float64_slack_beyond_half_a_unit():
    assert 0.5e-4 < float_tolerance_v2(13293.93, 4) <= 0.5e-4 + 1e-9
    assert 0.005 < float_tolerance_v2(0.001, 2) <= 0.005 + 1e-13


def test_fields_use_each_fields_decimals():
    schema = AnswerSchema("fields", fields=(Field("group", "str"), Field("value", "float", 2)))
    assert score_answer_v2(schema, {"group": "A", "value": 1.234}, {"group": "a", "value": 1.2344}).reward == 1.0
    assert score_answer_v2(schema, {"group": "A", "value": 1.24}, {"group": "a", "value": 1.2344}).reward == 0.0
