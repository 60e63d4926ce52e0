"""The work both sides run, as plain data: imported by the agentgym side and, by path, by
the peer side (which runs in its own virtualenv and never imports agentgym)."""

SNIPPETS = {
    "arith": "print(1 + 1)",
    "pandas_sum": "import pandas as pd\nprint(pd.DataFrame({'a': range(1000)}).a.sum())",
    "json_sort": "import json\nprint(json.dumps(sorted(range(200), reverse=True))[:20])",
}
STATE_PROBE = ("x = 41", "print(x + 1)")  # a stateful tool prints 42 for the second call
CALLS_PER_SNIPPET = 20

# The search comparison: every side sends the same questions (Search-v1's test split, the
# first SEARCH_QUERIES) one at a time to the same `agentgym serve-retriever`, top SEARCH_TOPK.
SEARCH_QUERIES = 200
SEARCH_TOPK = 3


def search_summary(latencies_ms: list[float], wall_s: float, top_titles: list[str]) -> dict:
    """Median and p99 latency, queries per second, and the top title per query (to check agreement)."""
    ordered = sorted(latencies_ms)
    return {"p50_ms": ordered[len(ordered) // 2], "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "queries_per_s": len(ordered) / wall_s, "top_titles": top_titles}
