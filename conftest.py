"""Shared pytest setup for tests/ and benchmarks/.

Tests marked ``docker`` need a real Docker engine. Without one they are skipped, unless
``AGENTGYM_REQUIRE_DOCKER=1`` (set by CI), which turns a missing engine into a failure:
a green CI run always means the Docker tests really ran.

The ``>>>`` examples in the docstrings of ``agentgym``, ``sandboxes`` and ``tasks`` run as
tests too (the packages are in ``testpaths``), so an example cannot drift from the code.
Only modules whose text holds an example are imported for it, to keep collection cheap.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest
from _pytest.doctest import DoctestModule

ROOT = pathlib.Path(__file__).resolve().parent
DOCTEST_PACKAGES = tuple(ROOT / name for name in ("agentgym", "sandboxes", "tasks"))

_docker_state: dict[str, object] = {}


def docker_available() -> tuple[bool, str]:
    """Whether a Docker engine answers ``docker info`` (cached per session)."""
    if "ok" not in _docker_state:
        try:
            proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                                  capture_output=True, text=True, timeout=20)
            ok, why = proc.returncode == 0, (proc.stderr.strip() or proc.stdout.strip())
        except (OSError, subprocess.TimeoutExpired) as e:
            ok, why = False, str(e)
        _docker_state.update(ok=ok, why=why)
    return bool(_docker_state["ok"]), str(_docker_state["why"])


def docker_required() -> bool:
    return os.environ.get("AGENTGYM_REQUIRE_DOCKER", "") not in ("", "0", "false")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is None:
        return
    ok, why = docker_available()
    if ok:
        return
    message = f"no Docker engine reachable ({why})"
    if docker_required():
        pytest.fail(f"AGENTGYM_REQUIRE_DOCKER=1 but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def docker_engine() -> str:
    """Use in Docker tests: fails or skips (see module docstring) when no engine answers."""
    ok, why = docker_available()
    if not ok:
        if docker_required():
            pytest.fail(f"AGENTGYM_REQUIRE_DOCKER=1 but no Docker engine reachable ({why})", pytrace=False)
        pytest.skip(f"no Docker engine reachable ({why})")
    return "unix:///var/run/docker.sock"


EXAMPLE_LINE = re.compile(r"^\s*>>> ", re.M)
"""A docstring example's first line (not any ``>>>``: a regex or a fence may hold one)."""


def pytest_collect_file(file_path: pathlib.Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect the docstring examples of the library packages' modules that have any."""
    if file_path.suffix != ".py" or not any(file_path.is_relative_to(p) for p in DOCTEST_PACKAGES):
        return None
    if not EXAMPLE_LINE.search(file_path.read_text("utf-8")):
        return None
    return DoctestModule.from_parent(parent, path=file_path)
