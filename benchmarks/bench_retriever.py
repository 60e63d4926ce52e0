"""The retriever service over HTTP: queries/s and p50/p99 latency at a fixed concurrency.

``agentgym serve-retriever`` runs as a subprocess over a generated corpus (5,000
documents of ~60 words); ``RemoteRetriever`` sends one query (top 3) per request, as a
search tool does, from ``--concurrency`` workers on one event loop. Both sides are the
code on ``sys.path``, so one command compares two checkouts::

    PYTHONPATH=/path/to/checkout .venv/bin/python benchmarks/bench_retriever.py

prints ``code=<checkout> concurrency=C requests=N q/s=... p50_ms=... p99_ms=...`` and the
CPU time per request of the client and of the service (``/proc``; 0 where there is
none), which a busy machine disturbs less than the wall-clock figures.
The service's subprocess runs from a scratch directory, so ``python -m`` cannot pick up
the current directory's copy instead of ``PYTHONPATH``'s. Client and service share the
machine's cores: on a 2-core machine the figure is the pair's, not the service's alone.
Under pytest (``make bench``) it is one pedantic round with the figures in ``extra_info``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import agentgym
from agentgym.retrieval import RemoteRetriever

WORDS = [f"w{i}" for i in range(2000)]
WARMUP = 200


def write_corpus(path: Path, docs: int = 5000) -> None:
    rng = random.Random(0)
    with path.open("w") as f:
        for i in range(docs):
            text = " ".join(rng.choice(WORDS) for _ in range(60))
            f.write(json.dumps({"id": f"d{i}", "contents": f'"Doc {i}"\n{text}'}) + "\n")


def start_service(workdir: Path) -> tuple[subprocess.Popen, str]:
    """``agentgym serve-retriever`` on a free port; returns the process and its URL."""
    write_corpus(workdir / "corpus.jsonl")
    env = {**os.environ, "AGENTGYM_CACHE_DIR": str(workdir / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "agentgym.cli", "serve-retriever", "--port", "0",
                             "--corpus", str(workdir / "corpus.jsonl")],
                            cwd=workdir, env=env, stderr=subprocess.PIPE, text=True)
    seen = ""
    while not (match := re.search(r"on (http://127\.0\.0\.1:\d+)", seen)):
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError(f"the retriever service did not start: {seen}")
        seen += line
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
    return proc, match.group(1)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0 without ``/proc``)."""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return 0.0
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(url: str, concurrency: int, requests: int, service_pid: int) -> dict[str, float]:
    """Send ``requests`` one-query searches from ``concurrency`` workers; q/s, latency and
    CPU per request."""
    rng = random.Random(1)
    queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(requests + WARMUP)]
    client = RemoteRetriever(url, max_concurrency=concurrency)
    latencies: list[float] = []

    async def worker(mine: list[str], record: bool) -> None:
        for q in mine:
            start = time.perf_counter()
            hits = await client.search([q], 3)
            if record:
                latencies.append(time.perf_counter() - start)
            assert len(hits) == 1

    async def run(batch: list[str], record: bool) -> None:
        await asyncio.gather(*(worker(batch[i::concurrency], record) for i in range(concurrency)))

    await run(queries[:WARMUP], record=False)  # connections opened, index pages warm
    start, client_cpu, service_cpu = time.perf_counter(), time.process_time(), cpu_s(service_pid)
    await run(queries[WARMUP:], record=True)
    elapsed = time.perf_counter() - start
    client_cpu, service_cpu = time.process_time() - client_cpu, cpu_s(service_pid) - service_cpu
    await client.aclose()
    latencies.sort()
    return {"qps": requests / elapsed, "p50_ms": latencies[len(latencies) // 2] * 1e3,
            "p99_ms": latencies[int(len(latencies) * 0.99)] * 1e3,
            "client_cpu_us": client_cpu / requests * 1e6, "service_cpu_us": service_cpu / requests * 1e6}


def bench(concurrency: int = 32, requests: int = 10000) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_service(Path(tmp))
        try:
            return asyncio.run(measure(url, concurrency, requests, proc.pid))
        finally:
            proc.terminate()
            proc.wait(10)


def test_retriever_service_qps(benchmark):
    """One round at concurrency 32 (the figures are in ``extra_info``)."""
    figures = benchmark.pedantic(bench, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    assert figures["qps"] > 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=10000)
    args = parser.parse_args()
    figures = bench(args.concurrency, args.requests)
    print(f"code={Path(agentgym.__file__).parent.parent} concurrency={args.concurrency} requests={args.requests} "
          f"q/s={figures['qps']:.0f} p50_ms={figures['p50_ms']:.2f} p99_ms={figures['p99_ms']:.2f} "
          f"client_cpu_us/req={figures['client_cpu_us']:.0f} service_cpu_us/req={figures['service_cpu_us']:.0f}")


if __name__ == "__main__":
    main()
