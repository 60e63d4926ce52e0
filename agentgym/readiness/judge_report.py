"""Rendering a judged env's audit as rich tables (the CLI prints them)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from agentgym.readiness.judge_env_audit import JudgedEnvAudit

__all__ = ["judge_audit_tables"]


def _categories(audit: JudgedEnvAudit, judge: str) -> Table:
    p = audit.pipeline
    table = Table(title=f"Judge attacks — {audit.env_id}, judge {judge} (calibration {p.calibration}; "
                        f"{audit.episodes} attack episodes, {len(audit.episode_leaks)} paid)")
    for c in ("attack", "tried", "scored 0", "LEAKED", "judge failed"):
        table.add_column(c, justify="left" if c == "attack" else "right")
    for category, n in p.by_category().items():
        leak = f"[red bold]{n['leak']}[/]" if n["leak"] else "0"
        table.add_row(category, str(n["attacks"]), str(n["ok"]), leak, str(n["escape"]))
    return table


def _defences(audit: JudgedEnvAudit) -> Table:
    table = Table(title="Which attack would succeed without which defence (one defence removed at a time)")
    table.add_column("defence removed")
    table.add_column("attacks that then score above 0")
    for defence, attacks in audit.pipeline.defence_table().items():
        table.add_row(defence, ", ".join(attacks) or "[dim]none on this judge[/]")
    return table


def judge_audit_tables(audit: JudgedEnvAudit, judge: str) -> list[Any]:
    """Renderables: attack categories, the ablation, and any leak or failure."""
    out: list[Any] = [_categories(audit, judge)]
    if audit.pipeline.ablated:
        out.append(_defences(audit))
    problems = ([("oracle", "-", m) for m in audit.oracle_failures + audit.pipeline.truth_failures]
                + [(r.item_id, r.attack, f"{r.outcome}: reward {r.reward}, {r.refused or ''}")
                   for r in audit.pipeline.leaks]
                + [(e.task_id, e.attack, f"episode paid {e.reward}, infra_failed={e.infra_failed}")
                   for e in audit.episode_leaks])
    if problems:
        detail = Table(title="Leaks, judge failures and oracle failures")
        for c in ("task", "attack", "what"):
            detail.add_column(c)
        for row in problems[:30]:
            detail.add_row(*(str(x)[:200] for x in row))
        out.append(detail)
    return out
