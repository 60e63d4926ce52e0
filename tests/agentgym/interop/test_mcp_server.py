"""``agentgym serve-mcp``: an MCP client runs code in the sandboxed Python (one sandbox per
MCP session) and searches the corpus; agent mistakes come back as tool errors."""

import os
import sys

import pytest
from mcp import (  # agentgym[mcp], installed by make install
    Client,
    StdioServerParameters,
)

from agentgym import ToolEnv
from agentgym.interop.launch import agentgym_server, free_port
from agentgym.interop.mcp_tools import MCPToolbox, MCPToolOptions, with_mcp_tools
from agentgym.testing import ProbeFamily


def serve_mcp_stdio(backend: str | None = "process", tools: str = "python,search") -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k != "AGENTGYM_SANDBOX"}
    if backend:
        env["AGENTGYM_SANDBOX"] = backend
    return StdioServerParameters(command=sys.executable, args=["-m", "agentgym.cli", "serve-mcp", "--tools", tools],
                                 env=env)


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


async def test_an_mcp_client_runs_print_1_plus_1_and_gets_2_in_a_sandbox_of_its_session():
    async with Client(serve_mcp_stdio()) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == {"python", "search", "open"}
        assert listed["python"].input_schema["required"] == ["code"]
        result = await client.call_tool("python", {"code": "print(1+1)"})
        assert not result.is_error and text(result).strip() == "2"
        await client.call_tool("python", {"code": "x = 41"})
        assert "42" in text(await client.call_tool("python", {"code": "x + 1"}))  # state kept in the session
        failed = await client.call_tool("python", {"code": "1/0"})
        assert failed.is_error and "ZeroDivisionError" in text(failed)
        escaped = await client.call_tool("python", {"code": "import os; os.listdir('/work')"})
        assert escaped.is_error  # the host's files are not there: the sandbox's boundary holds
        bad = await client.call_tool("python", {"source": "1"})
        assert bad.is_error and "invalid arguments" in text(bad)
    async with Client(serve_mcp_stdio(tools="python")) as other:  # a new session: a fresh interpreter
        assert "NameError" in text(await other.call_tool("python", {"code": "x"}))


async def test_search_and_open_over_mcp():
    async with Client(serve_mcp_stdio(tools="search")) as client:
        found = text(await client.call_tool("search", {"query": "capital of France", "k": 2}))
        assert found.startswith("Results for") and "1. [" in found
        doc_id = found.split("1. [", 1)[1].split("]", 1)[0]
        opened = await client.call_tool("open", {"doc_id": doc_id})
        assert not opened.is_error and doc_id in text(opened)
        assert (await client.call_tool("open", {"doc_id": "no-such-doc"})).is_error


def test_serve_mcp_tools_mount_back_into_a_tool_env():
    """Both directions at once: agentgym's served python tool inside a ToolEnv."""
    box = MCPToolbox.open_sync(serve_mcp_stdio(tools="python"), MCPToolOptions(prefix="remote_"))
    env = ToolEnv(with_mcp_tools(ProbeFamily(), box))
    try:
        env.reset(seed=0)
        obs, _, _, _, info = env.step('<tool_call>{"name": "remote_python", "arguments": {"code": "print(6*7)"}}</tool_call>')
        assert info["tool_results"][0]["status"] == "ok" and "42" in obs
        obs, _, _, _, info = env.step('<tool_call>{"name": "remote_python", "arguments": {"code": "raise SystemExit(3)"}}</tool_call>')
        assert info["tool_results"][0]["status"] == "agent_error" and not info["infra_failed"]
    finally:
        env.close()


async def test_http_sessions_get_a_sandbox_each_and_sessionless_requests_are_told_why():
    port = free_port()
    server = agentgym_server(["serve-mcp", "--tools", "python", "--transport", "streamable-http", "--port", str(port)],
                             f"http://127.0.0.1:{port}/mcp", accept_http_error=True, env={"AGENTGYM_SANDBOX": "process"})
    with server:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode="legacy") as a, Client(url, mode="legacy") as b:
            await a.call_tool("python", {"code": "secret = 'a'"})
            assert "'a'" in text(await a.call_tool("python", {"code": "secret"}))
            assert "NameError" in text(await b.call_tool("python", {"code": "secret"}))
        async with Client(url) as modern:  # the 2026 protocol has no sessions
            refused = await modern.call_tool("python", {"code": "1"})
            assert refused.is_error and "session" in text(refused)


@pytest.mark.docker
async def test_print_1_plus_1_in_a_docker_sandbox():
    async with Client(serve_mcp_stdio(backend="docker", tools="python")) as client:
        result = await client.call_tool("python", {"code": "print(1+1)"})
        assert not result.is_error and text(result).strip() == "2"
