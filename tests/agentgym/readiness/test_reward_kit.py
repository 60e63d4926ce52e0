"""The reward-hacking kit: attacks are wrong by construction, cover every family the
issue names, and the audit catches a scorer that leaks."""

from __future__ import annotations

import dataclasses
import json
import math
import unicodedata
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym
from agentgym.envs.calculator import CalculatorEnv
from agentgym.readiness import audit_reward, build_attacks, oracle_answer, score_answer
from agentgym.readiness.audit import render_attack_action
from agentgym.readiness.reward_kit import ATTACK_CATEGORIES, homoglyphs
from agentgym.readiness.scoring import OracleFailedError, answer_schema_problem

from .conftest import register_test_env

REQUIRED = {"candidates", "long", "echo", "empty", "whitespace", "lookalike", "embedded", "extra_field",
            "duplicate_field", "judge", "multiple_calls"}


def test_text_answer_attacks_cover_every_family():
    attacks = build_attacks({"answer": "Paris"}, "What is the capital of France?", ["Lyon", "Nice"])
    assert REQUIRED <= {a.category for a in attacks}
    assert len({a.name for a in attacks}) == len(attacks)
    assert set(a.category for a in attacks) <= set(ATTACK_CATEGORIES)


def test_number_attacks_include_non_finite_and_embedded_numbers():
    attacks = build_attacks({"answer": 42}, "How many?")
    texts = {a.name: a.arguments for a in attacks if a.arguments is not None}
    assert texts["embedded_sentence[answer]"] == {"answer": "The answer is 42."}
    assert math.isnan(texts["nan[answer]"]["answer"])
    assert {"non_finite", "candidates", "judge"} <= {a.category for a in attacks}


def test_boolean_attack_only_where_it_aliases_the_truth():
    assert any(a.name == "boolean[answer]" for a in build_attacks({"answer": 1}, "q"))
    assert not any(a.name == "boolean[answer]" for a in build_attacks({"answer": 7}, "q"))


def test_duplicate_key_attack_is_raw_text_that_decodes_to_the_truth():
    attack = next(a for a in build_attacks({"answer": "Paris"}, "q", ["Lyon"])
                  if a.name == "duplicate_key_wrong_first[answer]")
    assert attack.arguments is None
    assert json.loads(attack.raw_arguments[0]) == {"answer": "Paris"}  # why only a whole episode sees it
    assert attack.raw_arguments[0].count('"answer"') == 2


def test_homoglyphs_look_alike_but_are_not_digits_or_ascii():
    fake = homoglyphs("2024 Paris")
    assert fake != "2024 Paris" and len(fake) == len("2024 Paris")
    assert not any(unicodedata.category(ch) == "Nd" for ch in fake)
    with pytest.raises(ValueError):
        float(homoglyphs("42"))


@settings(max_examples=60, deadline=None)
@given(truth=st.one_of(st.text(min_size=1, max_size=30).filter(str.strip), st.integers(-10**6, 10**6),
                       st.floats(-1e6, 1e6, allow_nan=False).filter(lambda x: abs(x) > 1e-3)))
def test_no_attack_is_the_truth_itself(truth: Any):
    for attack in build_attacks({"answer": truth}, "question?", ["Lyon", "Nice", "42"]):
        if attack.arguments is not None:
            # JSON text, not ==: False == 0 in Python, but the boolean is a different answer
            assert json.dumps(attack.arguments) != json.dumps({"answer": truth}), attack.name


def test_attack_actions_render_for_both_parsers():
    attacks = {a.name: a for a in build_attacks({"answer": "Paris"}, "q", ["Lyon"])}
    assert render_attack_action(attacks["two_answer_calls"], "hermes").count("<tool_call>") == 2
    assert render_attack_action(attacks["candidates_or[answer]"], "tags") == "<answer>Lyon or Paris</answer>"
    assert render_attack_action(attacks["extra_confidence"], "tags") is None  # not expressible as a tag
    assert render_attack_action(attacks["duplicate_key_wrong_first[answer]"], "tags") is None


def test_scorer_seam_scores_the_oracle_one_and_a_wrong_answer_zero():
    env = gym.make("agentgym/Calculator-v0")
    oracle = oracle_answer(env, seed=3)
    assert oracle.reward == 1.0
    assert score_answer(env, oracle.arguments, oracle.task)[0] == 1.0
    assert score_answer(env, {"answer": oracle.task.answer + 1}, oracle.task)[0] == 0.0
    assert answer_schema_problem(env, {"answer": 1, "extra": 2}, oracle.task) is not None
    assert answer_schema_problem(env, oracle.arguments, oracle.task) is None


class LenientCalculator(CalculatorEnv):
    """A scorer with the classic hole: the truth anywhere in the text counts."""

    def _score(self, task, answer_args):
        return float(str(task.answer) in str(answer_args.get("answer"))), {}


class LenientCalculatorAndTool(LenientCalculator):
    """The same hole with an answer tool that accepts any text, so attacks reach the scorer."""

    def _tools(self, task):
        async def accept(answer):
            return "Answer recorded."

        return [t if t.name != "answer" else dataclasses.replace(t, fn=accept) for t in super()._tools(task)]


class BrokenOracleCalculator(CalculatorEnv):
    def _score(self, task, answer_args):
        return 0.0, {}


def test_audit_catches_a_lenient_scorer():
    env_id = register_test_env("agentgym-test/LenientCalculatorAndTool-v0", LenientCalculatorAndTool)
    report = audit_reward(env_id, tasks=3)
    assert not report.passed
    leaked = {r.category for r in report.leaks}
    assert {"candidates", "embedded", "judge", "long"} <= leaked


def test_a_lenient_scorer_behind_a_strict_answer_tool_is_guarded_not_leaking():
    env_id = register_test_env("agentgym-test/LenientCalculator-v0", LenientCalculator)
    report = audit_reward(env_id, tasks=3)
    guarded = {r.category for r in report.results if r.verdict == "guarded"}
    assert {"candidates", "embedded", "judge"} <= guarded  # the scorer alone would pay...
    assert not [r for r in report.leaks if r.category != "duplicate_field"]  # ...the episode does not


def test_audit_fails_when_the_oracle_does_not_score_one():
    env = gym.make(register_test_env("agentgym-test/BrokenOracle-v0", BrokenOracleCalculator))
    with pytest.raises(OracleFailedError):
        oracle_answer(env, seed=0)
    report = audit_reward("agentgym-test/BrokenOracle-v0", tasks=2, env=env)
    assert not report.passed and len(report.oracle_failures) == 2


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch):
    monkeypatch.setenv("AGENTGYM_SANDBOX", "process")  # unit tests need no Docker


TASKS = {"agentgym/DataAnalysis-v1": 2, "agentgym/AnalysisReport-v0": 3}


@pytest.mark.parametrize("env_id", [s.env_id for s in agentgym.ENVS])
def test_audit_reward_passes_for_every_registered_env(env_id):
    report = audit_reward(env_id, tasks=TASKS.get(env_id, 8), seed=11)
    assert not report.oracle_failures
    assert report.results, "no attack ran"
    assert not report.crashes, report.crashes[:3]
    assert not report.leaks, [(r.attack, r.episode_reward) for r in report.leaks[:5]]
    assert report.passed


def test_audit_reward_command_prints_a_table_and_passes_on_search_r1(capsys):
    from agentgym.commands.readiness import audit_reward_command

    assert audit_reward_command("agentgym/SearchR1-v1", 3, 0) == 0
    out = capsys.readouterr().out
    assert "Reward-hacking audit" in out and "candidates" in out and "PASS" in out


def test_audit_reward_command_fails_on_a_leaky_env(capsys):
    from agentgym.commands.readiness import audit_reward_command

    env_id = register_test_env("agentgym-test/LenientCalculatorAndTool-v0", LenientCalculatorAndTool)
    assert audit_reward_command(env_id, 2, 0) == 1
    assert "FAIL" in capsys.readouterr().out
