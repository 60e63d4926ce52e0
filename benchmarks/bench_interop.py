"""What the interop protocols cost: one step through ``agentgym serve-env`` (OpenEnv's
WebSocket protocol) and through the env's OpenEnv container (``agentgym package-env``,
started by OpenEnv's ``LocalDockerProvider``; building the image takes ~2 min) vs in-process, one MCP tool call (stdio) vs a direct call of the same
tool, and episodes/s at concurrency 64 through the OpenEnv server vs in-process.

Run: ``make bench`` or ``.venv/bin/pytest benchmarks/bench_interop.py --benchmark-only``.
Each pair is measured in the same run; compare medians (``--benchmark-sort=name``).
"""

import asyncio
import json
import sys
import textwrap

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from agentgym.interop.launch import agentgym_server, free_port
from agentgym.interop.mcp_tools import MCPToolbox
from agentgym.interop.openenv_client import openenv_env
from agentgym.runtime import run_sync
from agentgym.wrappers import areset, astep

CALCULATE = f'<tool_call>{json.dumps({"name": "calculate", "arguments": {"expression": "6*7"}})}</tool_call>'
ANSWER = f'<tool_call>{json.dumps({"name": "answer", "arguments": {"answer": 0}})}</tool_call>'
ENDLESS = ["-k", "max_turns=1000000000", "-k", "tool_output_budget_chars=1000000000000"]
CONCURRENCY = 64
EPISODES = 256


@pytest.fixture(scope="module")
def calculator_url():
    port = free_port()
    with agentgym_server(["serve-env", "agentgym/Calculator-v0", "--port", str(port), "--max-sessions",
                          str(CONCURRENCY + 8), *ENDLESS], f"http://127.0.0.1:{port}/health"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def calculator_container_url(tmp_path_factory):
    """Calculator-v0 (endless episodes) packaged, built and run as OpenEnv runs an image."""
    import docker
    from openenv.core.containers.runtime.providers import LocalDockerProvider

    from agentgym.interop.openenv_package import build_openenv_image, write_openenv_package

    tag = "openenv-agentgym-calculator-v0:bench"
    package = write_openenv_package("agentgym/Calculator-v0", tmp_path_factory.mktemp("pkg") / "calc",
                                    {"max_turns": 10**9, "tool_output_budget_chars": 10**12})
    build_openenv_image(package, tag)
    provider = LocalDockerProvider()
    try:
        url = provider.start_container(tag)
        provider.wait_for_ready(url)
        yield url
    finally:
        provider.stop_container()
        client = docker.from_env()
        client.images.remove(tag, force=True)
        client.close()


def test_step_in_process(benchmark):
    """Baseline: ToolEnv.step with one calculate call, in this process."""
    env = gym.make("agentgym/Calculator-v0", max_turns=10**9, tool_output_budget_chars=10**12)
    env.reset(seed=0)
    benchmark(env.step, CALCULATE)
    env.close()


def _bench_remote_step(benchmark, url: str) -> None:
    env = openenv_env(url)
    env.reset(seed=0)
    result = benchmark(env.step, CALCULATE)
    assert "42" in result[0]
    env.close()


def test_step_through_openenv_server(benchmark, calculator_url):
    """The same step sent through agentgym serve-env with openenv_env (OpenEnv's client)."""
    _bench_remote_step(benchmark, calculator_url)


@pytest.mark.docker
def test_step_through_openenv_container(benchmark, calculator_container_url):
    """The same step sent to the env's OpenEnv container (docker-proxy port forwarding included)."""
    _bench_remote_step(benchmark, calculator_container_url)


MCP_SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer
    server = MCPServer("bench")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    server.run()
''')


async def _add(a: int, b: int) -> str:
    return str(a + b)


def test_tool_call_direct(benchmark):
    """Baseline: the tool's coroutine awaited on the runtime loop (the sync hop included)."""
    result = benchmark(lambda: run_sync(_add(a=2, b=3)))
    assert result == "5"


def test_tool_call_through_mcp_stdio(benchmark, tmp_path):
    """The same tool on an MCP server over stdio, called through MCPToolbox."""
    from mcp import StdioServerParameters

    script = tmp_path / "bench_server.py"
    script.write_text(MCP_SERVER)
    box = MCPToolbox.open_sync(StdioServerParameters(command=sys.executable, args=[str(script)]))
    [tool] = box.tools
    result = benchmark(lambda: run_sync(tool.fn(a=2, b=3)))
    assert result == "5"
    run_sync(box.aclose())


async def _one_step_episodes(envs, episodes: int) -> None:
    """``episodes`` episodes of reset + one answer step, ``len(envs)`` at a time."""
    queue = iter(range(episodes))

    async def worker(env):
        for seed in queue:
            await areset(env, seed=seed)
            *_, info = await astep(env, ANSWER)
            assert info["infra_failed"] is False

    await asyncio.gather(*(worker(env) for env in envs))


def _bench_episodes(benchmark, envs) -> None:
    benchmark.pedantic(lambda: run_sync(_one_step_episodes(envs, EPISODES)), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["episodes_per_s"] = EPISODES / benchmark.stats.stats.median
    for env in envs:
        env.close()


def test_episodes_per_s_in_process_c64(benchmark):
    _bench_episodes(benchmark, [gym.make("agentgym/Calculator-v0") for _ in range(CONCURRENCY)])


def test_episodes_per_s_through_openenv_server_c64(benchmark, calculator_url):
    _bench_episodes(benchmark, [openenv_env(calculator_url) for _ in range(CONCURRENCY)])


@pytest.mark.docker
def test_episodes_per_s_through_openenv_container_c64(benchmark, calculator_container_url):
    _bench_episodes(benchmark, [openenv_env(calculator_container_url) for _ in range(CONCURRENCY)])
