"""The asynchronous rollout: same tokens as the synchronous loop at max_staleness=0;
groups consumed as they finish; episodes continue under new weights with per-token
versions; stale groups dropped; a hung env step times out into a dropped episode."""

from __future__ import annotations

import asyncio
import copy

import gymnasium as gym
import pytest
import torch

import agentgym  # noqa: F401
from agentgym.runtime import get_loop
from agentgym.wrappers import ToolWrapper
from baselines.agent_loop import AgentLoop, AgentLoopConfig
from baselines.async_rollout import AsyncRollout, AsyncRolloutConfig
from baselines.chat_tokens import ChatTokenizer
from baselines.engines.base import Generation, SamplingConfig
from baselines.engines.hf import HFEngine
from baselines.engines.hf_async import BatchingEngine

CALC = "agentgym/Calculator-v0"


def test_max_staleness_0_reproduces_the_synchronous_loop(tiny_model_dir, tokenizer):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)

    def engine():
        return HFEngine(copy.deepcopy(model), pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id])

    chat = ChatTokenizer(tokenizer)
    config = AgentLoopConfig(SamplingConfig(max_new_tokens=12, temperature=1.0), 512, 1.0)

    def schedule(step):
        return [100 + 10 * step + i for i in range(3)], 1000 + step

    sync_engine, async_engine = engine(), BatchingEngine(engine())
    sync = AgentLoop([gym.make(CALC, difficulty=1, max_turns=3) for _ in range(6)], sync_engine, chat, config)
    rollout = AsyncRollout([gym.make(CALC, difficulty=1, max_turns=3) for _ in range(6)], async_engine, chat, config,
                           AsyncRolloutConfig(max_staleness=0), 3, 2, schedule)
    try:
        for step in range(2):
            seeds, sampling_seed = schedule(step)
            want, got = sync.collect(seeds, 2, sampling_seed=sampling_seed), rollout.collect(step)
            assert len(want.trajectories) == len(got.trajectories) == 6
            for a, b in zip(want.trajectories, got.trajectories):
                assert (a.task_id, a.group_id, a.turns, a.reward, a.truncated) == (b.task_id, b.group_id, b.turns, b.reward, b.truncated)
                assert a.token_ids == b.token_ids and a.loss_mask == b.loss_mask and a.engine_logprobs == b.engine_logprobs
                assert a.drift_ok == b.drift_ok
                assert {v for v, m in zip(b.token_versions, b.loss_mask) if m} == {step}
            assert max(t.turns for t in got.trajectories) > 1  # multi-turn: later turns batched in lockstep too
            assert got.stats["rollout/staleness_max"] == 0.0
            new = {k: v + 0.01 * torch.randn_like(v) for k, v in model.state_dict().items()}
            sync_engine.sync_weights(new)
            async_engine.sync_weights(new)
        assert async_engine.version == 2
    finally:
        rollout.close()
        async_engine.close()


class ScriptedEngine:
    """Calls ``calculate`` on the first turn and answers after a tool response."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.synced = 0

    def generate(self, prompts, sampling, seed=None, row_seeds=None):
        out = []
        for p in prompts:
            turn = self.tokenizer.decode(p).count("<tool_response>")
            text = ('<tool_call>{"name": "calculate", "arguments": {"expression": "1 + 1"}}</tool_call>' if turn == 0
                    else '<tool_call>{"name": "answer", "arguments": {"answer": 2}}</tool_call>')
            ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
            out.append(Generation(ids, [-0.1] * len(ids), "stop"))
        return out

    def sync_weights(self, state_dict):
        self.synced += 1

    def sleep(self):
        pass

    def wake_up(self):
        pass


class GatedSteps(ToolWrapper):
    """The first step of an episode whose task seed has a gate waits for that gate."""

    def __init__(self, env, gates):
        super().__init__(env)
        self.gates = gates
        self.seed = None
        self.turn = 0

    async def areset(self, *, seed=None, options=None):
        self.seed, self.turn = seed, 0
        return await super().areset(seed=seed, options=options)

    async def astep(self, action):
        if self.turn == 0 and self.seed in self.gates:
            await self.gates[self.seed].wait()
        self.turn += 1
        return await super().astep(action)


def _gated_rollout(tokenizer, gates, max_staleness, step_timeout_s=600.0):
    def schedule(step):
        return [step], None  # group g plays task seed g (one group per batch)

    engine = BatchingEngine(ScriptedEngine(tokenizer))
    envs = [GatedSteps(gym.make(CALC, difficulty=1), gates) for _ in range(max_staleness + 1)]
    config = AgentLoopConfig(SamplingConfig(max_new_tokens=64), 1024, 0.0)
    return AsyncRollout(envs, engine, ChatTokenizer(tokenizer), config, AsyncRolloutConfig(max_staleness, step_timeout_s), 1, 1,
                        schedule), engine


def _release(gate):
    get_loop().call_soon_threadsafe(gate.set)


def _wait_until(predicate, timeout_s=30.0):
    import time

    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the rollout"
        time.sleep(0.01)


def test_groups_are_consumed_as_they_finish_and_continue_under_new_weights(tokenizer):
    gates = {0: asyncio.Event()}
    rollout, engine = _gated_rollout(tokenizer, gates, max_staleness=1)
    try:
        first = rollout.collect(0)  # group 0 waits at its first step: group 1 comes first
        assert first.stats["rollout/groups_in_flight"] == 1.0
        slow_task = gym.make(CALC, difficulty=1).reset(seed=0)[1]["task_id"]
        assert first.trajectories[0].task_id != slow_task
        engine.sync_weights({})  # version 1 while group 0 is inside its first tool call
        gates[2] = asyncio.Event()  # the group admitted next waits too, so group 0 is the one to finish
        _release(gates[0])
        second = rollout.collect(1)
        (t,) = second.trajectories
        assert t.task_id == slow_task and t.terminated and t.turns == 2
        versions = [v for v, m in zip(t.token_versions, t.loss_mask) if m]
        spans = sorted(set(versions))
        assert spans == [0, 1] and versions == sorted(versions)  # turn 1 sampled by version 0, turn 2 by version 1
        assert second.stats["rollout/staleness_max"] == 1.0
        assert 0.0 < second.stats["rollout/staleness_mean"] < 1.0
        assert 0.0 <= second.stats["perf/engine_idle_frac"] <= 1.0 and 0.0 <= second.stats["perf/env_idle_frac"] <= 1.0
        _release(gates[2])
    finally:
        rollout.close()
        engine.close()
    assert rollout.episodes_running == 0 and rollout.groups_in_flight == 0


def test_a_group_too_old_for_the_bound_is_dropped_never_trained_on(tokenizer):
    gates = {0: asyncio.Event()}
    rollout, engine = _gated_rollout(tokenizer, gates, max_staleness=1)
    slow_task = gym.make(CALC, difficulty=1).reset(seed=0)[1]["task_id"]
    try:
        seen = [rollout.collect(0), rollout.collect(1)]
        _release(gates[0])  # group 0 (admitted at step 0) can only finish after step 1: too late
        _wait_until(lambda: rollout.groups_in_flight == 0)
        seen += [rollout.collect(2), rollout.collect(3)]
        assert all(b.trajectories[0].task_id != slow_task for b in seen)
        assert seen[-1].stats["rollout/dropped_stale_groups"] == 1.0
        assert all(b.stats["rollout/staleness_max"] <= 1.0 for b in seen)
    finally:
        rollout.close()
        engine.close()


def test_a_hung_step_times_out_into_a_dropped_episode_and_the_next_batch_arrives(tokenizer):
    gates = {0: asyncio.Event()}  # never released
    rollout, engine = _gated_rollout(tokenizer, gates, max_staleness=0, step_timeout_s=2.0)
    try:
        first = rollout.collect(0)  # its only episode hangs in its first step: dropped after 2 s, counted
        assert first.trajectories == [] and first.dropped_infra_failed == 1
        assert first.stats["rollout/dropped_stuck_episodes"] == 1.0 and first.stats["rollout/dropped_infra_failed"] == 1.0
        second = rollout.collect(1)
        assert len(second.trajectories) == 1 and second.trajectories[0].terminated
    finally:
        rollout.close()
        engine.close()


def test_an_engine_error_reaches_the_trainer(tokenizer):
    class Broken(ScriptedEngine):
        def generate(self, prompts, sampling, seed=None, row_seeds=None):
            raise RuntimeError("engine died")

    rollout, engine = _gated_rollout(tokenizer, {}, max_staleness=0)
    engine.engine = Broken(tokenizer)
    try:
        with pytest.raises(RuntimeError, match="engine died"):
            rollout.collect(0)
    finally:
        rollout.close()
        engine.close()
