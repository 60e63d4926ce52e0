"""Suite-wide collection rules.

``make test`` runs the suite on two xdist workers (``-n 2 --dist loadgroup``). Every test
under ``tests/sandboxes`` and ``tests/agentgym`` starts containers, sandboxes, servers
or clusters, and several assert that none is left over machine-wide, or time a sandbox
against a deadline; they run as one group, on one worker, in order, as they did
before. The rest (the trainer, the tasks, the examples) is spread over both workers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
ENGINE_DIRS = ("sandboxes", "agentgym")
"""Test packages whose tests share the machine's Docker engine and process table."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):  # (the vLLM and peers venvs run one process)
        return
    for item in items:
        path = item.path.resolve()
        parts = path.relative_to(ROOT).parts if path.is_relative_to(ROOT) else ()  # (doctests of the packages)
        if len(parts) > 1 and parts[0] in ENGINE_DIRS:
            item.add_marker(pytest.mark.xdist_group("engine"))
