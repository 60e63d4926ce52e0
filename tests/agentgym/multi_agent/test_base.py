"""The TeamEnv contract, on the data-free probe team."""

import pytest

from agentgym.errors import ConfigError, EpisodeFinishedError, ResetNeededError
from agentgym.multi_agent import UnknownAgentError
from agentgym.multi_agent.testing import InFlight, ProbeTeamEnv, check_team_env
from agentgym.runtime import run_sync


def _finish(env, actions_fn=None):
    final = {}
    while env.agents:
        actions = actions_fn(env) if actions_fn else env.oracle_actions()
        obs, rewards, terms, truncs, infos = env.step(actions)
        final.update({a: (rewards[a], terms[a], truncs[a], infos[a]) for a in infos if terms[a] or truncs[a]})
    return final


def test_probe_team_passes_the_checker():
    check_team_env(ProbeTeamEnv(num_helpers=3))


def test_reset_is_deterministic_in_the_seed():
    env = ProbeTeamEnv()
    ids = {env.reset(seed=7)[1]["lead"]["task_id"] for _ in range(3)}
    assert len(ids) == 1
    assert env.reset(seed=8)[1]["lead"]["task_id"] not in ids


def test_oracle_team_wins_and_every_agent_gets_the_team_reward():
    env = ProbeTeamEnv(num_helpers=3)
    env.reset(seed=1)
    final = _finish(env)
    assert set(final) == set(env.possible_agents)
    for reward, terminated, truncated, info in final.values():
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert info["success"] and info["end_reason"] == "answered"
        assert info["answer"] == {"answer": env.task.secret}
    assert final["helper_0"][3]["tool_calls"] == {"reveal": 1, "send": 1}
    assert env.agents == []


def test_inactive_agents_get_empty_observations_and_their_actions_are_ignored():
    env = ProbeTeamEnv(num_helpers=2)
    obs, infos = env.reset(seed=0)
    assert infos["lead"]["active"] is False and infos["helper_0"]["active"] is True
    obs, _, _, _, infos = env.step({"lead": '<tool_call>{"name": "answer", "arguments": {"answer": 1}}</tool_call>'})
    assert env.seats["lead"].turns == 0 and env.agents  # ignored: no turn, no answer
    assert infos["lead"]["acted"] is False and obs["lead"] == ""


def test_messages_held_for_an_inactive_agent_arrive_when_it_becomes_active():
    env = ProbeTeamEnv(num_helpers=2)
    env.reset(seed=0)
    env.step(env.oracle_actions())  # reveal
    env.step({"helper_0": env.oracle_actions()["helper_0"]})  # helper_0 sends; lead still waits for helper_1
    assert not env.is_active("lead")
    obs, _, _, _, infos = env.step({"helper_1": env.oracle_actions()["helper_1"]})
    assert infos["lead"]["active"]
    assert "[from helper_0]" in obs["lead"] and "[from helper_1]" in obs["lead"]
    assert [m["role"] for m in infos["lead"]["messages"]] == ["user", "user"]


def test_missing_action_of_an_active_agent_costs_no_turn():
    env = ProbeTeamEnv()
    env.reset(seed=0)
    env.step({})
    assert all(s.turns == 0 for s in env.seats.values()) and env.team_turn == 1


def test_unknown_agent_raises():
    env = ProbeTeamEnv()
    env.reset(seed=0)
    with pytest.raises(UnknownAgentError, match="nobody"):
        env.step({"nobody": "hi"})


def test_step_before_reset_and_after_end_raise():
    env = ProbeTeamEnv()
    with pytest.raises(ResetNeededError):
        env.step({})
    env.reset(seed=0)
    _finish(env)
    with pytest.raises(EpisodeFinishedError):
        env.step({})


def test_unrecoverable_infra_failure_truncates_the_team_and_flags_every_agent():
    env = ProbeTeamEnv(infra_failures=5, tool_max_retries=1)
    env.reset(seed=0)
    flaky = '<tool_call>{"name": "flaky", "arguments": {}}</tool_call>'
    obs, rewards, terms, truncs, infos = env.step({"helper_0": flaky})
    assert all(truncs.values()) and not any(terms.values())
    assert all(i["infra_failed"] and i["end_reason"] == "infra_failed" for i in infos.values())
    assert set(rewards.values()) == {0.0} and env.agents == []


def test_recovered_infra_failure_does_not_end_the_episode():
    env = ProbeTeamEnv(infra_failures=1, tool_max_retries=2)
    env.reset(seed=0)
    _, _, _, truncs, infos = env.step({"helper_0": '<tool_call>{"name": "flaky", "arguments": {}}</tool_call>'})
    assert not any(truncs.values()) and infos["helper_0"]["tool_results"][0]["retries"] == 1


def test_helper_out_of_turns_retires_but_gets_the_team_reward():
    env = ProbeTeamEnv(num_helpers=2, helper_max_turns=2)
    env.reset(seed=0)
    idle = '<tool_call>{"name": "wait", "arguments": {}}</tool_call>'
    for _ in range(2):  # helper_1 wastes its turns; helper_0 reveals then sends
        env.step({**env.oracle_actions(), "helper_1": idle})
    assert env.seats["helper_1"].retired and "helper_1" in env.agents and env.is_active("lead")
    final = _finish(env)  # the oracle lead answers the secret from the hidden task
    assert final["helper_1"][:2] == (1.0, True)
    assert final["helper_1"][3]["retired"].startswith("used all 2 turns")


def test_essential_agent_out_of_turns_truncates_everyone():
    env = ProbeTeamEnv(num_helpers=1, lead_max_turns=1)
    env.reset(seed=0)
    env.step(env.oracle_actions())
    env.step(env.oracle_actions())
    _, _, terms, truncs, infos = env.step({"lead": "no tool call"})
    assert all(truncs.values()) and not any(terms.values())
    assert infos["lead"]["end_reason"] == "agent_exhausted"


def test_team_turn_limit_truncates():
    env = ProbeTeamEnv(max_team_turns=3)
    env.reset(seed=0)
    final = _finish(env, lambda e: {})
    assert {info["end_reason"] for *_, info in final.values()} == {"team_turn_limit"}
    assert all(trunc for _, _, trunc, _ in final.values())


def test_tool_calls_of_different_agents_overlap_in_one_step():
    counter = InFlight()
    env = ProbeTeamEnv(num_helpers=4, latency_s=0.05, in_flight=counter)
    env.reset(seed=0)
    env.step(env.oracle_actions())
    assert counter.calls == 4 and counter.peak == 4


def test_async_api_and_telemetry_count_one_episode_per_team_episode():
    env = ProbeTeamEnv(num_helpers=2)

    async def play():
        await env.areset(seed=3)
        while env.agents:
            await env.astep(env.oracle_actions())

    run_sync(play())
    run_sync(play())
    metrics = env.telemetry.metrics()
    assert env.telemetry.episodes == 2
    assert metrics["tool/reveal/calls"] == 4 and metrics["tool/reveal/usage_frac"] == 1.0
    assert metrics["tool/flaky/usage_frac"] == 0.0


def test_fingerprint_covers_roles_and_limits():
    a, b = ProbeTeamEnv(num_helpers=2), ProbeTeamEnv(num_helpers=2)
    assert str(a.fingerprint) == str(b.fingerprint)
    assert str(ProbeTeamEnv(num_helpers=3).fingerprint) != str(a.fingerprint)
    assert str(ProbeTeamEnv(helper_max_turns=9).fingerprint) != str(a.fingerprint)
    assert set(a.fingerprint.fields["roles"]) == {"lead", "helper"}


def test_unknown_reset_option_warns_and_is_ignored():
    env = ProbeTeamEnv()
    with pytest.warns(UserWarning, match="ignoring unknown reset option"):
        env.reset(seed=0, options={"difficulty": 3})
    assert env.agents


def test_config_errors_say_what_was_expected():
    with pytest.raises(ConfigError, match="tag parser"):
        ProbeTeamEnv(parser="tags")
    with pytest.raises(ConfigError, match="max_team_turns"):
        ProbeTeamEnv(max_team_turns=0)
