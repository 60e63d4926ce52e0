"""Benchmarks of two source trees side by side, in one run, alternating A and B.

A refactor's cost is only visible against the code it replaced, measured on the same
machine in the same minutes: this runs the chosen pytest-benchmark tests once per round
in tree A, then in tree B (``PYTHONPATH`` picks the tree, the venv is shared), for
``--rounds`` rounds, and prints each test's median of the per-round medians and the
ratio B/A.

    git worktree add /tmp/before <rev>
    python benchmarks/ab.py --a /tmp/before --b . --rounds 3 \\
        benchmarks/bench_core.py::test_step_overhead_noop_tool \\
        benchmarks/bench_sandboxes.py::test_process_warm_exec_round_trip

Each test id is looked up in the tree being measured, so both trees must have it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def _run(tree: Path, tests: list[str]) -> dict[str, float]:
    """Median seconds per test name, one pytest run in ``tree``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        env = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "--benchmark-only",
                        f"--benchmark-json={out}", *tests],
                       cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
        data = json.loads(out.read_text())
    return {b["fullname"].split("/")[-1]: b["stats"]["median"] for b in data["benchmarks"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", type=Path, required=True, help="tree A (before)")
    parser.add_argument("--b", type=Path, required=True, help="tree B (after)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("tests", nargs="+", help="pytest-benchmark test ids, relative to each tree")
    args = parser.parse_args(argv)
    runs: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    for round_no in range(args.rounds):
        for label, tree in (("A", args.a), ("B", args.b)):
            for name, median in _run(tree.resolve(), args.tests).items():
                runs[label].setdefault(name, []).append(median)
            print(f"round {round_no + 1}/{args.rounds} {label} done", file=sys.stderr)
    print(f"| test | A median | B median | B/A |\n|---|---|---|---|")
    for name in sorted(runs["A"]):
        a, b = statistics.median(runs["A"][name]), statistics.median(runs["B"].get(name, [float("nan")]))
        print(f"| {name} | {a * 1e3:.3f} ms | {b * 1e3:.3f} ms | {b / a:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
