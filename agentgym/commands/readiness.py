"""``agentgym stress | audit-reward | bench``: readiness checks that can gate a training job."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from agentgym.commands.console import cli_console

__all__ = ["stress_command", "audit_reward_command", "bench_command"]


def stress_command(env_id: str, episodes: int, concurrency: int, faults: str, adversarial: float, seed: int,
                   json_out: bool) -> int:
    """Run the stress harness; exit 0 only when every guarantee holds (1 otherwise, 2 on bad input)."""
    import agentgym  # noqa: F401 - registers the envs
    from agentgym.errors import ConfigError
    from agentgym.readiness import FaultPlan, StressConfig, run_stress
    from agentgym.readiness.report import stress_tables

    import logging

    # Injected faults make the pools log every replacement; the report counts them instead.
    logging.basicConfig(level=logging.ERROR)
    console = cli_console(stderr=json_out)
    try:
        config = StressConfig(env_id, episodes=episodes, concurrency=concurrency, faults=FaultPlan.parse(faults),
                              adversarial=adversarial, seed=seed)
    except ConfigError as e:
        sys.stderr.write(f"error: {e}\n")  # one plain line, like every CLI user error
        return 2
    console.print(f"[dim]stress {env_id}: {episodes} episodes, concurrency {concurrency}, "
                  f"faults {config.faults.rates or 'none'}, adversarial {adversarial:.0%}[/]")
    report = run_stress(config)
    if json_out:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        for table in stress_tables(report):
            console.print(table)
        for note in report.notes:
            console.print(f"[dim]note: {note}[/]")
        for index, tb in report.lost[:3]:
            console.print(f"[red]lost episode {index}[/]:\n{tb}")
    console.print("[green bold]READY[/]" if report.passed else "[red bold]NOT READY: a guarantee is broken[/]")
    return 0 if report.passed else 1


def audit_reward_command(env_id: str, tasks: int, seed: int, judge_url: str | None = None,
                         judge_model: str | None = None) -> int:
    """Run the reward-hacking kit; exit 1 on any leak, crash or failing oracle. A judged
    env gets the judge kit instead, against the gullible judge and, when given, a real one."""
    import agentgym  # noqa: F401
    from agentgym.readiness import audit_reward
    from agentgym.readiness.judged_command import audit_judged_command, env_is_judged
    from agentgym.readiness.report import audit_tables

    console = cli_console()
    if env_is_judged(env_id):
        return audit_judged_command(console, env_id, tasks, seed, judge_url, judge_model)
    report = audit_reward(env_id, tasks=tasks, seed=seed)
    for table in audit_tables(report):
        console.print(table)
    guarded = sum(1 for r in report.results if r.verdict == "guarded")
    if guarded:
        console.print(f"[dim]{guarded} attacks would score on the scorer alone but are stopped before it "
                      "(schema check, answer tool or parser): reported, not failed (AuditReport.to_dict()['guarded']).[/]")
    console.print("[green bold]PASS[/]: no adversarial answer scored" if report.passed
                  else "[red bold]FAIL[/]: the reward can be gamed (see above)")
    return 0 if report.passed else 1


def bench_command(extra_pytest_args: list[str]) -> int:
    """``pytest benchmarks --benchmark-only`` with the JSON saved under benchmarks/results."""
    root = Path.cwd()
    results = root / "benchmarks" / "results"
    results.mkdir(parents=True, exist_ok=True)
    out = results / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    cmd = [sys.executable, "-m", "pytest", "benchmarks", "-q", "--benchmark-only", "--benchmark-sort=name",
           f"--benchmark-json={out}", *extra_pytest_args]
    return subprocess.call(cmd, cwd=root)
