"""Per-tool metrics: how often each tool is called, how it fails, and how fast it is.

Agent errors and infrastructure errors are counted apart, because they call for opposite
responses (the first is learning signal, the second is an outage). Telemetry objects merge,
so a vector runner sums its envs and a multi-process trainer sums its workers
(``to_dict``/``from_dict`` cross the process boundary as plain JSON).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["STATUSES", "ToolStats", "Telemetry"]

STATUSES = ("ok", "agent_error", "invalid_args", "parse_error", "timeout", "infra_error")
_RESERVOIR = 20_000  # latency samples kept per tool: enough for a stable p99


@dataclass
class ToolStats:
    """Counters of one tool. Latencies are a uniform reservoir sample, in milliseconds."""

    calls: int = 0
    status_counts: dict[str, int] = field(default_factory=lambda: {s: 0 for s in STATUSES})
    retries: int = 0
    truncated: int = 0
    episodes_used: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    _seen_latencies: int = 0

    def add_latency(self, ms: float, rng: random.Random) -> None:
        self._seen_latencies += 1
        if len(self.latencies_ms) < _RESERVOIR:
            self.latencies_ms.append(ms)
        else:
            j = rng.randrange(self._seen_latencies)
            if j < _RESERVOIR:
                self.latencies_ms[j] = ms

    def merge(self, other: "ToolStats", rng: random.Random) -> None:
        self.calls += other.calls
        for s, n in other.status_counts.items():
            self.status_counts[s] = self.status_counts.get(s, 0) + n
        self.retries += other.retries
        self.truncated += other.truncated
        self.episodes_used += other.episodes_used
        for ms in other.latencies_ms:
            self.add_latency(ms, rng)
        # Samples beyond the other's reservoir were already thinned; count them as seen.
        self._seen_latencies += max(0, other._seen_latencies - len(other.latencies_ms))

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else 0.0


class Telemetry:
    """Mergeable per-tool counters, exported as flat ``tool/<name>/<metric>`` metrics."""

    def __init__(self) -> None:
        self.tools: dict[str, ToolStats] = {}
        self.episodes = 0
        self._rng = random.Random(0)

    def _stats(self, name: str) -> ToolStats:
        if name not in self.tools:
            self.tools[name] = ToolStats()
        return self.tools[name]

    def record_call(self, name: str, status: str, latency_ms: float, retries: int, truncated: bool) -> None:
        """Count one finished call (after its retries)."""
        st = self._stats(name)
        st.calls += 1
        st.status_counts[status] = st.status_counts.get(status, 0) + 1
        st.retries += retries
        st.truncated += int(truncated)
        st.add_latency(latency_ms, self._rng)

    def record_episode(self, tools_used: Iterable[str], tools_available: Iterable[str] = ()) -> None:
        """Count a finished episode and which tools it used (for ``usage_frac``)."""
        self.episodes += 1
        for name in tools_available:
            self._stats(name)
        for name in set(tools_used):
            self._stats(name).episodes_used += 1

    def merge(self, other: "Telemetry") -> "Telemetry":
        """Add ``other``'s counts into this object and return it."""
        self.episodes += other.episodes
        for name, st in other.tools.items():
            self._stats(name).merge(st, self._rng)
        return self

    @classmethod
    def merged(cls, parts: Iterable["Telemetry"]) -> "Telemetry":
        total = cls()
        for p in parts:
            total.merge(p)
        return total

    def metrics(self) -> dict[str, float]:
        """Flat metrics: ``tool/<name>/calls``, ``.../ok_rate``, ``.../p99_ms``, ..."""
        out: dict[str, float] = {}
        for name, st in sorted(self.tools.items()):
            p = f"tool/{name}/"
            out[p + "calls"] = float(st.calls)
            for s in STATUSES:
                out[p + f"{s}_rate"] = st.status_counts.get(s, 0) / st.calls if st.calls else 0.0
            out[p + "retries"] = float(st.retries)
            out[p + "truncated"] = float(st.truncated)
            for q in (50, 95, 99):
                out[p + f"p{q}_ms"] = st.percentile(q)
            out[p + "usage_frac"] = st.episodes_used / self.episodes if self.episodes else 0.0
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "tools": {
                n: {
                    "calls": s.calls, "status_counts": dict(s.status_counts), "retries": s.retries,
                    "truncated": s.truncated, "episodes_used": s.episodes_used,
                    "latencies_ms": list(s.latencies_ms), "seen": s._seen_latencies,
                }
                for n, s in self.tools.items()
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Telemetry":
        t = cls()
        t.episodes = int(data.get("episodes", 0))
        for name, d in data.get("tools", {}).items():
            t.tools[name] = ToolStats(
                calls=d["calls"], status_counts=dict(d["status_counts"]), retries=d["retries"],
                truncated=d["truncated"], episodes_used=d["episodes_used"],
                latencies_ms=list(d["latencies_ms"]), _seen_latencies=d.get("seen", len(d["latencies_ms"])),
            )
        return t

    def table(self, title: str = "Tool telemetry") -> Any:
        """A ``rich.table.Table`` with one row per tool (render it with a rich Console)."""
        from rich.table import Table

        table = Table(title=title)
        for col in ("tool", "calls", "ok", "agent_err", "invalid", "parse_err", "timeout",
                    "infra_err", "retries", "p50 ms", "p95 ms", "p99 ms", "truncated", "usage"):
            table.add_column(col, justify="left" if col == "tool" else "right")
        m = self.metrics()
        for name, st in sorted(self.tools.items()):
            p = f"tool/{name}/"
            pct = lambda k: f"{100 * m[p + k]:.1f}%"  # noqa: E731
            table.add_row(
                name, str(st.calls), pct("ok_rate"), pct("agent_error_rate"), pct("invalid_args_rate"),
                pct("parse_error_rate"), pct("timeout_rate"), pct("infra_error_rate"), str(st.retries),
                f"{m[p + 'p50_ms']:.2f}", f"{m[p + 'p95_ms']:.2f}", f"{m[p + 'p99_ms']:.2f}",
                str(st.truncated), pct("usage_frac"),
            )
        return table
