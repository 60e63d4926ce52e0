"""The three sandbox backends side by side: runc, gVisor (runsc) and the process backend.

Run: ``.venv/bin/pytest benchmarks/bench_backends.py --benchmark-only -s`` on a quiet
machine. One run measures, for each backend, in alternating rounds so that load drifts
hit all three alike:

- the warm ``1+1`` round trip through the persistent interpreter (p50, p99);
- ``reset`` after a typical cell (p50): what a reused sandbox costs between episodes;
- a fresh sandbox's start (p50): what an episode costs where a reset cannot be checked
  and the pool starts a new sandbox instead (gVisor);
- DataAnalysis-v1 oracle episodes/s at concurrency 8, the pool warm.

The runsc column needs gVisor registered in the engine (see docs/sandboxes.md); without
it, or without an engine, those columns are left out and say why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import pytest

from sandboxes import DockerSandbox, ProcessSandbox, SandboxConfig
from sandboxes.engine import connect, default_engine_url, engine_reachable
from sandboxes.process import SandboxIsolationWarning

ROUNDS = 10
TRIPS_PER_ROUND = 200
RESET_CELL = "import pandas as pd\ndf = pd.DataFrame({'a': range(100)})\nopen('x.csv', 'w').write(df.to_csv())\nopen('/tmp/t', 'w').write('t')\nlen(df)"
ENV_ID = "agentgym/DataAnalysis-v1"


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def available_backends() -> dict[str, str]:
    """Backend name -> why it is missing ('' when it can be measured)."""
    found = {"process": ""}
    if not engine_reachable():
        found["runc"] = found["runsc"] = f"no Docker engine at {default_engine_url()}"
        return found
    found["runc"] = ""
    runtimes = connect(default_engine_url()).info().get("Runtimes") or {}
    found["runsc"] = "" if "runsc" in runtimes else "gVisor (runsc) is not registered in the engine"
    return found


async def _start(backend: str, config: SandboxConfig):
    if backend == "process":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SandboxIsolationWarning)
            return await ProcessSandbox(config).start()
    runtime = "runsc" if backend == "runsc" else None
    return await DockerSandbox(dataclasses.replace(config, runtime=runtime)).start()


async def _sandbox_figures(backends: list[str]) -> dict[str, dict[str, float]]:
    config = SandboxConfig()
    sandboxes = {name: await _start(name, config) for name in backends}
    trips: dict[str, list[float]] = {name: [] for name in backends}
    resets: dict[str, list[float]] = {name: [] for name in backends}
    starts: dict[str, list[float]] = {name: [] for name in backends}
    try:
        for sb in sandboxes.values():
            for _ in range(50):
                await sb.run("1+1")
        for _ in range(ROUNDS):
            for name, sb in sandboxes.items():
                for _ in range(TRIPS_PER_ROUND):
                    t = time.perf_counter()
                    result = await sb.run("1+1")
                    trips[name].append(time.perf_counter() - t)
                    assert result.value == "2", result
                await sb.run(RESET_CELL)
                t = time.perf_counter()
                await sb.reset()
                resets[name].append(time.perf_counter() - t)
        for _ in range(3):
            for name in backends:
                t = time.perf_counter()
                fresh = await _start(name, config)
                starts[name].append(time.perf_counter() - t)
                await fresh.close()
    finally:
        for sb in sandboxes.values():
            await sb.close()
    return {name: {"warm_p50_ms": _pct(trips[name], 0.5) * 1e3,
                   "warm_p99_ms": _pct(trips[name], 0.99) * 1e3,
                   "reset_p50_ms": statistics.median(resets[name]) * 1e3,
                   "start_p50_s": statistics.median(starts[name])} for name in backends}


_ORACLE_RUN = """
import json, sys
import gymnasium as gym
import agentgym
from agentgym.policies import oracle_policy
from agentgym.runner import run_episodes
episodes, concurrency = int(sys.argv[1]), int(sys.argv[2])
keeper = gym.make("agentgym/DataAnalysis-v1")  # holds the shared pool open: the figure is the warm pool's
keeper.reset(seed=0)
run_episodes("agentgym/DataAnalysis-v1", oracle_policy, episodes=concurrency, concurrency=concurrency, seed=1)
report = run_episodes("agentgym/DataAnalysis-v1", oracle_policy, episodes=episodes, concurrency=concurrency, seed=100)
keeper.close()
print(json.dumps({"episodes_per_s": report.episodes_per_s, "success_rate": report.success_rate,
                  "infra_failed": report.infra_failed, "isolation": (report.sandbox or {}).get("isolation")}))
"""


def _oracle_episodes_per_s(backend: str, episodes: int = 64, concurrency: int = 8) -> float:
    """Oracle episodes/s with the shared pool warm, in a process of its own (a process's
    shared pool is per backend name, so runc and runsc cannot follow each other in one)."""
    env = dict(os.environ, AGENTGYM_SANDBOX="process" if backend == "process" else "docker",
               AGENTGYM_SANDBOX_RUNTIME="runsc" if backend == "runsc" else "")
    done = subprocess.run([sys.executable, "-c", _ORACLE_RUN, str(episodes), str(concurrency)], env=env,
                          capture_output=True, text=True, timeout=900, check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["infra_failed"] == 0 and report["success_rate"] >= 0.99, report
    expected = {"runc": "container (runc)", "runsc": "container (runsc)"}.get(backend, "namespaces")
    assert expected in str(report["isolation"]), (backend, report)
    return float(report["episodes_per_s"])


def test_backends_side_by_side(benchmark):
    status = available_backends()
    backends = [name for name in ("runc", "runsc", "process") if not status[name]]
    figures = benchmark.pedantic(lambda: asyncio.run(_sandbox_figures(backends)), rounds=1, iterations=1)
    rates: dict[str, list[float]] = {name: [] for name in backends}
    for _ in range(2):  # alternating, twice
        for name in backends:
            rates[name].append(_oracle_episodes_per_s(name))
    print()
    print(f"  {'backend':8} {'warm p50 ms':>12} {'warm p99 ms':>12} {'reset p50 ms':>13} {'start p50 s':>12} {'oracle ep/s':>12}")
    for name in backends:
        f = figures[name]
        f["oracle_episodes_per_s"] = statistics.median(rates[name])
        print(f"  {name:8} {f['warm_p50_ms']:12.3f} {f['warm_p99_ms']:12.3f} {f['reset_p50_ms']:13.1f} "
              f"{f['start_p50_s']:12.2f} {f['oracle_episodes_per_s']:12.2f}")
        benchmark.extra_info.update({f"{name}_{k}": round(v, 4) for k, v in f.items()})
    for name, why in status.items():
        if why:
            print(f"  {name:8} not measured: {why}")
    assert backends, "no backend could be measured"
