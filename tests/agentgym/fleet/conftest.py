"""Fixtures for the fleet tests: a small local Ray instance, and process bookkeeping to
prove that nothing (actor, raylet, GCS) outlives a shutdown.

Without Ray installed the tests are skipped, unless ``AGENTGYM_REQUIRE_RAY=1`` (set by
CI), which makes a missing Ray a failure: a green CI run means the Ray tests ran.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def ray_required() -> bool:
    return os.environ.get("AGENTGYM_REQUIRE_RAY", "") not in ("", "0", "false")


def need_ray() -> None:
    """Skip (or fail under AGENTGYM_REQUIRE_RAY=1) when Ray is not installed."""
    if importlib.util.find_spec("ray") is not None:
        return
    message = "Ray is not installed (pip install 'agentgym[ray]')"
    if ray_required():
        pytest.fail(f"AGENTGYM_REQUIRE_RAY=1 but {message}", pytrace=False)
    pytest.skip(message)


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` (read from /proc)."""
    parents = {int(p.name): _parent(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()}
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier and pid not in found}
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: set[int], within_s: float = 30.0) -> set[int]:
    """The pids still alive after waiting up to ``within_s`` for them to exit."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        left = {p for p in pids if alive(p)}
        if not left:
            return left
        time.sleep(0.2)
    return {p for p in pids if alive(p)}


@pytest.fixture(scope="session")
def ray_installed() -> None:
    """Skip (or fail under AGENTGYM_REQUIRE_RAY=1) when Ray is not installed."""
    need_ray()


@pytest.fixture(name="wait_gone", scope="session")
def wait_gone_fixture():
    """:func:`wait_gone`, for tests (conftest modules are not importable by path)."""
    return wait_gone


@pytest.fixture(scope="module")
def local_ray() -> Iterator[object]:
    """A local Ray instance for the module (4 logical CPUs, no dashboard UI). On teardown
    it is shut down and every process it started must be gone."""
    need_ray()
    from agentgym.fleet import connect

    session = connect("local", num_cpus=4)
    assert session.started_here
    started = descendants(os.getpid())
    assert started, "ray.init started no process: the leak check below would prove nothing"
    yield session
    session.shutdown()
    assert wait_gone(started) == set(), "Ray processes outlived the shutdown"
