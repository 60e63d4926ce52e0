"""An MCP server's tools inside a ToolEnv: schemas from the server, the status contract,
retries on a fresh connection, deadlines, truncation and telemetry."""

import json
import sys
import textwrap

import pytest
from mcp import StdioServerParameters  # agentgym[mcp], installed by make install

from agentgym import ToolEnv
from agentgym.interop.extras import MissingExtraError, require
from agentgym.interop.mcp_tools import MCPToolbox, MCPToolOptions, with_mcp_tools
from agentgym.testing import ProbeFamily

SERVER = textwrap.dedent('''
    import os, sys, time
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("test-tools")
    marker = sys.argv[1]

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool()
    def refuse(reason: str) -> str:
        """Always fails with the reason (a tool-level error)."""
        raise ValueError(reason)

    @server.tool()
    def crash_once() -> str:
        """Kills its server the first time it is called, then answers."""
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(3)
        return "recovered"

    @server.tool()
    def crash_always() -> str:
        """Kills its server every time."""
        os._exit(4)

    @server.tool()
    def slow(seconds: float) -> str:
        """Sleeps."""
        time.sleep(seconds)
        return "slept"

    @server.tool()
    def big() -> str:
        """A long output."""
        return "x" * 20000

    server.run()
''')


def tc(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


@pytest.fixture
def server(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    return StdioServerParameters(command=sys.executable, args=[str(script), str(tmp_path / "crashed")])


@pytest.fixture
def env(server):
    box = MCPToolbox.open_sync(server, MCPToolOptions(timeout_s=5.0, max_retries=2, max_output_chars=500))
    env = ToolEnv(with_mcp_tools(ProbeFamily(), box))
    env.reset(seed=0)
    yield env
    env.close()


def _step(env, action):
    obs, reward, terminated, truncated, info = env.step(action)
    return obs, info["tool_results"][0], info


def test_the_servers_tools_and_schemas_are_offered_and_fingerprinted(env):
    obs, info = env.reset(seed=1)
    specs = {t["function"]["name"]: t["function"] for t in info["tools"]}
    assert {"add", "refuse", "crash_once", "slow", "big", "echo", "answer"} <= set(specs)
    assert specs["add"]["description"] == "Add two integers."
    assert set(specs["add"]["parameters"]["required"]) == {"a", "b"}
    assert list(specs)[-1] == "answer"  # the family's answer tool stays last
    plain = ToolEnv(ProbeFamily())
    assert env.fingerprint != plain.fingerprint  # the mounted tools are part of what the agent sees
    plain.close()


def test_a_call_runs_on_the_server_and_is_counted_in_telemetry(env):
    obs, result, info = _step(env, tc("add", a=2, b=3))
    assert (result["name"], result["status"], result["retries"]) == ("add", "ok", 0)
    assert "5" in obs
    metrics = env.telemetry.metrics()
    assert metrics["tool/add/calls"] == 1 and metrics["tool/add/ok_rate"] == 1.0


def test_arguments_are_checked_against_the_servers_schema_before_the_call(env):
    obs, result, _ = _step(env, tc("add", a="two", b=3))
    assert result["status"] == "invalid_args" and "a" in obs


def test_a_tool_error_is_the_agents_and_is_not_retried(env):
    obs, result, info = _step(env, tc("refuse", reason="no such file"))
    assert (result["status"], result["retries"]) == ("agent_error", 0)
    assert not info["infra_failed"]


def test_a_dead_server_is_an_infra_error_retried_on_a_fresh_connection(env):
    obs, result, info = _step(env, tc("crash_once"))
    assert (result["status"], result["retries"]) == ("ok", 1)
    assert "recovered" in obs and not info["infra_failed"]
    obs, result, _ = _step(env, tc("add", a=1, b=1))  # the new connection serves later calls
    assert result["status"] == "ok" and "2" in obs


def test_a_server_that_keeps_dying_fails_the_episode_as_infrastructure(env):
    obs, result, info = _step(env, tc("crash_always"))
    assert (result["status"], result["retries"]) == ("infra_error", 2)
    assert info["infra_failed"] and "not your fault" in obs


def test_deadline_and_truncation_apply(server):
    box = MCPToolbox.open_sync(server, MCPToolOptions(timeout_s=0.5, max_output_chars=300))
    env = ToolEnv(with_mcp_tools(ProbeFamily(), box))
    try:
        env.reset(seed=0)
        obs, result, _ = _step(env, tc("slow", seconds=1.5))
        assert result["status"] == "timeout"
        obs, result, _ = _step(env, tc("big"))
        assert result["status"] == "ok" and result["truncated"] and result["original_chars"] == 20000
    finally:
        env.close()


def test_a_name_clash_with_the_family_is_refused(server):
    from agentgym.errors import ConfigError

    class EchoClash(ProbeFamily):
        def tools(self, task):
            tools = super().tools(task)
            tools["add"] = tools["echo"]
            return tools

    box = MCPToolbox.open_sync(server)
    try:
        with pytest.raises(ConfigError, match="prefix"):
            with_mcp_tools(EchoClash(), box)
        prefixed = MCPToolbox.open_sync(server, MCPToolOptions(prefix="srv_"))
        family = with_mcp_tools(EchoClash(), prefixed)
        assert "srv_add" in family.tools(None)
    finally:
        from agentgym.runtime import run_sync

        run_sync(box.aclose())
        run_sync(prefixed.aclose())


def test_an_unreachable_server_is_an_infra_error_at_open(tmp_path):
    from agentgym.errors import InfraError

    missing = StdioServerParameters(command=sys.executable, args=[str(tmp_path / "no_such_server.py")])
    with pytest.raises(InfraError, match="MCP server"):
        MCPToolbox.open_sync(missing, MCPToolOptions(connect_timeout_s=10))


def test_a_missing_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # makes `import mcp` fail
    with pytest.raises(MissingExtraError, match=r"pip install 'agentgym\[mcp\]'"):
        require("mcp", "mcp")


def test_one_toolbox_serves_many_envs_and_closes_with_the_last(server):
    box = MCPToolbox.open_sync(server)
    first, second = ToolEnv(with_mcp_tools(ProbeFamily(), box)), ToolEnv(with_mcp_tools(ProbeFamily(), box))
    first.reset(seed=0)
    connection = box._conn
    first.close()
    first.close()  # twice: still one release
    assert box._conn is connection  # still open for the second env
    second.reset(seed=0)
    obs, result, _ = _step(second, tc("add", a=20, b=22))
    assert result["status"] == "ok" and "42" in obs  # the first env's close left the connection open
    second.close()
    assert box._conn is None  # the last env closed it (the server process ends with it)
