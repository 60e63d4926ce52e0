"""Fleet throughput on this machine: oracle episodes/s of Search-v1
and DataAnalysis-v1 with 1, 2 and 4 Ray env workers against the in-process runner,
in one run (same episode
count, same total concurrency), and Ray's overhead per step in ms (a step through a fleet
worker minus the same step in process, one env, a cheap calculator call).

Workers and their sandbox pools are started (and warmed with one batch) before timing:
the figures are steady-state rollout throughput, not start-up.

Run: ``make bench``, or ``.venv/bin/pytest benchmarks/bench_fleet.py --benchmark-only -s``
(the table is printed at the end; figures are medians over the rounds).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("ray", reason="the fleet benchmarks need Ray: pip install 'agentgym[ray]'")

from agentgym.fleet import EnvFleet, FleetConfig, connect  # noqa: E402
from agentgym.policies import oracle_policy  # noqa: E402
from agentgym.runner import run_episodes  # noqa: E402


@dataclass(frozen=True)
class Case:
    episodes: int
    concurrency: int
    rounds: int


CASES = {"agentgym/Search-v1": Case(256, 16, 3), "agentgym/DataAnalysis-v1": Case(32, 8, 1)}
RUNNERS: tuple[int, ...] = (0, 1, 2, 4)  # 0: the in-process runner; n: n Ray workers
_ROWS: list[tuple[str, str, float, float, int]] = []
_OVERHEAD: dict[str, float] = {}


@pytest.fixture(scope="module")
def ray_session(request) -> Iterator[None]:
    """A local Ray instance for the module; at the end, the table."""
    session = connect("local", num_cpus=4)
    yield
    session.shutdown()
    from agentgym.resources import shared_resources
    from agentgym.runtime import run_sync

    run_sync(shared_resources().aclose())
    _print_table(request)


@pytest.mark.parametrize("workers", RUNNERS, ids=lambda w: "in-process" if w == 0 else f"ray-{w}")
@pytest.mark.parametrize("env_id", sorted(CASES))
def test_fleet_episodes_per_s(benchmark, ray_session, env_id, workers):
    case = CASES[env_id]
    fleet = None if workers == 0 else EnvFleet(env_id, {}, FleetConfig(workers=workers, slots=-(-case.concurrency // workers)))
    try:
        if fleet is None:
            def play(n: int) -> Any:
                return run_episodes(env_id, oracle_policy, n, case.concurrency)
        else:
            play = fleet.run_episodes
        play(case.concurrency)  # warm: pools filled, caches loaded
        report = benchmark.pedantic(play, args=(case.episodes,), rounds=case.rounds, iterations=1)
    finally:
        if fleet is not None:
            fleet.shutdown()
    eps = case.episodes / benchmark.stats.stats.median
    steps = sum(e.turns for e in report.episodes) / max(1, report.completed)
    benchmark.extra_info.update(episodes=case.episodes, concurrency=case.concurrency, episodes_per_s=eps,
                                steps_per_episode=steps, success_rate=report.success_rate,
                                infra_failed=report.infra_failed, lost=len(report.lost))
    _ROWS.append((env_id, "in-process" if workers == 0 else f"ray x{workers}", eps, steps, case.concurrency))
    assert not report.lost and report.infra_failed == 0 and report.success_rate == 1.0, report.summary()


def test_ray_overhead_per_step(benchmark, ray_session):
    """One env, a calculator call per step: the step through a fleet worker (one Ray call,
    pickling the observation and info both ways) minus the same step in process."""
    import gymnasium as gym

    from agentgym.vector import ToolVectorEnv

    env_id, kwargs, steps = "agentgym/Calculator-v0", {"max_turns": 1000}, 300
    action = '<tool_call>{"name": "calculate", "arguments": {"expression": "6 * 7"}}</tool_call>'
    local = ToolVectorEnv([gym.make(env_id, **kwargs)], autoreset=False)
    local.reset(seed=0)
    local_ms = _median_ms(lambda: local.step([action]), steps)
    local.close()
    with EnvFleet(env_id, kwargs, FleetConfig(workers=1, slots=1)) as fleet:
        remote = fleet.vector_env()
        remote.reset(seed=0)
        cpu_start = time.process_time()
        remote_ms = _median_ms(lambda: remote.step([action]), steps)
        driver_cpu_ms = (time.process_time() - cpu_start) * 1000 / steps  # every thread of the driver
        benchmark.pedantic(remote.step, args=([action],), rounds=50, iterations=1)
    _OVERHEAD.update(local_step_ms=local_ms, fleet_step_ms=remote_ms, overhead_ms=remote_ms - local_ms,
                     driver_cpu_ms_per_step=driver_cpu_ms)
    benchmark.extra_info.update(_OVERHEAD)


def _median_ms(fn: Any, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _print_table(request: pytest.FixtureRequest) -> None:
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None or not (_ROWS or _OVERHEAD):
        return
    base = {env: eps for env, runner, eps, _, _ in _ROWS if runner == "in-process"}
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        if _ROWS:
            reporter.write_line(f"{'env':26} {'runner':>11} {'conc':>5} {'episodes/s':>11} {'vs in-process':>14} "
                                f"{'steps/ep':>9}")
        for env, runner, eps, steps, conc in _ROWS:
            ratio = eps / base[env] if base.get(env) else float("nan")
            reporter.write_line(f"{env:26} {runner:>11} {conc:>5} {eps:>11.1f} {ratio:>13.2f}x {steps:>9.2f}")
        if _OVERHEAD:
            reporter.write_line(f"Ray overhead per step: {_OVERHEAD['overhead_ms']:.2f} ms (fleet step "
                                f"{_OVERHEAD['fleet_step_ms']:.2f} ms, in-process {_OVERHEAD['local_step_ms']:.2f} ms, medians); "
                                f"driver CPU {_OVERHEAD['driver_cpu_ms_per_step']:.2f} ms per remote step (mean)")
