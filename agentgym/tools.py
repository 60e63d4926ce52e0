"""What a tool is: a name, a description, a JSON schema, and an async call.

Tools are plain data plus one coroutine, so an env can build them per episode as closures
over its episode state (the episode's sandbox, the documents the agent has seen), and the
executor can treat every tool alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agentgym.errors import ConfigError

__all__ = ["Tool", "ToolReply", "string_tool_schema"]


@dataclass(frozen=True, slots=True)
class ToolReply:
    """A tool's output with its status, returned instead of raising.

    A tool whose machinery already knows the outcome (the sandbox reports that the
    agent's code timed out or raised) returns it as a value, so the status travels from
    the sandbox to the executor unchanged. Infrastructure failures are still raised as
    ``InfraError``: they are retried, and a value cannot be.
    """

    text: str
    status: Literal["ok", "agent_error", "timeout"] = "ok"

    def __post_init__(self) -> None:
        if self.status not in ("ok", "agent_error", "timeout"):
            raise ConfigError(
                f"Expected a ToolReply status of 'ok', 'agent_error' or 'timeout' (raise InfraError "
                f"for infrastructure), actual value: {self.status!r}"
            )


ToolFn = Callable[..., Awaitable["str | ToolReply"]]


@dataclass(frozen=True)
class Tool:
    """A callable tool as the agent sees it.

    Attributes:
        name: the name the agent calls (``[A-Za-z_][A-Za-z0-9_-]*``).
        description: shown to the agent in the tool spec; say what it returns.
        parameters: a JSON-schema object for the arguments; the executor validates
            every call against it before ``fn`` runs.
        fn: ``async def fn(**arguments) -> str | ToolReply``. Return a
            :class:`ToolReply` (or raise ``AgentError``/``ToolTimeout``) for the agent's
            mistakes, raise ``InfraError`` for infrastructure failures.
        max_output_chars: longer output is cut head and tail with a visible marker.
        timeout_s: deadline of the whole call, retries and backoff included.
        max_concurrency: at most this many calls in flight per process across every env
            sharing ``concurrency_key`` (protects a retriever service or a pool);
            ``None`` means unlimited.
        concurrency_key: defaults to ``name``.
        max_retries: retries of an ``infra_error`` (not counting the first attempt), by
            the executor and every layer under the tool together.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: ToolFn = field(repr=False, compare=False)
    max_output_chars: int = 4000
    timeout_s: float = 30.0
    max_concurrency: int | None = None
    concurrency_key: str | None = None
    max_retries: int = 3

    def __post_init__(self) -> None:
        if not self.name or not (self.name[0].isalpha() or self.name[0] == "_"):
            raise ConfigError(f"Expected a tool name starting with a letter, actual value: {self.name!r}")
        if self.parameters.get("type") != "object":
            raise ConfigError(
                f"Tool {self.name!r}: expected a JSON schema with type 'object', "
                f"actual value: {self.parameters.get('type')!r}"
            )
        if self.max_output_chars < 64:
            raise ConfigError(f"Tool {self.name!r}: max_output_chars must be >= 64, got {self.max_output_chars}")
        if self.timeout_s <= 0:
            raise ConfigError(f"Tool {self.name!r}: timeout_s must be > 0, got {self.timeout_s}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError(f"Tool {self.name!r}: max_concurrency must be >= 1 or None")

    @property
    def limit_key(self) -> str:
        return self.concurrency_key or self.name

    def spec(self) -> dict[str, Any]:
        """The OpenAI-style function spec that chat templates render."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def schema_fields(self) -> dict[str, Any]:
        """What about this tool changes what the agent sees (goes into the fingerprint)."""
        return {
            "description": self.description,
            "parameters": self.parameters,
            "max_output_chars": self.max_output_chars,
            "timeout_s": self.timeout_s,
        }


def string_tool_schema(param: str, description: str, **extra: dict[str, Any]) -> dict[str, Any]:
    """A schema with one required string parameter plus optional extra properties.

    >>> string_tool_schema("query", "what to search")["required"]
    ['query']
    """
    return {
        "type": "object",
        "properties": {param: {"type": "string", "description": description}, **extra},
        "required": [param],
        "additionalProperties": False,
    }
