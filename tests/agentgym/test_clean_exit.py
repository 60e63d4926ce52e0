"""Clean exits (issue 29): a script that uses a sandboxed env exits silently and leaves no
container and no process behind; the shared pool stops when its last env closes; a pool
whose event loop has ended is never handed out again.

The scripts run in a subprocess under a small *subreaper* (``PR_SET_CHILD_SUBREAPER``):
whatever the script starts that outlives it is re-parented to the subreaper instead of
init, so "no process left" is checked exactly, sessions and double forks included.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.resources import SharedResources
from sandboxes import PoolConfig, SandboxPool
from sandboxes.fake import FakeBackend

ISSUE_SCRIPT = """
import gymnasium as gym, agentgym
e = gym.make("agentgym/DataAnalysis-v2"); o, i = e.reset(seed=0)
print([t["function"]["name"] for t in i["tools"]])
e.close()
print("closed")
"""

LEFT_OPEN_SCRIPT = """
import gymnasium as gym, agentgym
e = gym.make("agentgym/DataAnalysis-v2"); o, i = e.reset(seed=0)
o, *_ = e.step('<tool_call>{"name": "python", "arguments": {"code": "1 + 1"}}</tool_call>')
print("Out: 2" in o)
print("left open")
"""

CLOSED_AT_EXIT_SCRIPT = """
import atexit
import gymnasium as gym, agentgym
e = gym.make("agentgym/DataAnalysis-v2"); o, i = e.reset(seed=0)
atexit.register(e.close)  # runs after the runtime loop has closed its pools
print("closed at exit")
"""

SYNC_SANDBOX_SCRIPT = """
from sandboxes import SyncSandbox
sb = SyncSandbox()
print(sb.run("1 + 1").value)
print("left open")
"""

ALLOWED_STDERR: tuple[re.Pattern[str], ...] = ()
"""Lines a clean exit may print: none. (A leftover would be reported in one line naming
``agentgym reap``; seeing it here is a failure too.)"""

SUBREAPER = textwrap.dedent(r"""
    import ctypes, json, os, signal, subprocess, sys, tempfile, time

    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    script, timeout_s, grace_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # Files, not pipes: a leftover holding a pipe open would make reading it hang.
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=out, stderr=err)
        try:
            rc = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        out.seek(0); err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")

    from agentgym.lifeline import live_children  # stdlib only; no thread, no loop

    def leftovers():
        return {pid: b" ".join(cmdline).decode(errors="replace")[:300]
                for pid, cmdline in live_children().items()}

    end = time.monotonic() + grace_s
    while True:
        while True:  # reap what died (zombies re-parented to us)
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        left = leftovers()
        if not left or time.monotonic() > end:
            break
        time.sleep(0.1)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    print(json.dumps({"pid": proc.pid, "rc": rc, "stdout": stdout, "stderr": stderr, "left": left}))
""")


def run_tracked(script: str, env: dict[str, str], timeout_s: float = 240.0, grace_s: float = 10.0) -> dict:
    """Run ``script`` with ``python -c`` under the subreaper; its pid, exit status, output
    and the processes it left (pid -> command line) after ``grace_s``."""
    done = subprocess.run([sys.executable, "-c", SUBREAPER, script, str(timeout_s), str(grace_s)],
                          capture_output=True, text=True, env=env, timeout=timeout_s + grace_s + 60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def unexpected_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if line.strip() and not any(p.search(line) for p in ALLOWED_STDERR)]


def containers_of(pid: int, timeout_s: float = 10.0) -> list[str]:
    """Containers labelled as owned by process ``pid`` of this host, once auto-removal had
    ``timeout_s`` to finish."""
    from sandboxes.engine import connect
    from sandboxes.reaper import OWNER_LABEL

    prefix = f"{socket.gethostname()}:{pid}:"
    client = connect()
    try:
        end = time.monotonic() + timeout_s
        while True:
            listed = client.api.containers(all=True, filters={"label": OWNER_LABEL})
            mine = [c["Id"][:12] for c in listed if (c.get("Labels") or {}).get(OWNER_LABEL, "").startswith(prefix)]
            if not mine or time.monotonic() > end:
                return mine
            time.sleep(0.2)
    finally:
        client.close()


def backend_env(backend: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTGYM_SANDBOX")}
    env["AGENTGYM_SANDBOX"] = backend
    return env


BACKENDS = [
    pytest.param("process", id="process"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


@pytest.fixture
def backend(request) -> str:
    """The backend named by the parameter: Docker needs an engine (skipped or failed as
    tests/conftest.py says), the process backend needs bubblewrap."""
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    else:
        from sandboxes.process import isolation_support

        support = isolation_support()
        if support.bwrap is None:
            pytest.skip(f"the process backend cannot isolate here: {support.reason}")
    return request.param


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("script, last_line", [(ISSUE_SCRIPT, "closed"), (LEFT_OPEN_SCRIPT, "left open"),
                                               (CLOSED_AT_EXIT_SCRIPT, "closed at exit")],
                         ids=["closed", "left-open", "closed-at-exit"])
def test_a_script_with_a_sandboxed_env_exits_silently_and_leaves_nothing(backend, script, last_line):
    run = run_tracked(script, backend_env(backend))
    assert run["rc"] == 0, run["stderr"]
    assert run["stdout"].strip().splitlines()[-1] == last_line
    assert unexpected_lines(run["stderr"]) == []
    assert run["left"] == {}
    if backend == "docker":
        assert containers_of(run["pid"]) == []


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_sync_sandbox_left_open_is_closed_quietly_at_exit(backend):
    run = run_tracked(SYNC_SANDBOX_SCRIPT, backend_env(backend))
    assert run["rc"] == 0, run["stderr"]
    assert run["stdout"].split() == ["2", "left", "open"]
    assert unexpected_lines(run["stderr"]) == []
    assert run["left"] == {}
    if backend == "docker":
        assert containers_of(run["pid"]) == []


# ---------------------------------------------------------------- the shared pools' owner


@pytest.fixture
def fake_pools(monkeypatch):
    """``make_pool`` makes pools of fake sandboxes; the list of those made."""
    import sandboxes

    made: list[SandboxPool] = []

    def make_pool(backend=None, *, pool=None, **_):
        made.append(SandboxPool(FakeBackend(), PoolConfig(size=pool.size if pool else 2, reap_on_start=False)))
        return made[-1]

    monkeypatch.setattr(sandboxes, "make_pool", make_pool)
    return made


async def test_the_last_user_to_let_go_closes_the_shared_pool(fake_pools):
    owner = SharedResources()
    first, second = object(), object()
    pool = await owner.sandbox_pool("process", user=first)
    assert await owner.sandbox_pool("process", user=second) is pool
    await pool.wait_ready()
    await owner.release_sandbox_pool(first)
    assert not pool.closed  # the other user still holds it
    await owner.release_sandbox_pool(second)
    assert pool.closed and all(not sb.healthy for sb in pool.backend.created)
    again = await owner.sandbox_pool("process", user=first)
    assert again is not pool and not again.closed  # a new user gets a new pool
    await owner.aclose()


async def test_a_pool_asked_for_without_a_user_stays_until_the_owner_closes(fake_pools):
    owner = SharedResources()
    family = object()
    pool = await owner.sandbox_pool("process", user=family)
    assert await owner.sandbox_pool("process") is pool  # e.g. an MCP server: not counted
    await owner.release_sandbox_pool(family)
    assert not pool.closed
    later = object()
    assert await owner.sandbox_pool("process", user=later) is pool
    await owner.release_sandbox_pool(later)  # the last counted user, but the server holds it
    assert not pool.closed
    await owner.aclose()
    assert pool.closed


def test_a_pool_whose_loop_ended_is_never_handed_out_again(fake_pools):
    owner = SharedResources()
    family = object()

    async def use() -> SandboxPool:
        pool = await owner.sandbox_pool("process", user=family)
        await pool.wait_ready()
        return pool

    first = asyncio.run(use())  # returns with the pool open: its loop ends under it
    second = asyncio.run(use())
    assert second is not first and not second.closed
    assert first.closed and all(not sb.healthy for sb in first.backend.created)  # killed, not left
    asyncio.run(owner.release_sandbox_pool(family))


def test_closing_the_last_data_analysis_env_stops_the_pools_background_work(fake_pools):
    import gymnasium as gym

    from agentgym.resources import shared_resources
    from agentgym.runtime import run_sync

    run_sync(shared_resources().aclose())  # no pool of an earlier test is reused
    envs = [gym.make("agentgym/DataAnalysis-v1", backend="process") for _ in range(2)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
    [pool] = {id(p): p for p in fake_pools}.values()
    envs[0].close()
    assert not pool.closed
    envs[1].close()
    assert pool.closed and pool.counts() == {"idle": 0, "leased": 0, "creating": 0, "resetting": 0, "waiting": 0}
