"""AsyncVLLMEngine against a real vLLM (CPU build: ``make test-vllm``): one request per
episode turn, versions across a weight sync, lockstep seeds, and the asynchronous
rollout on Calculator-v0 end to end."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest
import torch

import agentgym  # noqa: F401
from agentgym.runtime import run_sync
from baselines.engines.base import SamplingConfig

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from baselines.tiny_model import TinyModelSpec, build_tiny_model

    from .conftest import TRAINED_TINY  # head_dim 32, which vLLM's CPU attention needs

    return build_tiny_model(tmp_path_factory.mktemp("vllm-async"), spec=TinyModelSpec(**TRAINED_TINY))


@pytest.fixture(scope="module")
def engine(model_dir):
    from baselines.engines.vllm_async import AsyncVLLMEngine

    eng = AsyncVLLMEngine(str(model_dir), dtype="float32", enforce_eager=True, max_model_len=512, seed=0)
    yield eng
    eng.close()


def test_requests_record_the_version_that_sampled_them(engine, model_dir):
    from transformers import AutoModelForCausalLM

    sampling = SamplingConfig(max_new_tokens=8, temperature=1.0)
    first = engine.generate([[5, 17, 42], [7, 8, 9]], sampling, seed=3)
    assert first == engine.generate([[5, 17, 42], [7, 8, 9]], sampling, seed=3)  # per-request seeds
    assert all(len(g.token_ids) == len(g.logprobs) > 0 for g in first)
    state = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).state_dict()
    new = {k: v + 0.05 * torch.randn_like(v) for k, v in state.items()}

    async def sync_while_requests_run():
        before = [asyncio.create_task(engine.agenerate([5, 17, 42, i], sampling)) for i in range(4)]
        await asyncio.sleep(0)
        syncing = asyncio.create_task(engine.async_sync_weights(new))
        await asyncio.sleep(0)
        after = await engine.agenerate([5, 17, 42], sampling)
        await syncing
        return [await b for b in before], after

    version = engine.version
    before, after = run_sync(sync_while_requests_run())
    assert {b.version for b in before} == {version} and after.version == version + 1 == engine.version
    assert engine.generate([[5, 17, 42], [7, 8, 9]], sampling, seed=3) != first  # the new weights are in use


def test_async_rollout_on_async_llm(engine, model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from baselines.agent_loop import AgentLoopConfig
    from baselines.async_rollout import AsyncRollout, AsyncRolloutConfig
    from baselines.chat_tokens import ChatTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    envs = [gym.make("agentgym/Calculator-v0", difficulty=1, max_turns=2) for _ in range(8)]
    rollout = AsyncRollout(envs, engine, ChatTokenizer(tokenizer), AgentLoopConfig(SamplingConfig(16, 1.0), 512, 1.0),
                           AsyncRolloutConfig(max_staleness=1), 2, 2, lambda step: ([10 * step, 10 * step + 1], step))
    weights = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).state_dict()
    try:
        batches = []
        for step in range(3):
            batches.append(rollout.collect(step))
            engine.sync_weights(weights)
        for b in batches:
            assert len(b.trajectories) + b.dropped_infra_failed == 4 and b.stats["rollout/staleness_max"] <= 1
            for t in b.trajectories:
                generated = [v for v, m in zip(t.token_versions, t.loss_mask) if m]
                assert generated and all(0 <= v <= engine.version for v in generated)
                assert len(t.engine_logprobs) == len(t.token_ids)
        assert max(t.turns for b in batches for t in b.trajectories) == 2  # later turns went through AsyncLLM too
    finally:
        rollout.close()
    assert rollout.episodes_running == 0
