"""The interface every rollout engine implements: token ids in, token ids and log-probs out.

An engine is a model instance *separate* from the trainer's policy. It sees new weights
only through :meth:`RolloutEngine.sync_weights`, the same separation a vLLM server has,
so the CPU path (``hf``) exercises the same weight-flow as the GPU path (``vllm``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import torch

from agentgym.seeding import derived_seed  # re-exported: the engines' callers seed rows with it

__all__ = ["SamplingConfig", "Generation", "RolloutEngine", "FinishReason", "derived_seed", "generate_rows",
           "strip_wrapper_prefixes"]

FinishReason = Literal["stop", "length"]

# Prefixes that training wrappers add to parameter names: DDP, torch.compile, FSDP1.
_WRAPPER_PREFIXES = ("module.", "_orig_mod.", "_fsdp_wrapped_module.", "_checkpoint_wrapped_module.")


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample one turn. ``temperature=0`` means greedy."""

    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"Expected max_new_tokens >= 1, actual value: {self.max_new_tokens}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(
                f"Expected temperature >= 0 and 0 < top_p <= 1, actual values: {self.temperature}, {self.top_p}"
            )


@dataclass
class Generation:
    """One completion: the sampled ids and the log-prob of each under the *processed*
    distribution (after temperature and top-p), which is what the policy sampled from."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(
                f"Expected one log-prob per token, actual: {len(self.token_ids)} ids, {len(self.logprobs)} log-probs"
            )


@runtime_checkable
class RolloutEngine(Protocol):
    """Generates completions for token-id prompts and receives trainer weights."""

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig, seed: int | None = None,
                 row_seeds: Sequence[int] | None = None) -> list[Generation]:
        """One completion per prompt, in order. ``seed`` seeds the call; ``row_seeds``
        (one per prompt, in place of ``seed``) give each prompt a draw of its own that
        does not depend on what else is in the call."""
        ...

    def sync_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load the trainer's (full, unsharded) weights; names as in the HF checkpoint."""
        ...

    def sleep(self) -> None:
        """Release accelerator memory while the trainer runs (no-op where meaningless)."""
        ...

    def wake_up(self) -> None:
        """Re-acquire accelerator memory before generating."""
        ...


def generate_rows(engine: RolloutEngine, prompts: Sequence[Sequence[int]], sampling: SamplingConfig,
                  seed: int | None, row_seeds: Sequence[int] | None) -> list[Generation]:
    """``engine.generate``, with ``row_seeds`` passed only when there are any: an engine
    written before row seeds existed still serves the calls that do without them."""
    if row_seeds is None:
        return engine.generate(prompts, sampling, seed)
    return engine.generate(prompts, sampling, seed, row_seeds=row_seeds)


def strip_wrapper_prefixes(name: str) -> str:
    """Map a parameter name of a wrapped module to the checkpoint's name.

    >>> strip_wrapper_prefixes("module._orig_mod.model.layers.0.mlp.up_proj.weight")
    'model.layers.0.mlp.up_proj.weight'
    """
    changed = True
    while changed:
        changed = False
        for prefix in _WRAPPER_PREFIXES:
            if name.startswith(prefix):
                name, changed = name[len(prefix):], True
            name = name.replace("." + prefix, ".")
    return name
