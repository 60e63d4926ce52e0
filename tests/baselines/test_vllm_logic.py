"""vLLM engine logic that needs no GPU: requests, output conversion, weight names.

The records below are plain stand-ins with the attribute shapes of vLLM's
``RequestOutput``/``CompletionOutput``/``Logprob``; the code under test is our conversion.
"""

from types import SimpleNamespace as NS

import pytest
import torch

from baselines.engines.base import SamplingConfig, strip_wrapper_prefixes
from baselines.engines.vllm_async import AsyncVLLMEngine
from baselines.engines.vllm_common import (
    check_vllm_version,
    outputs_to_generations,
    sampling_kwargs,
    token_prompts,
    vllm_weight_items,
)
from baselines.errors import EngineError, EngineUnavailableError


def _record(ids, lps, reason, extra=None):
    per_pos = []
    for t, lp in zip(ids, lps):
        d = {t: NS(logprob=lp, rank=1, decoded_token=None)}
        d.update(extra or {})
        per_pos.append(d)
    return NS(request_id="0", prompt_token_ids=[1, 2], outputs=[NS(index=0, token_ids=tuple(ids), logprobs=per_pos, finish_reason=reason, text="")])


def test_outputs_become_generations_with_sampled_token_logprobs():
    gens = outputs_to_generations([
        _record([5, 6, 2], [-0.1, -0.2, -0.3], "stop", extra={99: NS(logprob=-9.0)}),
        _record([7], [-1.5], "length"),
    ])
    assert gens[0].token_ids == [5, 6, 2] and gens[0].logprobs == pytest.approx([-0.1, -0.2, -0.3])
    assert gens[0].finish_reason == "stop" and gens[1].finish_reason == "length"


def test_missing_logprobs_are_an_error():
    rec = _record([5], [-0.1], "stop")
    rec.outputs[0].logprobs = None
    with pytest.raises(EngineError):
        outputs_to_generations([rec])
    rec = _record([5], [-0.1], "stop")
    rec.outputs[0].logprobs = [{6: NS(logprob=-1.0)}]
    with pytest.raises(EngineError, match="sampled token 5"):
        outputs_to_generations([rec])


def test_requests_are_token_prompts_with_sampled_logprobs_only():
    assert token_prompts([[1, 2], (3,)]) == [{"prompt_token_ids": [1, 2]}, {"prompt_token_ids": [3]}]
    kw = sampling_kwargs(SamplingConfig(max_new_tokens=7, temperature=0.9, top_p=0.95, stop_token_ids=(4,)), seed=3)
    assert kw["logprobs"] == 0 and kw["max_tokens"] == 7 and kw["stop_token_ids"] == [4] and kw["seed"] == 3
    assert kw["temperature"] == 0.9 and kw["top_p"] == 0.95 and kw["skip_special_tokens"] is False


def test_weight_names_drop_wrappers_tied_head_and_rotary_buffers():
    sd = {
        "module.model.embed_tokens.weight": torch.zeros(2),
        "module._orig_mod.model.layers.0.self_attn.q_proj.weight": torch.zeros(2),
        "lm_head.weight": torch.zeros(2),
        "model.layers.0.self_attn.rotary_emb.inv_freq": torch.zeros(1),
    }
    names = [n for n, _ in vllm_weight_items(sd, tie_word_embeddings=True)]
    assert names == ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"]
    assert "lm_head.weight" in [n for n, _ in vllm_weight_items(sd, tie_word_embeddings=False)]
    assert strip_wrapper_prefixes("_fsdp_wrapped_module.model.norm.weight") == "model.norm.weight"


def test_version_guard():
    assert check_vllm_version("0.11.0+cu128") == (0, 11, 0)
    with pytest.raises(EngineUnavailableError, match=">= 0.10.2"):
        check_vllm_version("0.9.2")


def test_engine_without_vllm_says_how_to_fix():
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(EngineUnavailableError, match="rollout.engine=hf"):
            AsyncVLLMEngine("/nonexistent")


# ------------------------------------------------------ GPU weight path (CUDA IPC)
def test_cuda_ipc_only_for_cuda_weights_on_a_platform_with_it():
    from baselines.engines.vllm_common import weight_transfer_path

    on_gpu = [NS(device=torch.device("cuda", 0)), NS(device=torch.device("cuda", 0))]
    assert weight_transfer_path(True, on_gpu) == "cuda_ipc"
    assert weight_transfer_path(False, on_gpu) == "shared_memory"  # vLLM's CPU build
    assert weight_transfer_path(True, on_gpu + [NS(device=torch.device("cpu"))]) == "shared_memory"  # host weights


def test_ipc_buffer_fits_the_largest_tensor_in_the_engine_dtype():
    from baselines.engines.vllm_common import ipc_buffer_bytes

    embedding_7b = torch.empty(152_064, 3_584, device="meta")  # fp32 master weights, sent as bf16: 1.09 GB
    assert ipc_buffer_bytes([("embed", embedding_7b), ("norm", torch.empty(3_584, device="meta"))], torch.bfloat16) == 152_064 * 3_584 * 2
    assert ipc_buffer_bytes([("norm", torch.empty(3_584, device="meta"))], torch.bfloat16) == 1 << 30


class _RecordingLLM:
    """The four weight-transfer methods of vLLM 0.32's ``LLM`` (``RLOfflineMixin``),
    with its signatures: request dicts in, nothing out."""

    def __init__(self):
        self.calls = []

    def init_weight_transfer_engine(self, request):
        self.calls.append(("init", request["init_info"]))

    def start_weight_update(self):
        self.calls.append(("start", None))

    def update_weights(self, request):
        self.calls.append(("update", request["update_info"]))

    def finish_weight_update(self, weight_version=None):
        self.calls.append(("finish", weight_version))


def test_llm_client_wraps_requests_and_sends_ipc_handles_pickled():
    import base64
    import pickle

    from baselines.engines.vllm_common import LLMWeightSyncClient

    llm = _RecordingLLM()
    client = LLMWeightSyncClient(llm)
    handles = {"GPU-1234": (torch.Tensor, (4,), (1,), 0, "storage", torch.bfloat16, 0, b"\x00handle")}
    client.init_weight_transfer_engine({"packed": True})
    client.start_weight_update()
    client.update_weights({"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[4]], "ipc_handles": handles, "tensor_sizes": [8]})
    client.finish_weight_update()
    assert [c[0] for c in llm.calls] == ["init", "start", "update", "finish"]
    assert llm.calls[0][1] == {"packed": True}
    sent = llm.calls[2][1]
    assert "ipc_handles" not in sent and sent["names"] == ["w"] and sent["tensor_sizes"] == [8]
    assert pickle.loads(base64.b64decode(sent["ipc_handles_pickled"])) == handles
    client.update_weights([{"names": [], "dtype_names": [], "shapes": [], "ipc_handles": None}])  # per-rank list, nothing to pickle
    assert llm.calls[-1] == ("update", [{"names": [], "dtype_names": [], "shapes": [], "ipc_handles": None}])
