"""Unit tests that need neither Docker nor a running sandbox."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandboxes import (
    EngineUnreachableError,
    ExecResult,
    SandboxConfig,
    SandboxConfigError,
    SandboxInfraError,
)
from sandboxes.pool import choose_backend
from sandboxes.protocol import parse_size
from sandboxes.runtime import wire
from sandboxes.runtime.headtail import HeadTail


def test_exec_result_round_trips_through_a_dict():
    result = ExecResult(status="timeout", stdout="a", value=None, state_lost=True, duration_s=1.5)
    assert ExecResult.from_dict({**result.to_dict(), "seq": 7}) == result
    assert not result.ok and ExecResult(status="ok").ok


@pytest.mark.parametrize(("text", "expected"), [("512m", 512 * 2**20), ("1g", 2**30), ("1GiB", 2**30), (4096, 4096)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "-1g", "12q"])
def test_parse_size_rejects_garbage_with_a_clear_message(bad):
    with pytest.raises(SandboxConfigError, match="Expected a size"):
        parse_size(bad)


def test_config_validates_itself():
    with pytest.raises(SandboxConfigError, match="pids_limit"):
        SandboxConfig(pids_limit=1)
    with pytest.raises(SandboxConfigError, match="workdir"):
        SandboxConfig(workdir="relative")
    env = SandboxConfig(blas_threads=1).thread_env()
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"


def test_infra_errors_are_also_builtin_errors():
    assert issubclass(EngineUnreachableError, ConnectionError)
    assert issubclass(EngineUnreachableError, SandboxInfraError)
    assert issubclass(SandboxInfraError, RuntimeError)


@given(
    frames=st.lists(
        st.tuples(
            st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=50)), max_size=4),
            st.binary(max_size=300),
        ),
        max_size=6,
    ),
    seed=st.integers(0, 2**32),
)
def test_frames_survive_arbitrary_chunking(frames, seed):
    data = b"".join(wire.encode(h, p) for h, p in frames)
    rng = random.Random(seed)
    decoder, out, i = wire.FrameDecoder(), [], 0
    while i < len(data):
        step = rng.randint(1, 64)
        out += decoder.feed(data[i : i + step])
        i += step
    assert out == frames


@given(st.binary(max_size=200))
def test_decoder_rejects_garbage_with_frame_error_only(junk):
    decoder = wire.FrameDecoder()
    try:
        decoder.feed(junk)
    except wire.FrameError:
        pass


@given(chunks=st.lists(st.binary(max_size=700), max_size=20), limit=st.integers(256, 2048))
def test_head_tail_keeps_exact_text_below_limit_and_both_ends_above(chunks, limit):
    buf = HeadTail(limit)
    for c in chunks:
        buf.add(c)
    data = b"".join(chunks)
    text, cut = buf.render()
    assert buf.total == len(data)
    if len(data) <= buf.limit:
        assert not cut and text == data.decode("utf-8", "replace")
    else:
        half = limit // 2
        assert cut and f"{len(data) - 2 * half:,} bytes truncated" in text
        assert text.startswith(data[:half].decode("utf-8", "replace"))
        assert text.endswith(data[-half:].decode("utf-8", "replace"))


def test_choose_backend_honours_the_environment(monkeypatch):
    monkeypatch.setenv("AGENTGYM_SANDBOX", "process")
    assert choose_backend() == "process"
    monkeypatch.setenv("AGENTGYM_SANDBOX", "kubernetes")
    with pytest.raises(SandboxConfigError, match="AGENTGYM_SANDBOX"):
        choose_backend()


def test_forcing_docker_without_an_engine_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTGYM_SANDBOX", "docker")
    url = f"unix://{tmp_path}/no-docker.sock"
    with pytest.raises(EngineUnreachableError, match="AGENTGYM_SANDBOX=process"):
        choose_backend(engine_urls=[url])


def test_auto_falls_back_to_process_with_a_warning(monkeypatch, tmp_path):
    from sandboxes.process import SandboxIsolationWarning

    monkeypatch.delenv("AGENTGYM_SANDBOX", raising=False)
    with pytest.warns(SandboxIsolationWarning, match="No Docker engine"):
        assert choose_backend(engine_urls=[f"unix://{tmp_path}/no-docker.sock"]) == "process"


async def test_unreachable_daemon_gives_a_clear_error(tmp_path):
    from sandboxes import DockerSandbox

    sandbox = DockerSandbox(engine_url=f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(EngineUnreachableError, match="did not answer"):
        await sandbox.start()


def test_sync_wrapper_runs_code_blocking():
    import warnings

    from sandboxes import ProcessSandbox, SyncSandbox
    from sandboxes.process import SandboxIsolationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxIsolationWarning)
        with SyncSandbox(ProcessSandbox()) as sb:
            sb.run("x = 3")
            assert sb.run("x * 2").value == "6"
            sb.upload("f.txt", b"hi")
            assert sb.download("f.txt") == b"hi"


def test_fake_sandbox_implements_the_protocol():
    import asyncio

    from sandboxes import Sandbox
    from sandboxes.fake import FakeSandbox

    async def scenario():
        sb = FakeSandbox()
        assert isinstance(sb, Sandbox)
        assert (await sb.run("print('a')\n1 + 1")).value == "2"
        assert (await sb.run("1/0")).status == "error"

    asyncio.run(scenario())


def test_sandboxes_imports_nothing_from_the_other_packages():
    import ast
    from pathlib import Path

    import sandboxes

    root = Path(sandboxes.__file__).parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in {"agentgym", "tasks", "baselines"}, f"{path}: {name}"


def test_runtime_is_stdlib_only():
    import ast
    import sys
    from pathlib import Path

    from sandboxes.supervised import RUNTIME_DIR

    allowed = set(sys.stdlib_module_names) | {"wire", "headtail", "confine", "libc"}
    for path in Path(RUNTIME_DIR).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                mods = [(node.module or "").split(".")[0]]
            else:
                continue
            assert set(mods) <= allowed, f"{path.name} imports {mods}"


def test_reaper_removes_sandbox_dirs_of_dead_processes_only():
    from sandboxes.reaper import _sandbox_dirs, remove_dead_sandbox_dirs, sandbox_root

    mine = sandbox_root()
    dead = _sandbox_dirs() / "999999999_1"
    (dead / "p-x").mkdir(parents=True, exist_ok=True)
    assert remove_dead_sandbox_dirs() >= 1
    assert not dead.exists() and mine.exists()


def test_the_per_user_sandbox_directory_must_be_private(tmp_path, monkeypatch):
    import os

    from sandboxes import SandboxConfigError
    from sandboxes.reaper import sandbox_root

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    root = sandbox_root()
    assert (root.parent.stat().st_mode & 0o777) == 0o700 and root.parent.stat().st_uid == os.getuid()
    os.chmod(root.parent, 0o711)  # what an older version (or another user) left behind
    with pytest.raises(SandboxConfigError, match="mode 0700"):
        sandbox_root()


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_memory_headroom_counts_page_cache_as_free_and_tmpfs_as_used(tmp_path, monkeypatch, layout):
    """The supervisor removes agent files only when they leave an interpreter restart no
    room; page cache (reclaimable) must not look full, tmpfs pages (anon lists) must."""
    import sys
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).parents[2] / "sandboxes" / "runtime"))
    sys.modules.pop("supervisor", None)
    import supervisor

    mib = 1 << 20
    if layout == "v1":
        files = {"memory.limit_in_bytes": 512 * mib, "memory.usage_in_bytes": 500 * mib,
                 "memory.oom_control": "oom_kill 0"}
        stat = {"total_active_file": 100 * mib, "total_inactive_file": 20 * mib, "total_shmem": 300 * mib,
                "active_file": 1}  # a v1 cgroup's own (not hierarchical) counts are not used
    else:
        files = {"memory.max": 512 * mib, "memory.current": 500 * mib, "memory.events": "oom_kill 0"}
        stat = {"active_file": 100 * mib, "inactive_file": 20 * mib, "shmem": 300 * mib}
    for name, value in files.items():
        (tmp_path / name).write_text(f"{value}\n")
    (tmp_path / "memory.stat").write_text("".join(f"{k} {v}\n" for k, v in stat.items()))
    oom_name = "memory.oom_control" if layout == "v1" else "memory.events"
    monkeypatch.setattr(supervisor, "OOM_FILES", [str(tmp_path / oom_name)])
    assert supervisor._memory_headroom() == (512 - 500 + 120) * mib
    (tmp_path / "memory.stat").write_text("")  # all of it tmpfs and slab: nothing to reclaim
    assert supervisor._memory_headroom() == 12 * mib < supervisor.RESTART_RESERVE_BYTES
    (tmp_path / ("memory.limit_in_bytes" if layout == "v1" else "memory.max")).write_text(
        "9223372036854771712\n" if layout == "v1" else "max\n")
    assert supervisor._memory_headroom() is None  # no limit: nothing is ever "full"
    monkeypatch.setattr(supervisor, "OOM_FILES", [str(tmp_path / "missing" / oom_name)])
    assert supervisor._memory_headroom() is None


def test_the_engine_timeout_comes_from_the_environment(monkeypatch):
    from sandboxes.engine import ENGINE_TIMEOUT_ENV, engine_timeout

    monkeypatch.setenv(ENGINE_TIMEOUT_ENV, "7.5")
    assert engine_timeout() == 7.5
    for bad in ("soon", "0", "-3", "nan"):
        monkeypatch.setenv(ENGINE_TIMEOUT_ENV, bad)
        with pytest.raises(ValueError, match=ENGINE_TIMEOUT_ENV):
            engine_timeout()
    monkeypatch.delenv(ENGINE_TIMEOUT_ENV)
    assert engine_timeout() == 60.0


V2_EVENTS = "low 0\nhigh 0\nmax 3\noom {}\noom_kill {}\noom_group_kill 0\n"
V1_CONTROL = "oom_kill_disable 0\nunder_oom 0\noom_kill {}\n"


@pytest.mark.parametrize("version, limit_reached, killed, expected", [
    ("v2", True, True, True),
    ("v2", False, True, False),  # a kill without its own limit reached: a host-wide OOM killer's
    ("v2", True, False, False),  # the limit reached, reclaimed, nothing killed
    ("v1", True, True, True),
    ("v1", False, True, False),
    ("v1", True, False, False),
])
def test_a_sandbox_cgroup_tells_its_own_oom_kill_from_the_hosts(tmp_path, version, limit_reached, killed, expected):
    from sandboxes.cgroups import SandboxCgroup

    if version == "v2":
        events = tmp_path / "memory.events"
        events.write_text(V2_EVENTS.format(2, 1))
    else:
        events = tmp_path / "memory.oom_control"
        events.write_text(V1_CONTROL.format(1))
        (tmp_path / "memory.limit_in_bytes").write_text("1000\n")
        (tmp_path / "memory.max_usage_in_bytes").write_text("1000\n")  # restarted by the mark
    cgroup = SandboxCgroup([tmp_path], events)
    mark = cgroup.oom_mark()
    if version == "v1":
        assert (tmp_path / "memory.max_usage_in_bytes").read_text() == "0"
        (tmp_path / "memory.max_usage_in_bytes").write_text("1000" if limit_reached else "900")
        events.write_text(V1_CONTROL.format(1 + killed))
    else:
        events.write_text(V2_EVENTS.format(2 + limit_reached, 1 + killed))
    assert cgroup.killed_by_own_limit_since(mark) is expected
    assert SandboxCgroup([tmp_path], tmp_path / "gone").killed_by_own_limit_since(mark) is False
    (tmp_path / "old").write_text("oom_kill_disable 0\nunder_oom 0\n")  # before kernel 4.13: no kill count
    assert SandboxCgroup([tmp_path], tmp_path / "old").oom_mark() is None
