"""MCP tools in: any MCP server's tools, mounted into a ``ToolEnv`` like every other tool.

:class:`MCPToolbox` holds one connection to an MCP server (a subprocess over stdio, a
streamable-HTTP URL, or an in-process ``MCPServer`` in tests) and turns the server's tool
list into :class:`agentgym.Tool` objects. The schemas are the server's, so the executor
validates arguments before a call leaves the process, and the tools go through the same
deadlines, infra-only retries, truncation and telemetry as the built-in ones.
:func:`with_mcp_tools` adds them to a task family (composition, not a subclass).

Who is at fault (DESIGN.md, "Who is at fault"): a result the server marks ``is_error`` is
the tool telling the agent it used it wrongly (the MCP spec's channel for errors "the LLM
can see and self-correct"), so it is an ``agent_error``; a protocol error about the call's
parameters is too. A closed connection, a dead server, a transport or internal error is an
``infra_error``: retried by the executor on a fresh connection, and never the agent's.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.errors import AgentError, ConfigError, InfraError
from agentgym.family import ANSWER_TOOL, EpisodeView, TaskFamily
from agentgym.interop.extras import require
from agentgym.tools import Tool

__all__ = ["MCPToolOptions", "MCPToolbox", "MCPToolsFamily", "render_tool_result", "with_mcp_tools"]

log = logging.getLogger(__name__)

_AGENT_CODES = frozenset({-32602, -32601})
"""JSON-RPC codes that describe the call itself (invalid params, unknown method)."""


@dataclass(frozen=True)
class MCPToolOptions:
    """How the mounted tools behave in the executor (the same knobs as :class:`Tool`).

    Attributes:
        timeout_s: deadline of one attempt of one call.
        max_retries: retries of an ``infra_error`` (each on a fresh connection).
        max_output_chars: longer results are cut head and tail with a visible marker.
        max_concurrency: calls in flight to this server at once (``None``: unlimited).
        prefix: prepended to every tool name (to keep two servers' tools apart).
        connect_timeout_s: deadline of connecting and listing the tools.
    """

    timeout_s: float = 30.0
    max_retries: int = 2
    max_output_chars: int = 4000
    max_concurrency: int | None = None
    prefix: str = ""
    connect_timeout_s: float = 30.0


def render_tool_result(result: Any) -> str:
    """The text an agent sees of an MCP ``CallToolResult``: its text blocks, a note for
    each non-text block, and the structured content when there is no text."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        else:
            parts.append(f"[{kind or type(block).__name__} content: {getattr(block, 'mime_type', '') or 'binary'}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts) if parts else "(no output)"


class _Connection:
    """One live MCP client session, owned by a task of its own.

    The SDK enters anyio task groups and cancel scopes on connect, which must be left by
    the task that entered them; so a holder task connects, waits for ``close`` and leaves.
    """

    def __init__(self) -> None:
        self.client: Any = None
        self.broken = False
        self._stop = asyncio.Event()
        self._holder: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, server: Any, timeout_s: float) -> _Connection:
        conn = cls()
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        conn._holder = asyncio.create_task(conn._hold(server, ready), name="agentgym-mcp-connection")
        try:
            conn.client = await asyncio.wait_for(asyncio.shield(ready), timeout_s)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _hold(self, server: Any, ready: asyncio.Future[Any]) -> None:
        mcp = require("mcp", "mcp")
        try:
            async with mcp.Client(server) as client:
                ready.set_result(client)
                await self._stop.wait()
        except BaseException as e:  # noqa: BLE001 - reported to the opener or marks the connection broken
            self.broken = True
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else ConnectionError(str(e)))
            elif not isinstance(e, (asyncio.CancelledError, GeneratorExit)):
                log.info("MCP connection ended: %s: %s", type(e).__name__, e)

    async def close(self) -> None:
        self._stop.set()
        holder, self._holder = self._holder, None
        if holder is not None and not holder.done():
            try:
                await asyncio.wait_for(holder, 10.0)
            except (TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001 - best effort, then cancel
                holder.cancel()


class MCPToolbox:
    """The tools of one MCP server, as agentgym tools, over one shared connection.

    Open it on the loop the tools will run on (the runtime loop, for a ``ToolEnv``):
    ``await MCPToolbox.open(server)`` there, or :meth:`open_sync` from plain code.

    Args:
        server: an ``mcp.StdioServerParameters`` (a subprocess), a URL (streamable
            HTTP), or an ``mcp.server.mcpserver.MCPServer`` (in-process, for tests).
        options: deadlines, retries, truncation and concurrency of the tools.
    """

    def __init__(self, server: Any, options: MCPToolOptions | None = None) -> None:
        self.server = server
        self.options = options or MCPToolOptions()
        self._conn: _Connection | None = None
        self._lock = asyncio.Lock()
        self._tools: list[Tool] = []
        self._server_names: dict[str, str] = {}
        self._holders = 0

    @classmethod
    async def open(cls, server: Any, options: MCPToolOptions | None = None) -> MCPToolbox:
        """Connect and read the server's tool list (raises ``InfraError`` if it cannot)."""
        box = cls(server, options)
        try:
            await box.refresh()
        except BaseException:
            await box.aclose()
            raise
        return box

    @classmethod
    def open_sync(cls, server: Any, options: MCPToolOptions | None = None) -> MCPToolbox:
        """:meth:`open` on agentgym's runtime loop, where ``ToolEnv``'s tools run."""
        from agentgym.runtime import run_sync

        return run_sync(cls.open(server, options))

    @property
    def tools(self) -> list[Tool]:
        """The server's tools as of the last :meth:`refresh`."""
        return list(self._tools)

    async def refresh(self) -> list[Tool]:
        """List the server's tools again (all pages) and rebuild the agentgym tools."""
        conn = await self._connection()
        listed: list[Any] = []
        cursor: str | None = None
        try:
            while True:
                page = await asyncio.wait_for(conn.client.list_tools(cursor=cursor), self.options.connect_timeout_s)
                listed.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        except Exception as e:
            conn.broken = True
            raise InfraError(f"could not list the tools of MCP server {self._describe()}: {e}") from e
        self._tools = [self._as_tool(spec) for spec in listed]
        return self.tools

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Call the server's tool ``name`` (its own name, without the prefix)."""
        mcp = require("mcp", "mcp")
        conn = await self._connection()
        try:
            result = await conn.client.call_tool(name, arguments)
        except mcp.MCPError as e:
            if e.code in _AGENT_CODES:
                raise AgentError(f"{name}: {e.message}") from e
            conn.broken = True
            raise InfraError(f"MCP server {self._describe()} failed the call to {name}: {e.message} (code {e.code})") from e
        except (asyncio.CancelledError, AgentError):
            raise
        except Exception as e:  # a transport failure: the server or the pipe is gone
            conn.broken = True
            raise InfraError(f"MCP server {self._describe()} is unreachable: {type(e).__name__}: {e}") from e
        text = render_tool_result(result)
        if result.is_error:
            raise AgentError(text)
        return text

    def hold(self) -> None:
        """Count one more family using this toolbox (see :meth:`release`)."""
        self._holders += 1

    async def release(self) -> None:
        """One family is done with the toolbox; the last one closes the connection, so
        the same toolbox can serve many envs (a vector of them) and closes with the last."""
        self._holders = max(0, self._holders - 1)
        if self._holders == 0:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the connection (a stdio server process ends with it). Safe to call twice."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _connection(self) -> _Connection:
        async with self._lock:
            if self._conn is not None and self._conn.broken:
                stale, self._conn = self._conn, None
                await stale.close()
            if self._conn is None:
                try:
                    self._conn = await _Connection.open(self.server, self.options.connect_timeout_s)
                except Exception as e:
                    raise InfraError(f"could not connect to MCP server {self._describe()}: {type(e).__name__}: {e}") from e
            return self._conn

    def _as_tool(self, spec: Any) -> Tool:
        name = f"{self.options.prefix}{spec.name}"
        schema = dict(spec.input_schema or {})
        if schema.get("type") != "object":
            raise ConfigError(f"MCP tool {spec.name!r}: expected an input schema of type 'object', "
                              f"actual value: {schema.get('type')!r}; agentgym tools take keyword arguments")
        server_name = spec.name

        async def call(**arguments: Any) -> str:
            return await self.call(server_name, arguments)

        self._server_names[name] = server_name
        return Tool(name, spec.description or f"MCP tool {spec.name}", schema, call,
                    max_output_chars=self.options.max_output_chars, timeout_s=self.options.timeout_s,
                    max_concurrency=self.options.max_concurrency,
                    concurrency_key=f"mcp:{id(self)}" if self.options.max_concurrency else None,
                    max_retries=self.options.max_retries)

    def _describe(self) -> str:
        command = getattr(self.server, "command", None)
        if command is not None:
            return " ".join([command, *getattr(self.server, "args", [])])
        return self.server if isinstance(self.server, str) else type(self.server).__name__


class MCPToolsFamily(TaskFamily):
    """A task family with an MCP server's tools added to every episode.

    Everything but the tool set is the wrapped family's: tasks, prompts, scoring, oracle.
    The tools' names and schemas enter the env's fingerprint like any tool's, so an env
    whose MCP server changed its tools no longer matches one from before.
    """

    def __init__(self, family: TaskFamily, toolboxes: Sequence[MCPToolbox]) -> None:
        self.family = family
        self.toolboxes = list(toolboxes)
        self.name, self.version = family.name, family.version
        self.splits, self.reset_options = family.splits, family.reset_options
        clash = _name_clashes(family.tools(None), self.toolboxes)
        if clash:
            raise ConfigError(f"Expected MCP tool names distinct from the family's tools and each other, "
                              f"actual value: {sorted(clash)} twice; mount the server with MCPToolOptions(prefix=...)")
        for box in self.toolboxes:
            box.hold()
        self._released = False

    def new_task(self, rng: np.random.Generator, split: str, options: dict[str, Any]) -> Any:
        return self.family.new_task(rng, split, options)

    def tools(self, task: Any | None) -> dict[str, Tool]:
        own = self.family.tools(task)
        answer = own.pop(ANSWER_TOOL, None)
        mounted = {t.name: t for box in self.toolboxes for t in box.tools}
        return {**own, **mounted, **({ANSWER_TOOL: answer} if answer is not None else {})}

    def prompt(self, task: Any) -> str:
        return self.family.prompt(task)

    def score(self, task: Any, answer: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        return self.family.score(task, answer)

    def oracle_action(self, task: Any, episode: EpisodeView) -> str:
        return self.family.oracle_action(task, episode)

    def system_prompt(self) -> str:
        return self.family.system_prompt()

    def fingerprint_fields(self) -> dict[str, Any]:
        return self.family.fingerprint_fields()

    async def open_episode(self, task: Any) -> None:
        await self.family.open_episode(task)

    async def close_episode(self) -> None:
        await self.family.close_episode()

    async def aclose(self) -> None:
        await self.family.aclose()
        if not self._released:  # an env may close twice; each family releases its toolboxes once
            self._released = True
            for box in self.toolboxes:
                await box.release()


def _name_clashes(own: dict[str, Tool], toolboxes: Sequence[MCPToolbox]) -> set[str]:
    seen, clash = set(own), set()
    for box in toolboxes:
        for tool in box.tools:
            (clash if tool.name in seen else seen).add(tool.name)
    return clash


def with_mcp_tools(family: TaskFamily, *toolboxes: MCPToolbox) -> MCPToolsFamily:
    """``family`` with the tools of ``toolboxes`` added. A toolbox may serve many
    families (one per env of a vector); it closes with the last env that uses it.

    >>> from agentgym.envs.calculator import CalculatorFamily
    >>> sorted(with_mcp_tools(CalculatorFamily()).tools(None))
    ['answer', 'calculate']
    """
    return MCPToolsFamily(family, toolboxes)
