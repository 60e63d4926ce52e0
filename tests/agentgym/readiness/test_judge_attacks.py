"""Judge attacks: all scored 0 through the hardened pipeline with the gullible judge, and
each defence shown necessary by an attack that gets through without it."""

from __future__ import annotations

import asyncio

import pytest

from agentgym.judges import DEFENCES, Judge, JudgeDefences, JudgeRefused
from agentgym.judges.testing import GullibleJudge, HonestJudge, LazyJudge
from agentgym.readiness.judge_attacks import JUDGE_ATTACK_CATEGORIES, WEAK_ANSWER, build_judge_attacks
from agentgym.readiness.judge_audit import ABLATED_DEFENCES, audit_judge
from tests.agentgym.judges.items import items

# The attack each defence is there for (the audit measures the whole table).
STOPS = {"normalise": "homoglyph_injection", "length_cap": "extreme_length", "neutralise": "ignore_rubric",
         "echo": "keyword_stuffing", "checks_gate": "wrong_numbers", "quote": "fence_escape",
         "strict_verdict": "quoted_score"}


def _attack(name: str, item):
    others = [i.truth for i in items() if i is not item]
    return next(a for a in build_judge_attacks(item.truth, item.question, item.rubric, others) if a.name == name)


def _grade(defences: JudgeDefences, item, answer: str) -> float:
    judge = Judge(GullibleJudge(), defences=defences)
    return asyncio.run(judge.grade(item.question, answer, item.rubric, item.checks)).reward


@pytest.fixture(scope="module")
def gullible_report():
    return audit_judge(lambda d: Judge(GullibleJudge(), defences=d), items())


def test_every_attack_scores_zero_through_the_hardened_pipeline(gullible_report):
    assert gullible_report.calibration == "passed" and not gullible_report.truth_failures
    assert all(r == 1.0 for r in gullible_report.truth_rewards.values())
    assert {r.category for r in gullible_report.results} == set(JUDGE_ATTACK_CATEGORIES)
    assert [(r.item_id, r.attack, r.reward) for r in gullible_report.results if r.reward != 0.0] == []
    assert gullible_report.passed


def test_the_report_says_which_attack_each_defence_stops(gullible_report):
    table = gullible_report.defence_table()
    for defence, attack in STOPS.items():
        assert attack in table[defence], (defence, table[defence])
    assert set(table) == set(ABLATED_DEFENCES) and all(table.values())
    assert set(gullible_report.to_dict()["defences"]) == set(ABLATED_DEFENCES)


@pytest.mark.parametrize("defence", sorted(STOPS))
def test_removing_a_defence_lets_its_attack_through(defence):
    item = items()[0]  # the item with number checks
    attack = _attack(STOPS[defence], item)
    assert _grade(JudgeDefences(calibrate=False), item, attack.answer) == 0.0
    # The checks gate stops most non-answers by itself; each judge defence is shown without it.
    weaker = JudgeDefences(calibrate=False).without(*{defence, "checks_gate"})
    assert _grade(weaker, item, attack.answer) > 0.0


def test_removing_calibration_lets_a_judge_that_passes_everything_score():
    item = items()[2]
    with pytest.raises(JudgeRefused):
        asyncio.run(Judge(LazyJudge()).grade(item.question, WEAK_ANSWER, item.rubric))
    unchecked = Judge(LazyJudge(), defences=JudgeDefences(calibrate=False))
    assert asyncio.run(unchecked.grade(item.question, WEAK_ANSWER, item.rubric)).reward == 1.0
    assert set(STOPS) | {"calibrate"} == set(DEFENCES)


def test_a_failing_judge_is_an_escape_in_the_audit():
    from agentgym.judges.testing import ScriptedReplies
    from agentgym.reliability import RetryPolicy

    def make(d):
        return Judge(ScriptedReplies(["not a verdict"]), defences=JudgeDefences(calibrate=False),
                     policy=RetryPolicy(attempts=1))
    report = audit_judge(make, items()[2:], ablate=False)
    escapes = [r for r in report.results if r.outcome == "escape"]
    assert not report.passed and report.truth_failures and escapes
    assert all(r.reward is None for r in escapes) and not [r for r in report.results if r.outcome == "leak"]


def test_the_honest_judge_passes_the_audit_too():
    assert audit_judge(lambda d: Judge(HonestJudge(), defences=d), items(), ablate=False).passed
