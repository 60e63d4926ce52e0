"""Peer workloads. Runs ONLY inside the peers virtualenv (see run_peers.py); prints JSON.

Usage: python peer_side.py llm_sandbox IMAGE | gem_python | skyrl_python
       | skyrl_search URL QUERIES_JSON | gem_search URL QUERIES_JSON
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import CALLS_PER_SNIPPET, SEARCH_TOPK, SNIPPETS, STATE_PROBE, search_summary  # noqa: E402


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


def _time_searches(call, queries_file: str, first_title) -> dict:
    with open(queries_file, encoding="utf-8") as f:
        queries = json.load(f)
    latencies, titles = [], []
    wall = time.perf_counter()
    for query in queries:
        start = time.perf_counter()
        out = call(query)
        latencies.append((time.perf_counter() - start) * 1e3)
        titles.append(first_title(str(out)))
    return search_summary(latencies, time.perf_counter() - wall, titles)


def skyrl_search(url: str, queries_file: str) -> dict:
    """skyrl-gym's search tool, posting its JSON {"query": q} straight to agentgym's retriever."""
    import re

    from skyrl_gym.tools.search import SearchToolGroup

    group = SearchToolGroup(search_url=f"{url}/retrieve", topk=SEARCH_TOPK, log_requests=False)

    def first_title(out: str) -> str:  # {"result": "Doc 1: \"Title\"\ntext ..."}
        match = re.search(r'Doc 1: "(.*?)"\n', json.loads(out).get("result", ""))
        return match.group(1) if match else ""
    return _time_searches(group.search, queries_file, first_title)


class _GemAdapter:
    """GEM's SearchTool speaks msgpack ({"query", "topk", "return_scores"} -> {"result": [...]})
    to its own server; this adapter, on the peer side, turns each request into the retriever's
    JSON form and the reply back into msgpack. Its hop is part of GEM's measured latency."""

    def __init__(self, upstream: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import msgspec
        import requests

        session = requests.Session()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = msgspec.msgpack.decode(self.rfile.read(int(self.headers["Content-Length"])))
                reply = session.post(f"{upstream}/retrieve", json={"queries": [body["query"]], "topk": body["topk"],
                                                                   "return_scores": True}, timeout=10).json()
                data = msgspec.msgpack.encode({"result": reply["result"][0]})
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/retrieve"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def gem_search(url: str, queries_file: str) -> dict:
    """GEM's search tool through the msgpack adapter to agentgym's retriever."""
    import re

    from gem.tools.search_tool import SearchTool

    adapter = _GemAdapter(url)
    try:
        tool = SearchTool(search_url=adapter.url, topk=SEARCH_TOPK)

        def call(query: str) -> str:
            return tool.execute_action(f"<search>{query}</search>")[2]

        def first_title(out: str) -> str:  # <information>Doc 1(Title: "Title") text ...
            match = re.search(r'Doc 1\(Title: "(.*?)"\)', out)
            return match.group(1) if match else ""
        return _time_searches(call, queries_file, first_title)
    finally:
        adapter.close()


if __name__ == "__main__":
    which = sys.argv[1]
    fn = {"llm_sandbox": llm_sandbox, "gem_python": gem_python, "skyrl_python": skyrl_python,
          "skyrl_search": skyrl_search, "gem_search": gem_search}[which]
    print(json.dumps(fn(*sys.argv[2:])))
