"""A step's rollout figures over every process, not one process's share.

Each process collects its own share of a step's episodes, so the figures its rollout
loop reports (episode and token counts, tool telemetry, engine time) are its own. Logged
as they were, a 4-process run reported a quarter of its episodes and rank 0's tool error
rates and latencies, and a tool-usage alarm or reward watch read one process's tools.

:func:`global_rollout_stats` gathers every process's figures and its tool telemetry and
combines them by what each figure is (:func:`combine_rank_stats`):

- tool telemetry is merged and its figures computed again (rates over all calls,
  percentiles over all latencies), so N processes report what one process would;
- counts are summed, and so are throughputs (the engines generate side by side);
- times are the slowest process's (the step waits for it), as are maxima;
- a fraction with a known denominator is weighted by it; any other figure is the mean
  over processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentgym.telemetry import Telemetry
from baselines.distributed import DistInfo, all_gather_lists
from baselines.trajectory import RolloutBatch

__all__ = ["SUMMED", "SLOWEST", "WEIGHTED", "combine_rank_stats", "global_rollout_stats"]

SUMMED = frozenset({
    "rollout/episodes", "rollout/dropped_infra_failed", "rollout/generated_tokens", "rollout/window_generated_tokens",
    "rollout/no_tool_call_turns", "rollout/groups_in_flight", "rollout/groups_ready", "rollout/idle_seats",
    "rollout/tokens_per_s", "tokens/drift_checked",
})
"""Counts, and throughputs of engines that run side by side (``rollout/dropped_*`` too)."""

SLOWEST = frozenset({
    "rollout/wall_s", "rollout/window_s", "rollout/gen_s", "rollout/env_s", "rollout/wait_s",
    "rollout/staleness_max", "rollout/max_staleness",
})
"""Times (a step waits for its slowest process) and maxima."""

WEIGHTED = {
    "tokens/drift_frac": "tokens/drift_checked",
    "rollout/staleness_mean": "rollout/generated_tokens",  # a mean over generated tokens
    "rollout/staleness_episode_max_mean": "rollout/episodes",
    "rollout/admitted_lag_mean": "rollout/episodes",  # over groups: a rank's episodes are its groups x group size
}
"""Fractions and means, and the count each is taken over."""


def combine_rank_stats(per_rank: Sequence[tuple[Mapping[str, float], Telemetry | None]]) -> dict[str, float]:
    """Every process's ``(stats, telemetry)``, in rank order, as one process's figures."""
    if len(per_rank) == 1:
        return dict(per_rank[0][0])
    keys = dict.fromkeys(k for stats, _ in per_rank for k in stats if not k.startswith("tool/"))
    out: dict[str, float] = {}
    for key in keys:
        values = [float(stats.get(key, 0.0)) for stats, _ in per_rank]
        if key in SUMMED or key.startswith("rollout/dropped_"):
            out[key] = sum(values)
        elif key in SLOWEST:
            out[key] = max(values)
        elif key in WEIGHTED:
            weights = [float(stats.get(WEIGHTED[key], 0.0)) for stats, _ in per_rank]
            out[key] = sum(v * w for v, w in zip(values, weights)) / sum(weights) if sum(weights) else 0.0
        else:
            out[key] = sum(values) / len(values)
    telemetry = [t for _, t in per_rank if t is not None]
    if telemetry:
        out.update(Telemetry.merged(telemetry).metrics())
    return out


def global_rollout_stats(batch: RolloutBatch, info: DistInfo) -> dict[str, float]:
    """``batch.stats`` over every process (one gather; collective: call on every rank)."""
    if not info.enabled:
        return dict(batch.stats)
    mine: Any = (dict(batch.stats), batch.telemetry.to_dict() if batch.telemetry is not None else None)
    gathered = all_gather_lists([mine], info)
    return combine_rank_stats([(stats, Telemetry.from_dict(t) if t is not None else None) for stats, t in gathered])
