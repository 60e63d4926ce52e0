"""The summary of a run: what ``agentgym run``/``eval`` print and save beside the records.

Success counts only the scored episodes: an infra-failed episode (the env or the model
server failed) carries no signal about the agent, so it is counted apart and never as a
0. Everything else is computed from the records alone, so a summary can be rebuilt from
any run file (``agentgym eval summary RUN.jsonl``) and two runs' summaries agree with
what ``agentgym eval compare`` pairs.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from agentgym.evaluation.records import RunHeader
from agentgym.evaluation.stats import pass_at_k, wilson_interval

__all__ = ["summarize", "success_stats", "SLICE_KEYS", "slice_value"]

SLICE_KEYS = ("template", "num_hops", "tier")
"""``info`` fields a run is sliced by when its episodes carry them (Search's template and
hop count, DataAnalysis's tier)."""


def slice_value(record: dict[str, Any], key: str) -> Any:
    return (record.get("info") or {}).get(key)


def success_stats(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``n``, success rate and its 95% Wilson interval over scored ``records``. With none
    scored (every episode infra-failed) the rate is ``None`` (null in JSON), never 0: an
    outage is not an agent that failed everything."""
    n = len(records)
    wins = sum(1 for r in records if r["success"])
    lo, hi = wilson_interval(wins, n)
    return {"n": n, "success": wins / n if n else None, "ci95": [round(lo, 4), round(hi, 4)]}


def _samples(header: RunHeader, scored: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """pass@k and mean@k: per task, over its scored samples; tasks with fewer than k scored
    samples (some infra-failed) count for mean@k but not for pass@k."""
    by_task: dict[int, list[bool]] = defaultdict(list)
    for r in scored:
        by_task[int(r["task_index"])].append(bool(r["success"]))
    k = header.samples
    out: dict[str, Any] = {"k": k, "tasks": len(by_task)}
    if not by_task:
        return out
    out[f"mean@{k}"] = statistics.fmean(sum(v) / len(v) for v in by_task.values())
    for j in sorted({1, k}):
        full = [v for v in by_task.values() if len(v) >= j]
        if full:
            out[f"pass@{j}"] = statistics.fmean(pass_at_k(len(v), sum(v), j) for v in full)
    return out


def _tool_usage(scored: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per tool: the fraction of scored episodes that called it, its calls and their statuses."""
    used: Counter[str] = Counter()
    statuses: dict[str, Counter[str]] = defaultdict(Counter)
    for r in scored:
        names = {c["name"] for c in r.get("tool_calls", ()) if c.get("name")}
        used.update(names)
        for c in r.get("tool_calls", ()):
            statuses[str(c.get("name"))][str(c.get("status"))] += 1
    n = max(1, len(scored))
    return {name: {"usage_frac": used[name] / n, "calls": sum(st.values()), "statuses": dict(st)}
            for name, st in sorted(statuses.items())}


def _slices(scored: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key in SLICE_KEYS:
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in scored:
            value = slice_value(r, key)
            if value is not None:
                groups[str(value)].append(r)
        if groups:
            out[key] = {v: success_stats(rs) for v, rs in sorted(groups.items())}
    return out


def summarize(header: RunHeader, records: Sequence[dict[str, Any]], *, elapsed_s: float | None = None,
              played: int | None = None, played_tokens: int = 0, lost: int = 0) -> dict[str, Any]:
    """The run's summary (a JSON-ready dict); ``elapsed_s``/``played`` add throughput."""
    scored = [r for r in records if not r.get("infra_failed")]
    failed = [r for r in records if r.get("infra_failed")]
    tokens = [r["tokens"]["prompt"] + r["tokens"]["completion"] for r in records]
    latencies = sorted(r["latency_s"] for r in scored)
    summary: dict[str, Any] = {
        "env": header.env, "fingerprint": header.fingerprint, "agent": header.agent, "sampling": header.sampling,
        "episodes_planned": header.episodes, "episodes": len(records), "scored": len(scored),
        "infra_failed": len(failed),
        "infra_failed_by_source": dict(Counter(str(r.get("infra_source", "env")) for r in failed)),
        "lost": lost, **success_stats(scored),
        "mean_reward": statistics.fmean(r["reward"] for r in scored) if scored else 0.0,
        "ends": dict(Counter(str(r.get("end")) for r in scored)),
        "samples": _samples(header, scored), "slices": _slices(scored), "tools": _tool_usage(scored),
        "tokens": {"prompt": sum(r["tokens"]["prompt"] for r in records),
                   "completion": sum(r["tokens"]["completion"] for r in records),
                   "mean_per_episode": statistics.fmean(tokens) if tokens else 0.0},
        "latency_s": {"mean": statistics.fmean(latencies) if latencies else 0.0,
                      "p50": latencies[len(latencies) // 2] if latencies else 0.0,
                      "p90": latencies[int(len(latencies) * 0.9)] if latencies else 0.0},
    }
    if elapsed_s is not None and played is not None:
        summary["throughput"] = {"elapsed_s": elapsed_s, "played": played,
                                 "episodes_per_s": played / elapsed_s if elapsed_s > 0 else 0.0,
                                 "tokens_per_s": played_tokens / elapsed_s if elapsed_s > 0 else 0.0}
    return summary
