"""DataAnalysis-v1: question generation, python tool latency, oracle episodes/s.

Run the benchmarks (process sandboxes, no Docker needed)::

    .venv/bin/pytest benchmarks/bench_data_analysis.py --benchmark-only

Run the readiness figure of the issue (Docker sandboxes, 256 oracle episodes at
concurrency 128) as a script; it prints success rate, infra failures, episodes/s and the
python tool's p50/p99::

    .venv/bin/python benchmarks/bench_data_analysis.py --episodes 256 --concurrency 128 --backend docker

``--warmup`` first runs one untimed round so the figure is the warm-pool steady state
rather than container start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import pytest

from tasks.data_analysis.generator import generate_question

ENV_ID = "agentgym/DataAnalysis-v1"


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch):
    monkeypatch.setenv("AGENTGYM_SANDBOX", os.environ.get("AGENTGYM_BENCH_SANDBOX", "process"))


@pytest.mark.parametrize("tier", [1, 2, 3, 4])
def test_generate_question(benchmark, tier):
    """Host cost of one question: draw, variant files, truth and the ambiguity filter."""
    generate_question(np.random.default_rng(0), tier=tier)  # tables loaded once per process
    seeds = iter(range(10**9))
    benchmark(lambda: generate_question(np.random.default_rng(next(seeds)), tier=tier))


def test_python_tool_round_trip(benchmark):
    """One ``python`` call through ToolEnv.step into a warm sandbox (``df.shape``)."""
    import gymnasium as gym

    import agentgym  # noqa: F401

    env = gym.make(ENV_ID, max_turns=10**6, tool_output_budget_chars=10**12).unwrapped
    env.reset(seed=0)
    name = next(iter(env.task.question.files))
    env.step(_call("python", code=f"import pandas as pd\ndf = pd.read_csv({name!r})"))
    benchmark(env.step, _call("python", code="df.shape"))
    env.close()


def test_oracle_episodes_per_second(benchmark):
    """Oracle episodes (reset, upload, python, answer) at concurrency 8."""
    from agentgym.policies import oracle_policy
    from agentgym.runner import run_episodes

    report = benchmark.pedantic(
        lambda: run_episodes(ENV_ID, oracle_policy, episodes=32, concurrency=8, seed=7),
        rounds=1, iterations=1)
    benchmark.extra_info.update(_summary(report))
    assert report.success_rate >= 0.99 and report.infra_failed == 0


def _call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _summary(report) -> dict:
    m = report.telemetry.metrics()
    per_tier: dict[int, list[bool]] = {}
    for e in report.episodes:
        if not e.infra_failed and "tier" in e.info:
            per_tier.setdefault(e.info["tier"], []).append(e.success)
    return {
        **report.summary(),
        "python_p50_ms": m.get("tool/python/p50_ms"),
        "python_p99_ms": m.get("tool/python/p99_ms"),
        "python_calls": m.get("tool/python/calls"),
        "success_by_tier": {t: sum(v) / len(v) for t, v in sorted(per_tier.items())},
        "failures": [(e.task_id, e.info.get("score_reason")) for e in report.episodes
                     if not e.success][:20],
        "lost": [tb.splitlines()[-1] for _, tb in report.lost][:5],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Oracle readiness run of DataAnalysis-v1")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--backend", choices=["docker", "process", "auto"], default="docker")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", action="store_true",
                        help="first run `concurrency` untimed episodes so the pool is warm")
    args = parser.parse_args(argv)

    import agentgym  # noqa: F401
    from agentgym.resources import shared_resources
    from agentgym.policies import oracle_policy
    from agentgym.runner import run_episodes
    from agentgym.runtime import run_sync

    kwargs = {"backend": args.backend}
    if args.warmup:
        run_episodes(ENV_ID, oracle_policy, args.concurrency, args.concurrency,
                     seed=args.seed + 10**6, env_kwargs=kwargs)
    report = run_episodes(ENV_ID, oracle_policy, args.episodes, args.concurrency, seed=args.seed,
                          env_kwargs=kwargs)
    run_sync(shared_resources().aclose())
    summary = _summary(report)
    sys.stdout.write(json.dumps(summary, indent=1, default=str) + "\n")
    ok = summary["success_rate"] >= 0.99 and summary["infra_failed"] == 0 and not report.lost
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
