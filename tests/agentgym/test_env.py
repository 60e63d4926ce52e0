import json

import gymnasium as gym
import pytest

import agentgym
from agentgym.errors import EpisodeFinishedError, InvalidOptionError, ResetNeededError
from agentgym.testing import ProbeEnv


def tc(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def test_reset_returns_messages_tools_task_and_fingerprint():
    env = ProbeEnv()
    obs, info = env.reset(seed=3)
    assert "reveal" in obs and info["messages"][0]["role"] == "system" and info["messages"][-1]["role"] == "user"
    assert {t["function"]["name"] for t in info["tools"]} == {"echo", "flaky", "dump", "reveal", "answer"}
    assert info["fingerprint"] == str(env.fingerprint) and info["task_id"].startswith("probe-")


def test_reset_with_a_seed_is_deterministic():
    a, b = ProbeEnv(), ProbeEnv()
    ids = [a.reset(seed=s)[1]["task_id"] for s in range(5)]
    assert ids == [b.reset(seed=s)[1]["task_id"] for s in range(5)]
    assert len(set(ids)) > 1


def test_answer_terminates_and_scores():
    env = ProbeEnv()
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step(tc("reveal"))
    secret = int(info["messages"][0]["content"])
    obs, r, term, trunc, info = env.step(tc("answer", answer=secret))
    assert (r, term, trunc, info["success"], info["infra_failed"]) == (1.0, True, False, True, False)
    assert info["tool_calls"] == {"reveal": 1, "answer": 1} and info["answer"] == {"answer": secret}


def test_step_before_reset_and_after_end_raise_clear_errors():
    env = ProbeEnv()
    with pytest.raises(ResetNeededError):
        env.step("x")
    env.reset(seed=0)
    env.step(tc("answer", answer=1))
    with pytest.raises(EpisodeFinishedError, match="reset"):
        env.step(tc("answer", answer=1))


def test_unknown_reset_option_is_rejected():
    with pytest.raises(InvalidOptionError, match="nonsense"):
        ProbeEnv().reset(options={"nonsense": 1})


@pytest.mark.parametrize("action, expect", [
    ("", "No valid tool call"),
    ("<tool_call>{oops</tool_call>", "not valid JSON"),
    (tc("nonexistent"), "no tool named"),
    (tc("answer", answer="five"), "invalid arguments"),
    (tc("answer", answer=-1), "never negative"),
    (b"\xff\xfe garbage", "not valid UTF-8"),
    ("x" * (10 * 1024 * 1024), "only the first"),
])
def test_bad_actions_get_instructive_observations(action, expect):
    env = ProbeEnv()
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step(action)
    assert expect in obs and r == 0.0 and not term


def test_multiple_answers_in_one_turn_are_not_scored():
    env = ProbeEnv()
    env.reset(seed=0)
    secret = env.task.secret
    obs, r, term, _, _ = env.step(tc("answer", answer=secret) + tc("answer", answer=secret + 1))
    assert not term and r == 0.0 and "exactly one" in obs


def test_turn_limit_and_output_budget_truncate():
    env = ProbeEnv(max_turns=2)
    env.reset(seed=0)
    assert env.step(tc("echo", text="a"))[3] is False
    obs, _, term, trunc, info = env.step(tc("echo", text="b"))
    assert trunc and not term and "turn limit" in obs and info["turns"] == 2
    env = ProbeEnv(tool_output_budget_chars=1500, big_output_chars=5000)
    env.reset(seed=0)
    obs, _, _, trunc1, info1 = env.step(tc("dump"))
    assert not trunc1 and info1["tool_results"][0]["truncated"] and "truncated" in obs
    obs, _, _, trunc2, info2 = env.step(tc("dump"))
    assert trunc2 and info2["truncations"] == 2 and "budget" in obs


def test_infra_failure_flags_the_episode_instead_of_scoring_it():
    env = ProbeEnv(infra_failures=10, tool_max_retries=1)
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step(tc("flaky") + tc("echo", text="still runs"))
    assert info["infra_failed"] is True and trunc and not term and r == 0.0
    assert "not your fault" in obs and "still runs" in obs
    m = env.telemetry.metrics()
    assert m["tool/flaky/infra_error_rate"] == 1.0 and m["tool/flaky/retries"] == 1


def test_infra_failure_recovered_by_retry_does_not_flag():
    env = ProbeEnv(infra_failures=2, tool_max_retries=3)
    env.reset(seed=0)
    _, _, _, _, info = env.step(tc("flaky"))
    assert not info["infra_failed"] and info["tool_results"][0]["retries"] == 2


def test_fingerprint_diff_names_changed_fields():
    a, b, c = ProbeEnv(max_turns=8), ProbeEnv(max_turns=8), ProbeEnv(max_turns=9, parser="tags")
    assert str(a.fingerprint) == str(b.fingerprint) and agentgym.fingerprint_diff(a, b) == {}
    diff = agentgym.fingerprint_diff(a, c)
    assert diff["max_turns"] == (8, 9) and "parser.parser" in diff


def test_gym_make_and_registered_ids():
    ids = {spec.env_id for spec in agentgym.ENVS}
    assert {"agentgym/Calculator-v0", "agentgym/Search-v1", "agentgym/DataAnalysis-v1"} <= ids
    assert ids <= set(gym.registry)
    env = gym.make("agentgym/Calculator-v0", difficulty=2, max_turns=3)
    assert env.unwrapped.max_turns == 3 and env.unwrapped.difficulty == 2


def test_render_ansi_shows_the_transcript():
    env = ProbeEnv(render_mode="ansi")
    env.reset(seed=0)
    env.step(tc("echo", text="hello"))
    assert "[assistant]" in env.render() and "hello" in env.render()


def test_last_results_do_not_leak_into_the_next_episode():
    env = ProbeEnv(max_turns=1)
    env.reset(seed=0)
    env.step(tc("reveal"))  # truncated by the turn limit right after a successful call
    env.reset(seed=1)
    assert env.last_results == []
    assert '"reveal"' in env.oracle_action()


def test_tool_middleware_wraps_episode_tools_but_not_answer_or_fingerprint():
    import dataclasses

    env = ProbeEnv()
    before = str(env.fingerprint)
    seen = []

    def spy(tool):
        async def fn(**kw):
            seen.append(tool.name)
            return await tool.fn(**kw)
        return dataclasses.replace(tool, fn=fn)

    env.tool_middleware.append(spy)
    env.reset(seed=0)
    env.step(tc("echo", text="hi") + tc("answer", answer=1))
    assert seen == ["echo"] and str(env.fingerprint) == before


def test_an_observation_cut_to_max_observation_chars_is_counted():
    env = ProbeEnv(max_observation_chars=1500, big_output_chars=900)
    env.reset(seed=0)
    obs, _, _, _, info = env.step(tc("dump") + tc("dump"))  # two 900-char outputs > 1500
    assert len(obs) <= 1500 and "truncated" in obs and info["observation_truncated"]
    *_, info = env.step(tc("answer", answer=env.task.secret))
    assert info["truncations"] == 1  # the episode's count (each dump was under its own limit)


def test_a_turn_without_tool_calls_is_answered_by_a_user_message():
    env = ProbeEnv()
    env.reset(seed=0)
    obs, *_, info = env.step("I think the answer is 3.")
    assert info["messages"] == [{"role": "user", "content": obs}] and "<tool_call>" in obs
    _, *_, info = env.step(tc("echo", text="x"))
    assert [m["role"] for m in info["messages"]] == ["tool"]
