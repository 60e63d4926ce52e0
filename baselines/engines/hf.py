"""Rollout with ``transformers.generate``: CPU or GPU, a separate model instance.

Prompts of different lengths are left-padded into one batch; ``generate`` derives
position ids from the attention mask, so a sequence's log-probs do not depend on its
padding and match the trainer's unpadded forward. The sampled token's log-prob comes
from ``output_scores`` (logits after temperature/top-p warping), i.e. the distribution
that was actually sampled, like vLLM's ``processed_logprobs``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from baselines.engines.base import Generation, SamplingConfig, strip_wrapper_prefixes

__all__ = ["HFEngine"]


class HFEngine:
    """A ``transformers`` causal LM used only for generation.

    Args:
        model: a model directory (loaded here) or an already built module (not shared
            with the trainer: pass a copy).
        pad_token_id / eos_token_ids: padding id and ids that end a turn.
        max_batch_size: prompts per ``generate`` call (bounds memory).
    """

    def __init__(
        self,
        model: str | Path | torch.nn.Module,
        *,
        pad_token_id: int,
        eos_token_ids: Sequence[int],
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        max_batch_size: int = 64,
    ) -> None:
        if isinstance(model, (str, Path)):
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(str(model), dtype=dtype)
        self.model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
        self.device = torch.device(device)
        self.dtype = dtype
        self.pad_token_id = pad_token_id
        self.eos_token_ids = tuple(eos_token_ids)
        self.max_batch_size = max_batch_size

    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig, seed: int | None = None) -> list[Generation]:
        if seed is not None:
            torch.manual_seed(seed)
        out: list[Generation] = []
        for start in range(0, len(prompts), self.max_batch_size):
            out.extend(self._generate_chunk(prompts[start : start + self.max_batch_size], sampling))
        return out

    def _generate_chunk(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig) -> list[Generation]:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.as_tensor(p)
            mask[i, width - len(p) :] = 1
        stop = list(self.eos_token_ids) + list(sampling.stop_token_ids)
        greedy = sampling.temperature == 0
        result = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not greedy,
            temperature=None if greedy else sampling.temperature,
            top_p=None if greedy else sampling.top_p,
            top_k=None,
            eos_token_id=stop,
            pad_token_id=self.pad_token_id,
            output_scores=True,
            return_dict_in_generate=True,
        )
        new = result.sequences[:, width:].cpu()
        scores = torch.stack(result.scores, dim=1).float().cpu()  # [B, T_new, V]
        logprobs = torch.log_softmax(scores, dim=-1).gather(-1, new[..., None]).squeeze(-1)
        return [self._trim(new[i].tolist(), logprobs[i].tolist(), set(stop)) for i in range(len(prompts))]

    @staticmethod
    def _trim(ids: list[int], logprobs: list[float], stop: set[int]) -> Generation:
        for j, t in enumerate(ids):
            if t in stop:
                return Generation(ids[: j + 1], logprobs[: j + 1], "stop")
        return Generation(ids, logprobs, "length")

    @torch.no_grad()
    def score(self, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
        """``log p(ids[t] | ids[:t])`` at temperature 1 for ``t >= 1``, one list per sequence."""
        from baselines.logprobs import sequence_logprobs

        out = []
        for seq in sequences:
            ids = torch.tensor([list(seq)], device=self.device)
            logp, _ = sequence_logprobs(self.model, ids, torch.ones_like(ids))
            out.append(logp[0, 1:].float().cpu().tolist())
        return out

    @torch.no_grad()
    def sync_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Copy the trainer's weights in place (names may carry DDP/compile prefixes)."""
        params = dict(self.model.named_parameters())
        params.update(dict(self.model.named_buffers()))
        missing = set(params)
        for name, tensor in state_dict.items():
            key = strip_wrapper_prefixes(name)
            if key not in params:
                continue
            params[key].copy_(tensor.detach().to(device=self.device, dtype=params[key].dtype))
            missing.discard(key)
        missing = {m for m in missing if m in dict(self.model.named_parameters())}
        if missing:
            from baselines.errors import EngineError

            raise EngineError(f"sync_weights got no tensor for {len(missing)} parameter(s), e.g. {sorted(missing)[:3]}")

    def sleep(self) -> None:
        """Nothing to release: the hf engine keeps its weights resident."""

    def wake_up(self) -> None:
        """Nothing to re-acquire."""
