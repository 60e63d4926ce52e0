"""One agent's turns, taken the same way alone (``ToolEnv``) and in a team (``TeamEnv``).

A turn reads the action as text (non-text converted, over-long text cut, the agent told),
parses its tool calls, runs them through :class:`~agentgym.executor.ToolExecutor` (schema
check, deadline, infrastructure-only retries, output truncation, telemetry) and renders
the results as the observation delta. An action with no readable call is a
``parse_error`` with a format hint, never an exception. :class:`TurnEngine` does this and
keeps the counters that go into the episode ``info``; the envs only decide what a turn
means for the episode (an answer ends it, a proposal wakes a reviewer).

:class:`TurnSettings` is what both envs share around the turns: the parser, the output
budgets and the split they were built with, the env id and the one place the fingerprint
is assembled, so a single agent and a team cannot drift apart on what counts in it.

>>> from agentgym.testing import ProbeFamily
>>> from agentgym.parsing import make_parser
>>> from agentgym.telemetry import Telemetry
>>> from agentgym.runtime import run_sync
>>> engine = TurnEngine(list(ProbeFamily().tools(None).values()), make_parser("hermes"), Telemetry(), 1000)
>>> turn = run_sync(engine.take('<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>'))
>>> [(r.name, r.status, r.output) for r in turn.results], engine.turns
([('echo', 'ok', 'hi')], 1)
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from agentgym.errors import ConfigError
from agentgym.executor import UNPARSED, ToolExecutor, ToolResult
from agentgym.family import ANSWER_TOOL
from agentgym.fingerprint import Fingerprint, make_fingerprint
from agentgym.parsing import FORMAT_NOTE, Parser, make_parser, normalise_action
from agentgym.runtime import in_runtime_loop, run_sync
from agentgym.telemetry import Telemetry
from agentgym.tools import Tool
from agentgym.truncation import Truncated, truncate_head_tail

__all__ = ["Turn", "TurnEngine", "TurnSettings", "tool_listing", "seat_fingerprint_fields"]

_OWN_NAMESPACE = "agentgym/"

_closing: set[asyncio.Task[None]] = set()
"""Closes started on the runtime loop, kept referenced until they finish."""

_log = logging.getLogger(__name__)


def _report_failed_close(env_id: str, task: asyncio.Task[None]) -> None:
    """Forget a finished close; log its error with the env it belongs to (this retrieves it)."""
    _closing.discard(task)
    if not task.cancelled() and (error := task.exception()) is not None:
        _log.error("%s: close failed on the runtime loop; its resources may not be released", env_id,
                   exc_info=error)


@dataclass(frozen=True)
class Turn:
    """What one turn gave back: the observation delta and the calls' results."""

    text: str
    """The rendered results (not yet fitted to ``max_observation_chars``)."""
    messages: list[dict[str, Any]]
    """The same, as chat messages."""
    results: list[ToolResult]
    """One per call, in order; empty when the action held no readable call."""


class TurnEngine:
    """The turns of one agent in one episode. Built fresh at every reset.

    Args:
        tools: the episode's tools (``answer`` included where the seat has one).
        parser: reads calls from the action and renders results.
        telemetry: where every call (and every unreadable action) is counted.
        max_action_chars: longer actions are cut (and the agent is told).
        opening: the chat messages the agent starts with (the transcript's first).
    """

    def __init__(self, tools: Sequence[Tool], parser: Parser, telemetry: Telemetry, max_action_chars: int,
                 opening: Sequence[dict[str, Any]] = ()) -> None:
        self.tools = list(tools)
        self.tool_names = [t.name for t in self.tools]
        self.parser = parser
        self.telemetry = telemetry
        self.max_action_chars = max_action_chars
        self._executor = ToolExecutor(self.tools, telemetry)
        self.turns = 0
        self.tool_chars = 0
        self.truncations = 0
        self.tool_calls: Counter[str] = Counter()
        self.infra_failed = False
        self.answer: dict[str, Any] | None = None
        """The arguments of the first ``ok`` ``answer`` call (what the family scores)."""
        self.last_results: list[ToolResult] = []
        self.transcript: list[dict[str, Any]] = list(opening)

    async def take(self, action: Any) -> Turn:
        """Run one turn of ``action``. Never raises for anything the agent wrote."""
        text, notes = normalise_action(action, self.max_action_chars)
        self.turns += 1
        self.transcript.append({"role": "assistant", "content": text})
        calls = self.parser.parse(text)
        if not calls:
            self.telemetry.record_call(UNPARSED, "parse_error", 0.0, 0, False)
            self.last_results = []
            outputs = [(FORMAT_NOTE, "\n".join(notes + [self.parser.format_hint(self.tool_names)]))]
        else:
            self.last_results = await self._executor.execute_turn(calls, ANSWER_TOOL)  # with the spraying guard
            self._count(self.last_results)
            outputs = [(r.name, r.output) for r in self.last_results]
            if notes:
                outputs.insert(0, (FORMAT_NOTE, "\n".join(notes)))
        self.tool_chars += sum(len(o) for _, o in outputs)
        rendered, messages = self.parser.render_results(outputs)
        self.transcript.extend(messages)
        return Turn(rendered, messages, self.last_results)

    def note_observation_truncated(self) -> None:
        """Count an observation cut to its limit (the text already carries the marker)."""
        self.truncations += 1

    def used_tools(self) -> set[str]:
        """The seat's own tools called at least once (for tool-usage telemetry)."""
        return {n for n, c in self.tool_calls.items() if c and n in self.tool_names}

    def episode_fields(self) -> dict[str, Any]:
        """The episode-end ``info`` fields that are this agent's own."""
        return {"tool_calls": dict(self.tool_calls), "truncations": self.truncations, "turns": self.turns,
                "tool_output_chars": self.tool_chars}

    def _count(self, results: list[ToolResult]) -> None:
        for r in results:
            self.tool_calls[r.name] += 1
            self.truncations += int(r.truncated)
            self.infra_failed |= r.status == "infra_error"
            if r.name == ANSWER_TOOL and r.status == "ok" and self.answer is None:
                self.answer = dict(r.arguments)


def tool_listing(tools: Sequence[Tool]) -> str:
    """The tools as the opening observation lists them (the chat gets their JSON specs)."""
    lines = ["Tools:"]
    for t in tools:
        params = ", ".join(t.parameters.get("properties", {}))
        lines.append(f"- {t.name}({params}): {t.description}")
    return "\n".join(lines)


def seat_fingerprint_fields(tools: Sequence[Tool], system_prompt: str, max_turns: int) -> dict[str, Any]:
    """What one seat contributes to a fingerprint: its tools' schemas, its system prompt
    and its turn limit (a single agent's at the top level, a team's per role)."""
    return {"tools": {t.name: t.schema_fields() for t in tools}, "system_prompt": system_prompt,
            "max_turns": max_turns}


class TurnSettings:
    """The settings a ``ToolEnv`` and a ``TeamEnv`` share, checked in one place, and the
    fingerprint assembled from them. A mixin: the env class supplies ``env_name``,
    ``env_version`` and ``splits``."""

    env_name: ClassVar[str] = "ToolEnv"
    env_version: ClassVar[int] = 0
    splits: ClassVar[tuple[str, ...]] = ("train", "validation", "test")
    registered_id: str | None = None
    """The id a registry made the env under (``multi_agent.make`` sets it; a ``ToolEnv``
    reads Gymnasium's ``spec``, which ``gym.make`` sets). See :attr:`env_id`."""

    def _init_turn_settings(self, *, parser: str | Parser, tool_output_budget_chars: int, max_action_chars: int,
                            max_observation_chars: int, split: str, render_mode: str | None) -> None:
        if split not in self.splits:
            raise ConfigError(f"Expected split in {self.splits}, actual value: {split!r}")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"Expected render_mode None or 'ansi', actual value: {render_mode!r}")
        self.parser = make_parser(parser)
        self.tool_output_budget_chars = tool_output_budget_chars
        self.max_action_chars = max_action_chars
        self.max_observation_chars = max_observation_chars
        self.split = split
        self.render_mode = render_mode

    @property
    def env_id(self) -> str:
        """The id in the fingerprint and in error messages: the id the env was registered
        under, so a user's ``myorg/UnitConversion-v0`` is named so.

        Ids in the ``agentgym`` namespace are this package's own, and those name what was
        made: ``env_name`` and ``env_version`` (a family's name and version), so a
        variant made by kwargs (``agentgym/Search-v1``
        with ``parser="tags"`` is ``agentgym/SearchR1-v1``) keep their fingerprints. An env
        made without a registry is named so too.
        """
        registered = self._registration_id()
        if registered is None or registered.startswith(_OWN_NAMESPACE):
            return f"{_OWN_NAMESPACE}{self.env_name}-v{self.env_version}"
        return registered

    def _registration_id(self) -> str | None:
        return self.registered_id

    def fit_observation(self, text: str) -> Truncated:
        """``text`` cut head and tail to ``max_observation_chars`` with a visible marker."""
        return truncate_head_tail(text, self.max_observation_chars)

    def opening_observation(self, system: str, tools: Sequence[Tool], user: str) -> str:
        """The first observation of a seat: system prompt, tool listing, task prompt."""
        return self.fit_observation(f"{system}\n\n{tool_listing(tools)}\n\n{user}").text

    def _finish_close(self, close: Coroutine[Any, Any, None]) -> None:
        """Run an env's ``close`` work from anywhere: on the runtime loop (closed from a
        coroutine) it is scheduled there and kept referenced, so it never blocks the loop;
        elsewhere it runs to the end before ``close`` returns, and raises what it raises.

        A scheduled close that fails is logged (``agentgym.turns``, ERROR, with the env id
        and the traceback) as soon as it fails. It is not re-raised: ``close`` has returned,
        and a closed env has no later call to raise it from. Without this the error would
        only reach asyncio's "exception was never retrieved" log, with no context, whenever
        the task happened to be collected.
        """
        if in_runtime_loop():
            task = asyncio.get_running_loop().create_task(close)
            _closing.add(task)
            task.add_done_callback(partial(_report_failed_close, self.env_id))
        else:
            run_sync(close)

    def _assemble_fingerprint(self, seating: dict[str, Any], extra: dict[str, Any]) -> Fingerprint:
        """The fingerprint of an env: ``seating`` says who sits where (one seat's fields,
        or the team's agents and roles), ``extra`` is the family's (and team's) own."""
        return make_fingerprint({
            "env": self.env_id, "split": self.split, "parser": self.parser.fingerprint(), **seating,
            "tool_output_budget_chars": self.tool_output_budget_chars, "max_action_chars": self.max_action_chars,
            "max_observation_chars": self.max_observation_chars, **extra,
        })
