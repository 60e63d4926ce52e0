"""Rendering readiness reports as rich tables (the CLI prints them; the library does not)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from agentgym.readiness.audit import AuditReport
from agentgym.readiness.stress import StressReport
from agentgym.telemetry import STATUSES

__all__ = ["stress_tables", "audit_tables"]


def _tool_table(report: StressReport) -> Table:
    table = Table(title=f"Tools under stress — {report.config.env_id} (status rates, latency incl. retries)")
    short = {"agent_error": "agent", "invalid_args": "args", "parse_error": "parse", "infra_error": "infra"}
    cols = ["tool", "calls", *(short.get(s, s) for s in STATUSES), "retry", "p50ms", "p95ms", "p99ms", "trunc"]
    for c in cols:
        table.add_column(c, justify="left" if c == "tool" else "right")
    for name, st in sorted(report.telemetry.tools.items()):
        if not st.calls:
            continue
        rates = [f"{100 * st.status_counts.get(s, 0) / st.calls:.0f}%" for s in STATUSES]
        table.add_row(name, str(st.calls), *rates, str(st.retries), f"{st.percentile(50):.1f}",
                      f"{st.percentile(95):.1f}", f"{st.percentile(99):.1f}", str(st.truncated))
    return table


def _episode_table(report: StressReport) -> Table:
    s = report.summary()
    table = Table(title="Episodes", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    clean = s["clean_success_rate"]
    rows = [
        ("requested", s["episodes"]), ("completed", s["completed"]),
        ("infra-failed (flagged)", s["infra_failed"]), ("lost", s["lost"]),
        ("truncated", s["truncated"]), ("adversarial turns", s["adversarial_turns"]),
        ("oracle success on clean episodes", "-" if clean is None else f"{clean:.1%}"),
        ("faults injected", ", ".join(f"{k}={v}" for k, v in sorted(s["faults_injected"].items())) or "none"),
        ("containers leaked", "n/a (no Docker)" if s["leaked_containers"] is None else s["leaked_containers"]),
        ("episodes/s", f"{s['episodes_per_s']:.2f} (concurrency {s['concurrency']}, {s['elapsed_s']:.1f} s)"),
    ]
    for k, v in rows:
        table.add_row(k, str(v))
    return table


def _adversarial_table(report: StressReport) -> Table:
    table = Table(title="Adversarial actions -> tool statuses")
    table.add_column("action")
    table.add_column("outcomes", justify="left")
    per: dict[str, list[str]] = {}
    for (name, status), n in sorted(report.adversarial.items()):
        per.setdefault(name, []).append(f"{status}×{n}")
    for name, parts in per.items():
        table.add_row(name, ", ".join(parts))
    return table


def _guarantee_table(report: StressReport) -> Table:
    table = Table(title="Guarantees")
    for c in ("guarantee", "value", "ok", "detail"):
        table.add_column(c)
    for g in report.guarantees():
        table.add_row(g.name, "-" if g.value is None else str(g.value),
                      "[green]yes[/]" if g.ok else "[red bold]NO[/]", g.detail)
    return table


def _boundary_table(report: StressReport) -> Table:
    table = Table(title="Trust-boundary attacks (each must cause 0 infra failures and 0 leaks)")
    for c in ("attack", "uses", "infra-failed episodes", "cross-episode leaks"):
        table.add_column(c, justify="left" if c == "attack" else "right")
    for name, row in report.boundary_table().items():
        bad = row["infra_failed_episodes"] or row["cross_episode_leaks"]
        table.add_row(name, str(row["uses"]), str(row["infra_failed_episodes"]), str(row["cross_episode_leaks"]),
                      style="red" if bad else None)
    table.caption = f"{report.probes} leak probes; leaked containers: {report.leaked_containers}"
    return table


def stress_tables(report: StressReport) -> list[Any]:
    """Renderables for a stress report, in print order."""
    out: list[Any] = [_tool_table(report), _episode_table(report)]
    if report.adversarial:
        out.append(_adversarial_table(report))
    if report.attack_uses:
        out.append(_boundary_table(report))
    out.append(_guarantee_table(report))
    return out


def audit_tables(report: AuditReport) -> list[Any]:
    """Renderables for a reward audit: one row per attack category, then any leaks."""
    table = Table(title=f"Reward-hacking audit — {report.env_id} ({report.tasks} tasks)")
    for c in ("attack", "tried", "scored 0", "guarded", "LEAKED", "crashed"):
        table.add_column(c, justify="left" if c == "attack" else "right")
    for category, n in report.by_category().items():
        leak = f"[red bold]{n['leak']}[/]" if n["leak"] else "0"
        table.add_row(category, str(n["attacks"]), str(n["ok"]), str(n["guarded"]), leak, str(n["crash"]))
    out: list[Any] = [table]
    bad = report.leaks + report.crashes
    if bad or report.oracle_failures:
        detail = Table(title="Leaks, crashes and oracle failures")
        for c in ("task", "attack", "episode reward", "note"):
            detail.add_column(c)
        for msg in report.oracle_failures:
            detail.add_row("-", "oracle", "-", msg)
        for r in bad[:30]:
            detail.add_row(r.task_id, r.attack, str(r.episode_reward), r.episode_note[:200])
        out.append(detail)
    return out
