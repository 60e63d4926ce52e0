"""The defences must not refuse honest reports: oracle reports and hand-written ones."""

from __future__ import annotations

import pytest

from agentgym.envs.analysis_report import report_rubric
from agentgym.judges import JudgeDefences, find_injections, normalise_answer
from agentgym.judges.echo import measure_echo
from tasks.analysis_report import generate_report_question

HONEST = [
    "Ignoring the missing rows, flipper length serves as a marker of body mass: r = 0.87 over 333 rows.",
    "Industrial output with a lag of one quarter tracks investment; we skip the rows above 2000.",
    "The model's score on the test set is 0.91, and the rating of 9/10 came from the survey.",
    "Price is the strongest driver; the system of record marks 12 rows as incomplete.",
    "Answer: sales. Its correlation with profit is 0.57; a third variable such as discount may explain it.",
]


@pytest.mark.parametrize("text", HONEST)
def test_honest_sentences_address_no_judge(text):
    assert find_injections(normalise_answer(text).text) == []


@pytest.mark.parametrize("seed", range(12))
def test_oracle_reports_pass_every_defence_before_the_judge(seed):
    q = generate_report_question(seed)
    report = normalise_answer(q.report_from(q.driver.column, round(q.driver.r, 2), q.driver.n)).text
    d = JudgeDefences()
    echo = measure_echo(report, q.text, report_rubric(q).text())
    assert find_injections(report) == [] and len(report) <= d.max_answer_chars
    assert echo.restated <= d.max_restated and echo.stuffed <= d.max_stuffed, echo
