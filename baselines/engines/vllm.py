"""Rollout with vLLM (GPU, optional extra ``agentgym[vllm]``), imported lazily.

* Prompts are token ids (``TokensPrompt``: ``{"prompt_token_ids": [...]}``), so the
  agent loop's exact ids go in and vLLM never re-tokenises.
* The engine is built with ``logprobs_mode="processed_logprobs"``: the log-prob returned
  for a sampled token is under the distribution it was sampled from (after temperature
  and top-p), matching what the trainer's importance weights need. Each request asks
  for ``logprobs=0``: only the sampled token's log-prob.
* ``sleep()``/``wake_up()`` (``enable_sleep_mode=True``) free the GPU memory of weights
  and KV cache while the colocated trainer runs.
* Weights are updated in place after each training step by a worker extension
  (:mod:`baselines.engines.vllm_worker`) that calls the model's own ``load_weights``
  with checkpoint-named tensors (vLLM fuses q/k/v and gate/up itself).

vLLM's RL-facing APIs moved between releases. This module needs ``logprobs_mode``
(added in the 0.10 series) and ``LLM.collective_rpc`` with ``worker_extension_cls``
(present since 0.8); newer releases also offer a dedicated weight-transfer engine
(NCCL/IPC) for trainer and engine on different GPUs, which this colocated path does not
need. Versions are checked at construction with an instructive error.

The GPU-free logic (request building, conversion of vLLM's output records into
:class:`Generation`, weight-name mapping) is in plain functions, unit-tested without vLLM.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from baselines.engines.base import Generation, SamplingConfig, strip_wrapper_prefixes
from baselines.errors import EngineError, EngineUnavailableError

__all__ = ["VLLMEngine", "MIN_VLLM_VERSION", "sampling_kwargs", "token_prompts", "outputs_to_generations", "vllm_weight_items", "check_vllm_version"]

MIN_VLLM_VERSION = (0, 10, 2)
_EXTENSION = "baselines.engines.vllm_worker.WeightSyncExtension"


def check_vllm_version(version: str) -> tuple[int, ...]:
    """Parse ``vllm.__version__`` and refuse releases without ``logprobs_mode``."""
    parts = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    found = tuple(parts + [0] * (3 - len(parts)))
    if found < MIN_VLLM_VERSION:
        want = ".".join(map(str, MIN_VLLM_VERSION))
        raise EngineUnavailableError(
            f"vLLM {version} lacks logprobs_mode='processed_logprobs'; expected vLLM >= {want} "
            f"(pip install 'vllm>={want}') or use rollout.engine=hf."
        )
    return found


def sampling_kwargs(sampling: SamplingConfig, seed: int | None = None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one turn."""
    kw: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_new_tokens,
        "logprobs": 0,
        "skip_special_tokens": False,
        "include_stop_str_in_output": True,
    }
    if sampling.stop_token_ids:
        kw["stop_token_ids"] = list(sampling.stop_token_ids)
    if seed is not None:
        kw["seed"] = seed
    return kw


def token_prompts(prompts: Sequence[Sequence[int]]) -> list[dict[str, list[int]]]:
    """``TokensPrompt`` dicts (a TypedDict, so plain dicts are the real thing)."""
    return [{"prompt_token_ids": [int(t) for t in p]} for p in prompts]


def _logprob_value(entry: Any) -> float:
    return float(entry.logprob if hasattr(entry, "logprob") else entry)


def outputs_to_generations(outputs: Sequence[Any]) -> list[Generation]:
    """Turn ``RequestOutput`` records into :class:`Generation` (first completion each).

    Each record has ``.outputs[0]`` with ``token_ids``, ``logprobs`` (per position, a
    mapping from token id to an object with ``.logprob``) and ``finish_reason``.
    """
    out = []
    for request in outputs:
        completion = request.outputs[0]
        ids = [int(t) for t in completion.token_ids]
        if completion.logprobs is None:
            raise EngineError("vLLM returned no log-probs; the request must set logprobs=0 (sampling_kwargs does).")
        lps = []
        for pos, tok in enumerate(ids):
            per_pos = completion.logprobs[pos]
            if tok not in per_pos:
                raise EngineError(f"vLLM's log-probs at position {pos} lack the sampled token {tok}.")
            lps.append(_logprob_value(per_pos[tok]))
        reason = "length" if completion.finish_reason == "length" else "stop"
        out.append(Generation(ids, lps, reason))
    return out


def vllm_weight_items(state_dict: Mapping[str, torch.Tensor], tie_word_embeddings: bool) -> Iterator[tuple[str, torch.Tensor]]:
    """Checkpoint-named tensors for vLLM's ``load_weights``.

    Wrapper prefixes (DDP ``module.``, ``_orig_mod.``) are removed; with tied embeddings
    ``lm_head.weight`` is skipped (vLLM ties it to ``embed_tokens`` itself); rotary
    caches are skipped (they are buffers vLLM computes).
    """
    for name, tensor in state_dict.items():
        key = strip_wrapper_prefixes(name)
        if tie_word_embeddings and key == "lm_head.weight":
            continue
        if "rotary_emb.inv_freq" in key:
            continue
        yield key, tensor.detach()


class VLLMEngine:
    """A colocated ``vllm.LLM`` used for rollout. See the module docstring."""

    def __init__(self, model_path: str, *, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.5,
                 enable_sleep_mode: bool = True, enforce_eager: bool = False, dtype: str = "bfloat16",
                 max_model_len: int | None = None, seed: int = 0) -> None:
        try:
            import vllm
        except ImportError as e:
            raise EngineUnavailableError("rollout.engine=vllm needs vLLM on a GPU machine: pip install 'agentgym[vllm]', or use rollout.engine=hf.") from e
        check_vllm_version(vllm.__version__)
        from transformers import AutoConfig

        self._vllm = vllm
        self.tied = bool(getattr(AutoConfig.from_pretrained(model_path), "tie_word_embeddings", False))
        self.llm = vllm.LLM(
            model=model_path, tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
            enable_sleep_mode=enable_sleep_mode, enforce_eager=enforce_eager, dtype=dtype, max_model_len=max_model_len,
            seed=seed, logprobs_mode="processed_logprobs", worker_extension_cls=_EXTENSION,
        )
        self.sleep_enabled = enable_sleep_mode
        self.asleep = False

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig, seed: int | None = None) -> list[Generation]:
        self.wake_up()
        params = self._vllm.SamplingParams(**sampling_kwargs(sampling, seed))
        outputs = self.llm.generate(token_prompts(prompts), params, use_tqdm=False)
        return outputs_to_generations(outputs)

    def sync_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load new weights in place. Wakes only the weights when asleep (no KV cache)."""
        if self.asleep:
            self.llm.wake_up(tags=["weights"])
        items = [(k, v.to("cpu")) for k, v in vllm_weight_items(state_dict, self.tied)]
        self.llm.collective_rpc("agentgym_load_weights", args=(items,))
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False
        self.llm.reset_prefix_cache()

    def sleep(self) -> None:
        if self.sleep_enabled and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def wake_up(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False
