"""Fixtures for the sandbox tests.

Behaviour tests run against both backends: ``process`` always, ``docker`` only where an
engine answers (the ``docker`` marker; ``AGENTGYM_REQUIRE_DOCKER=1`` turns a missing
engine into a failure, see tests/conftest.py). Sandboxes are shared per module to keep the
Docker module well under its time budget on a 2-core CI machine.
"""

from __future__ import annotations

import os
import warnings

import pytest
import pytest_asyncio

from sandboxes import DockerSandbox, ProcessSandbox, SandboxConfig
from sandboxes.engine import default_engine_url, engine_reachable
from sandboxes.process import SandboxIsolationWarning, isolation_support

BACKENDS = [
    pytest.param("process", id="process"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]

TEST_CONFIG = SandboxConfig(mem_limit="512m", tmpfs_size="128m", pids_limit=64, output_limit_bytes=4096)


def require_engine() -> str:
    """The engine URL, or skip (fail under AGENTGYM_REQUIRE_DOCKER=1) without one."""
    url = default_engine_url()
    if engine_reachable(url):
        return url
    message = f"no Docker engine reachable at {url}"
    if os.environ.get("AGENTGYM_REQUIRE_DOCKER", "") not in ("", "0", "false"):
        pytest.fail(f"AGENTGYM_REQUIRE_DOCKER=1 but {message}", pytrace=False)
    pytest.skip(message)


def process_enforces(what: str) -> str | None:
    """Why the process backend cannot be tested for ``what`` here (None: it can).

    With bubblewrap the process backend enforces everything these tests check; without
    it, it refuses to start (tested in test_process_isolation.py)."""
    support = isolation_support()
    return None if support.bwrap else support.reason


def skip_unless_enforced(backend: str, what: str) -> None:
    if backend == "process":
        reason = process_enforces(what)
        if reason:
            pytest.skip(f"ProcessSandbox does not enforce {what} here: {reason}")


async def start_sandbox(backend: str, config: SandboxConfig = TEST_CONFIG):
    if backend == "docker":
        require_engine()
        return await DockerSandbox(config).start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxIsolationWarning)
        return await ProcessSandbox(config).start()


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def sandbox(request):
    sb = await start_sandbox(request.param)
    sb.backend_name = request.param
    yield sb
    await sb.close()


@pytest.fixture
def requires():
    """``requires(backend, "network" | "pids" | "readonly")`` skips where not enforced."""
    return skip_unless_enforced


@pytest.fixture
def sandbox_factory():
    """``await sandbox_factory(backend, config)`` starts a sandbox (caller closes it)."""
    return start_sandbox


@pytest.fixture(scope="module")
def engine_url() -> str:
    """Module-scoped twin of ``docker_engine``: the URL of a reachable engine."""
    return require_engine()
