"""MCP tools out: the sandboxed Python interpreter and the search tool as an MCP server
(``agentgym serve-mcp``), for agents at inference time.

Every call goes through agentgym's :class:`~agentgym.ToolExecutor`, so served tools keep
the deadlines, truncation, infra-only retries and telemetry they have in an env. Their
outcome maps onto MCP's two error channels: a result the agent caused (its code raised,
timed out, bad arguments) is a tool result with ``is_error`` (the agent sees it and can
correct itself); an infrastructure failure is a JSON-RPC error (``INTERNAL_ERROR``), so a
client (agentgym's :class:`~agentgym.interop.MCPToolbox` among them) retries it.

The trust boundary is the sandbox's: one sandbox per MCP session, never shared. Over
stdio the session is the connection (one client, one server process). Over streamable
HTTP it is the ``mcp-session-id`` a client gets by connecting in the session-ful
(handshake) mode; a request without one cannot own a sandbox and is told so. A session's
sandbox goes back to the pool (reset, never reused dirty) when it has been idle for
``idle_timeout_s`` and when the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentgym.envs.data_analysis import PYTHON_OUTPUT_CHARS, cell_reply
from agentgym.errors import AgentError, ConfigError, InfraError
from agentgym.executor import ToolExecutor, ToolResult
from agentgym.interop.extras import require
from agentgym.parsing import ParsedCall
from agentgym.tools import Tool, ToolReply

__all__ = ["SERVABLE_TOOLS", "ServeConfig", "SessionSandboxes", "build_mcp_server", "check_transport", "serve_mcp"]

SERVABLE_TOOLS = ("python", "search")
"""Tool groups ``serve-mcp`` offers: ``python`` (a persistent sandboxed interpreter) and
``search`` (``search`` and ``open`` over Search-v1's corpus)."""

Transport = Literal["stdio", "streamable-http"]
STDIO_SESSION = "stdio"

_session_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("agentgym_mcp_session", default=None)


@dataclass(frozen=True)
class ServeConfig:
    """What ``serve-mcp`` serves and how.

    Attributes:
        tools: tool groups from :data:`SERVABLE_TOOLS`.
        search_kwargs: Search-v1 keyword arguments for the search tool (corpus, retriever).
        sandbox_backend: ``docker``, ``process`` or None (``AGENTGYM_SANDBOX``, then auto).
        python_timeout_s: deadline of one cell inside the sandbox.
        idle_timeout_s: a session's sandbox is released after this long without a call.
        max_sessions: sessions holding a sandbox at once; more are refused with a message.
    """

    tools: tuple[str, ...] = SERVABLE_TOOLS
    search_kwargs: dict[str, Any] = field(default_factory=dict)
    sandbox_backend: str | None = None
    python_timeout_s: float = 30.0
    idle_timeout_s: float = 600.0
    max_sessions: int = 64

    def __post_init__(self) -> None:
        unknown = set(self.tools) - set(SERVABLE_TOOLS)
        if unknown or not self.tools:
            raise ConfigError(f"Expected --tools from {list(SERVABLE_TOOLS)}, actual value: {list(self.tools)}")
        if self.max_sessions < 1 or self.idle_timeout_s <= 0 or self.python_timeout_s <= 0:
            raise ConfigError(f"Expected max_sessions >= 1 and positive timeouts, actual values: {self.max_sessions}, "
                              f"{self.idle_timeout_s}, {self.python_timeout_s}")


@dataclass
class _Lease:
    sandbox: Any
    last_used: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class SessionSandboxes:
    """One sandbox lease per session key, from the shared pool on the server's loop."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self._leases: dict[str, _Lease] = {}
        self._lock = asyncio.Lock()
        self._reaper: asyncio.Task[None] | None = None

    async def run(self, key: str, code: str) -> ToolReply:
        """Run ``code`` in the session's sandbox: the cell's reply with its status, or
        ``InfraError`` when the sandbox itself fails."""
        from sandboxes.errors import SandboxClosedError, SandboxError

        lease = await self._lease(key)
        async with lease.lock:  # one cell at a time per interpreter, as in an episode
            lease.last_used = time.monotonic()
            try:
                result = await lease.sandbox.run(code, timeout=self.config.python_timeout_s)
            except (SandboxError, SandboxClosedError) as e:
                raise InfraError(f"sandbox failure: {e}") from e
            lease.last_used = time.monotonic()
        return cell_reply(result)

    async def _lease(self, key: str) -> _Lease:
        from agentgym.resources import shared_resources

        async with self._lock:
            lease = self._leases.get(key)
            if lease is not None:
                return lease
            if len(self._leases) >= self.config.max_sessions:
                raise AgentError(f"this server holds {self.config.max_sessions} sessions' sandboxes already; "
                                 "close an MCP session (or wait for an idle one to expire) and retry")
            pool = await shared_resources().sandbox_pool(self.config.sandbox_backend)
            try:
                sandbox = await pool.acquire()
            except Exception as e:
                raise InfraError(f"no sandbox for the session: {e}") from e
            lease = self._leases[key] = _Lease(sandbox, time.monotonic())
            if self._reaper is None:
                self._reaper = asyncio.create_task(self._reap_idle(), name="agentgym-mcp-idle-sandboxes")
            return lease

    async def _reap_idle(self) -> None:
        period = min(30.0, self.config.idle_timeout_s / 2)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            idle = [k for k, lease in self._leases.items()
                    if now - lease.last_used > self.config.idle_timeout_s and not lease.lock.locked()]
            for key in idle:
                await self.release(key)

    async def release(self, key: str) -> None:
        """Give the session's sandbox back to the pool (it is reset before reuse)."""
        from agentgym.resources import shared_resources

        async with self._lock:
            lease = self._leases.pop(key, None)
        if lease is not None:
            pool = await shared_resources().sandbox_pool(self.config.sandbox_backend)
            await pool.release(lease.sandbox)

    @property
    def live_sessions(self) -> int:
        return len(self._leases)

    async def aclose(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        for key in list(self._leases):
            await self.release(key)


def _python_tool(sandboxes: SessionSandboxes) -> Tool:
    async def python(code: str) -> ToolReply:
        key = _session_key.get()
        if key is None:
            raise AgentError("the python tool keeps an interpreter per MCP session, and this request has none: "
                             "connect over stdio, or over HTTP in session mode (mcp.Client(url, mode='legacy'))")
        return await sandboxes.run(key, code)

    return Tool("python",
                "Run Python code in your persistent sandbox (variables, imports and files are kept across "
                "calls of this MCP session; no network). Returns stdout, stderr and the value of the last "
                "expression.",
                {"type": "object", "properties": {"code": {"type": "string", "description": "Python source"}},
                 "required": ["code"], "additionalProperties": False},
                python, max_output_chars=PYTHON_OUTPUT_CHARS, timeout_s=2 * sandboxes.config.python_timeout_s + 120.0,
                max_retries=2)


def _search_tools(search_kwargs: dict[str, Any]) -> tuple[list[Tool], Any]:
    import gymnasium as gym

    import agentgym  # noqa: F401 - registers the envs

    env = gym.make("agentgym/Search-v1", **search_kwargs)
    tools = env.unwrapped.tools_for(None)
    return [tools["search"], tools["open"]], env


def _to_mcp(result: ToolResult) -> Any:
    """The served result: text when ``ok``; what the agent caused as a tool result with
    ``is_error`` (the agent reads it); an infrastructure failure as a protocol error
    (``INTERNAL_ERROR``) that a client retries."""
    mcp = require("mcp", "mcp")
    if result.status == "infra_error":
        raise mcp.MCPError(-32603, result.output)
    return mcp.types.CallToolResult(content=[mcp.types.TextContent(type="text", text=result.output)],
                                    is_error=result.status != "ok")


def _session_of(ctx: Any, stdio: bool) -> str | None:
    """The MCP session a request belongs to (see the module docstring)."""
    if stdio:
        return STDIO_SESSION
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    return headers.get("mcp-session-id") if headers is not None else None


def build_mcp_server(config: ServeConfig, *, stdio: bool) -> Any:
    """An MCP server (``mcp.server.Server``) with the tools of ``config``: each listed with
    agentgym's JSON schema and called through a :class:`ToolExecutor`.

    Its lifespan releases every session's sandbox and closes the pools it started.
    """
    mcp = require("mcp", "mcp")
    lowlevel = require("mcp.server", "mcp")
    sandboxes = SessionSandboxes(config)
    tools: list[Tool] = []
    search_env = None
    if "python" in config.tools:
        tools.append(_python_tool(sandboxes))
    if "search" in config.tools:
        found, search_env = _search_tools(config.search_kwargs)
        tools.extend(found)
    executor = ToolExecutor(tools)
    listing = mcp.types.ListToolsResult(tools=[
        mcp.types.Tool(name=t.name, description=t.description, input_schema=t.parameters) for t in tools])

    async def list_tools(ctx: Any, params: Any) -> Any:
        return listing

    async def call_tool(ctx: Any, params: Any) -> Any:
        token = _session_key.set(_session_of(ctx, stdio))
        try:
            [result] = await executor.execute([ParsedCall(name=params.name, arguments=dict(params.arguments or {}))])
        finally:
            _session_key.reset(token)
        return _to_mcp(result)

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[dict[str, Any]]:
        from agentgym.resources import shared_resources

        try:
            yield {}
        finally:
            await sandboxes.aclose()
            await shared_resources().aclose()
            if search_env is not None:
                search_env.close()

    server = lowlevel.Server("agentgym", instructions="agentgym's sandboxed Python and search tools",
                             lifespan=lifespan, on_list_tools=list_tools, on_call_tool=call_tool)
    server.agentgym_sandboxes = sandboxes  # live sessions, for stats and tests
    server.agentgym_telemetry = executor.telemetry
    return server


async def _run_stdio(server: Any) -> None:
    stdio = require("mcp.server.stdio", "mcp")
    async with stdio.stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def check_transport(transport: str) -> None:
    """Raise ``ConfigError`` unless ``transport`` is one ``serve_mcp`` speaks."""
    if transport not in ("stdio", "streamable-http"):
        raise ConfigError(f"Expected transport 'stdio' or 'streamable-http', actual value: {transport!r}")


def serve_mcp(tools: Sequence[str], *, transport: Transport = "stdio", host: str = "127.0.0.1", port: int = 8000,
              search_kwargs: dict[str, Any] | None = None) -> None:
    """Build the server and run it until stdin closes (stdio) or it is interrupted (HTTP)."""
    check_transport(transport)
    config = ServeConfig(tools=tuple(tools), search_kwargs=dict(search_kwargs or {}))
    server = build_mcp_server(config, stdio=transport == "stdio")
    if transport == "stdio":
        anyio = require("anyio", "mcp")
        anyio.run(_run_stdio, server)
        return
    uvicorn = require("uvicorn", "mcp")
    app = server.streamable_http_app(host=host, max_sessions=config.max_sessions)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
