"""Per-token log-probs (and entropy) of a causal LM on right-padded sequences.

The trainer, the EWMA (proximal) model and the drift/mismatch checks all use this one
function, so ``log pi`` means the same computation everywhere: logits divided by the
sampling temperature (the engine sampled from that distribution), then log-softmax.
"""

from __future__ import annotations

import torch

__all__ = ["sequence_logprobs"]


def sequence_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Return ``logp[b, t] = log p(ids[b, t] | ids[b, :t])`` (``logp[:, 0] = 0``) and,
    optionally, the entropy of the predictive distribution at each position ``t``.

    Sequences must be right-padded so that position ids start at 0 for every row.
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits[:, :-1]
    logits = logits.float()
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    logz = torch.logsumexp(logits, dim=-1)
    picked = logits.gather(-1, input_ids[:, 1:, None]).squeeze(-1) - logz
    logp = torch.nn.functional.pad(picked, (1, 0))
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.softmax(logits, dim=-1)
            ent = logz - (probs * logits).sum(-1)
            entropy = torch.nn.functional.pad(ent, (1, 0))
    return logp, entropy
