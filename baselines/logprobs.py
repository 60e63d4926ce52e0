"""Per-token log-probs (and entropy) of a causal LM on right-padded sequences.

The trainer, the EWMA (proximal) model and the drift/mismatch checks all use this one
function, so ``log pi`` means the same computation everywhere: logits divided by the
sampling temperature (the engine sampled from that distribution), then log-softmax.

The vocabulary projection dominates a small model's forward and is pure waste on
positions whose log-prob nobody reads (the prompt of every row): ``first_target`` says
where the wanted positions begin, and the model projects only the hidden states from
there on (``logits_to_keep``, the slicing every ``transformers`` causal LM does before
its ``lm_head``).
"""

from __future__ import annotations

import torch

__all__ = ["first_generated_position", "sequence_logprobs"]


def sequence_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    first_target: int = 1,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Return ``logp[b, t] = log p(ids[b, t] | ids[b, :t])`` and, optionally, the entropy
    of the predictive distribution at each position ``t``, both ``[B, T]``.

    Only positions ``t >= first_target`` are computed (the rest are 0): pass the first
    position any row needs, e.g. the shortest prompt's length when only completions are
    scored. ``logp[:, 0]`` is always 0. Sequences must be right-padded so that position
    ids start at 0 for every row.
    """
    width = input_ids.shape[1]
    start = min(max(int(first_target), 1), max(width - 1, 1))
    # Hidden state t-1 predicts token t: positions start-1 .. T-2 predict start .. T-1.
    keep = torch.arange(start - 1, width - 1, device=input_ids.device)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, logits_to_keep=keep).logits
    logits = logits.float()
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    logz = torch.logsumexp(logits, dim=-1)
    picked = logits.gather(-1, input_ids[:, start:, None]).squeeze(-1) - logz
    logp = torch.nn.functional.pad(picked, (start, 0))
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.softmax(logits, dim=-1)
            ent = logz - (probs * logits).sum(-1)
            entropy = torch.nn.functional.pad(ent, (start, 0))
    return logp, entropy


def first_generated_position(loss_mask: torch.Tensor) -> int:
    """The first column where any row has a loss token (1 when none has): the
    ``first_target`` of a forward whose only use is the loss."""
    columns = loss_mask.any(dim=0).nonzero()
    return int(columns[0]) if len(columns) else 1
