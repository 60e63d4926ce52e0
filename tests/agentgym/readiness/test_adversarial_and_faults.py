"""The adversarial action library and fault injection, on envs that need no Docker."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from agentgym.errors import ConfigError
from agentgym.readiness import FaultInjector, FaultPlan, MixedPolicy, adversarial_actions
from agentgym.readiness.faults import kill_sandbox
from agentgym.testing import ProbeEnv


def _python_tools() -> list[dict]:
    return [{"type": "function", "function": {"name": "python", "description": "", "parameters": {
        "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}]


def test_python_tool_gets_runaway_code_and_floods():
    actions = {a.name: a for a in adversarial_actions(_python_tools())}
    assert {"python:busy_loop", "python:allocate_forever", "python:fork_bomb", "python:print_forever",
            "python:kill_self"} <= set(actions)
    call = json.loads(actions["python:busy_loop"].text.removeprefix("<tool_call>").removesuffix("</tool_call>"))
    assert call == {"name": "python", "arguments": {"code": "while True:\n    pass"}}


def test_exclude_drops_actions_and_tags_render_as_tags():
    actions = adversarial_actions(_python_tools(), "tags", exclude=frozenset({"fork_bomb"}))
    names = {a.name for a in actions}
    assert "python:fork_bomb" not in names and "python:busy_loop" in names
    busy = next(a for a in actions if a.name == "python:busy_loop")
    assert busy.text == "<python>while True:\n    pass</python>"


def test_huge_arguments_fit_the_action_limit_so_they_reach_the_tool():
    env = ProbeEnv()
    _, info = env.reset(seed=0)
    huge = next(a for a in adversarial_actions(info["tools"], max_action_chars=env.max_action_chars)
                if a.name == "echo:huge_arg")
    assert len(huge.text) <= env.max_action_chars
    env.step(huge.text)
    assert env.last_results[0].status == "ok" and env.last_results[0].truncated


def test_every_adversarial_action_gets_an_observation_on_the_probe_env():
    env = ProbeEnv()
    _, info = env.reset(seed=0)
    for action in adversarial_actions(info["tools"], max_action_chars=env.max_action_chars):
        if env._done:  # noqa: SLF001
            env.reset(seed=0)
        obs, *_ = env.step(action.text)
        assert isinstance(obs, str) and obs, action.name


def test_mixed_policy_rates_are_respected_and_deterministic():
    actions = adversarial_actions(_python_tools())
    never, always = MixedPolicy(actions, 0.0), MixedPolicy(actions, 1.0)
    rng = np.random.default_rng(0)
    assert all(never.choose(rng) is None for _ in range(100))
    assert all(always.choose(rng) is not None for _ in range(100))
    half = MixedPolicy(actions, 0.5)
    a = [half.choose(np.random.default_rng(5)) for _ in range(1)]
    b = [half.choose(np.random.default_rng(5)) for _ in range(1)]
    assert a == b
    with pytest.raises(ValueError):
        MixedPolicy(actions, 1.5)


def test_fault_plan_parses_and_rejects_nonsense():
    plan = FaultPlan.parse("kill=0.05, stall=0.02")
    assert plan.rates == {"kill": 0.05, "stall": 0.02} and plan.needs_service
    assert not FaultPlan.parse("").any
    for bad in ("explode=0.1", "kill=2", "kill", "kill=lots"):
        with pytest.raises(ConfigError):
            FaultPlan.parse(bad)


def test_infra_faults_are_retried_and_flag_the_episode_when_retries_run_out():
    env = gym.make("agentgym/Calculator-v0")
    fingerprint = env.unwrapped.fingerprint
    injector = FaultInjector(FaultPlan({"infra": 1.0}))
    injector.install(env)
    assert env.unwrapped.fingerprint == fingerprint
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
    result = info["tool_results"][0]
    assert result["status"] == "infra_error" and result["retries"] == 3
    assert truncated and info["infra_failed"] and reward == 0.0
    assert injector.injected["infra"] == 4 and injector.faults_for(env) == 4


def test_the_answer_tool_is_never_faulted():
    env = gym.make("agentgym/Calculator-v0")
    FaultInjector(FaultPlan({"infra": 1.0})).install(env)
    env.reset(seed=0)
    answer = env.unwrapped.task.answer
    _, reward, terminated, _, info = env.step(f'<tool_call>{{"name": "answer", "arguments": {{"answer": {answer}}}}}</tool_call>')
    assert terminated and reward == 1.0 and not info["infra_failed"]


def test_delay_faults_slow_calls_down():
    env = ProbeEnv()
    FaultInjector(FaultPlan({"delay": 1.0}, delay_s=0.05)).install(env)
    env.reset(seed=0)
    env.step('<tool_call>{"name": "echo", "arguments": {"text": "x"}}</tool_call>')
    assert env.last_results[0].status == "ok" and env.last_results[0].latency_ms >= 50


def test_kill_sandbox_kills_a_process_sandbox_and_ignores_other_objects():
    import asyncio

    from sandboxes import ProcessSandbox

    async def scenario() -> tuple[bool, str]:
        sb = ProcessSandbox()
        await sb.start()
        try:
            hit = kill_sandbox(sb)
            result = None
            try:
                result = await sb.run("1 + 1", timeout=10)
            except Exception as e:  # noqa: BLE001 - the sandbox is dead: the transport says so
                return hit, type(e).__name__
            return hit, result.status
        finally:
            await sb.close()

    hit, outcome = asyncio.run(scenario())
    assert hit
    assert outcome != "ok"
    assert kill_sandbox(object()) is False


def test_create_faults_go_through_a_faulty_backend_that_aclose_takes_away():
    from agentgym.runtime import run_sync
    from sandboxes import FaultyBackend, PoolConfig, SandboxInfraError, SandboxPool
    from sandboxes.reliability import RetryPolicy
    from sandboxes.fake import FakeBackend

    env = ProbeEnv()
    backend = FakeBackend()
    pool = SandboxPool(backend, PoolConfig(size=0, retry=RetryPolicy(attempts=2, initial_s=0.001, max_wait_s=0.002), reap_on_start=False))
    from agentgym.resources import shared_resources

    async def register() -> None:
        shared_resources().register_pool(pool, "fake-for-this-test")

    run_sync(register())  # the process's owner of shared resources is where pools are found
    injector = FaultInjector(FaultPlan({"create": 1.0}))
    injector.install(env)
    env.reset(seed=0)
    env.step('<tool_call>{"name": "echo", "arguments": {"text": "x"}}</tool_call>')
    assert isinstance(pool.backend, FaultyBackend) and pool.backend.inner is backend
    assert pool.describe() == {**backend.describe(), "pool": pool.describe()["pool"]}  # fingerprint unchanged

    async def acquire() -> None:
        with pytest.raises(SandboxInfraError, match="injected"):
            await pool.acquire()

    run_sync(acquire())
    assert injector.injected["create"] == 2  # both of the pool's attempts
    run_sync(injector.aclose())
    assert pool.backend is backend and injector.injected["create"] == 2

    async def close() -> None:
        await shared_resources().aclose()

    run_sync(close())


def test_kill_sandbox_kills_what_is_under_a_lease_and_misses_a_released_one():
    import asyncio

    from sandboxes import PoolConfig, SandboxPool
    from sandboxes.fake import FakeBackend

    async def scenario() -> tuple[bool, bool, str | None, bool]:
        async with SandboxPool(FakeBackend(), PoolConfig(size=1, reap_on_start=False)) as pool:
            lease = await pool.acquire()
            await lease.run("x = 1")
            victim = lease.inner
            hit = kill_sandbox(lease)
            value = (await lease.run("x")).value  # replaced and replayed
            await pool.release(lease)
            return hit, victim.healthy, value, kill_sandbox(lease)

    hit, victim_alive, value, hit_after_release = asyncio.run(scenario())
    assert hit and not victim_alive and value == "1"
    assert not hit_after_release


def test_faults_reach_a_team_env_through_its_public_tool_middleware():
    from agentgym.multi_agent.testing import ProbeTeamEnv

    env = ProbeTeamEnv(num_helpers=2, tool_max_retries=1)
    fingerprint = str(env.fingerprint)
    injector = FaultInjector(FaultPlan({"infra": 1.0}))
    injector.install(env)
    injector.install(env)  # idempotent: one wrap per tool
    env.reset(seed=0)
    *_, truncs, infos = env.step({"helper_0": '<tool_call>{"name": "reveal", "arguments": {}}</tool_call>'})
    assert infos["helper_0"]["tool_results"][0]["status"] == "infra_error"
    assert all(truncs.values()) and infos["lead"]["end_reason"] == "infra_failed"
    attempts = 1 + infos["helper_0"]["tool_results"][0]["retries"]
    assert attempts > 1 and injector.faults_for(env) == attempts and str(env.fingerprint) == fingerprint


def test_an_injector_installed_on_a_wrapper_and_its_env_wraps_once():
    env = gym.make("agentgym/Calculator-v0")
    injector = FaultInjector(FaultPlan({"infra": 1.0}))
    injector.install(env)
    injector.install(env.unwrapped)
    env.reset(seed=0)
    *_, info = env.step(env.unwrapped.oracle_action())
    assert info["tool_results"][0]["retries"] == 3 and injector.faults_for(env.unwrapped) == 4
