"""make/registry, the batched team runner and its RunReport."""

import pytest

from agentgym import multi_agent
from agentgym.envs import check_env_id
from agentgym.errors import ConfigError
from agentgym.multi_agent import MULTI_AGENT_ENVS, UnknownTeamEnvError, is_multi_agent_env
from agentgym.multi_agent.registry import MultiAgentEnvSpec, register
from agentgym.multi_agent.runner import arun_team_episodes, run_team_episode
from agentgym.multi_agent.testing import InFlight, ProbeTeamEnv
from agentgym.runner import RunReport
from agentgym.runtime import run_sync

PROBE = MultiAgentEnvSpec("agentgym/ProbeTeam-v0", "agentgym.multi_agent.testing:ProbeTeamEnv",
                          ("answer", "reveal", "send", "wait", "flaky"), "probe team")
register(PROBE)


def test_specs_have_what_agentgym_envs_prints():
    ids = {s.env_id for s in MULTI_AGENT_ENVS}
    assert {"agentgym/SearchTeam-v1", "agentgym/AnalysisReview-v1"} <= ids
    for s in MULTI_AGENT_ENVS:
        assert s.tools and s.summary and s.env_id.startswith("agentgym/")


def test_make_with_and_without_namespace():
    assert multi_agent.make("ProbeTeam-v0", num_helpers=3).possible_agents[-1] == "helper_2"
    assert isinstance(multi_agent.make("agentgym/ProbeTeam-v0"), ProbeTeamEnv)
    assert is_multi_agent_env("SearchTeam-v1") and not is_multi_agent_env("agentgym/Search-v1")


def test_the_retired_search_team_id_is_refused_and_names_v1():
    assert not is_multi_agent_env("SearchTeam-v0") and "agentgym/SearchTeam-v0" not in {s.env_id for s in MULTI_AGENT_ENVS}
    with pytest.raises(UnknownTeamEnvError, match="retired.*SearchTeam-v1"):
        multi_agent.make("agentgym/SearchTeam-v0", num_searchers=1)
    with pytest.raises(ConfigError, match="retired.*SearchTeam-v1"):
        check_env_id("agentgym/SearchTeam-v0")
    env = multi_agent.make("agentgym/SearchTeam-v1", num_searchers=1)
    assert env.fingerprint.fields["env"] == "agentgym/SearchTeam-v1"
    assert env.fingerprint.fields["search"]["dataset_builder"] == "search-data-4"  # Search-v1's questions


def test_registry_miss_suggests_the_closest_id():
    with pytest.raises(UnknownTeamEnvError, match="Did you mean 'agentgym/SearchTeam-v1'"):
        multi_agent.make("SearchTeem-v0")


def test_registering_a_different_spec_under_a_taken_id_raises():
    register(PROBE)  # identical: fine
    with pytest.raises(ValueError, match="registered"):
        register(MultiAgentEnvSpec(PROBE.env_id, "x:Y", (), "other"))


def test_runner_returns_a_run_report_with_the_core_summary_fields():
    report = multi_agent.run_team_episodes("ProbeTeam-v0", "oracle", 12, concurrency=4, seed=3)
    assert isinstance(report, RunReport)
    summary = report.summary()
    assert summary["episodes"] == 12 and summary["success_rate"] == 1.0 and summary["lost"] == 0
    assert [e.index for e in report.episodes] == list(range(12))
    assert set(report.episodes[0].info["agents"]) == {"lead", "helper_0", "helper_1"}
    assert report.telemetry.episodes == 12


def test_runner_is_reproducible_in_the_seed():
    a = multi_agent.run_team_episodes("ProbeTeam-v0", "oracle", 5, concurrency=2, seed=9)
    b = multi_agent.run_team_episodes("ProbeTeam-v0", "oracle", 5, concurrency=3, seed=9)
    assert [e.task_id for e in a.episodes] == [e.task_id for e in b.episodes]


def test_tool_calls_overlap_across_concurrent_episodes():
    counter = InFlight()
    report = multi_agent.run_team_episodes("ProbeTeam-v0", "oracle", 8, concurrency=4, seed=0,
                                           env_kwargs={"latency_s": 0.05, "in_flight": counter})
    assert report.success_rate == 1.0
    assert counter.calls == 16 and counter.peak == 8  # 4 envs x 2 helpers in flight at once


def test_a_policy_that_raises_loses_the_episode_with_its_traceback():
    def broken(env, obs, infos):
        raise RuntimeError("policy bug")

    report = multi_agent.run_team_episodes("ProbeTeam-v0", broken, 3, concurrency=2)
    assert report.completed == 0 and len(report.lost) == 3 and "policy bug" in report.lost[0][1]


def test_async_policy_and_unknown_policy_name():
    async def oracle(env, obs, infos):
        return env.oracle_actions()

    report = run_sync(arun_team_episodes("ProbeTeam-v0", oracle, 3))
    assert report.success_rate == 1.0
    with pytest.raises(ConfigError, match="oracle"):
        multi_agent.run_team_episodes("ProbeTeam-v0", "smart", 1)


def test_reset_infra_error_counts_as_infra_failed():
    from agentgym.errors import InfraError

    class NoResources(ProbeTeamEnv):
        async def _start_episode(self, task):
            raise InfraError("pool down")

    record = run_sync(run_team_episode(NoResources(), multi_agent.oracle_team_policy, 0, 0))
    assert record.infra_failed and "pool down" in record.info["reset_error"]


@pytest.mark.filterwarnings("ignore::Warning")
@pytest.mark.parametrize("env_id", [s.env_id for s in MULTI_AGENT_ENVS])
def test_pettingzoo_parallel_api_test_passes_for_every_registered_env(env_id, monkeypatch):
    from pettingzoo.test import parallel_api_test

    monkeypatch.setenv("AGENTGYM_SANDBOX", "process")  # unit tests need no Docker
    env = multi_agent.make(env_id)
    try:
        parallel_api_test(env, num_cycles=100)
    finally:
        env.close()
