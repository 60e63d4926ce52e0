"""Native tool calls (OpenAI ``tool_calls``) rendered as the env's action text.

An env parses text (``agentgym.parsing``): Hermes ``<tool_call>`` blocks or Search-R1
tags. A model served with native tool calling returns structured calls instead; they are
written here in the env's own format, so the env parses, executes and scores them exactly
as it would a text action, and a malformed call (arguments that are not JSON) reaches the
env as what it is, a parse error of the agent's, with the usual instructive observation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["render_tool_calls"]


def _arguments(raw: Any) -> Any:
    """The call's arguments as an object when they are JSON, else the raw text as sent."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
    return raw


def render_tool_calls(parser: Any, calls: Sequence[dict[str, Any]]) -> str:
    """The text action of ``calls`` (each ``{"function": {"name", "arguments"}}``) for ``parser``.

    >>> from agentgym.parsing import HermesParser, TagParser
    >>> call = {"function": {"name": "search", "arguments": '{"query": "Graz"}'}}
    >>> render_tool_calls(HermesParser(), [call])
    '<tool_call>{"name": "search", "arguments": {"query": "Graz"}}</tool_call>'
    >>> render_tool_calls(TagParser(), [call])
    '<search>Graz</search>'
    """
    tag_params = getattr(parser, "tag_params", None) if getattr(parser, "name", "") == "tags" else None
    parts = []
    for call in calls:
        function = call.get("function") or {}
        name = str(function.get("name", ""))
        args = _arguments(function.get("arguments", {}))
        if tag_params is not None:
            param = tag_params.get(name)
            body = args.get(param, "") if isinstance(args, dict) and param else args
            parts.append(f"<{name}>{body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)}</{name}>")
        else:
            parts.append(f"<tool_call>{json.dumps({'name': name, 'arguments': args}, ensure_ascii=False)}</tool_call>")
    return "\n".join(parts)
