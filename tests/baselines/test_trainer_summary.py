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


def test_the_paired_gain_error_is_the_error_of_the_mean_per_task_difference():
    from baselines.trainer import _paired_difference_sums, _paired_gain_se

    before, after = [0.0, 0.0, 1.0, 1.0], [1.0, 0.0, 1.0, 1.0]
    sums = _paired_difference_sums(before, after)
    assert sums == (4.0, 1.0, 1.0)
    # d = (1, 0, 0, 0): mean 0.25, sample variance 0.25, so the error of the mean is sqrt(0.25 / 4).
    assert _paired_gain_se(*sums) == pytest.approx(0.25)
    # A task that infrastructure failed (NaN) on either side is left out of the pairs.
    assert _paired_difference_sums([0.0, math.nan, 1.0], [1.0, 1.0, math.nan]) == (1.0, 1.0, 1.0)
    assert _paired_gain_se(1.0, 1.0, 1.0) is None  # one pair has no spread to estimate
    assert _paired_difference_sums(None, after) is None  # team envs give no per-task outcome


def test_correlated_outcomes_give_a_paired_error_below_the_unpaired_one():
    """The same 100 tasks before and after: the start solved 30, the end those 30 and 10
    more. Independent binomials put the gain's error at 0.067; the pairs know that only
    10 tasks changed, and put it at 0.030."""
    from baselines.trainer import _paired_difference_sums, _paired_gain_se

    before = [1.0] * 30 + [0.0] * 70
    after = [1.0] * 40 + [0.0] * 60
    unpaired = _gains({**_eval_summary({"eval/success_rate": 0.3, "eval/episodes": 100.0}, "before"),
                       **_eval_summary({"eval/success_rate": 0.4, "eval/episodes": 100.0}, "after")})["eval/success_gain_se"]
    paired = _paired_gain_se(*_paired_difference_sums(before, after))
    assert unpaired == pytest.approx(math.hypot(math.sqrt(0.21 / 100), math.sqrt(0.24 / 100)))
    assert paired == pytest.approx(math.sqrt((10 - 10 * 10 / 100) / 99 / 100))
    assert paired < unpaired / 2
