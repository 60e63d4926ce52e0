"""One agent's place at the table: its tools, its turn counters and its undelivered text.

A ``Seat`` takes one agent's turns with the same :class:`~agentgym.turns.TurnEngine` as a
single-agent ``ToolEnv`` (parse, execute under the status contract, render, count), and
adds what a team needs: the agent's role, whether it retired, and the text waiting to be
delivered to it. It knows nothing about the other agents; routing messages between them
is the env's job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.parsing import Parser
from agentgym.telemetry import Telemetry
from agentgym.tools import Tool
from agentgym.turns import TurnEngine

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


class Seat(TurnEngine):
    """The per-episode state of one agent: its turns (a :class:`~agentgym.turns.TurnEngine`,
    the same one ``ToolEnv`` uses), whether it retired, and what waits to be delivered.
    Built fresh at every reset."""

    def __init__(self, agent: str, role: str, tools: Sequence[Tool], parser: Parser, telemetry: Telemetry,
                 max_action_chars: int, opening: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__(tools, parser, telemetry, max_action_chars, opening)
        self.agent = agent
        self.role = role
        self.retired: str | None = None  # why the agent stopped taking turns, if it did
        self.pending = Delivery()

    async def act(self, action: Any) -> None:
        """Run one turn of ``action`` and queue its results for delivery."""
        turn = await self.take(action)
        self.pending.add(turn.text, turn.messages)

    def tell(self, sender: str, text: str) -> None:
        """Queue a message from another agent (or the env) for this agent's next turn."""
        content = f"[from {sender}] {text}"
        message = {"role": "user", "content": content}
        self.pending.add(content, [message], from_other=True)
        self.transcript.append(message)

    def episode_info(self) -> dict[str, Any]:
        """The ToolEnv episode-end fields that belong to this agent."""
        return {**self.episode_fields(), "retired": self.retired}
