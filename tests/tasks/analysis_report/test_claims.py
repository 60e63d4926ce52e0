"""Report questions and the claim checks (no sandbox, no judge)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tasks.analysis_report import check_claims, generate_report_question, numbers_in


@pytest.fixture(scope="module")
def question():
    return generate_report_question(11)


def _truth(q) -> str:
    return q.report_from(q.driver.column, round(q.driver.r, 2), q.driver.n)


def test_questions_are_deterministic_and_have_one_clear_driver():
    a, b = generate_report_question(4), generate_report_question(4)
    assert a.text == b.text and a.files == b.files and a.driver == b.driver
    ranked = sorted((abs(f.r) for f in a.facts), reverse=True)
    assert ranked[0] - ranked[1] >= 0.03 and ranked[0] >= 0.2


def test_the_oracle_report_makes_every_claim(question):
    check = check_claims(_truth(question), question)
    assert check.score == 1.0 and not check.failed


def test_one_wrong_figure_fails_the_report(question):
    d = question.driver
    wrong = _truth(question).replace(f"{d.r:.2f}", f"{d.r + 0.07:.2f}")
    check = check_claims(wrong, question)
    assert check.score == 0.0 and "not a figure of the table" in check.failed[0]


def test_a_report_without_figures_makes_only_the_naming_claim(question):
    d = question.driver
    check = check_claims(f"{d.column} matters most for {question.target}.", question)
    assert check.score == pytest.approx(1 / 3) and len(check.failed) == 2


def test_another_columns_true_r_is_allowed_but_not_enough(question):
    other = min(question.facts, key=lambda f: abs(f.r))
    check = check_claims(f"{other.column} has r = {other.r:.2f} over {other.n} rows.", question)
    assert check.failed and check.score < 1.0


@settings(max_examples=50, deadline=None)
@given(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).map(lambda x: round(x, 3)))
def test_numbers_are_read_back_as_written(x):
    assert numbers_in(f"the value is {x} here") == [x]
