"""One turn engine: a single agent and a team seat take the same action the same way."""

import json

from agentgym.multi_agent import ReviewTeamEnv
from agentgym.parsing import make_parser
from agentgym.runtime import run_sync
from agentgym.telemetry import Telemetry
from agentgym.testing import ProbeEnv, ProbeFamily
from agentgym.turns import TurnEngine


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


MIXED = call("echo", text="hi") + call("echo", wrong=1) + "<tool_call>{broken</tool_call>" + call("dump")


def test_a_single_agent_and_a_team_seat_see_the_same_turn():
    single = ProbeEnv(max_observation_chars=100_000)
    single.reset(seed=0)
    obs, _, _, _, info = single.step(MIXED)
    team = ReviewTeamEnv(ProbeFamily, max_observation_chars=100_000)
    team.reset(seed=0)
    team_obs, *_, team_infos = team.step({"solver": MIXED})
    assert team_obs["solver"] == obs
    statuses = [r["status"] for r in info["tool_results"]]
    assert [r["status"] for r in team_infos["solver"]["tool_results"]] == statuses
    assert statuses == ["ok", "invalid_args", "parse_error", "ok"]


def test_the_engine_counts_what_the_episode_info_reports():
    tools = list(ProbeFamily(infra_failures=5, tool_max_retries=0).tools(None).values())
    engine = TurnEngine(tools, make_parser("hermes"), Telemetry(), max_action_chars=80,
                        opening=[{"role": "system", "content": "s"}])
    turn = run_sync(engine.take("no calls here"))
    assert turn.results == [] and "<tool_call>" in turn.text and engine.turns == 1
    run_sync(engine.take(call("dump")))
    assert engine.last_results[0].truncated and engine.truncations == 1
    run_sync(engine.take(call("flaky")))
    assert engine.infra_failed and engine.answer is None
    turn = run_sync(engine.take(call("answer", answer=3) + "x" * 100))  # over max_action_chars: cut, told
    assert "only the first 80" in turn.text and engine.answer == {"answer": 3}
    assert engine.episode_fields() == {"tool_calls": {"dump": 1, "flaky": 1, "answer": 1}, "truncations": 1,
                                       "turns": 4, "tool_output_chars": engine.tool_chars}
    assert [m["role"] for m in engine.transcript[:3]] == ["system", "assistant", "user"]


# ---- the env id: the registration's, and agentgym's own ids unchanged ----------------
def test_a_user_registration_names_the_env_in_its_fingerprint_and_errors():
    import gymnasium as gym
    import pytest

    from agentgym.errors import ResetNeededError

    if "myorg/ProbeRenamed-v3" not in gym.registry:
        gym.register("myorg/ProbeRenamed-v3", entry_point=ProbeEnv)
    env = gym.make("myorg/ProbeRenamed-v3").unwrapped
    assert env.env_id == "myorg/ProbeRenamed-v3"
    assert env.fingerprint.fields["env"] == "myorg/ProbeRenamed-v3"
    with pytest.raises(ResetNeededError, match="^myorg/ProbeRenamed-v3: call reset"):
        env.step("x")
    assert ProbeEnv().env_id == "agentgym/Probe-v0"  # made without a registry: its own name


def test_a_review_team_registered_under_any_id_is_named_by_it():
    from agentgym import multi_agent
    from agentgym.multi_agent.registry import MultiAgentEnvSpec, register

    class ProbeReview(ReviewTeamEnv):
        family_class = ProbeFamily

    register(MultiAgentEnvSpec("myorg/ProbeCheckers-v2", ProbeReview))
    try:
        env = multi_agent.make("myorg/ProbeCheckers-v2")
        assert env.env_id == env.fingerprint.fields["env"] == "myorg/ProbeCheckers-v2"
        assert env.metadata["name"] == "ProbeCheckers-v2"
        assert ProbeReview().env_id == "agentgym/ProbeReview-v0"  # no registry: the family's name
    finally:
        multi_agent.MULTI_AGENT_ENVS[:] = [s for s in multi_agent.MULTI_AGENT_ENVS if s.env_id != "myorg/ProbeCheckers-v2"]


def test_agentgym_ids_name_what_was_made():
    import gymnasium as gym

    import agentgym  # noqa: F401  (registers the envs)

    tags = gym.make("agentgym/Search-v1", parser="tags").unwrapped
    assert tags.env_id == "agentgym/SearchR1-v1"
    assert str(tags.fingerprint) == str(gym.make("agentgym/SearchR1-v1").unwrapped.fingerprint)


# ---- a close scheduled on the runtime loop ---------------------------------------------
class _FamilyWhoseCloseFails(ProbeFamily):
    async def aclose(self) -> None:
        raise RuntimeError("the pool would not close")


def test_a_close_that_fails_on_the_runtime_loop_is_logged_with_the_env_and_retrieved(caplog):
    import asyncio
    import gc
    import logging

    from agentgym.env import ToolEnv

    async def close_from_a_coroutine() -> None:
        ToolEnv(_FamilyWhoseCloseFails()).close()  # scheduled, not awaited: close must not block the loop
        for _ in range(20):
            await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR):
        run_sync(close_from_a_coroutine())
        gc.collect()  # an unretrieved task exception would be reported now, without context
    failed = [r for r in caplog.records if r.name == "agentgym.turns"]
    assert len(failed) == 1 and "agentgym/Probe-v0: close failed" in failed[0].getMessage()
    assert "the pool would not close" in str(failed[0].exc_info[1])
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
