"""Fixtures for env tests that need a sandbox: the process backend, and no pool left over."""

from __future__ import annotations

import pytest

from agentgym.resources import shared_resources
from agentgym.runtime import run_sync


@pytest.fixture
def process_sandbox(monkeypatch):
    """Run the env's sandboxes on the process backend (unit tests need no Docker)."""
    monkeypatch.setenv("AGENTGYM_SANDBOX", "process")


@pytest.fixture(scope="module")
def close_pools_after_module():
    """Close the shared sandbox pools when the module's tests are done."""
    yield
    run_sync(shared_resources().aclose())
