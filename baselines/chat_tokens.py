"""Token-in/token-out bookkeeping with a chat template.

A multi-turn episode is one token sequence: the prompt, then for each turn the ids the
engine generated (kept exactly) followed by the ids of the observation. Re-tokenising
the whole history each turn would be wrong (BPE may split the generated text
differently, so the trainer would score tokens the policy never sampled) and slow.
Instead an observation delta (the step's ``info["messages"]``) is tokenised against a
fixed base conversation: render ``base + delta`` and ``base`` alone with the model's chat
template, tokenise both, and keep the suffix. This is exact as long as the rendering of
the base is a token-prefix of the rendering of ``base + delta`` (checked every time).

The template also writes text *after* an assistant turn's end-of-turn token (``"\\n"``
after ``<|im_end|>`` for Qwen/Hermes templates). The engine stops at the end-of-turn
token, so those trailing ids are prepended to the observation (taken from the base
rendering). A turn cut at ``max_new_tokens`` gets the end-of-turn token added too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from baselines.errors import TokenizationError

__all__ = ["ChatTokenizer", "DriftReport"]

_BASE: list[dict[str, Any]] = [
    {"role": "system", "content": "base"},
    {"role": "user", "content": "base"},
    {"role": "assistant", "content": "base"},
]


@dataclass(frozen=True)
class DriftReport:
    """Outcome of comparing accumulated ids with a full re-tokenisation."""

    matches: bool
    first_mismatch: int | None
    ours_len: int
    full_len: int


class ChatTokenizer:
    """Renders prompts and observation deltas into ids for one tokenizer and template.

    Args:
        tokenizer: a ``transformers`` tokenizer with a chat template.
        end_of_turn_id: the id that ends an assistant turn (defaults to ``eos_token_id``).
    """

    def __init__(self, tokenizer: Any, end_of_turn_id: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.end_of_turn_id = tokenizer.eos_token_id if end_of_turn_id is None else end_of_turn_id
        base_ids = self._encode(self._render(_BASE, None, add_generation_prompt=False))
        if self.end_of_turn_id not in base_ids:
            raise TokenizationError(
                f"The chat template does not end an assistant turn with token id {self.end_of_turn_id}; "
                "pass end_of_turn_id= the id that closes assistant messages."
            )
        last = len(base_ids) - 1 - base_ids[::-1].index(self.end_of_turn_id)
        self._base_ids = base_ids
        self.turn_trailer: list[int] = base_ids[last + 1 :]

    def _render(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None, *, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages), tools=list(tools) if tools else None, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> list[int]:
        """The first prompt (system with tools, user) ending with the generation prompt."""
        return self._encode(self._render(messages, tools, add_generation_prompt=True))

    def observation_ids(self, delta: Sequence[dict[str, Any]], turn_ended: bool) -> list[int]:
        """Ids to append after a generated turn: trailer, the delta, the next generation prompt.

        Args:
            delta: the messages the env added in this step (tool results, format hints).
            turn_ended: whether the generated ids already end with the end-of-turn id.
        """
        full = self._encode(self._render(_BASE + list(delta), None, add_generation_prompt=True))
        n = len(self._base_ids)
        if full[:n] != self._base_ids:
            raise TokenizationError(
                "Rendering the base conversation is not a token prefix of rendering base + delta, "
                "so observation tokens cannot be appended without re-tokenising; "
                "use a chat template that renders each message independently of the following ones."
            )
        head = [] if turn_ended else [self.end_of_turn_id]
        return head + self.turn_trailer + full[n:]

    def decode_action(self, generated: Sequence[int]) -> str:
        """The text of a generated turn as the env should see it (no end-of-turn token)."""
        ids = list(generated)
        if ids and ids[-1] == self.end_of_turn_id:
            ids = ids[:-1]
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def drift(self, ids: Sequence[int], messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> DriftReport:
        """Compare accumulated ``ids`` with re-tokenising the whole conversation.

        ``messages`` holds the assistant turns as decoded text. A mismatch means the
        trainer scores a different tokenisation than a naive re-render would produce
        (non-canonical BPE in the sampled ids, or a template that is not prefix-stable);
        it is reported as a metric, never "fixed" by changing masks.
        """
        full = self._encode(self._render(messages, tools, add_generation_prompt=False))
        ours = list(ids)
        if ours and ours[-1] == self.end_of_turn_id:
            ours = ours + self.turn_trailer
        first = next((i for i, (a, b) in enumerate(zip(ours, full)) if a != b), None)
        if first is None and len(ours) != len(full):
            first = min(len(ours), len(full))
        return DriftReport(first is None, first, len(ours), len(full))
