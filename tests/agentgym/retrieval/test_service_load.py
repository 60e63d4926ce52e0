"""A bounded load test of ``agentgym serve-retriever`` with its default limits.

40 clients each send maximum-size requests (1,024 queries x topk 16 = 16,384 documents,
a ~1 MiB body, a ~17 MB reply) and read their replies late and slowly. The service runs
as a subprocess, so its RSS is measured alone.

The bound (also in docs/cli.md): peak RSS above the idle service stays under
``max_bytes_in_flight`` (128 MiB) + 32 MiB for connection buffers and allocator slack,
i.e. 160 MiB (measured on a 2-core machine: ~105 MiB). With the in-flight budget
switched off, the same load grows the service by ~315 MiB and this test fails.
"""

import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentgym.retrieval import ServiceLimits

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")]

CLIENTS = 40
LIMITS = ServiceLimits()
TOPK = LIMITS.max_docs // LIMITS.max_queries
BOUND_MIB = LIMITS.max_bytes_in_flight / 2**20 + 32
DEADLINE_S = 60
HOLD_S = 1.5  # long enough that, unbounded, ~20 replies pile up unread (~300 MiB measured)


def write_corpus(path: Path, docs: int = 2000) -> None:
    rng = random.Random(0)
    words = [f"w{i}" for i in range(500)]
    with path.open("w") as f:
        for i in range(docs):
            text = "zeta " + " ".join(rng.choice(words) for _ in range(250))  # ~1 kB
            f.write(json.dumps({"id": f"d{i}", "contents": f'"Doc {i}"\n{text}'}) + "\n")


def max_size_request() -> bytes:
    query = ("zeta " * 200).strip()  # one term after analysis: cheap to search, large to send
    body = json.dumps({"queries": [query] * LIMITS.max_queries, "topk": TOPK}).encode()
    assert len(body) <= LIMITS.max_body_bytes
    return b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+) kB", status).group(1)) / 1024


def start_service(corpus: Path, cache: Path) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "AGENTGYM_CACHE_DIR": str(cache)}
    proc = subprocess.Popen([sys.executable, "-m", "agentgym.cli", "serve-retriever", "--port", "0",
                             "--corpus", str(corpus)], env=env, stderr=subprocess.PIPE, text=True)
    seen, match = "", None
    while match is None:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"the service did not start: {seen}")
        seen += line
        match = re.search(r"on http://127\.0\.0\.1:(\d+)", seen)
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
    return proc, int(match.group(1))


def read_reply_slowly(sock: socket.socket) -> int:
    """Read one reply in 256 kB gulps with pauses; return its status."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1 << 18)
        if not chunk:
            raise ConnectionError("closed before the headers")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
    received = len(body)
    while received < length:
        chunk = sock.recv(1 << 18)
        if not chunk:
            raise ConnectionError("closed in the body")
        received += len(chunk)
        time.sleep(0.002)
    return int(head.split(b" ")[1])


def client(port: int, request: bytes, statuses: list[int], deadline: float) -> None:
    rng = random.Random(port + threading.get_ident())
    while time.monotonic() < deadline:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(request)
            time.sleep(HOLD_S)  # not reading the reply promptly
            status = read_reply_slowly(sock)
        statuses.append(status)
        if status == 200:
            return
        time.sleep(rng.uniform(0.1, 0.4))  # 429: back off and retry


def test_forty_clients_with_maximum_size_requests_stay_under_the_memory_bound(tmp_path):
    write_corpus(tmp_path / "corpus.jsonl")
    proc, port = start_service(tmp_path / "corpus.jsonl", tmp_path / "cache")
    try:
        time.sleep(0.5)
        idle = rss_mib(proc.pid)
        Path(f"/proc/{proc.pid}/clear_refs").write_text("5")  # resets VmHWM: the peak from here on
        request = max_size_request()
        statuses: list[int] = []
        deadline = time.monotonic() + DEADLINE_S
        threads = [threading.Thread(target=client, args=(port, request, statuses, deadline)) for _ in range(CLIENTS)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        peak = rss_mib(proc.pid, "VmHWM")
        print(f"\nretriever load: idle RSS {idle:.0f} MiB, peak {peak:.0f} MiB, growth {peak - idle:.0f} MiB "
              f"(bound {BOUND_MIB:.0f} MiB); {statuses.count(200)} x 200, {statuses.count(429)} x 429 "
              f"in {elapsed:.1f} s")
        assert statuses.count(200) == CLIENTS, statuses
        assert set(statuses) <= {200, 429}
        assert peak - idle < BOUND_MIB
    finally:
        proc.terminate()
        proc.wait(10)
