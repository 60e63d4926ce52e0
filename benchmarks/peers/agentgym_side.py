"""The agentgym half of the peer comparison: the same snippets through agentgym sandboxes."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import CALLS_PER_SNIPPET, SNIPPETS, STATE_PROBE  # noqa: E402


async def _measure(sandbox) -> dict:
    result = {}
    for name, code in SNIPPETS.items():
        lat, out = [], ""
        for _ in range(CALLS_PER_SNIPPET):
            start = time.perf_counter()
            r = await sandbox.run(code, timeout=30)
            lat.append((time.perf_counter() - start) * 1e3)
            out = r.stdout
        result[name] = {"p50_ms": statistics.median(lat), "max_ms": max(lat), "sample_output": out[:80]}
    await sandbox.run(STATE_PROBE[0], timeout=30)
    result["stateful"] = "42" in (await sandbox.run(STATE_PROBE[1], timeout=30)).stdout
    return result


async def sandbox_backend(backend: str) -> dict:
    """Open a pool of one, time the first acquire (container start), then the snippets."""
    from sandboxes import PoolConfig, make_pool

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pool = make_pool(backend, pool=PoolConfig(size=1))
        start = time.perf_counter()
        await pool.start()
        sb = await pool.acquire()
        opened_ms = (time.perf_counter() - start) * 1e3
        try:
            return {"open_ms": opened_ms, **await _measure(sb)}
        finally:
            await pool.release(sb)
            await pool.close()


def run(backend: str) -> dict:
    return asyncio.run(sandbox_backend(backend))


async def _search_remote(url: str, queries: list[str]) -> dict:
    from agentgym.retrieval import RemoteRetriever
    from workloads import SEARCH_TOPK, search_summary

    client = RemoteRetriever(url)
    latencies, titles = [], []
    try:
        wall = time.perf_counter()
        for query in queries:
            start = time.perf_counter()
            docs = (await client.search([query], SEARCH_TOPK))[0]
            latencies.append((time.perf_counter() - start) * 1e3)
            titles.append(docs[0].title if docs else "")
        return search_summary(latencies, time.perf_counter() - wall, titles)
    finally:
        await client.aclose()


def search_remote(url: str, queries: list[str]) -> dict:
    """agentgym's retriever client (what Search-v1's search tool calls), one query at a time."""
    return asyncio.run(_search_remote(url, queries))
