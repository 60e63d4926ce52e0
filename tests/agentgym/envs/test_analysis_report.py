"""AnalysisReport-v0: oracle reports, the verifiable gate, judge failures, the judge kit."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.judges import Judge, JudgeDefences, JudgeUnavailable, SamplingSettings
from agentgym.judges.testing import ScriptedReplies
from agentgym.readiness.judge_attacks import change_numbers
from agentgym.readiness.judge_env_audit import audit_judged_env
from agentgym.reliability import RetryPolicy
from tasks.analysis_report import check_claims, generate_report_question

ENV_ID = "agentgym/AnalysisReport-v0"
pytestmark = pytest.mark.usefixtures("process_sandbox", "close_pools_after_module")


def answer(report: str) -> str:
    return f"<tool_call>{json.dumps({'name': 'answer', 'arguments': {'report': report}})}</tool_call>"


def play_oracle(env, seed: int):
    env.reset(seed=seed)
    for _ in range(4):
        obs, reward, terminated, truncated, info = env.step(env.oracle_action())
        if terminated or truncated:
            return reward, info
    raise AssertionError("the oracle did not finish")


@pytest.mark.parametrize("judge", ["honest", "gullible"])
def test_oracle_reports_score_at_least_0_9_with_the_scripted_judges(judge):
    env = gym.make(ENV_ID, judge=judge).unwrapped
    try:
        for seed in range(3):
            reward, info = play_oracle(env, seed)
            assert reward >= 0.9 and not info["infra_failed"], info
            assert info["check_score"] == 1.0 and info["judge_refused"] is None
    finally:
        env.close()


def test_an_unanswered_episode_still_says_which_table_and_target_it_was():
    """Task facts go into every episode's end info; a report question has a table and a
    target, not v1's tier and template (this crashed every AnalysisReport episode)."""
    env = gym.make(ENV_ID, max_turns=1).unwrapped
    try:
        env.reset(seed=2)
        q = env.family.question(env.task)
        _, reward, terminated, truncated, info = env.step("I will not call a tool.")
        assert truncated and not terminated and reward == 0.0 and not info["infra_failed"]
        assert (info["table"], info["target"]) == (q.table, q.target)
        assert "tier" not in info
    finally:
        env.close()


@pytest.mark.parametrize("judge", ["honest", "gullible"])
def test_a_report_with_a_wrong_number_scores_zero_through_the_gate(judge):
    env = gym.make(ENV_ID, judge=judge).unwrapped
    try:
        env.reset(seed=5)
        q = env.family.question(env.task)
        truth = q.report_from(q.driver.column, round(q.driver.r, 2), q.driver.n)
        wrong = change_numbers(truth)
        assert wrong != truth and check_claims(truth, q).score == 1.0
        _, reward, terminated, _, info = env.step(answer(wrong))
        assert terminated and reward == 0.0 and not info["infra_failed"]
        assert info["judge_refused"].startswith("fails its verifiable checks") and info["judge_score"] is None
    finally:
        env.close()


def test_a_judge_that_fails_makes_the_episode_infra_failed_not_a_score():
    backend = ScriptedReplies([JudgeUnavailable("judge server down")])
    judge = Judge(backend, defences=JudgeDefences(calibrate=False),
                  policy=RetryPolicy(attempts=2, initial_s=0.0, max_wait_s=0.0, deadline_s=10.0))
    env = gym.make(ENV_ID, judge=judge).unwrapped
    try:
        env.reset(seed=1)
        q = env.family.question(env.task)
        _, reward, terminated, truncated, info = env.step(
            answer(q.report_from(q.driver.column, round(q.driver.r, 2), q.driver.n)))
        assert info["infra_failed"] and truncated and not terminated and reward == 0.0
        assert "judge_score" not in info and backend.calls >= 2  # retried, then given up
        assert info["tool_results"][0]["status"] == "infra_error"
    finally:
        env.close()


def test_a_judge_that_fails_calibration_is_refused_at_reset():
    from agentgym.errors import ConfigError
    from agentgym.judges.testing import LazyJudge

    env = gym.make(ENV_ID, judge=Judge(LazyJudge())).unwrapped
    try:
        with pytest.raises(ConfigError, match="calibration"):
            env.reset(seed=0)
    finally:
        env.close()


def test_the_fingerprint_carries_the_judge_model_sampling_and_rubric():
    def fp(**kw):
        env = gym.make(ENV_ID, **kw).unwrapped
        try:
            return env.fingerprint, env.family.fingerprint_fields()
        finally:
            env.close()

    base, fields = fp(judge_url="http://judge:8000/v1", judge_model="judge-a")
    assert fields["judge"]["backend"]["model"] == "judge-a" and fields["rubric"]
    assert fp(judge_url="http://judge:8000/v1", judge_model="judge-b")[0] != base
    hot = Judge(ScriptedReplies(["{}"]), sampling=SamplingSettings(temperature=0.8))
    cold = Judge(ScriptedReplies(["{}"]))
    assert fp(judge=hot)[0] != fp(judge=cold)[0]


def test_task_ids_regenerate_the_same_question():
    env = gym.make(ENV_ID).unwrapped
    try:
        env.reset(seed=7)
        task_id, text = env.task.task_id, env.family.question(env.task).text
        env.reset(options={"task_id": task_id})
        assert env.family.question(env.task).text == text
        assert generate_report_question(int(task_id.split("-")[1])).text == text
    finally:
        env.close()


def test_every_judge_attack_pays_nothing_in_episodes_with_the_gullible_judge():
    audit = audit_judged_env(ENV_ID, tasks=2, env_kwargs={"judge": "gullible"})
    assert audit.passed, audit.to_dict()
    assert audit.episodes >= 30 and not audit.episode_leaks
    table = audit.pipeline.defence_table()
    assert "wrong_numbers" in table["checks_gate"] and "extreme_length" in table["length_cap"]
    assert {"spray"} <= {r.category for r in audit.pipeline.results}


def test_a_hanging_judge_ends_the_episode_infra_failed_within_the_answer_tools_deadline():
    import time

    judge = Judge(ScriptedReplies([60.0]), defences=JudgeDefences(calibrate=False), timeout_s=30.0,
                  policy=RetryPolicy(attempts=3, deadline_s=2.0))
    env = gym.make(ENV_ID, judge=judge).unwrapped
    try:
        env.reset(seed=2)
        q = env.family.question(env.task)
        start = time.monotonic()
        _, reward, _, truncated, info = env.step(answer(q.report_from(q.driver.column, round(q.driver.r, 2), q.driver.n)))
        elapsed = time.monotonic() - start
        assert info["infra_failed"] and truncated and reward == 0.0
        assert elapsed < 2.0 + 2.5, elapsed  # the tool's deadline (the judge's policy) plus the executor's grace
    finally:
        env.close()
