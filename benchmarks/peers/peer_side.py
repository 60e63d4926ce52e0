"""Peer workloads. Runs ONLY inside the peers virtualenv (see run_peers.py); prints JSON.

Usage: python peer_side.py llm_sandbox IMAGE | gem_python | skyrl_python
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import CALLS_PER_SNIPPET, SNIPPETS, STATE_PROBE  # noqa: E402


def _timed(fn, code: str) -> tuple[float, str]:
    start = time.perf_counter()
    out = fn(code)
    return (time.perf_counter() - start) * 1e3, out


def _measure(call) -> dict:
    result = {}
    for name, code in SNIPPETS.items():
        lat = []
        out = ""
        for _ in range(CALLS_PER_SNIPPET):
            ms, out = _timed(call, code)
            lat.append(ms)
        result[name] = {"p50_ms": statistics.median(lat), "max_ms": max(lat), "sample_output": str(out)[:80]}
    call(STATE_PROBE[0])
    result["stateful"] = "42" in str(call(STATE_PROBE[1]))
    return result


def llm_sandbox(image: str) -> dict:
    from llm_sandbox import SandboxSession

    start = time.perf_counter()
    session = SandboxSession(lang="python", image=image, keep_template=True, skip_environment_setup=True,
                             verbose=False)
    session.open()
    opened_ms = (time.perf_counter() - start) * 1e3
    try:
        def call(code: str) -> str:
            r = session.run(code)
            return (r.stdout or "") + (r.stderr or "")
        return {"open_ms": opened_ms, **_measure(call)}
    finally:
        session.close()


def gem_python() -> dict:
    from gem.tools.python_code_tool import PythonCodeTool

    tool = PythonCodeTool(timeout=10)

    def call(code: str) -> str:
        out = tool.execute_action(f"<python>{code}</python>")
        return str(out[2])  # (is_valid, has_error, observation, parsed_action)
    return _measure(call)


def skyrl_python() -> dict:
    from skyrl_gym.tools.python import PythonCodeExecutorToolGroup

    group = PythonCodeExecutorToolGroup(timeout=10)
    return _measure(group.python)


if __name__ == "__main__":
    which = sys.argv[1]
    fn = {"llm_sandbox": llm_sandbox, "gem_python": gem_python, "skyrl_python": skyrl_python}[which]
    print(json.dumps(fn(*sys.argv[2:])))
