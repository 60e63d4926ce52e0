"""Running parsed tool calls with deadlines, retries and per-tool concurrency limits.

The executor is where the status contract is enforced:

========== ============================================ =========
status     cause                                        retried
========== ============================================ =========
ok         the tool returned
agent_error the tool raised ``AgentError``, or the call  no
           named an unknown tool
invalid_args arguments failed the tool's JSON schema    no
parse_error the call could not be read from the text    no
timeout    the call ran past ``Tool.timeout_s``, or the  no
           tool raised ``ToolTimeout``
infra_error ``InfraError`` or an unexpected exception   yes (within
           from the tool (a bug in the tool is never     the call's
           the agent's fault)                           budget)
========== ============================================ =========

A tool may also *return* its status as a value (:class:`~agentgym.tools.ToolReply`)
instead of raising: that is how the sandbox's outcome reaches the executor without
turning into an exception and back.

Retries follow :mod:`agentgym.reliability`: each call opens one budget of
``Tool.max_retries + 1`` attempts and ``Tool.timeout_s`` seconds, and every layer under
the tool (the sandbox pool replacing a dead sandbox, say) spends from that budget, so a
call is tried at most ``max_retries + 1`` times in all and ends within ``timeout_s``
(plus :data:`DEADLINE_GRACE_S`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema

from agentgym.errors import AgentError, InfraError, ToolTimeout
from agentgym.parsing import ParsedCall
from agentgym.reliability import Budget, RetryPolicy, call_budget, retrying
from agentgym.telemetry import Telemetry
from agentgym.tools import Tool, ToolReply
from agentgym.truncation import truncate_head_tail

__all__ = ["ToolStatus", "ToolResult", "ToolExecutor", "UNKNOWN_TOOL", "UNPARSED", "DEADLINE_GRACE_S"]

log = logging.getLogger(__name__)

ToolStatus = Literal["ok", "agent_error", "invalid_args", "parse_error", "timeout", "infra_error"]
UNKNOWN_TOOL = "_unknown_tool"  # telemetry bucket for calls naming a tool that does not exist
UNPARSED = "_unparsed"  # telemetry bucket for calls whose name could not be read


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one call, as the env reports it and telemetry counts it."""

    name: str
    status: ToolStatus
    output: str
    arguments: dict[str, Any] = field(default_factory=dict)
    latency_ms: float = 0.0
    retries: int = 0
    truncated: bool = False
    original_chars: int = 0

    def as_info(self) -> dict[str, Any]:
        """The call's facts for ``info["tool_results"]``; an infrastructure failure also
        carries its reply (``error``), so whoever drops the episode can say why."""
        info: dict[str, Any] = {
            "name": self.name, "status": self.status, "latency_ms": self.latency_ms,
            "retries": self.retries, "truncated": self.truncated, "original_chars": self.original_chars,
        }
        if self.status == "infra_error":
            info["error"] = self.output
        return info


DEADLINE_GRACE_S = 1.0
"""The executor's own deadline fires this long after the call's budget runs out, so a
layer that honours the budget (the sandbox pool waiting for a sandbox, say) reports its
own failure as infrastructure before the executor has to call the overrun a timeout."""


class _RetriableInfra(Exception):
    """Internal: carries an InfraError (or unexpected exception) into tenacity's retry."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


# Semaphores per (event loop, concurrency key): the limit holds across every env of the
# process that runs on the same loop, which is what protects a shared service.
_limits: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]]" = (
    weakref.WeakKeyDictionary()
)


def _semaphore(tool: Tool) -> asyncio.Semaphore | None:
    if tool.max_concurrency is None:
        return None
    per_loop = _limits.setdefault(asyncio.get_running_loop(), {})
    sem = per_loop.get(tool.limit_key)
    if sem is None:
        sem = per_loop[tool.limit_key] = asyncio.Semaphore(tool.max_concurrency)
    return sem


class ToolExecutor:
    """Validates, runs and post-processes the tool calls of one env."""

    def __init__(self, tools: Sequence[Tool], telemetry: Telemetry | None = None,
                 retry: RetryPolicy | None = None) -> None:
        """``retry`` sets the backoff (``initial_s``, ``max_wait_s``); each tool's
        ``max_retries`` and ``timeout_s`` set its attempts and deadline."""
        self.tools = {t.name: t for t in tools}
        self.telemetry = telemetry if telemetry is not None else Telemetry()
        self.retry = retry or RetryPolicy()
        self._validators = {t.name: jsonschema.Draft202012Validator(t.parameters) for t in tools}

    async def execute(self, calls: Sequence[ParsedCall]) -> list[ToolResult]:
        """Run all calls concurrently; results come back in call order."""
        results = await asyncio.gather(*(self._execute_one(c) for c in calls))
        for r in results:
            self.telemetry.record_call(r.name, r.status, r.latency_ms, r.retries, r.truncated)
        return list(results)

    async def execute_turn(self, calls: Sequence[ParsedCall], answer_tool: str = "answer") -> list[ToolResult]:
        """``execute`` with the answer-spraying guard: several answer calls in one turn are
        all refused (an agent must commit to one answer), the other calls still run."""
        n_answers = sum(1 for c in calls if c.status == "ok" and c.name == answer_tool)
        if n_answers <= 1:
            return await self.execute(calls)
        results = await self.execute([c for c in calls if not (c.status == "ok" and c.name == answer_tool)])
        results.append(ToolResult(answer_tool, "agent_error",
                                  f"Error: you gave {n_answers} answers in one turn; give exactly one."))
        self.telemetry.record_call(answer_tool, "agent_error", 0.0, 0, False)
        return results

    async def _execute_one(self, call: ParsedCall) -> ToolResult:
        if call.status != "ok":
            name = call.name if call.name in self.tools else UNPARSED
            return ToolResult(name, "parse_error", f"Error: could not read the tool call: {call.error}")
        tool = self.tools.get(call.name or "")
        if tool is None:
            known = ", ".join(sorted(self.tools))
            return ToolResult(UNKNOWN_TOOL, "agent_error",
                              f"Error: there is no tool named {call.name!r}. Available tools: {known}.",
                              arguments=call.arguments)
        problem = self._validate(tool, call.arguments)
        if problem:
            return ToolResult(tool.name, "invalid_args",
                              f"Error: invalid arguments for {tool.name}: {problem}", arguments=call.arguments)
        return await self._run(tool, call.arguments)

    def _validate(self, tool: Tool, arguments: dict[str, Any]) -> str | None:
        error = jsonschema.exceptions.best_match(self._validators[tool.name].iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "arguments"
        required = tool.parameters.get("required", [])
        return f"{where}: {error.message}. Expected parameters: {list(tool.parameters.get('properties', {}))} (required: {required})."

    async def _run(self, tool: Tool, arguments: dict[str, Any]) -> ToolResult:
        start = time.perf_counter()
        policy = RetryPolicy(attempts=tool.max_retries + 1, initial_s=self.retry.initial_s,
                             max_wait_s=self.retry.max_wait_s, deadline_s=tool.timeout_s)
        status: ToolStatus
        sem = _semaphore(tool)
        async with sem if sem is not None else contextlib.nullcontext():
            with call_budget(policy, fresh=True) as budget:
                try:
                    status, output = await self._attempts(tool, arguments, budget)
                except AgentError as e:
                    status, output = "agent_error", f"Error: {e}"
                except ToolTimeout as e:
                    status, output = "timeout", f"Error: {e}"
                except TimeoutError:
                    status, output = "timeout", (
                        f"Error: {tool.name} did not finish within {tool.timeout_s:g} s and was stopped. "
                        "Make the call cheaper or split the work."
                    )
                except _RetriableInfra as e:
                    status, output = "infra_error", (
                        f"Error: {tool.name} is unavailable because of an infrastructure failure "
                        f"({type(e.cause).__name__}: {e.cause}); this is not your fault."
                    )
                retries = budget.retries
        latency_ms = (time.perf_counter() - start) * 1e3
        cut = truncate_head_tail(output, tool.max_output_chars)
        return ToolResult(tool.name, status, cut.text, arguments, latency_ms, retries,
                          cut.truncated, cut.original_chars)

    async def _attempts(self, tool: Tool, arguments: dict[str, Any], budget: Budget) -> tuple[ToolStatus, str]:
        async for attempt in retrying(_RetriableInfra, budget=budget):
            with attempt:
                return await self._attempt(tool, arguments, budget)
        raise AssertionError("unreachable: retrying re-raises when it gives up")

    async def _attempt(self, tool: Tool, arguments: dict[str, Any], budget: Budget) -> tuple[ToolStatus, str]:
        try:
            out = await asyncio.wait_for(tool.fn(**arguments), budget.remaining_s() + DEADLINE_GRACE_S)
        except (AgentError, ToolTimeout, TimeoutError):
            raise
        except InfraError as e:
            raise _RetriableInfra(e) from e
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug in the tool is never the agent's fault
            log.warning("tool %s raised %s: %s (treated as infra_error)", tool.name, type(e).__name__, e)
            raise _RetriableInfra(e) from e
        if isinstance(out, ToolReply):
            return out.status, out.text
        return "ok", out if isinstance(out, str) else str(out)
