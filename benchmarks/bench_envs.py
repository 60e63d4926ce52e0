"""Env throughput: oracle episodes/s of every registered env at concurrency 1, 16, 64 and
128, with the peak memory of the process tree (the host process plus any process
sandboxes; Docker containers are outside it and are reported by ``docker stats``).

Run: ``make bench`` or ``.venv/bin/pytest benchmarks/bench_envs.py --benchmark-only``.
Restrict with ``AGENTGYM_BENCH_ENVS=agentgym/Search-v1,agentgym/Calculator-v0``.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import pytest

import agentgym
from agentgym.policies import oracle_policy
from agentgym.readiness.lifecycle import aclose_shared_resources
from agentgym.runner import run_episodes
from agentgym.runtime import run_sync

CONCURRENCY = (1, 16, 64, 128)


@dataclass(frozen=True)
class Case:
    episodes_per_slot: int  # episodes = max(min_episodes, concurrency * episodes_per_slot)
    min_episodes: int
    rounds: int


CASES = {
    "agentgym/Calculator-v0": Case(4, 256, 3),
    "agentgym/Search-v1": Case(2, 128, 3),
    "agentgym/SearchR1-v1": Case(2, 128, 2),
    "agentgym/DataAnalysis-v1": Case(1, 8, 1),
}


def _selected() -> list[str]:
    wanted = os.environ.get("AGENTGYM_BENCH_ENVS")
    ids = [s.env_id for s in agentgym.ENVS]
    return [i for i in ids if i in wanted.split(",")] if wanted else ids


def _tree_rss_bytes(root: int) -> int:
    """RSS of ``root`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * page
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


class PeakMemory:
    """Samples the process tree's RSS every ``interval_s`` while the block runs."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.peak = 0
        self._stop = threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss_bytes(os.getpid()))
            time.sleep(self.interval_s)

    def __enter__(self) -> "PeakMemory":
        self.baseline = _tree_rss_bytes(os.getpid())
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _tree_rss_bytes(os.getpid()))


_ROWS: list[tuple[str, int, int, float, float, float]] = []


@pytest.fixture(scope="module", autouse=True)
def _close_pools(request):
    """Print the episodes/s table, then close process-wide sandbox pools so the
    benchmarks leave no containers behind."""
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and _ROWS:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line(f"{'env':28} {'conc':>5} {'episodes':>8} {'episodes/s':>11} "
                                f"{'peak RSS MiB':>13} {'success':>8}")
            for env_id, conc, n, eps, peak, success in _ROWS:
                reporter.write_line(f"{env_id:28} {conc:>5} {n:>8} {eps:>11.1f} {peak:>13.1f} {success:>8.1%}")
    import gymnasium as gym

    for env_id in _selected():
        env = gym.make(env_id)
        try:
            run_sync(aclose_shared_resources())
        finally:
            env.close()


@pytest.mark.parametrize("concurrency", CONCURRENCY)
@pytest.mark.parametrize("env_id", _selected())
def test_env_oracle_episodes_per_s(benchmark, env_id, concurrency):
    case = CASES.get(env_id, Case(2, 64, 1))
    episodes = max(case.min_episodes, concurrency * case.episodes_per_slot)
    run_episodes(env_id, oracle_policy, min(episodes, concurrency), concurrency)  # warm caches and pools
    with PeakMemory() as memory:
        report = benchmark.pedantic(run_episodes, args=(env_id, oracle_policy, episodes, concurrency),
                                    rounds=case.rounds, iterations=1)
    benchmark.extra_info.update(
        episodes=episodes,
        episodes_per_s=episodes / benchmark.stats.stats.median,
        peak_rss_mib=round(memory.peak / 2**20, 1),
        rss_growth_mib=round((memory.peak - memory.baseline) / 2**20, 1),
        success_rate=report.success_rate,
        infra_failed=report.infra_failed,
    )
    _ROWS.append((env_id, concurrency, episodes, benchmark.extra_info["episodes_per_s"],
                  benchmark.extra_info["peak_rss_mib"], report.success_rate))
    assert not report.lost
    assert report.success_rate >= 0.98, report.summary()
