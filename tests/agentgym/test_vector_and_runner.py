import json
import time

import gymnasium as gym
import pytest

from agentgym.errors import ConfigError, InfraError
from agentgym.policies import oracle_policy, random_text_policy
from agentgym.runner import run_episodes
from agentgym.testing import ProbeEnv
from agentgym.vector import ToolVectorEnv
from agentgym.wrappers import ToolWrapper


def echo(text):
    return f'<tool_call>{json.dumps({"name": "echo", "arguments": {"text": text}})}</tool_call>'


def test_tool_calls_of_a_batch_overlap():
    vec = ToolVectorEnv([lambda: ProbeEnv(latency_s=0.2) for _ in range(16)])
    vec.reset(seed=0)
    start = time.perf_counter()
    obs, rewards, term, trunc, infos = vec.step([echo(f"env{i}") for i in range(16)])
    assert time.perf_counter() - start < 1.0  # one at a time would take 3.2 s
    assert [f"env{i}" in o for i, o in enumerate(obs)] == [True] * 16
    assert rewards.shape == (16,) and not term.any()


def test_autoreset_returns_final_info_and_a_fresh_observation():
    vec = ToolVectorEnv([ProbeEnv(), ProbeEnv()])
    vec.reset(seed=[10, 11])
    secret = vec.envs[0].task.secret
    answer = f'<tool_call>{json.dumps({"name": "answer", "arguments": {"answer": secret}})}</tool_call>'
    obs, rewards, term, trunc, infos = vec.step([answer, echo("hi")])
    assert term.tolist() == [True, False] and rewards[0] == 1.0
    assert infos[0]["final_info"]["success"] and "reveal" in obs[0]  # new episode's first observation
    assert vec.telemetry.metrics()["tool/answer/calls"] == 1
    with pytest.raises(ConfigError):
        vec.step([echo("only one")])


def test_run_episodes_with_the_oracle_succeeds_everywhere():
    report = run_episodes("agentgym/Calculator-v0", oracle_policy, 200, 32, env_kwargs={"difficulty": 3})
    assert report.completed == 200 and report.success_rate == 1.0 and not report.lost
    assert report.telemetry.metrics()["tool/calculate/usage_frac"] == 1.0


def test_random_text_never_loses_an_episode():
    report = run_episodes("agentgym/Calculator-v0", random_text_policy, 20, 5, env_kwargs={"max_turns": 3})
    assert report.completed == 20 and not report.lost and report.success_rate == 0.0


def test_vector_reset_seeds_env_i_with_seed_plus_i():
    vec = ToolVectorEnv([ProbeEnv() for _ in range(3)])
    _, infos = vec.reset(seed=5)
    alone = [ProbeEnv().reset(seed=5 + i)[1]["task_id"] for i in range(3)]
    assert [i["task_id"] for i in infos] == alone and len(set(alone)) == 3


class FlakyResetEnv(ProbeEnv):
    """Its resets after the first fail with an infrastructure error ``fail_resets`` times."""

    def __init__(self, fail_resets: int):
        super().__init__()
        self.fail_resets, self.resets = fail_resets, 0

    async def _start_episode(self, task):
        self.resets += 1
        if self.resets > 1 and self.fail_resets > 0:
            self.fail_resets -= 1
            raise InfraError("pool exhausted")


@pytest.mark.parametrize("failures", [1, 2])
def test_failed_autoreset_never_loses_the_batch(failures):
    vec = ToolVectorEnv([FlakyResetEnv(failures), ProbeEnv()])
    vec.reset(seed=0)
    answer = '<tool_call>{"name": "answer", "arguments": {"answer": 0}}</tool_call>'
    _, _, term, _, infos = vec.step([answer, echo("a")])
    assert term[0] and "reset_error" in infos[0] and "final_info" in infos[0]
    obs, _, term, trunc, infos = vec.step([echo("ignored"), echo("b")])  # must not raise
    assert "b" in obs[1]
    if failures == 1:
        assert infos[0]["reset_retried"] and "reveal" in obs[0]
    else:
        assert trunc[0] and infos[0]["infra_failed"]
        obs, *_ = vec.step([echo("x"), echo("c")])  # third reset attempt succeeds
        assert "reveal" in obs[0]


class FailsFirstReset(ProbeEnv):
    """Its first reset fails with an infrastructure error (a pool not yet warm)."""

    def __init__(self):
        super().__init__()
        self.resets = 0

    async def _start_episode(self, task):
        self.resets += 1
        if self.resets == 1:
            raise InfraError("pool exhausted")


def test_a_failed_first_reset_is_that_envs_info_and_is_retried_at_its_next_step():
    vec = ToolVectorEnv([FailsFirstReset(), ProbeEnv()])
    obs, infos = vec.reset(seed=0)
    assert obs[0] == "" and infos[0]["infra_failed"] and "pool exhausted" in infos[0]["reset_error"]
    assert "task_id" in infos[1]  # the other env's reset stands
    obs, _, _, _, infos = vec.step([echo("ignored"), echo("b")])
    assert infos[0]["reset_retried"] and "task_id" in infos[0] and obs[0]


class Shout(gym.ObservationWrapper):
    """A plain Gymnasium wrapper: sync only."""

    def observation(self, observation):
        return observation.upper()


class CountSteps(ToolWrapper):
    """An async-aware wrapper: awaited on the loop."""

    steps = 0

    async def astep(self, action):
        CountSteps.steps += 1
        return await super().astep(action)


def test_batched_paths_step_every_wrapper_gym_make_and_the_user_added():
    import agentgym  # noqa: F401

    env = CountSteps(Shout(gym.make("agentgym/Calculator-v0")))
    vec = ToolVectorEnv([env])
    obs, _ = vec.reset(seed=0)
    assert obs[0] == obs[0].upper() and "CALCULATE" in obs[0]
    obs, *_ = vec.step([echo("x")])
    assert obs[0] == obs[0].upper() and CountSteps.steps == 1
    report = run_episodes("agentgym/Calculator-v0", oracle_policy, episodes=4, concurrency=2)
    assert report.success_rate == 1.0 and not report.lost


def test_play_episode_is_one_episode_of_the_runner_and_of_a_fleet_worker():
    """The runner and every fleet worker play an episode with the same public function,
    so what a fleet reports cannot drift from what ``agentgym run`` reports."""
    from agentgym.fleet.worker import EnvWorker
    from agentgym.runner import play_episode
    from agentgym.runtime import run_sync

    env = gym.make("agentgym/Calculator-v0", difficulty=2)
    record = run_sync(play_episode(env, oracle_policy, 7, 11))
    report = run_episodes("agentgym/Calculator-v0", oracle_policy, 1, 1, seed=11, env_kwargs={"difficulty": 2})
    ran = report.episodes[0]
    assert (record.task_id, record.reward, record.success, record.turns) == (ran.task_id, ran.reward, ran.success,
                                                                              ran.turns)
    assert record.index == 7 and record.success and "messages" in record.info

    worker = EnvWorker("agentgym/Calculator-v0", {"difficulty": 2}, 1, "oracle")
    played = run_sync(worker._episode(7, 11)).record  # noqa: SLF001 - the actor method minus Ray
    assert (played.index, played.task_id, played.reward, played.turns) == (7, record.task_id, record.reward,
                                                                            record.turns)
    assert "messages" not in played.info  # the transcript stays on the worker
    run_sync(worker.close())

    failed = run_sync(play_episode(FailsFirstReset(), oracle_policy, 0, 0))
    assert failed.infra_failed and failed.info == {"reset_error": "pool exhausted"} and failed.turns == 0
