"""Core overheads: one ``ToolEnv.step`` with a no-op tool, parsing, and oracle episodes/s.

Run: ``make bench`` or ``.venv/bin/pytest benchmarks/bench_core.py --benchmark-only``.
"""

import json

import pytest

from agentgym.parsing import HermesParser
from agentgym.policies import oracle_policy
from agentgym.runner import run_episodes
from agentgym.testing import ProbeEnv

NOOP = f'<tool_call>{json.dumps({"name": "echo", "arguments": {"text": "x"}})}</tool_call>'


def test_step_overhead_noop_tool(benchmark):
    """Median cost of ToolEnv.step (sync API: parse, validate, run on the loop, telemetry)."""
    env = ProbeEnv(max_turns=10**9, tool_output_budget_chars=10**12)
    env.reset(seed=0)
    benchmark(env.step, NOOP)


def test_astep_overhead_noop_tool(benchmark):
    """The same step measured without the thread hop of the sync API (many calls per loop turn)."""
    import asyncio

    env = ProbeEnv(max_turns=10**9, tool_output_budget_chars=10**12)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(env.areset(seed=0))

    async def hundred_steps():
        for _ in range(100):
            await env.astep(NOOP)

    benchmark.pedantic(lambda: loop.run_until_complete(hundred_steps()), rounds=30, iterations=1)
    benchmark.extra_info["per_step_us"] = benchmark.stats.stats.median / 100 * 1e6
    loop.close()


def test_hermes_parse_three_calls(benchmark):
    text = "I will call tools. " + NOOP * 3
    benchmark(HermesParser().parse, text)


@pytest.mark.parametrize("concurrency", [1, 16, 64, 128])
def test_calculator_oracle_episodes_per_s(benchmark, concurrency):
    episodes = 256
    report = benchmark.pedantic(run_episodes, args=("agentgym/Calculator-v0", oracle_policy, episodes, concurrency),
                                rounds=3, iterations=1)
    benchmark.extra_info["episodes_per_s"] = episodes / benchmark.stats.stats.median
    assert report.success_rate == 1.0
