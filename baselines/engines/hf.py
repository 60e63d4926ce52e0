"""Rollout with ``transformers.generate``: CPU or GPU, a separate model instance.

Prompts of different lengths are left-padded into one batch; ``generate`` derives
position ids from the attention mask, so a sequence's log-probs do not depend on its
padding and match the trainer's unpadded forward. The sampled token's log-prob comes
from ``output_scores`` (logits after temperature/top-p warping), i.e. the distribution
that was actually sampled, like vLLM's ``processed_logprobs``.

**Per-row seeds.** ``generate``'s sampler draws a whole call's rows from one generator,
so a row's tokens depend on the rows beside it. With ``row_seeds`` each row draws from a
generator of its own (:class:`RowSampler`): the Gumbel-max trick, ``argmax(log p + G)``
with ``G`` standard Gumbel noise, samples exactly from ``p`` (Gumbel 1954; Maddison et
al. 2014, "A* Sampling"), and the noise is the row's, so an evaluation's episode gets
the same random draws whichever episodes share its calls. Its tokens are then the same
too wherever the forward pass does not depend on the batch's shape (float32 on CPU,
as tested); in bf16 on a GPU a near-tie can still tip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

from baselines.engines.base import Generation, SamplingConfig, strip_wrapper_prefixes

__all__ = ["HFEngine", "RowSampler"]


class RowSampler(LogitsProcessor):
    """Samples each row from its own generator: temperature, then top-p (transformers'
    own warpers, so the distribution is ``generate``'s), then Gumbel noise from the row's
    generator, so that greedy decoding of the result is a sample. Keeps, per step, the
    warped log-prob of the token each row drew (the argmax greedy decoding then takes):
    ``B`` numbers a step, where ``output_scores`` keeps ``B x vocabulary``.

    Args:
        seeds: one per row.
        sampling: the turn's temperature (> 0) and top-p.
    """

    def __init__(self, seeds: Sequence[int], sampling: SamplingConfig, device: torch.device) -> None:
        self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
        self.warpers = [TemperatureLogitsWarper(sampling.temperature)]
        if sampling.top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(sampling.top_p))
        self.logprobs: list[torch.Tensor] = []
        """Per step, ``[B]``: the warped log-prob of the token each row drew."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        warped = scores.float()
        for warper in self.warpers:
            warped = warper(input_ids, warped)
        logp = torch.log_softmax(warped, dim=-1)
        # G = -log(-log U), U uniform on (0, 1): one draw per row and token from the row's own stream.
        u = torch.stack([torch.rand(logp.shape[-1], generator=g, device=logp.device) for g in self.generators])
        gumbel = -torch.log(-torch.log(u.clamp(min=torch.finfo(u.dtype).tiny)))
        noisy = logp + gumbel  # a -inf (top-p cut) token stays -inf
        self.logprobs.append(logp.gather(-1, noisy.argmax(-1, keepdim=True)).squeeze(-1))
        return noisy


class HFEngine:
    """A ``transformers`` causal LM used only for generation.

    Args:
        model: a model directory (loaded here) or an already built module (not shared
            with the trainer: pass a copy). Its ``generation_config``'s sampling defaults
            are dropped: a turn samples what its ``SamplingConfig`` says, nothing more.
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
        # A checkpoint's own sampling defaults (generation_config.json: repetition_penalty,
        # top_k, min_p, ...) would be applied on top of each turn's SamplingConfig, and the
        # engine would sample, and report log-probs of, a distribution the trainer never
        # computes. The engine's model is its own copy: keep only what ends and pads a turn.
        defaults = getattr(model, "generation_config", None)
        if defaults is not None:
            self.model.generation_config = GenerationConfig(bos_token_id=defaults.bos_token_id, eos_token_id=defaults.eos_token_id,
                                                            pad_token_id=defaults.pad_token_id)
        self.device = torch.device(device)
        self.dtype = dtype
        self.pad_token_id = pad_token_id
        self.eos_token_ids = tuple(eos_token_ids)
        self.max_batch_size = max_batch_size

    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig, seed: int | None = None,
                 row_seeds: Sequence[int] | None = None) -> list[Generation]:
        """One completion per prompt. ``seed`` seeds the call's one generator; ``row_seeds``
        (one per prompt) give each row its own instead (the module docstring)."""
        if row_seeds is not None and len(row_seeds) != len(prompts):
            raise ValueError(f"Expected one row seed per prompt ({len(prompts)}), actual: {len(row_seeds)}")
        if seed is not None and row_seeds is None:
            torch.manual_seed(seed)
        out: list[Generation] = []
        for start in range(0, len(prompts), self.max_batch_size):
            end = start + self.max_batch_size
            out.extend(self._generate_chunk(prompts[start:end], sampling, None if row_seeds is None else row_seeds[start:end]))
        return out

    def _generate_chunk(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig,
                        row_seeds: Sequence[int] | None = None) -> list[Generation]:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.as_tensor(p)
            mask[i, width - len(p) :] = 1
        stop = list(self.eos_token_ids) + list(sampling.stop_token_ids)
        greedy = sampling.temperature == 0
        rows = RowSampler(row_seeds, sampling, self.device) if row_seeds is not None and not greedy else None
        sample = not greedy and rows is None  # transformers' sampler, one generator for the call
        result = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            max_new_tokens=sampling.max_new_tokens,
            do_sample=sample,
            temperature=sampling.temperature if sample else None,
            top_p=sampling.top_p if sample else None,
            top_k=None,
            eos_token_id=stop,
            pad_token_id=self.pad_token_id,
            logits_processor=LogitsProcessorList([rows] if rows is not None else []),
            output_scores=rows is None,
            return_dict_in_generate=True,
        )
        new = result.sequences[:, width:].cpu()
        if rows is not None:  # the drawn tokens' log-probs under the warped distributions
            logprobs = torch.stack(rows.logprobs, dim=1).cpu()[:, : new.shape[1]]
        else:
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
