"""The vLLM rollout engine against a real vLLM (the CPU build in CI: ``make test-vllm``).

A head_dim-32 tiny Qwen2 (tied embeddings, random weights, local tokenizer), fp32,
eager mode. Covers token ids in and out, log-probs against transformers, weight sync
through shared memory (wrapper prefixes, tied head) and sleep/wake.
"""

from __future__ import annotations

import json
import time

import pytest
import torch

from baselines.engines.base import SamplingConfig
from baselines.logprobs import sequence_logprobs

pytestmark = pytest.mark.vllm

PROMPTS = [[5, 17, 42, 99, 3], [7, 8, 9], [100, 120, 130, 140, 150, 160, 11], [1, 2]]


@pytest.fixture(scope="module")
def engine(vllm_model_dir):
    from baselines.engines.vllm import VLLMEngine

    eng = VLLMEngine(str(vllm_model_dir), dtype="float32", enforce_eager=True, max_model_len=512, seed=0)
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


def test_sleep_and_wake_where_supported_else_a_no_op(engine):
    from vllm.platforms import current_platform

    engine.sleep()
    assert engine.asleep == current_platform.is_sleep_mode_available()
    engine.wake_up()
    assert not engine.asleep
    assert len(engine.generate(PROMPTS[:1], SamplingConfig(max_new_tokens=4))[0].token_ids) >= 1


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
    t0 = time.perf_counter()
    engine.sync_weights(state)
    seconds = time.perf_counter() - t0
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

    from baselines.engines.vllm import LLMWeightSyncClient, _items_source

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
