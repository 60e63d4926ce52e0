"""Turning an agent's text into tool calls, one parse status per call.

Parsers never raise on any input (property-tested): a malformed call becomes a
``ParsedCall`` with status ``parse_error`` and a message that tells the agent what was
wrong, while the well-formed calls of the same turn still run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "ParseStatus",
    "ParsedCall",
    "Parser",
    "HermesParser",
    "TagParser",
    "make_parser",
    "normalise_action",
    "FORMAT_NOTE",
]

ParseStatus = Literal["ok", "parse_error"]
FORMAT_NOTE = "format"  # pseudo tool name of notes about the agent's message itself


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call found in the action, or the reason it could not be read."""

    name: str | None
    arguments: dict[str, Any] = field(default_factory=dict)
    status: ParseStatus = "ok"
    error: str | None = None
    raw: str = ""


class Parser(Protocol):
    """Finds tool calls in text. Must never raise."""

    name: str

    def parse(self, text: str) -> list[ParsedCall]: ...

    def format_hint(self, tool_names: list[str]) -> str:
        """What the agent should write instead, shown when a turn has no valid call."""
        ...

    def fingerprint(self) -> dict[str, Any]: ...

    def render_results(self, results: list[tuple[str, str]]) -> tuple[str, list[dict[str, Any]]]:
        """Observation text and chat messages for ``(tool_name, output)`` pairs."""
        ...


class _DuplicateKey(ValueError):
    """A JSON object repeats a key; silently keeping one would let an agent hedge answers."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(f"the key {key!r} appears more than once")
        obj[key] = value
    return obj


def _short(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[:n] + "…"


class HermesParser:
    """Hermes/Qwen style: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

    Several blocks per turn are allowed. An opening tag without a closing tag is read to
    the end of the text (models often stop generating at the closing tag's first token).
    ``arguments`` may also arrive as a JSON string holding an object, as some models emit.
    """

    name = "hermes"
    _block = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)

    def parse(self, text: str) -> list[ParsedCall]:
        return [self._parse_block(m.group(1)) for m in self._block.finditer(text)]

    def _parse_block(self, body: str) -> ParsedCall:
        raw = body.strip()
        try:
            obj = json.loads(raw, object_pairs_hook=_unique_keys)
        except (ValueError, RecursionError) as e:
            msg = getattr(e, "msg", None) or (str(e) if isinstance(e, _DuplicateKey) else "too deeply nested")
            return ParsedCall(None, status="parse_error", raw=raw,
                              error=f"the text inside <tool_call> is not valid JSON ({msg}): {_short(raw)!r}")
        if not isinstance(obj, dict):
            return ParsedCall(None, status="parse_error", raw=raw,
                              error=f"expected a JSON object inside <tool_call>, got {type(obj).__name__}")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            return ParsedCall(None, status="parse_error", raw=raw,
                              error='the tool call has no "name" string')
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args, object_pairs_hook=_unique_keys) if args.strip() else {}
            except (ValueError, RecursionError):
                return ParsedCall(name, status="parse_error", raw=raw,
                                  error=f'"arguments" of {name!r} is a string that is not JSON')
        if not isinstance(args, dict):
            return ParsedCall(name, status="parse_error", raw=raw,
                              error=f'"arguments" of {name!r} must be a JSON object')
        return ParsedCall(name, args, raw=raw)

    def format_hint(self, tool_names: list[str]) -> str:
        example = tool_names[0] if tool_names else "tool_name"
        return (
            "No valid tool call found. Call a tool by writing exactly:\n"
            f'<tool_call>{{"name": "{example}", "arguments": {{...}}}}</tool_call>\n'
            f"Available tools: {', '.join(tool_names)}."
        )

    def fingerprint(self) -> dict[str, Any]:
        return {"parser": self.name}

    def render_results(self, results: list[tuple[str, str]]) -> tuple[str, list[dict[str, Any]]]:
        """One ``tool`` message per call; the text form wraps each in ``<tool_response>``.

        Notes about the message itself (name ``FORMAT_NOTE``: no tool call found, bytes
        replaced, text cut) answer no call, so they come as a ``user`` message.
        """
        texts, messages = [], []
        for name, out in results:
            if name == FORMAT_NOTE:
                texts.append(out)
                messages.append({"role": "user", "content": out})
            else:
                texts.append(f"<tool_response>\n{out}\n</tool_response>")
                messages.append({"role": "tool", "name": name, "content": out})
        return "\n".join(texts), messages


class TagParser:
    """Search-R1 style tags: ``<search>q</search>``, ``<python>code</python>``, ``<answer>x</answer>``.

    Each tag maps to a tool and the single string parameter that receives the tag's text.
    Text outside tags (the model's reasoning, ``<think>`` blocks) is ignored.
    """

    name = "tags"

    def __init__(self, tag_params: dict[str, str] | None = None) -> None:
        self.tag_params = dict(tag_params or {"search": "query", "python": "code", "answer": "answer"})
        tags = "|".join(re.escape(t) for t in self.tag_params)
        self._pattern = re.compile(rf"<({tags})>(.*?)(?:</\1>|$)", re.DOTALL)

    def parse(self, text: str) -> list[ParsedCall]:
        calls = []
        for m in self._pattern.finditer(text):
            tag, body = m.group(1), m.group(2)
            content = body.strip()
            if not content:
                calls.append(ParsedCall(tag, status="parse_error", raw=m.group(0),
                                        error=f"<{tag}></{tag}> is empty; put the {self.tag_params[tag]} between the tags"))
            else:
                calls.append(ParsedCall(tag, {self.tag_params[tag]: content}, raw=m.group(0)))
        return calls

    def format_hint(self, tool_names: list[str]) -> str:
        tags = [t for t in self.tag_params if t in tool_names] or list(self.tag_params)
        shown = " or ".join(f"<{t}>...</{t}>" for t in tags)
        return f"No valid action found. Write {shown}."

    def fingerprint(self) -> dict[str, Any]:
        return {"parser": self.name, "tags": sorted(self.tag_params.items())}

    def render_results(self, results: list[tuple[str, str]]) -> tuple[str, list[dict[str, Any]]]:
        """Search-R1 style: results wrapped in ``<information>`` and returned as a user turn."""
        text = "\n".join(f"<information>{out}</information>" for _, out in results)
        return text, [{"role": "user", "content": text}]


def make_parser(spec: "str | Parser") -> Parser:
    """Build a parser from a name (``"hermes"`` or ``"tags"``) or pass one through."""
    if not isinstance(spec, str):
        return spec
    if spec == "hermes":
        return HermesParser()
    if spec == "tags":
        return TagParser()
    from agentgym.errors import ConfigError

    raise ConfigError(f"Expected parser 'hermes' or 'tags' (or a Parser object), actual value: {spec!r}")


def normalise_action(action: Any, max_chars: int) -> tuple[str, list[str]]:
    """Turn whatever an agent sent into text of at most ``max_chars``, with notes for the agent.

    Bytes that are not UTF-8 are replaced (and the agent is told), non-text is converted,
    over-long text is cut. Never raises.
    """
    notes: list[str] = []
    if isinstance(action, (bytes, bytearray)):
        text = bytes(action).decode("utf-8", errors="replace")
        if "\ufffd" in text:
            notes.append("Note: your message contained bytes that are not valid UTF-8; they were replaced.")
    elif isinstance(action, str):
        text = action
    else:
        text = str(action)
        notes.append(f"Note: expected text, got {type(action).__name__}; it was converted to text.")
    if len(text) > max_chars:
        notes.append(f"Note: your message had {len(text)} characters; only the first {max_chars} were read.")
        text = text[:max_chars]
    return text, notes
