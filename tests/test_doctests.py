"""The docstring examples of the library packages are part of the test run (``make test``).

Two ways they could silently stop running: the packages drop out of ``testpaths``, or
the collection hook in conftest.py stops finding a module's examples. Both are checked.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("agentgym", "sandboxes", "tasks")


def _modules_with_examples() -> set[str]:
    example = re.compile(r"^\s*>>> ", re.M)
    return {str(p.relative_to(ROOT)) for name in PACKAGES for p in (ROOT / name).rglob("*.py")
            if example.search(p.read_text("utf-8"))}


def test_the_packages_are_in_testpaths():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"]["ini_options"]
    assert set(PACKAGES) <= set(options["testpaths"])


def test_every_module_with_an_example_is_collected():
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *PACKAGES],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    collected = {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}
    expected = _modules_with_examples()
    assert expected and expected <= collected
