"""``agentgym eval compare a.jsonl b.jsonl``: two runs, paired task by task.

Two runs are comparable only if their envs are the same env: the same fingerprint (tool
set, parser, limits, data versions, ...). If they differ, a difference in success may be
the env's, so the comparison is refused and the differing fields are named
(:func:`agentgym.fingerprint_diff`). Otherwise the runs are paired on the episodes both
scored (same task index and sample, hence the same task) and every slice reports both
rates, their difference and McNemar's exact p-value on the discordant pairs.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from agentgym.errors import ConfigError
from agentgym.evaluation.records import read_run
from agentgym.evaluation.stats import mcnemar_exact
from agentgym.evaluation.summary import SLICE_KEYS, slice_value
from agentgym.fingerprint import fingerprint_diff

__all__ = ["compare_runs", "FingerprintMismatchError"]


class FingerprintMismatchError(ConfigError):
    """Two runs of different envs (fingerprints differ): their scores are not comparable."""

    def __init__(self, diff: dict[str, tuple[Any, Any]]) -> None:
        self.diff = diff
        shown = "; ".join(f"{k}: {_short(a)} vs {_short(b)}" for k, (a, b) in list(diff.items())[:12])
        more = f" (and {len(diff) - 12} more)" if len(diff) > 12 else ""
        super().__init__(f"Expected runs of the same env (equal fingerprints), actual: {len(diff)} field(s) "
                         f"differ: {shown}{more}")


def _short(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 1] + "…"


def _paired_stats(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    a = [bool(x["success"]) for x, _ in pairs]
    b = [bool(y["success"]) for _, y in pairs]
    n = len(pairs)
    if not n:  # no task scored in both runs: nothing to compare, not a tie at 0
        return {"n": 0, "a": None, "b": None, "diff": None, **mcnemar_exact(a, b)}
    rate_a, rate_b = sum(a) / n, sum(b) / n
    return {"n": n, "a": rate_a, "b": rate_b, "diff": rate_b - rate_a, **mcnemar_exact(a, b)}


def compare_runs(path_a: str | Path, path_b: str | Path) -> dict[str, Any]:
    """The paired comparison of two run files; raises :class:`FingerprintMismatchError`."""
    run_a, run_b = read_run(path_a), read_run(path_b)
    if run_a.header.env != run_b.header.env or run_a.header.fingerprint != run_b.header.fingerprint:
        diff = fingerprint_diff(run_a.header.fingerprint_fields, run_b.header.fingerprint_fields)
        if run_a.header.env != run_b.header.env:
            diff = {"env": (run_a.header.env, run_b.header.env), **diff}
        raise FingerprintMismatchError(diff or {"fingerprint": (run_a.header.fingerprint, run_b.header.fingerprint)})
    key = lambda r: (int(r["task_index"]), int(r["sample"]))  # noqa: E731
    scored_b = {key(r): r for r in run_b.records if not r.get("infra_failed")}
    pairs = [(r, scored_b[key(r)]) for r in run_a.records if not r.get("infra_failed") and key(r) in scored_b]
    mismatched = sum(1 for x, y in pairs if x.get("task_id") != y.get("task_id"))
    if mismatched:
        raise ConfigError(f"Expected the same task at each episode of both runs, actual: {mismatched} paired "
                          "episodes have different task ids (different --seed?)")
    slices: dict[str, dict[str, Any]] = {}
    for slice_key in SLICE_KEYS:
        groups: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
        for x, y in pairs:
            value = slice_value(x, slice_key)
            if value is not None:
                groups[str(value)].append((x, y))
        if groups:
            slices[slice_key] = {v: _paired_stats(ps) for v, ps in sorted(groups.items())}
    return {"env": run_a.header.env, "fingerprint": run_a.header.fingerprint,
            "a": {"path": str(path_a), "agent": run_a.header.agent, "episodes": len(run_a.records)},
            "b": {"path": str(path_b), "agent": run_b.header.agent, "episodes": len(run_b.records)},
            "overall": _paired_stats(pairs), "slices": slices}
