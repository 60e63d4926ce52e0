"""The process backend without Docker: a real sandbox, or a refusal.

Each test sends what an adversarial agent would and asserts what it must not reach
(issue 17's findings): the host's files and sockets, the project's code (and with it the
gold answers), the limits, the environment.
"""

from __future__ import annotations

import asyncio
import os
import sys
import warnings
from pathlib import Path

import pytest
import pytest_asyncio

from sandboxes import ProcessSandbox, SandboxConfig, make_pool
from sandboxes.process import SandboxIsolationError, SandboxIsolationWarning, isolation_support

module_loop = pytest.mark.asyncio(loop_scope="module")

PROJECT = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox():
    sb = await ProcessSandbox(SandboxConfig(mem_limit="512m", tmpfs_size="128m", pids_limit=64)).start()
    yield sb
    await sb.close()


async def _value(sb, code: str):
    result = await sb.run(code, timeout=20)
    assert result.status == "ok", result
    return eval(result.value)  # noqa: S307 - reprs of builtins we made


@module_loop
async def test_the_host_filesystem_is_not_there(sandbox):
    seen = await _value(sandbox, f"""
import os
paths = ['/etc/shadow', '/etc/passwd', '/root/.bashrc', '/root/.ssh', '/home', {str(PROJECT)!r},
         {str(Path.home())!r} + '/.bashrc', '/var/run/docker.sock', '/run/docker.sock', '/sys/fs/cgroup',
         {str(Path(sys.prefix) / 'lib')!r}]
{{p: os.path.exists(p) for p in paths}}
""")
    assert not any(seen.values()), seen


@module_loop
async def test_the_projects_code_and_gold_answers_cannot_be_imported(sandbox):
    seen = await _value(sandbox, """
out = {}
for name in ('agentgym', 'tasks', 'sandboxes', 'gymnasium', 'docker', 'torch'):
    try:
        __import__(name)
        out[name] = 'imported'
    except ImportError:
        out[name] = 'missing'
import pandas, numpy, scipy
out
""")
    assert set(seen.values()) == {"missing"}, seen


@module_loop
async def test_namespaces_hide_the_host(sandbox):
    seen = await _value(sandbox, """
import os, socket
pids = [p for p in os.listdir('/proc') if p.isdigit()]
try:
    socket.create_connection(('1.1.1.1', 53), timeout=2)
    net = 'connected'
except OSError:
    net = 'no network'
(socket.gethostname(), len(pids) < 12, net, sorted(os.listdir('/sys')) if os.path.exists('/sys') else None)
""")
    assert seen == ("sandbox", True, "no network", None)


@module_loop
async def test_the_environment_is_minimal(sandbox):
    env = await _value(sandbox, "import os\ndict(os.environ)")
    assert not {k for k in env if k.startswith(("AGENTGYM", "DOCKER", "SSH", "VIRTUAL_ENV"))}
    assert set(env) <= {"PATH", "PWD", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "LC_ALL", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED",
                        "PYTHONHASHSEED", "MPLBACKEND", *SandboxConfig().thread_env()}, env


@module_loop
async def test_limits_cannot_be_rewritten_or_escaped(sandbox):
    seen = await _value(sandbox, """
import ctypes, os, resource
libc = ctypes.CDLL(None, use_errno=True)
out = {}
soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
try:
    resource.setrlimit(resource.RLIMIT_CORE, (hard + 1 if hard >= 0 else 1, hard + 1 if hard >= 0 else 1))
    out['raise_rlimit'] = 'raised'
except (ValueError, OSError):
    out['raise_rlimit'] = 'refused'
out['new_user_namespace'] = 'made' if libc.unshare(0x10000000) == 0 else 'refused'
out['mount'] = 'mounted' if libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0 else 'refused'
out['keyring'] = 'used' if libc.syscall(248, b'user', b'stash', b'x', 1, -3) >= 0 else 'refused'  # add_key
out['caps'] = [l.split()[1] for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapBnd'))]
out
""")
    assert seen == {"raise_rlimit": "refused", "new_user_namespace": "refused", "mount": "refused",
                    "keyring": "refused", "caps": ["0000000000000000", "0000000000000000"]}, seen


FORK_UNTIL_REFUSED = """
import os, time
n = 0
while n < 10000:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
n
"""


@module_loop
async def test_a_fork_bomb_is_bounded(sandbox):
    result = await sandbox.run(FORK_UNTIL_REFUSED, timeout=20)
    assert result.status == "ok" and int(result.value) <= 64, result
    assert (await sandbox.run("6 * 7")).value == "42"
    await sandbox.reset()


def test_without_bubblewrap_the_process_backend_refuses(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap anywhere
    isolation_support.cache_clear()
    try:
        sandbox = ProcessSandbox()
        with pytest.raises(SandboxIsolationError, match="bubblewrap") as refused:
            asyncio.run(sandbox.start())
        assert "AGENTGYM_SANDBOX=unsafe-process" in str(refused.value)
        assert sandbox._proc is None
    finally:
        monkeypatch.undo()
        isolation_support.cache_clear()


@pytest.mark.skipif(isolation_support().bwrap is None, reason="needs a host where the process sandbox starts")
def test_a_refused_tmpfs_mount_is_named_in_the_refusal(monkeypatch):
    """Where the sandbox's capped tmpfs cannot be mounted (here: an option the kernel
    refuses; on a host: unprivileged user namespaces restricted), the refusal says which
    step failed and why, not bubblewrap's bare exit status."""
    from sandboxes import process

    monkeypatch.setattr(process, "writable_mounts", lambda config: {"work": "size=lots", "tmp": "size=1m", "shm": "size=1m"})
    isolation_support.cache_clear()
    try:
        support = isolation_support()
        assert support.bwrap is None
        assert "capped tmpfs mounts failed" in support.reason and "user namespaces" in support.reason, support.reason
        with pytest.raises(SandboxIsolationError, match="capped tmpfs mounts failed"):
            asyncio.run(ProcessSandbox().start())
    finally:
        monkeypatch.undo()
        isolation_support.cache_clear()


def test_unsafe_process_runs_only_when_asked_and_says_so(monkeypatch):
    monkeypatch.setenv("AGENTGYM_SANDBOX", "unsafe-process")

    async def run() -> tuple[str, str | None]:
        async with make_pool() as pool:
            async with pool.sandbox() as sb:
                result = await sb.run("6 * 7")
                return pool.describe()["isolation"], result.value

    with pytest.warns(SandboxIsolationWarning, match="UNCONFINED"):
        isolation, value = asyncio.run(run())
    assert (isolation, value) == ("none", "42")


def test_backend_and_isolation_show_in_the_fingerprint_and_the_run_summary():
    import agentgym  # noqa: F401
    from agentgym import fingerprint_diff
    from agentgym.policies import oracle_policy
    from agentgym.runner import run_episodes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxIsolationWarning)
        report = run_episodes("agentgym/DataAnalysis-v1", oracle_policy, episodes=2, concurrency=1,
                              env_kwargs={"backend": "process"})
    assert report.summary()["sandbox_backend"] == "process" and report.summary()["isolation"] == "namespaces"
    assert not report.lost and report.success_rate == 1.0
    import gymnasium as gym

    a = gym.make("agentgym/DataAnalysis-v1", backend="process")
    b = gym.make("agentgym/DataAnalysis-v1", backend="unsafe-process")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SandboxIsolationWarning)
            diff = fingerprint_diff(a, b)
        assert "sandbox.isolation" in diff, diff
    finally:
        a.close()
        b.close()


@pytest.mark.skipif(os.geteuid() != 0 or isolation_support().bwrap is None, reason="cgroups are managed as root")
def test_cgroups_of_dead_owners_are_reaped():
    from sandboxes import cgroups

    group = cgroups.create("999999999_1-p-test", pids=16, memory_bytes=64 << 20, cpus=0.5)
    assert group is not None and all(d.exists() for d in group.dirs)
    assert cgroups.reap_dead() >= 1
    assert not any(d.exists() for d in group.dirs)
