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
def engine(vllm_model_dir):
    from baselines.engines.vllm_async import AsyncVLLMEngine

    eng = AsyncVLLMEngine(str(vllm_model_dir), dtype="float32", enforce_eager=True, max_model_len=512, seed=0)
    yield eng
    eng.close()


def test_requests_record_the_version_that_sampled_them(engine, vllm_model_dir):
    from transformers import AutoModelForCausalLM

    sampling = SamplingConfig(max_new_tokens=8, temperature=1.0)
    first = engine.generate([[5, 17, 42], [7, 8, 9]], sampling, seed=3)
    assert first == engine.generate([[5, 17, 42], [7, 8, 9]], sampling, seed=3)  # per-request seeds
    assert all(len(g.token_ids) == len(g.logprobs) > 0 for g in first)
    state = AutoModelForCausalLM.from_pretrained(vllm_model_dir, dtype=torch.float32).state_dict()
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


def test_async_rollout_on_async_llm(engine, vllm_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from baselines.agent_loop import AgentLoopConfig
    from baselines.async_rollout import AsyncRollout, AsyncRolloutConfig
    from baselines.chat_tokens import ChatTokenizer

    tokenizer = AutoTokenizer.from_pretrained(vllm_model_dir)
    envs = [gym.make("agentgym/Calculator-v0", difficulty=1, max_turns=2) for _ in range(8)]
    rollout = AsyncRollout(envs, engine, ChatTokenizer(tokenizer), AgentLoopConfig(SamplingConfig(16, 1.0), 512, 1.0),
                           AsyncRolloutConfig(max_staleness=1), 2, 2, lambda step: ([10 * step, 10 * step + 1], step))
    weights = AutoModelForCausalLM.from_pretrained(vllm_model_dir, dtype=torch.float32).state_dict()
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


class _RecordingAsyncLLM:
    """``AsyncLLM``'s weight-update surface (vLLM 0.32: coroutines taking request
    dataclasses), recording each call, its argument and the thread it ran on."""

    def __init__(self) -> None:
        import threading

        self.calls: list[tuple[str, object, int]] = []
        self._thread = threading.get_ident

    async def _record(self, name: str, arg: object = None) -> None:
        self.calls.append((name, arg, self._thread()))

    async def init_weight_transfer_engine(self, request):
        await self._record("init", request)

    async def start_weight_update(self):
        await self._record("start")

    async def update_weights(self, request):
        await self._record("update", request)

    async def finish_weight_update(self, weight_version=None):
        await self._record("finish", weight_version)

    async def reset_prefix_cache(self):
        await self._record("reset_prefix_cache")


def test_async_sync_takes_the_sync_engines_path_and_ipc_never_blocks_the_loop(engine, vllm_model_dir, monkeypatch):
    """Host weights go through shared memory even where CUDA IPC exists (a real reload);
    CUDA weights go through the shared IPC sender on a worker thread, whose four
    weight-update calls reach ``AsyncLLM`` as vLLM's request objects, on the loop, with the
    handles in a payload vLLM decodes, while the loop keeps running other coroutines."""
    import threading
    import time as time_module

    from transformers import AutoModelForCausalLM
    from vllm.distributed.weight_transfer.base import (
        WeightTransferInitRequest,
        WeightTransferUpdateRequest,
    )
    from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferUpdateInfo

    from baselines.engines import vllm_async

    state = AutoModelForCausalLM.from_pretrained(vllm_model_dir, dtype=torch.float32).state_dict()
    monkeypatch.setattr(engine, "cuda_ipc", True)  # a CUDA platform, but the weights are on the host
    version = engine.version
    engine.sync_weights(state)
    assert engine.last_sync_path == "shared_memory" and engine.version == version + 1

    handles = {"GPU-1": ("rebuild args", 0, (4,))}
    senders: list[tuple[int, bool]] = []

    def sender(client, named, dtype, *, workers_initialised):  # what vLLM's IPCTrainerWeightTransferEngine does with its client
        senders.append((threading.get_ident(), workers_initialised))
        if not workers_initialised:
            client.init_weight_transfer_engine({"packed": True})
        client.start_weight_update()
        time_module.sleep(0.3)  # packing and the workers' wait: blocking, on this thread
        client.update_weights({"names": [n for n, _ in named[:1]], "dtype_names": [str(dtype).removeprefix("torch.")],
                               "shapes": [list(named[0][1].shape)], "ipc_handles": handles, "tensor_sizes": [4]})
        client.finish_weight_update()

    fake = _RecordingAsyncLLM()
    monkeypatch.setattr(engine, "llm", fake)
    monkeypatch.setattr(engine, "_ipc_ready", False)
    monkeypatch.setattr(vllm_async, "send_by_cuda_ipc", sender)
    monkeypatch.setattr(vllm_async, "weight_transfer_path", lambda cuda_ipc, tensors: "cuda_ipc" if cuda_ipc else "shared_memory")

    async def sync_twice_while_ticking() -> tuple[int, int]:
        ticks = 0
        done = asyncio.Event()

        async def tick() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        await engine.async_sync_weights(state)
        await engine.async_sync_weights(state)
        done.set()
        await ticker
        return ticks, threading.get_ident()

    version = engine.version
    ticks, loop_thread = run_sync(sync_twice_while_ticking())
    assert engine.last_sync_path == "cuda_ipc" and engine.version == version + 2
    assert ticks >= 20, ticks  # 0.6 s of sender sleep: a blocked loop would tick about once
    assert [s[1] for s in senders] == [False, True]  # the workers get the init info once
    assert all(thread != loop_thread for thread, _ in senders)
    names = [c[0] for c in fake.calls]
    assert names == ["init", "start", "update", "finish", "reset_prefix_cache", "start", "update", "finish", "reset_prefix_cache"]
    assert all(thread == loop_thread for _, _, thread in fake.calls)
    init, update = fake.calls[0][1], fake.calls[2][1]
    assert isinstance(init, WeightTransferInitRequest) and init.init_info == {"packed": True}
    assert isinstance(update, WeightTransferUpdateRequest) and "ipc_handles" not in update.update_info
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    info = IPCWeightTransferUpdateInfo(**update.update_info)
    assert info.ipc_handles == handles and info.names == ["model.embed_tokens.weight"] and info.dtype_names == ["float32"]
