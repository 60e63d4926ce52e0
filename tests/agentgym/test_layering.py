"""Imports point down: ``baselines -> agentgym -> {sandboxes, tasks}`` (DESIGN.md).

Read with ``ast``, so an import hidden inside a function counts too and nothing is
imported to check it. ``agentgym train`` and ``plot`` reach baselines through the
``agentgym.commands`` entry points instead (tests/agentgym/test_cli.py).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "agentgym": {"baselines"},
    "sandboxes": {"agentgym", "tasks", "baselines"},
    "tasks": {"agentgym", "sandboxes", "baselines"},
}


def imported_packages(source: str) -> set[str]:
    """Top-level packages a module imports anywhere in its body (absolute imports only)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_check_sees_imports_inside_functions():
    assert "baselines" in imported_packages("def train():\n    import baselines.commands\n")


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_module_imports_upward(package: str):
    upward = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path.read_text("utf-8")) & FORBIDDEN[package])
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    assert {path: found for path, found in upward.items() if found} == {}
