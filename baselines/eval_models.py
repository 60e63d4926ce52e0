"""Local checkpoints for ``agentgym eval --model PATH`` and ``--model vllm:PATH``.

agentgym finds these through its ``agentgym.eval_models`` entry points (imports point
down: agentgym never imports baselines). A local model is evaluated exactly the way it is
trained: the prompt is the chat template's rendering of the env's messages and tool
schemas (:class:`~baselines.chat_tokens.ChatTokenizer`), each turn's generated ids are
kept as they were sampled, and each observation is tokenised against a fixed base and
appended (token-in/token-out, never a re-tokenised history). The engines are the
training ones behind their asynchronous front (the transformers engine batched by
:class:`~baselines.engines.hf_async.BatchingEngine`, or vLLM's ``AsyncLLM``), so every
episode in flight shares the engine's batches. Greedy decoding (``--temperature 0``,
the default) gives the same actions through either engine.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentgym.evaluation import ModelRejectedError, SeatState, Turn
from baselines.chat_tokens import ChatTokenizer
from baselines.engines.base import SamplingConfig

__all__ = ["TokenAgent", "hf_agent", "vllm_agent"]


class TokenAgent:
    """Plays every seat of a run with one local engine, token-in/token-out.

    Args:
        engine: an asynchronous engine (``agenerate(prompt_ids, sampling, order, seed)``);
            each turn asks with its own seed (:meth:`SeatState.turn_seed`), so a sampled
            episode draws the same tokens whatever shares the engine's calls with it.
        chat: the tokenizer's chat bookkeeping.
        sampling: per-turn sampling (``temperature=0``: greedy).
        max_seq_len: an episode whose next turn would not fit ends as the agent's
            outcome (``model_rejected``), as ``context_limited`` ends one in training.
        described: the run header's agent fields.
    """

    def __init__(self, engine: Any, chat: ChatTokenizer, sampling: SamplingConfig, max_seq_len: int,
                 described: dict[str, Any]) -> None:
        self.engine = engine
        self.chat = chat
        self.config = sampling
        self.max_seq_len = max_seq_len
        self.described = described

    def _ids(self, state: SeatState) -> list[int]:
        """The seat's ids up to the next generation prompt, extended by what the env added
        since its last turn."""
        extra = state.extra
        if "ids" not in extra:
            extra["ids"] = self.chat.prompt_ids(state.messages, state.tools)
        else:
            delta = state.messages[extra["seen"]:]
            extra["ids"] = extra["ids"] + self.chat.observation_ids(delta, turn_ended=extra["turn_ended"])
        return extra["ids"]

    async def act(self, state: SeatState) -> Turn:
        ids = self._ids(state)
        if len(ids) + self.config.max_new_tokens > self.max_seq_len:
            raise ModelRejectedError(f"context limit: {len(ids)} ids + {self.config.max_new_tokens} new tokens "
                                     f"exceed max_seq_len {self.max_seq_len}")
        loop = asyncio.get_running_loop()
        start = loop.time()
        gen = (await self.engine.agenerate(ids, self.config, order=state.episode, seed=state.turn_seed())).generation
        state.extra["ids"] = ids + list(gen.token_ids)
        state.extra["turn_ended"] = gen.finish_reason == "stop"
        state.extra["seen"] = len(state.messages) + 1  # the assistant message appended after this turn
        action = self.chat.decode_action(gen.token_ids)
        message = {"role": "assistant", "content": action, "token_ids": list(gen.token_ids),
                   "finish_reason": gen.finish_reason}
        return Turn(action, message, len(ids), len(gen.token_ids), loop.time() - start)

    def describe(self) -> dict[str, Any]:
        return dict(self.described)

    def sampling(self) -> dict[str, Any]:
        return {"temperature": self.config.temperature, "top_p": self.config.top_p,
                "max_tokens": self.config.max_new_tokens, "max_seq_len": self.max_seq_len}

    async def aclose(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None:
            await asyncio.to_thread(close)


def _sampling(settings: dict[str, Any]) -> SamplingConfig:
    return SamplingConfig(max_new_tokens=int(settings.get("max_tokens") or 1024),
                          temperature=float(settings.get("temperature") or 0.0), top_p=float(settings.get("top_p") or 1.0))


def _dtype(settings: dict[str, Any]) -> str:
    import torch

    return str(settings.get("dtype") or ("bfloat16" if torch.cuda.is_available() else "float32"))


def hf_agent(path: str, settings: dict[str, Any]) -> TokenAgent:
    """A transformers checkpoint directory, generated with ``transformers`` (CPU or GPU)."""
    import torch
    from transformers import AutoTokenizer

    from baselines.engines.hf import HFEngine
    from baselines.engines.hf_async import BatchingEngine

    tokenizer = AutoTokenizer.from_pretrained(path)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    engine = HFEngine(path, pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None
                      else tokenizer.eos_token_id, eos_token_ids=[tokenizer.eos_token_id], device=device,
                      dtype=getattr(torch, _dtype(settings)), max_batch_size=int(settings.get("max_batch_size") or 64))
    return TokenAgent(BatchingEngine(engine, seed=int(settings.get("seed") or 0)), ChatTokenizer(tokenizer),
                      _sampling(settings), int(settings.get("max_seq_len") or 4096),
                      {"kind": "hf", "model": path, "dtype": _dtype(settings)})


def vllm_agent(path: str, settings: dict[str, Any]) -> TokenAgent:
    """A checkpoint directory served by vLLM in this process (``AsyncLLM``)."""
    import torch
    from transformers import AutoTokenizer

    from baselines.engines.vllm_async import AsyncVLLMEngine

    tokenizer = AutoTokenizer.from_pretrained(path)
    max_seq_len = int(settings.get("max_seq_len") or 4096)
    engine = AsyncVLLMEngine(path, dtype=_dtype(settings), enforce_eager=not torch.cuda.is_available(),
                             max_model_len=max_seq_len, seed=int(settings.get("seed") or 0),
                             gpu_memory_utilization=float(settings.get("gpu_memory_utilization") or 0.8))
    return TokenAgent(engine, ChatTokenizer(tokenizer), _sampling(settings), max_seq_len,
                      {"kind": "vllm", "model": path, "dtype": _dtype(settings)})
