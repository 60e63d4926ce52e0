#!/usr/bin/env python
"""Side by side with peer suites, in one run: ``.venv/bin/python benchmarks/peers/run_peers.py``.

Peers live in their own virtualenv (default ``/tmp/agentgym-peers-venv``), installed from
PyPI by this script and run as subprocesses (``peer_side.py``): their code never enters
agentgym's process, package or tests. Compared:

1. the same Python snippets through llm-sandbox (Docker, on an image derived locally from
   ``sandboxes.default_image()`` — no registry) and through agentgym's DockerSandbox;
2. per-call latency of the Python tool of gem-llm and of skyrl-gym and of agentgym's
   sandboxes (process and Docker), with whether the tool keeps state between calls;
3. search: the search tools of skyrl-gym and GEM and agentgym's retriever client, each
   sending the same questions one at a time to the same ``agentgym serve-retriever`` (the
   bundled corpus): latency and queries/s, and whether the top results agree. skyrl-gym
   posts JSON ``{"query": q}``, which the service accepts; GEM posts msgpack to a server of
   its own, so a small adapter on the peer side (``peer_side._GemAdapter``) translates, and
   its hop is counted in GEM's latency.

Options: ``--venv PATH``, ``--no-install``, ``--json FILE``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
PEERS = {"llm-sandbox": "llm-sandbox[docker]", "gem-llm": "gem-llm", "skyrl-gym": "skyrl-gym"}
DERIVED_TAG = "agentgym-peers/llm-sandbox-python:local"


def ensure_venv(path: Path, install: bool) -> dict[str, str]:
    """Create the peers' venv and install each peer; return peer -> 'ok' or the error."""
    status: dict[str, str] = {}
    if not (path / "bin" / "python").exists():
        venv.EnvBuilder(with_pip=True).create(path)
    constraints = path / "constraints.txt"
    constraints.write_text("torch==2.13.0\n")  # never let a peer pull another torch build
    for name, spec in PEERS.items():
        if install:
            proc = subprocess.run([str(path / "bin" / "pip"), "install", "-q", "-c", str(constraints), spec],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                status[name] = f"pip install failed: {proc.stderr.strip().splitlines()[-1:]}"
                continue
        mod = {"llm-sandbox": "llm_sandbox", "gem-llm": "gem", "skyrl-gym": "skyrl_gym"}[name]
        probe = subprocess.run([str(path / "bin" / "python"), "-c", f"import {mod}"], capture_output=True, text=True)
        status[name] = "ok" if probe.returncode == 0 else f"import failed: {probe.stderr.strip().splitlines()[-1:]}"
    return status


def derived_image() -> str:
    """llm-sandbox runs ``python FILE`` in ``/sandbox`` via ``docker exec``; our image has
    ``python3`` and a supervisor entrypoint, so derive (locally, FROM our tag) an image with
    a ``python`` link, a writable /sandbox and an idle command."""
    import docker
    from sandboxes import default_image

    base = default_image().tag
    dockerfile = (f"FROM {base}\nUSER root\nRUN ln -sf /usr/bin/python3 /usr/local/bin/python && mkdir -p /sandbox "
                  "&& chown 1000:1000 /sandbox\nUSER 1000\nWORKDIR /sandbox\nENTRYPOINT []\n"
                  'CMD ["sleep", "infinity"]\n')
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    docker.from_env().images.build(fileobj=buf, custom_context=True, tag=DERIVED_TAG, pull=False, rm=True)
    return DERIVED_TAG


def peer(venv_path: Path, *args: str) -> dict:
    # Peers that shell out to `python` must find the peers' venv (with pandas), as if activated.
    env = {**os.environ, "PATH": f"{venv_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
           "VIRTUAL_ENV": str(venv_path)}
    proc = subprocess.run([str(venv_path / "bin" / "python"), str(HERE / "peer_side.py"), *args],
                          capture_output=True, text=True, timeout=900, env=env)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ratio_rows(label: str, ours: dict, theirs: dict, peer_name: str) -> list[tuple]:
    from workloads import SNIPPETS

    rows = []
    if "error" in theirs:
        return [(label, peer_name, "-", "-", "-", f"could not run: {theirs['error']}")]
    if "open_ms" in theirs and "open_ms" in ours:
        rows.append((label, "start a sandbox", ours["open_ms"], theirs["open_ms"],
                     theirs["open_ms"] / ours["open_ms"], ""))
    for name in SNIPPETS:
        a, b = ours[name]["p50_ms"], theirs[name]["p50_ms"]
        failed = any(w in theirs[name]["sample_output"] for w in ("Traceback", "Error"))
        rows.append((label, f"{name} p50", a, b, b / a, "peer's run failed: not comparable" if failed else ""))
    rows.append((label, "keeps state between calls", ours["stateful"], theirs["stateful"], "", ""))
    return rows


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_retriever() -> tuple[subprocess.Popen, str]:
    """``agentgym serve-retriever`` on a free port, once its /health answers."""
    import time
    import urllib.request

    port = _free_port()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "agentgym"), "serve-retriever", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2).read()
            return proc, url
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("agentgym serve-retriever did not come up")


def search_rows(venv_path: Path, status: dict[str, str], results: dict) -> list[tuple]:
    """The search tools of the peers and agentgym's client against one retriever service."""
    import tempfile

    import agentgym_side
    from workloads import SEARCH_QUERIES

    from tasks.search import load_default_dataset

    queries = [q.question for q in load_default_dataset().questions("test")[:SEARCH_QUERIES]]
    proc, url = _serve_retriever()
    try:
        agentgym_side.search_remote(url, queries)  # warm-up: the service's caches are warm for every side
        ours = results["agentgym_search"] = agentgym_side.search_remote(url, queries)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(queries, f)
        rows = []
        for name, key in (("skyrl-gym", "skyrl_search"), ("gem-llm", "gem_search")):
            if status.get(name) != "ok":
                results["not_compared"][f"search ({name})"] = "peer not installed"
                continue
            theirs = results[key] = peer(venv_path, key, url, f.name)
            if "error" in theirs:
                rows.append((f"search tool vs {name}", name, "-", "-", "-", f"could not run: {theirs['error']}"))
                continue
            agree = sum(a == b for a, b in zip(ours["top_titles"], theirs["top_titles"])) / len(queries)
            note = f"{len(queries)} queries, same top result {agree:.0%}" + (" (via msgpack adapter)" if "gem" in key
                                                                              else "")
            rows.append((f"search tool vs {name}", "latency p50", ours["p50_ms"], theirs["p50_ms"],
                         theirs["p50_ms"] / ours["p50_ms"], note))
            rows.append((f"search tool vs {name}", "latency p99", ours["p99_ms"], theirs["p99_ms"],
                         theirs["p99_ms"] / ours["p99_ms"], ""))
            rows.append((f"search tool vs {name}", "queries/s", ours["queries_per_s"], theirs["queries_per_s"],
                         ours["queries_per_s"] / theirs["queries_per_s"], "ratio = agentgym / peer"))
        os.unlink(f.name)
        return rows
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default="/tmp/agentgym-peers-venv")
    parser.add_argument("--no-install", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    from rich.console import Console
    from rich.table import Table

    import agentgym_side

    console = Console()
    venv_path = Path(args.venv)
    status = ensure_venv(venv_path, not args.no_install)
    console.print(f"peers: {status}")
    results: dict = {"peers": status, "not_compared": {}}
    rows: list[tuple] = []

    results["agentgym_process"] = agentgym_side.run("process")
    try:
        results["agentgym_docker"] = agentgym_side.run("docker")
    except Exception as e:  # noqa: BLE001 - no engine: reported
        results["agentgym_docker"] = {"error": f"{type(e).__name__}: {e}"}

    if status.get("llm-sandbox") == "ok" and "error" not in results["agentgym_docker"]:
        try:
            image = derived_image()
            results["llm_sandbox"] = peer(venv_path, "llm_sandbox", image)
        except Exception as e:  # noqa: BLE001
            results["llm_sandbox"] = {"error": f"{type(e).__name__}: {e}"}
        rows += ratio_rows("Docker sandbox vs llm-sandbox", results["agentgym_docker"], results["llm_sandbox"],
                           "llm-sandbox")
    else:
        results["not_compared"]["llm-sandbox"] = "peer not installed or no Docker engine"
    for name, key in (("gem-llm", "gem_python"), ("skyrl-gym", "skyrl_python")):
        if status.get(name) == "ok":
            results[key] = peer(venv_path, key)
            rows += ratio_rows(f"python tool vs {name} (agentgym process sandbox)", results["agentgym_process"],
                               results[key], name)
            if "error" not in results["agentgym_docker"]:
                rows += ratio_rows(f"python tool vs {name} (agentgym Docker sandbox)", results["agentgym_docker"],
                                   results[key], name)
    rows += search_rows(venv_path, status, results)

    table = Table(title="agentgym vs peers (latency in ms; ratio = peer / agentgym, >1 means agentgym is faster)")
    for c in ("comparison", "metric", "agentgym", "peer", "ratio", "note"):
        table.add_column(c)
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else str(v)  # noqa: E731
    for row in rows:
        table.add_row(*(fmt(v) for v in row))
    console.print(table)
    for what, why in results["not_compared"].items():
        console.print(f"[yellow]not compared[/] {what}: {why}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    os.chdir(HERE.parent.parent)
    sys.exit(main())
