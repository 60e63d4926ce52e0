"""No module of ``tasks`` imports a module that imports it back, even from inside a function.

A cycle hidden in a function-level import (``tables`` -> ``manifest`` -> ``tables``) works
until someone moves an import to the top; then one of them sees a half-initialised
module. The graph is read with ``ast``, so nothing is imported to check it.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
    return found & modules


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _graph(package: str) -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in (ROOT / package).rglob("*.py")}
    modules = set(paths)
    # A package's __init__ re-exporting its modules is not a cycle with them.
    return {name: {m for m in _imports(path, modules) if not name.startswith(m + ".") and m != name}
            for name, path in paths.items()}


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_tasks_has_no_import_cycle():
    assert _cycle(_graph("tasks")) is None
