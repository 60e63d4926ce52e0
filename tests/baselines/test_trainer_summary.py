"""The run summary's held-out figures: binomial standard errors and the gain's."""

import math

import pytest

from baselines.trainer import _eval_summary, _gains


def test_standard_errors_and_gain():
    before = _eval_summary({"eval/success_rate": 0.25, "eval/sampled_success_rate": 0.1, "eval/episodes": 100.0}, "before")
    after = _eval_summary({"eval/success_rate": 0.5, "eval/sampled_success_rate": 0.1, "eval/episodes": 100.0}, "after")
    assert before["eval/success_before_se"] == pytest.approx(math.sqrt(0.25 * 0.75 / 100))
    assert after["eval/success_after_se"] == pytest.approx(0.05)
    gains = _gains({**before, **after})
    assert gains["eval/success_gain"] == pytest.approx(0.25)
    assert gains["eval/success_gain_se"] == pytest.approx(math.hypot(math.sqrt(0.25 * 0.75 / 100), 0.05))
    assert gains["eval/sampled_success_gain"] == pytest.approx(0.0)


def test_no_sampled_evaluation_gives_no_sampled_figures():
    summary = _eval_summary({"eval/success_rate": 1.0, "eval/episodes": 8.0}, "before")
    assert summary == {"eval/success_before": 1.0, "eval/success_before_se": 0.0}
    assert _gains(summary) == {}
