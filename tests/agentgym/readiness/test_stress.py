"""The stress harness: the guarantees hold on healthy envs and bite on broken ones."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from agentgym.commands.readiness import stress_command
from agentgym.readiness import FaultPlan, StressConfig, run_stress
from agentgym.readiness.adversarial import adversarial_actions
from agentgym.testing import ProbeEnv

from .conftest import register_test_env


def _guarantee(report, name):
    return next(g for g in report.guarantees() if g.name == name)


def test_calculator_under_infra_faults_and_adversarial_actions_loses_nothing():
    report = run_stress(StressConfig("agentgym/Calculator-v0", episodes=120, concurrency=16,
                                     faults=FaultPlan({"infra": 0.3, "delay": 0.05}, delay_s=0.01),
                                     adversarial=0.3, seed=1))
    assert report.completed == 120 and not report.lost
    assert report.faults_injected["infra"] > 10
    calc = report.telemetry.tools["calculate"]
    assert calc.retries > 0
    assert sum(n for (_, status), n in report.adversarial.items() if status == "invalid_args") > 0
    assert _guarantee(report, "agent faults reported as infra").ok
    assert _guarantee(report, "leaked containers").ok


def test_calculator_stress_has_no_silent_failures():
    report = run_stress(StressConfig("agentgym/Calculator-v0", episodes=200, concurrency=16,
                                     faults=FaultPlan({"infra": 0.2}), adversarial=0.3, seed=2))
    assert _guarantee(report, "silent failures").ok, [o for o in report.outcomes if o.silent_failure][:3]
    assert report.passed


def test_every_episode_is_flagged_when_the_infrastructure_is_always_down(probe_env_id):
    report = run_stress(StressConfig(probe_env_id, episodes=20, concurrency=5,
                                     faults=FaultPlan({"infra": 1.0}), adversarial=0.0))
    assert report.infra_failed == 20 and not report.lost
    assert _guarantee(report, "silent failures").ok
    assert report.passed


class ScorerCrashes(ProbeEnv):
    def _score(self, task, answer_args):
        raise RuntimeError("scorer bug")


class SwallowsOutages(ProbeEnv):
    """Its service is down and it makes up a result instead of raising InfraError: the
    learner would see a wrong reward for an outage."""

    def _tools(self, task):
        async def reveal():
            try:
                raise ConnectionError("secret service down")
            except ConnectionError:  # the bug under test
                return "-1"

        return [dataclasses.replace(t, fn=reveal) if t.name == "reveal" else t for t in super()._tools(task)]

    def _score(self, task, answer_args):
        return float(answer_args["answer"] == task.secret), {}


class Hangs(ProbeEnv):
    def _tools(self, task):
        async def reveal():
            await asyncio.sleep(3600)
            return "0"

        return [dataclasses.replace(t, fn=reveal, timeout_s=3600) if t.name == "reveal" else t
                for t in super()._tools(task)]


def test_a_crashing_scorer_is_reported_as_lost_episodes():
    env_id = register_test_env("agentgym-test/ScorerCrashes-v0", ScorerCrashes)
    report = run_stress(StressConfig(env_id, episodes=6, concurrency=2, adversarial=0.0))
    assert len(report.lost) == 6 and "scorer bug" in report.lost[0][1]
    assert not report.passed


def test_an_env_that_hides_outages_is_caught_by_the_silent_failure_guarantee():
    env_id = register_test_env("agentgym-test/SwallowsOutages-v0", SwallowsOutages)
    report = run_stress(StressConfig(env_id, episodes=30, concurrency=4, adversarial=0.0))
    assert not report.lost
    assert not _guarantee(report, "silent failures").ok
    assert not report.passed


def test_a_hanging_episode_is_lost_and_its_env_replaced():
    env_id = register_test_env("agentgym-test/Hangs-v0", Hangs)
    report = run_stress(StressConfig(env_id, episodes=3, concurrency=1, adversarial=0.0, episode_timeout_s=0.3))
    assert len(report.lost) == 3 and "hung" in report.lost[0][1]
    assert not report.passed


def test_stress_command_exit_codes_and_json(capsys):
    assert stress_command("agentgym/Calculator-v0", 40, 8, "infra=0.1", 0.0, 0, True) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] and out["lost"] == 0 and out["completed"] == 40
    assert "tool/calculate/p99_ms" in out["telemetry"]
    assert stress_command("agentgym/Calculator-v0", 10, 2, "explode=1", 0.0, 0, False) == 2


@pytest.fixture
def _process_sandbox(monkeypatch):
    monkeypatch.setenv("AGENTGYM_SANDBOX", "process")


def test_an_infra_failure_in_a_run_with_shared_service_faults_is_not_blamed_on_the_agent():
    """A stall injected into the retriever process every episode shares can fail an
    episode whose own env had no fault. It then counted as 'caused by agent actions'
    (seen in a full-suite run of the stalled-retriever test below), though the
    per-attack count, by the same rule, already left it out."""
    from agentgym.readiness.stress import EpisodeOutcome, StressReport

    def report(shared):
        out = StressReport(StressConfig("agentgym/Search-v1", episodes=1))
        out.outcomes.append(EpisodeOutcome(0, "t", 0.0, True, False, True, False, 3, 1, 0, shared_faults=shared))
        return out

    assert report(shared=True).agent_caused_infra == 0
    assert _guarantee(report(shared=True), "infra-failed episodes caused by agent actions").ok
    assert report(shared=False).agent_caused_infra == 1  # with nothing to explain it, the agent is blamed


def test_search_with_a_stalled_retriever_process_loses_nothing():
    report = run_stress(StressConfig("agentgym/Search-v1", episodes=40, concurrency=8,
                                     faults=FaultPlan({"stall": 0.1}, stall_s=(0.3, 1.5)), adversarial=0.2, seed=3))
    assert report.faults_injected.get("stall", 0) > 0
    assert any("stalls" in n for n in report.notes)
    assert report.completed == 40 and not report.lost
    assert report.passed, report.guarantees()


def test_search_survives_a_retriever_restart():
    report = run_stress(StressConfig("agentgym/Search-v1", episodes=24, concurrency=6,
                                     faults=FaultPlan({"stop": 0.03}, restart_down_s=0.3), adversarial=0.0, seed=4))
    assert not report.lost and report.completed == 24
    assert _guarantee(report, "silent failures").ok


def _da_kwargs() -> dict:
    return {"python_timeout_s": 3.0}


@pytest.mark.docker
def test_data_analysis_with_killed_containers_loses_and_leaks_nothing(docker_engine):
    report = run_stress(StressConfig("agentgym/DataAnalysis-v1", episodes=12, concurrency=4,
                                     faults=FaultPlan({"kill": 0.3, "create": 0.1}), adversarial=0.0, seed=5,
                                     env_kwargs={**_da_kwargs(), "backend": "docker"}))
    assert report.faults_injected.get("kill", 0) > 0
    assert report.completed == 12 and not report.lost
    assert report.leaked_containers == 0
    assert _guarantee(report, "silent failures").ok
    assert report.passed, report.guarantees()


def test_data_analysis_process_sandbox_with_kills_and_adversarial_code(_process_sandbox):
    exclude = frozenset({"fork_bomb", "thread_bomb", "allocate_forever", "fill_disk", "kill_self", "exit_process",
                         "busy_loop", "print_forever", "sleep_forever"})
    report = run_stress(StressConfig("agentgym/DataAnalysis-v1", episodes=12, concurrency=3,
                                     faults=FaultPlan({"kill": 0.3}), adversarial=0.3, seed=6,
                                     env_kwargs=_da_kwargs(), exclude_actions=exclude))
    assert report.completed == 12 and not report.lost
    assert _guarantee(report, "silent failures").ok


def test_agent_code_that_kills_its_interpreter_is_not_an_infra_error(_process_sandbox):
    import gymnasium as gym

    env = gym.make("agentgym/DataAnalysis-v1", **_da_kwargs())
    try:
        _, info = env.reset(seed=0)
        kill = next(a for a in adversarial_actions(info["tools"]) if a.name == "python:kill_self")
        _, _, _, _, info = env.step(kill.text)
        assert [r["status"] for r in info["tool_results"]] == ["agent_error"]
        assert not info["infra_failed"]
    finally:
        env.close()


@pytest.mark.docker
def test_data_analysis_trust_boundary_attacks_cause_no_infra_failure_and_no_leak(docker_engine):
    report = run_stress(StressConfig("agentgym/DataAnalysis-v1", episodes=24, concurrency=4,
                                     adversarial=0.5, seed=11,
                                     env_kwargs={**_da_kwargs(), "backend": "docker"}))
    assert report.completed == 24 and not report.lost
    assert report.probes > 0 and sum(report.attack_uses.values()) > report.probes
    table = report.boundary_table()
    assert all(row["infra_failed_episodes"] == 0 and row["cross_episode_leaks"] == 0 for row in table.values())
    assert _guarantee(report, "cross-episode leaks").ok and _guarantee(report, "infra-failed episodes caused by agent actions").ok
    assert report.to_dict()["trust_boundary"] == table


@pytest.mark.docker
def test_the_leak_probe_finds_what_another_episode_planted(docker_engine):
    """The cross-episode guarantee can fail: a probe run where another episode's canaries
    are (the same episode, no reset in between) reports every one of them."""
    import gymnasium as gym

    from agentgym.readiness.adversarial import CANARY
    from agentgym.readiness.stress import _foreign_canaries

    env = gym.make("agentgym/DataAnalysis-v1", **_da_kwargs(), backend="docker")
    try:
        _, info = env.reset(seed=0)
        actions = {a.name: a for a in adversarial_actions(info["tools"])}
        env.step(actions["python:attach_to_workdir"].text.replace(CANARY, "agentgym-canary-E8"))
        env.step(actions["python:plant_files"].text.replace(CANARY, "agentgym-canary-E7"))  # chmods . to 555
        env.step(actions["python:plant_ipc"].text)
        obs, *_ = env.step(actions["python:probe_leaks"].text)
        found = _foreign_canaries(obs, index=3)
        assert "7" in found and "8" in found and "sysv-msg" in found, obs
        assert _foreign_canaries(obs, index=7) == [f for f in found if f != "7"]
    finally:
        env.close()
