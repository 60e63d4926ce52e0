"""Search-v1 speed: index build, in-process query latency, the retriever service under 64
concurrent clients, and oracle episodes/s at concurrency 64.

Run: ``.venv/bin/pytest benchmarks/bench_search.py --benchmark-only``.
Targets (DESIGN.md): in-process query p50 <= 1 ms on ~12k documents; first index build
well under 30 s.
"""

import asyncio
import itertools

import pytest

from agentgym.envs.search import SearchEnv
from agentgym.policies import oracle_policy
from agentgym.retrieval import BM25Index, LocalRetriever, RemoteRetriever, start_service_in_thread
from agentgym.runner import run_episodes


@pytest.fixture(scope="module")
def env():
    return SearchEnv(split="train")


@pytest.fixture(scope="module")
def queries(env):
    return [q.question for q in env.dataset.questions("train")]


@pytest.fixture(scope="module")
def index(env):
    return LocalRetriever.for_corpus(env.dataset.corpus).index


def test_index_build(benchmark, env):
    """Building the BM25 index of the bundled corpus from scratch (in memory)."""
    built = benchmark.pedantic(BM25Index.build, args=(env.dataset.corpus,), rounds=3, iterations=1)
    benchmark.extra_info["documents"] = len(env.dataset.corpus)
    assert built.search("capital of France", 1)


def test_in_process_query(benchmark, index, queries):
    """One BM25 query (top 3) with document ids resolved; the median is the p50."""
    cycle = itertools.cycle(queries)
    benchmark(lambda: index.search(next(cycle), 3))
    assert benchmark.stats.stats.median < 1e-3


def test_service_throughput_64_clients(benchmark, index, queries):
    """Queries/s of the HTTP service with 64 concurrent clients (one query per request)."""
    running = start_service_in_thread(index, port=0)
    batch = queries[:2048]

    async def load():
        client = RemoteRetriever(running.url, max_concurrency=64)
        slots = asyncio.Semaphore(64)

        async def one(q):
            async with slots:
                await client.search([q], 3)

        await asyncio.gather(*(one(q) for q in batch))
        await client.aclose()

    try:
        benchmark.pedantic(lambda: asyncio.run(load()), rounds=3, iterations=1)
    finally:
        running.stop()
    benchmark.extra_info["queries_per_s"] = len(batch) / benchmark.stats.stats.median
    benchmark.extra_info["batches_per_request"] = running.service.stats.batches / max(1, running.service.stats.requests)


@pytest.mark.parametrize("env_id", ["agentgym/Search-v1", "agentgym/SearchR1-v1"])
def test_oracle_episodes_per_s_concurrency_64(benchmark, env_id):
    episodes = 1024
    report = benchmark.pedantic(run_episodes, args=(env_id, oracle_policy, episodes, 64), rounds=3, iterations=1)
    benchmark.extra_info["episodes_per_s"] = episodes / benchmark.stats.stats.median
    assert report.success_rate >= 0.99
