"""The Docker engine goes away in the middle of a tool call: the call ends as
``infra_error`` (never the agent's outcome) within the documented bound.

The engine is reached through a socket relay that the test cuts, which is what "the
engine stopped" looks like from the client (connections reset, then refused). Stopping
the real ``dockerd`` instead would kill every other test's sandboxes on this machine and
the suite's shared pools with them.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from agentgym.envs.data_analysis import cell_reply
from agentgym.errors import InfraError
from agentgym.executor import ToolExecutor
from agentgym.parsing import ParsedCall
from agentgym.reliability import RetryPolicy
from agentgym.tools import Tool
from sandboxes import PoolConfig, SandboxPool
from sandboxes.docker import DockerBackend
from sandboxes.errors import SandboxError
from tests.sandboxes.conftest import TEST_CONFIG, require_engine
from tests.sandboxes.engine_relay import EngineRelay

pytestmark = pytest.mark.docker

ENGINE_LOSS_BOUND_S = 10.0
"""docs/reliability.md: a tool call whose engine stops answering ends as infra_error
within this many seconds (three fast failures and two waits of at most 0.1 s, with room
for a loaded 2-core machine)."""


def _python_tool(lease) -> Tool:
    """The python tool as DataAnalysis builds it (same retries, same deadline)."""
    async def python(code: str):
        try:
            return cell_reply(await lease.run(code, timeout=30.0))
        except SandboxError as e:
            raise InfraError(f"sandbox failure: {e}") from e

    return Tool("python", "run code", {"type": "object", "properties": {"code": {"type": "string"}},
                                       "required": ["code"]},
                python, max_output_chars=8000, timeout_s=2 * 30.0 + 120.0, max_retries=2)


async def test_a_stopped_engine_ends_the_call_as_infra_error_within_the_documented_bound():
    url = require_engine()
    relay = EngineRelay(url.removeprefix("unix://"))
    backend = DockerBackend(TEST_CONFIG, engine_urls=[relay.url])
    pool = SandboxPool(backend, PoolConfig(size=0, reap_on_start=False,
                                           retry=RetryPolicy(initial_s=0.05, max_wait_s=0.1)))
    ids: list[str] = []
    try:
        lease = await pool.acquire()
        ids.append(lease.id)
        executor = ToolExecutor([_python_tool(lease)], retry=RetryPolicy(initial_s=0.05, max_wait_s=0.1))
        warm = await executor.execute([ParsedCall("python", {"code": "x = 1\nx"}, "ok")])
        assert warm[0].status == "ok", warm[0].output

        call = asyncio.ensure_future(executor.execute(
            [ParsedCall("python", {"code": "import time\ntime.sleep(20)\nx"}, "ok")]))
        await asyncio.sleep(1.0)  # the cell is running in the sandbox
        cut_at = time.monotonic()
        relay.cut()
        (result,) = await call
        elapsed = time.monotonic() - cut_at
    finally:
        await pool.close()
        import docker

        from sandboxes import reaper

        reaper._engines.discard(relay.url)  # the relay is gone; its containers are removed here

        client = docker.DockerClient(base_url=url)
        for cid in ids:
            try:
                client.containers.get(cid).remove(force=True)
            except docker.errors.APIError:  # gone already, or being removed (auto-remove)
                pass
        client.close()
    assert result.status == "infra_error", (result.status, result.output)
    assert "not your fault" in result.output
    assert result.retries == 2  # the call's whole budget, not executor x lease x pool
    assert elapsed < ENGINE_LOSS_BOUND_S, elapsed
    print(f"engine lost -> infra_error in {elapsed:.2f} s")
