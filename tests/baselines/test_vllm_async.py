"""The vLLM engine (:class:`AsyncVLLMEngine`) against a real vLLM (CPU build: ``make test-vllm``).

A head_dim-32 tiny Qwen2 (tied embeddings, random weights, local tokenizer), fp32, eager
mode. Token ids in and out, log-probs against transformers, weight sync through shared
memory (wrapper prefixes, tied head) and the CUDA IPC payload; one request per episode
turn, versions across a weight sync, and the asynchronous rollout on Calculator-v0 end
to end. The module shares one engine: the tests that compare it with transformers run
first, while it holds the weights of ``hf_model`` (file order: ``-p no:randomly``).
"""

from __future__ import annotations

import asyncio
import json
import time

import gymnasium as gym
import pytest
import torch

import agentgym  # noqa: F401
from agentgym.runtime import run_sync
from baselines.engines.base import SamplingConfig
from baselines.logprobs import sequence_logprobs

pytestmark = pytest.mark.vllm

PROMPTS = [[5, 17, 42, 99, 3], [7, 8, 9], [100, 120, 130, 140, 150, 160, 11], [1, 2]]


@pytest.fixture(scope="module")
def engine(vllm_model_dir):
    from baselines.engines.vllm_async import AsyncVLLMEngine

    eng = AsyncVLLMEngine(str(vllm_model_dir), dtype="float32", enforce_eager=True, max_model_len=512, seed=0)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def hf_model(vllm_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(vllm_model_dir, dtype=torch.float32).eval()


def _hf_logprobs(model, seqs, temperature=1.0):
    """Trainer-side log-probs of each sequence's tokens 1.. (one row at a time: no padding)."""
    out = []
    with torch.no_grad():
        for s in seqs:
            ids = torch.tensor([s])
            logp, _ = sequence_logprobs(model, ids, torch.ones_like(ids), temperature=temperature)
            out.append(logp[0, 1:].tolist())
    return out


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_token_ids_in_and_out_with_logprobs_of_the_sampled_distribution(engine, hf_model, vllm_model_dir, temperature):
    vocab = json.loads((vllm_model_dir / "config.json").read_text())["vocab_size"]
    gens = engine.generate(PROMPTS, SamplingConfig(max_new_tokens=12, temperature=temperature), seed=3)
    assert len(gens) == len(PROMPTS)
    diffs = []
    for prompt, g in zip(PROMPTS, gens):
        assert 1 <= len(g.token_ids) <= 12 and all(isinstance(t, int) and 0 <= t < vocab for t in g.token_ids)
        assert g.finish_reason in ("stop", "length")
        ours = _hf_logprobs(hf_model, [prompt + g.token_ids], temperature)[0][len(prompt) - 1 :]
        diffs += [abs(a - b) for a, b in zip(ours, g.logprobs, strict=True)]
    assert max(diffs) < 1e-4 and sum(diffs) / len(diffs) < 1e-5, (max(diffs), sum(diffs) / len(diffs))
    again = engine.generate(PROMPTS, SamplingConfig(max_new_tokens=12, temperature=temperature), seed=3)
    assert [g.token_ids for g in again] == [g.token_ids for g in gens]  # a seed fixes the samples


def test_samples_of_one_prompt_differ_under_one_call_seed(engine):
    """A group is the same prompt several times: one seed shared by its requests would
    make every sample identical, every advantage 0, and no PPO step would ever happen."""
    gens = engine.generate([PROMPTS[0]] * 6, SamplingConfig(max_new_tokens=12, temperature=1.0), seed=5)
    assert len({tuple(g.token_ids) for g in gens}) > 1


def test_greedy_tokens_equal_transformers_greedy(engine, hf_model):
    gens = engine.generate(PROMPTS[:2], SamplingConfig(max_new_tokens=8, temperature=0.0))
    for prompt, g in zip(PROMPTS, gens):
        ref = hf_model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long), do_sample=False,
                                max_new_tokens=len(g.token_ids), eos_token_id=None, pad_token_id=0)[0, len(prompt):].tolist()
        assert g.token_ids == ref


def test_sync_weights_makes_the_engine_score_with_the_new_weights(engine, hf_model, capsys):
    """Prefixed names (DDP ``module.``, compile ``_orig_mod.``), tied embeddings: the
    engine must then give the perturbed model's log-probs, not the old ones."""
    seqs = [p + [13, 14, 15, 16] for p in PROMPTS]
    before = engine.score(seqs)
    torch.testing.assert_close(torch.tensor(sum(before, [])), torch.tensor(sum(_hf_logprobs(hf_model, seqs), [])), atol=1e-4, rtol=0)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in hf_model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)
    assert hf_model.config.tie_word_embeddings and hf_model.lm_head.weight is hf_model.model.embed_tokens.weight
    state = {f"module._orig_mod.{k}": v for k, v in hf_model.state_dict().items()}
    version = engine.version
    t0 = time.perf_counter()
    engine.sync_weights(state)
    seconds = time.perf_counter() - t0
    assert engine.version == version + 1 and engine.last_sync_path == "shared_memory"
    after = torch.tensor(sum(engine.score(seqs), []))
    expected = torch.tensor(sum(_hf_logprobs(hf_model, seqs), []))
    assert (after - torch.tensor(sum(before, []))).abs().max() > 1e-2  # the weights did change
    torch.testing.assert_close(after, expected, atol=1e-4, rtol=0)
    # Only the embeddings: the tied head must follow them.
    with torch.no_grad():
        hf_model.model.embed_tokens.weight.add_(torch.randn(hf_model.model.embed_tokens.weight.shape, generator=g) * 0.05)
    engine.sync_weights(dict(hf_model.state_dict()))
    torch.testing.assert_close(torch.tensor(sum(engine.score(seqs), [])), torch.tensor(sum(_hf_logprobs(hf_model, seqs), [])), atol=1e-4, rtol=0)
    with capsys.disabled():
        n = sum(p.numel() for p in hf_model.parameters())
        print(f"\nvLLM sync_weights: {n / 1e6:.2f}M params (fp32) in {seconds:.3f}s (first sync), {engine.last_sync_s:.3f}s (second)")


def test_cuda_ipc_payload_and_source_are_what_vllm_accepts(monkeypatch):
    """The GPU path's pieces against vLLM's own classes (no GPU needed): our pickled
    payload decodes into ``IPCWeightTransferUpdateInfo``, and our ``WeightSource`` casts
    to the engine dtype as it is read."""
    from vllm.distributed.weight_transfer.base import WeightSource
    from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferUpdateInfo

    from baselines.engines.vllm_common import LLMWeightSyncClient, _items_source

    sent = []
    client = LLMWeightSyncClient(type("LLM", (), {"update_weights": lambda self, request: sent.append(request["update_info"])})())
    handles = {"GPU-1": ("args", 1, (2, 3))}
    client.update_weights({"names": ["a"], "dtype_names": ["bfloat16"], "shapes": [[2, 3]], "ipc_handles": handles, "tensor_sizes": [12]})
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    info = IPCWeightTransferUpdateInfo(**sent[0])
    assert info.ipc_handles == handles and info.names == ["a"]

    source = _items_source([("model.embed_tokens.weight", torch.ones(2, 3))], torch.bfloat16)
    assert isinstance(source, WeightSource)
    assert [(m.name, m.dtype, m.shape) for m in source.metadata()] == [("model.embed_tokens.weight", torch.bfloat16, (2, 3))]
    assert [t.dtype for _, t in source] == [torch.bfloat16]


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


def test_host_weights_take_shared_memory_and_ipc_never_blocks_the_loop(engine, vllm_model_dir, monkeypatch):
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
