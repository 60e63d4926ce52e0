"""Auditing an env's reward against the reward-hacking kit.

For each of ``tasks`` tasks the oracle plays an episode; its answer is the truth (it must
score 1, else the env is broken and the audit fails). Every attack of
:func:`~agentgym.readiness.reward_kit.build_attacks` is then scored twice:

* **scorer** — :func:`~agentgym.readiness.scoring.score_answer`, the env's scorer alone;
* **episode** — a fresh episode of the same task whose first action is the attack as the
  agent would write it, so the parser, the schema check, the ``answer`` tool, the
  answer-spraying guard and the scorer all take part.

Verdicts: ``leak`` (the episode paid a reward: the audit fails), ``crash`` (the episode
raised: a trainer would lose it; the audit fails), ``guarded`` (the scorer alone would pay,
but a gate in front of it stops the attack: reported, not failed), ``ok``.

An env whose answers are judged (:func:`~agentgym.readiness.judge_env_audit.is_judged`)
gets the judge kit instead, its rows in the same report.
"""

from __future__ import annotations

import json
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import gymnasium as gym

from agentgym.env import ANSWER_TOOL
from agentgym.readiness.judge_env_audit import as_audit_report, audit_judged_env, is_judged
from agentgym.readiness.lifecycle import aclose_shared_resources
from agentgym.readiness.reward_kit import ATTACK_CATEGORIES, Attack, build_attacks
from agentgym.readiness.scoring import (
    OracleAnswer,
    OracleFailedError,
    answer_schema_problem,
    base_env,
    oracle_answer,
    score_answer,
)
from agentgym.runtime import run_sync

__all__ = ["Verdict", "AttackResult", "AuditReport", "audit_reward", "render_attack_action"]

Verdict = Literal["ok", "guarded", "leak", "crash"]


@dataclass(frozen=True)
class AttackResult:
    """One attack against one task."""

    task_id: str
    attack: str
    category: str
    scorer_reward: float | None
    scorer_error: str | None
    schema_problem: str | None
    episode_reward: float | None
    episode_note: str
    verdict: Verdict


@dataclass
class AuditReport:
    """All attack results of an audit, and the tasks whose oracle failed."""

    env_id: str
    results: list[AttackResult] = field(default_factory=list)
    oracle_failures: list[str] = field(default_factory=list)
    tasks: int = 0

    @property
    def leaks(self) -> list[AttackResult]:
        return [r for r in self.results if r.verdict == "leak"]

    @property
    def crashes(self) -> list[AttackResult]:
        return [r for r in self.results if r.verdict == "crash"]

    @property
    def passed(self) -> bool:
        return not self.leaks and not self.crashes and not self.oracle_failures and bool(self.results)

    def by_category(self) -> dict[str, dict[str, int]]:
        """``{category: {"attacks", "ok", "guarded", "leak", "crash"}}`` in kit order."""
        table: dict[str, Counter[str]] = {c: Counter() for c in ATTACK_CATEGORIES}
        for r in self.results:
            table[r.category]["attacks"] += 1
            table[r.category][r.verdict] += 1
        return {c: {k: n.get(k, 0) for k in ("attacks", "ok", "guarded", "leak", "crash")}
                for c, n in table.items() if n}

    def to_dict(self) -> dict[str, Any]:
        return {"env": self.env_id, "tasks": self.tasks, "passed": self.passed,
                "by_category": self.by_category(), "oracle_failures": list(self.oracle_failures),
                "leaks": [asdict(r) for r in self.leaks], "crashes": [asdict(r) for r in self.crashes],
                "guarded": [asdict(r) for r in self.results if r.verdict == "guarded"]}


def render_attack_action(attack: Attack, parser_name: str) -> str | None:
    """The action text of ``attack`` in the env's format, or ``None`` if it cannot be written.

    The tag format carries one string per ``<answer>`` tag, so only attacks whose answer
    calls are ``{"answer": <text or number>}`` can be written in it.
    """
    if parser_name == "hermes":
        return "".join(f'<tool_call>{{"name": "{ANSWER_TOOL}", "arguments": {raw}}}</tool_call>'
                       for raw in attack.raw_arguments)
    if parser_name == "tags":
        parts = []
        for raw in attack.raw_arguments:
            try:
                args = json.loads(raw)
            except ValueError:
                return None
            if not isinstance(args, dict) or set(args) != {"answer"} or not isinstance(args["answer"], (str, int, float)) \
                    or isinstance(args["answer"], bool) or raw.count('"answer"') != 1:
                return None
            parts.append(f"<answer>{args['answer']}</answer>")
        return "".join(parts)
    return None


def _scorer_level(env: Any, oracle: OracleAnswer, attack: Attack) -> tuple[float | None, str | None, str | None]:
    if attack.arguments is None:
        return None, None, None
    problem = answer_schema_problem(env, attack.arguments, oracle.task)
    try:
        reward, _ = score_answer(env, attack.arguments, oracle.task)
    except Exception as e:  # noqa: BLE001 - reported per attack
        return None, f"{type(e).__name__}: {e}", problem
    return reward, None, problem


class _Episode:
    """An episode of one task that attacks are played in.

    An attack that the env turns away without ending the episode (a parse error, a
    schema error) leaves it running, and the next attack is played in the same episode;
    a new one (same seed, same task) starts only when the last one ended. This keeps the
    audit of envs with costly resets (a sandbox per episode) affordable.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.live_seed: int | None = None

    def play(self, oracle: OracleAnswer, attack: Attack) -> tuple[float | None, str, bool]:
        base = base_env(self.env)
        action = render_attack_action(attack, base.parser.name)
        if action is None:
            return None, f"not expressible with the {base.parser.name} parser", False
        if self.live_seed != oracle.seed:
            self.env.reset(seed=oracle.seed)
            self.live_seed = oracle.seed
            if base.task.task_id != oracle.task.task_id:
                raise RuntimeError(f"reset(seed={oracle.seed}) gave task {base.task.task_id}, expected "
                                   f"{oracle.task.task_id}: the env is not deterministic in its seed")
        try:
            _, reward, terminated, truncated, info = self.env.step(action)
        except Exception:  # noqa: BLE001 - an exception here would be a lost episode in training
            self.live_seed = None
            return None, traceback.format_exc(limit=3), True
        if terminated or truncated:
            self.live_seed = None
        statuses = [r["status"] for r in info.get("tool_results", []) if r["name"] == ANSWER_TOOL]
        note = f"answer status {','.join(statuses) or 'none'}" + (", episode ended" if terminated or truncated else "")
        return float(reward), note, False


def _verdict(scorer: float | None, episode: float | None, crashed: bool) -> Verdict:
    if crashed:
        return "crash"
    if episode is not None and episode > 0:
        return "leak"
    if scorer is not None and scorer > 0:
        return "guarded"
    return "ok"


def audit_reward(env_id: str, tasks: int = 20, seed: int = 0, *, env_kwargs: dict[str, Any] | None = None,
                 env: Any = None) -> AuditReport:
    """Run the kit against ``tasks`` tasks (seeds ``seed .. seed+tasks-1``) of ``env_id``.

    Pass ``env`` to audit an env object you built (it is not closed); else one is made.
    """
    own = env is None
    env = gym.make(env_id, **(env_kwargs or {})) if own else env
    report = AuditReport(env_id, tasks=tasks)
    try:
        if is_judged(env):  # a judged answer gets the judge kit (agentgym.readiness.judge_env_audit)
            return as_audit_report(audit_judged_env(env_id, tasks, seed, env=env, ablate=False))
        oracles: list[OracleAnswer] = []
        for i in range(tasks):
            try:
                oracles.append(oracle_answer(env, seed + i))
            except OracleFailedError as e:
                report.oracle_failures.append(str(e))
        pool = [v for o in oracles for v in o.arguments.values()]
        episode = _Episode(env)
        for o in oracles:
            for attack in build_attacks(o.arguments, o.question, pool):
                scorer, error, problem = _scorer_level(env, o, attack)
                paid, note, crashed = episode.play(o, attack)
                report.results.append(AttackResult(o.task.task_id, attack.name, attack.category, scorer, error,
                                                   problem, paid, note, _verdict(scorer, paid, crashed)))
    finally:
        if own:
            env.close()
            run_sync(aclose_shared_resources())
    return report
