"""The Docker engine goes away in the middle of a tool call: the call ends as
``infra_error`` (never the agent's outcome) within the documented bound.

The engine is reached through a socket relay that the test cuts, which is what "the
engine stopped" looks like from the client (connections reset, then refused). Stopping
the real ``dockerd`` instead would kill every other test's sandboxes on this machine and
the suite's shared pools with them.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import threading
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

pytestmark = pytest.mark.docker

ENGINE_LOSS_BOUND_S = 10.0
"""docs/reliability.md: a tool call whose engine stops answering ends as infra_error
within this many seconds (three fast failures and two waits of at most 0.1 s, with room
for a loaded 2-core machine)."""


class EngineRelay:
    """A Unix-socket relay in front of the engine's socket, in its own thread; ``cut()``
    resets every connection and stops accepting, as a stopped engine does."""

    def __init__(self, engine_path: str) -> None:
        self.engine_path = engine_path
        self.dir = tempfile.mkdtemp(prefix="agentgym-relay-")
        self.path = os.path.join(self.dir, "docker.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(64)
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.engine_path)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def cut(self) -> None:
        os.unlink(self.path)  # new connections are refused ...
        self._listener.close()
        with self._lock:  # ... and open ones, the sandbox's own included, reset
            for conn in self._conns:
                try:  # shutdown, not just close: it wakes the relay's blocked reads
                    conn.shutdown(socket.SHUT_RDWR)
                    conn.close()
                except OSError:
                    pass


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
