"""One agent's place at the table: its tools, its turn counters and its undelivered text.

A ``Seat`` does for one agent of a team what ``ToolEnv.astep`` does for a single agent:
read the action as text, parse it with the env's parser, run the calls through the core
``ToolExecutor`` (statuses, retries, truncation, telemetry), and keep the counters that
end up in the agent's ``info``. It knows nothing about the other agents; routing
messages between them is the env's job.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agentgym.env import ANSWER_TOOL
from agentgym.executor import UNPARSED, ToolExecutor, ToolResult
from agentgym.parsing import FORMAT_NOTE, ParsedCall, Parser, normalise_action
from agentgym.telemetry import Telemetry
from agentgym.tools import Tool

__all__ = ["Seat", "Delivery"]


@dataclass
class Delivery:
    """Text and chat messages waiting to be shown to an agent."""

    texts: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    news: int = 0  # how many of the messages came from other agents (they wake an agent)

    def add(self, text: str, messages: list[dict[str, Any]], *, from_other: bool = False) -> None:
        if text:
            self.texts.append(text)
        self.messages.extend(messages)
        self.news += int(from_other)

    def take(self) -> tuple[str, list[dict[str, Any]]]:
        """Everything pending, as one observation delta; empties the delivery."""
        text, messages = "\n".join(self.texts), list(self.messages)
        self.texts.clear()
        self.messages.clear()
        self.news = 0
        return text, messages


class Seat:
    """The per-episode state of one agent. Built fresh at every reset."""

    def __init__(self, agent: str, role: str, tools: list[Tool], parser: Parser, telemetry: Telemetry,
                 max_action_chars: int) -> None:
        self.agent = agent
        self.role = role
        self.tools = tools
        self.tool_names = [t.name for t in tools]
        self.parser = parser
        self.executor = ToolExecutor(tools, telemetry)
        self.telemetry = telemetry
        self.max_action_chars = max_action_chars
        self.turns = 0
        self.tool_chars = 0
        self.truncations = 0
        self.tool_calls: Counter[str] = Counter()
        self.infra_failed = False
        self.retired: str | None = None  # why the agent stopped taking turns, if it did
        self.last_results: list[ToolResult] = []
        self.pending = Delivery()
        self.transcript: list[dict[str, Any]] = []

    async def act(self, action: Any) -> None:
        """Run one turn: parse ``action``, execute its calls, queue the results for delivery."""
        text, notes = normalise_action(action, self.max_action_chars)
        self.turns += 1
        self.transcript.append({"role": "assistant", "content": text})
        calls = self.parser.parse(text)
        if not calls:
            self.telemetry.record_call(UNPARSED, "parse_error", 0.0, 0, False)
            self.last_results = []
            outputs = [(FORMAT_NOTE, "\n".join(notes + [self.parser.format_hint(self.tool_names)]))]
        else:
            self.last_results = await self._execute(calls)
            outputs = [(r.name, r.output) for r in self.last_results]
            if notes:
                outputs.insert(0, (FORMAT_NOTE, "\n".join(notes)))
        self.tool_chars += sum(len(o) for _, o in outputs)
        obs, messages = self.parser.render_results(outputs)
        self.pending.add(obs, messages)
        self.transcript.extend(messages)

    def tell(self, sender: str, text: str) -> None:
        """Queue a message from another agent (or the env) for this agent's next turn."""
        content = f"[from {sender}] {text}"
        message = {"role": "user", "content": content}
        self.pending.add(content, [message], from_other=True)
        self.transcript.append(message)

    def episode_info(self) -> dict[str, Any]:
        """The ToolEnv episode-end fields that belong to this agent."""
        return {
            "tool_calls": dict(self.tool_calls),
            "truncations": self.truncations,
            "turns": self.turns,
            "tool_output_chars": self.tool_chars,
            "retired": self.retired,
        }

    # ------------------------------------------------------------- internals
    async def _execute(self, calls: list[ParsedCall]) -> list[ToolResult]:
        results = await self.executor.execute_turn(calls, ANSWER_TOOL)  # with the answer-spraying guard
        for r in results:
            self.tool_calls[r.name] += 1
            self.truncations += int(r.truncated)
            self.infra_failed |= r.status == "infra_error"
        return results
