"""``agentgym audit-reward`` for judged envs: the judge kit against the gullible judge and,
when ``--judge-url``/``--judge-model`` name one, a real judge (library side; the CLI prints)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from agentgym.readiness.judge_env_audit import audit_judged_env, is_judged

__all__ = ["env_is_judged", "audit_judged_command"]


def env_is_judged(env_id: str) -> bool:
    """Whether ``env_id``'s family grades answers with a judge (builds the env, no reset)."""
    env = gym.make(env_id)
    try:
        return is_judged(env)
    finally:
        env.close()


def audit_judged_command(console: Any, env_id: str, tasks: int, seed: int, judge_url: str | None,
                         judge_model: str | None) -> int:
    """Print the judge audit's tables per judge; 0 only when every judge passes."""
    from agentgym.readiness.judge_report import judge_audit_tables

    judges: list[tuple[str, dict[str, Any]]] = [("gullible (scripted)", {"judge": "gullible"})]
    if judge_url or judge_model:
        judges.append((f"{judge_model} at {judge_url}", {"judge_url": judge_url, "judge_model": judge_model}))
    passed = True
    for name, kwargs in judges:
        audit = audit_judged_env(env_id, tasks=tasks, seed=seed, env_kwargs=kwargs)
        for table in judge_audit_tables(audit, name):
            console.print(table)
        passed &= audit.passed
    console.print("[green bold]PASS[/]: no judge attack scored" if passed
                  else "[red bold]FAIL[/]: the judged reward can be gamed (see above)")
    return 0 if passed else 1
