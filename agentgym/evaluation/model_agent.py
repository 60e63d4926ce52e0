"""A model behind an OpenAI-compatible server as an :class:`~agentgym.evaluation.agents.Agent`.

The env speaks chat messages (``info["messages"]``: system, user, then per step the tool
results as ``tool`` messages named after their tool). This module turns that history into
a chat-completions request in either tool mode and the response back into the env's
action text:

- ``native``: assistant turns carry their ``tool_calls``; each following ``tool``
  message gets the ``tool_call_id`` of the call it answers (in order, as the env answers
  calls in order; an env whose parser answers in one user turn, like Search-R1 tags,
  answers the calls with that turn). The calls are rendered in the env's parser format
  (:func:`~agentgym.evaluation.actions.render_tool_calls`).
- ``text``: the model writes its calls as text and the env parses them; tool results go
  back as ``<tool_response>`` user turns (how Hermes/Qwen templates render them), so no
  server-side tool parsing is involved.
"""

from __future__ import annotations

import time
from typing import Any

from agentgym.evaluation.actions import render_tool_calls
from agentgym.evaluation.agents import SeatState, Turn
from agentgym.evaluation.openai_client import ChatClient

__all__ = ["ChatAgent", "request_messages"]


def _tool_response(content: str) -> str:
    return f"<tool_response>\n{content}\n</tool_response>"


def request_messages(history: list[dict[str, Any]], tool_mode: str) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` for an episode's ``history`` in ``tool_mode``.

    >>> h = [{"role": "user", "content": "2+2?"},
    ...      {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
    ...       "function": {"name": "calculate", "arguments": "{}"}}]},
    ...      {"role": "tool", "name": "calculate", "content": "4"}]
    >>> request_messages(h, "native")[-1]
    {'role': 'tool', 'content': '4', 'tool_call_id': 'c1', 'name': 'calculate'}
    >>> request_messages(h, "text")[-1]
    {'role': 'user', 'content': '<tool_response>\\n4\\n</tool_response>'}
    """
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for m in history:
        role = m.get("role")
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if tool_mode == "native" and calls:
                out.append({"role": "assistant", "content": m.get("content") or None, "tool_calls": calls})
                pending = [str(c.get("id", "")) for c in calls]
            else:
                out.append({"role": "assistant", "content": m.get("content") or ""})
                pending = []
        elif role == "tool" and tool_mode == "native" and pending:
            out.append({"role": "tool", "content": str(m.get("content", "")), "tool_call_id": pending.pop(0),
                        "name": m.get("name", "")})
        elif role == "tool":  # text mode, or more results than native calls: a user turn
            text = _tool_response(str(m.get("content", "")))
            if out and out[-1]["role"] == "user" and out[-1]["content"].startswith("<tool_response>"):
                out[-1] = {"role": "user", "content": out[-1]["content"] + "\n" + text}
            else:
                out.append({"role": "user", "content": text})
        else:
            if role == "user" and pending:  # results in a user turn (tag parsers): they answer the calls
                content = str(m.get("content", ""))
                out.extend({"role": "tool", "content": content if i == 0 else "[see the result above]",
                            "tool_call_id": call_id} for i, call_id in enumerate(pending))
                pending = []
                continue
            out.append({"role": role, "content": m.get("content", "")})
    return out


class ChatAgent:
    """Acts by asking a chat-completions server; one instance serves every seat of a run."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    async def act(self, state: SeatState) -> Turn:
        mode = self.client.settings.tool_mode
        start = time.perf_counter()
        completion = await self.client.complete(request_messages(state.messages, mode), state.tools, state.turn_seed())
        latency = time.perf_counter() - start
        message = completion.message
        content = message.get("content") or ""
        calls = message.get("tool_calls") or []
        action = render_tool_calls(state.extra.get("parser"), calls) if calls else content
        kept: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            kept["tool_calls"] = [{"id": c.get("id") or f"call_{state.turn}_{i}", "type": "function",
                                   "function": {"name": c["function"].get("name", ""),
                                                "arguments": c["function"].get("arguments", "")}}
                                  for i, c in enumerate(calls)]
        if completion.finish_reason:
            kept["finish_reason"] = completion.finish_reason
        return Turn(action, kept, completion.prompt_tokens, completion.completion_tokens, latency)

    def describe(self) -> dict[str, Any]:
        s = self.client.settings
        return {"kind": "openai", "model": s.model, "base_url": s.base_url, "tool_mode": s.tool_mode}

    def sampling(self) -> dict[str, Any]:
        return self.client.settings.sampling()

    async def aclose(self) -> None:
        await self.client.aclose()
