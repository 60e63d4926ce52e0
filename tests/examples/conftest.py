"""Tests marked ``peers`` need TRL, which lives only in ``.venv-peers`` (``make peers-env``).
Without it they are skipped, unless ``AGENTGYM_REQUIRE_PEERS=1`` (set by ``make
test-peers`` and so by CI), which turns a missing TRL into a failure."""

import importlib.util
import os

import pytest


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("peers") is None or importlib.util.find_spec("trl") is not None:
        return
    message = "TRL is not installed (make peers-env, then run with .venv-peers/bin/pytest -m peers)"
    if os.environ.get("AGENTGYM_REQUIRE_PEERS", "") not in ("", "0", "false"):
        pytest.fail(f"AGENTGYM_REQUIRE_PEERS=1 but {message}", pytrace=False)
    pytest.skip(message)
