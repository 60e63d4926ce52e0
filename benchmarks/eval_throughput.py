"""Eval throughput: ``agentgym eval`` against a model server, in both tool modes, and (where
verifiers is installed, ``.venv-peers``) the same episodes through the verifiers adapter,
side by side in one run.

The default server is the scripted one (``agentgym.evaluation.fake_server``, in a process
of its own), which answers at once: the figures are then the runners' own cost per
episode, what remains when the model is fast. Pass ``--base-url URL --model NAME`` to
measure against a real server (e.g. ``vllm serve``) instead.

Run: ``.venv/bin/python benchmarks/eval_throughput.py [--episodes 256 --concurrency 32]``
(``.venv-peers/bin/python`` for the verifiers column).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any

ENV = "agentgym/Calculator-v0"


def _agentgym(url: str, model: str, mode: str, episodes: int, concurrency: int) -> dict[str, Any]:
    from agentgym.evaluation import ChatAgent, ChatClient, ChatSettings, EvalPlan, run_eval
    from agentgym.evaluation.run import close_agent

    agent = ChatAgent(ChatClient(ChatSettings(url, model, tool_mode=mode, max_tokens=256)))
    start = time.perf_counter()
    result = run_eval(EvalPlan(ENV, episodes, concurrency=concurrency), agent)
    elapsed = time.perf_counter() - start
    close_agent(agent)
    tokens = sum(r["tokens"]["prompt"] + r["tokens"]["completion"] for r in result.records)
    return {"episodes_per_s": episodes / elapsed, "tokens_per_s": tokens / elapsed,
            "success": sum(r["success"] for r in result.records) / episodes}


def _verifiers(url: str, model: str, episodes: int, concurrency: int) -> dict[str, Any] | None:
    try:
        import verifiers.v1 as vf
    except ImportError:
        return None
    from agentgym.interop import as_verifiers_env

    env = as_verifiers_env(ENV, num_tasks=episodes)
    ctx = vf.ModelContext(model=model, client=vf.EvalClientConfig(base_url=url, api_key_var="OPENAI_API_KEY"))
    limit = asyncio.Semaphore(concurrency)

    async def one(task: Any) -> Any:
        async with limit:
            return await env.run_episode(task, ctx)

    async def main() -> list[Any]:
        async with env.serving():
            return await asyncio.gather(*(one(task) for task in env.taskset))

    start = time.perf_counter()
    done = asyncio.run(main())
    elapsed = time.perf_counter() - start
    ok = [e for e in done if e.ok]
    return {"episodes_per_s": len(done) / elapsed, "tokens_per_s": None,
            "success": sum(e.traces[0].reward >= 1 for e in ok) / max(1, len(done))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--base-url")
    parser.add_argument("--model", default="scripted")
    args = parser.parse_args()
    server = None
    url = args.base_url
    if url is None:
        server = subprocess.Popen([sys.executable, "-m", "agentgym.evaluation.fake_server"], stdout=subprocess.PIPE,
                                  text=True)
        url = server.stdout.readline().strip()
    try:
        rows = {f"agentgym eval ({mode})": _agentgym(url, args.model, mode, args.episodes, args.concurrency)
                for mode in ("native", "text")}
        rows["verifiers adapter"] = _verifiers(url, args.model, args.episodes, args.concurrency)
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
    print(json.dumps({"env": ENV, "episodes": args.episodes, "concurrency": args.concurrency, "server": url,
                      "results": rows}, indent=2))


if __name__ == "__main__":
    main()
