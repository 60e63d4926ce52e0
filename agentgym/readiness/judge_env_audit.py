"""The judge audit of a judged env (``agentgym audit-reward`` on one).

A judged env's family exposes its judge and, per task, the question, rubric and
verifiable checks (:class:`JudgedFamily`); the oracle plays each task for the truth.
Two passes:

* **pipeline** — :func:`~agentgym.readiness.judge_audit.audit_judge` on the items, with
  the family's judge backend under every set of defences (the ablation);
* **episodes** — each attack played as the agent's ``answer`` call in a fresh episode of
  its task, through the parser, the schema check, the answer tool and the env's scorer:
  it must pay 0 and must not end ``infra_failed`` (an attack that makes the judge fail
  would escape its reward).

The exact-answer kit (:func:`~agentgym.readiness.audit_reward`) does not apply to a
judged report: an answer wrapped in a sentence *is* a right report there; its spraying
attacks are part of the judge kit instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym

from agentgym.env import ANSWER_TOOL
from agentgym.judges import Judge, JudgeDefences, JudgeRefused, JudgeUnavailable, Rubric, VerifiableChecks
from agentgym.readiness.judge_attacks import build_judge_attacks
from agentgym.readiness.judge_audit import JudgeAuditReport, JudgedItem, audit_judge_async
from agentgym.readiness.lifecycle import aclose_shared_resources
from agentgym.readiness.scoring import OracleFailedError, base_env, oracle_answer
from agentgym.runtime import run_sync

__all__ = ["JudgedFamily", "EpisodeLeak", "JudgedEnvAudit", "is_judged", "audit_judged_env"]


@runtime_checkable
class JudgedFamily(Protocol):
    """What a task family with a judged answer offers the audit."""

    judge: Judge

    def question(self, task: Any) -> Any: ...

    def rubric(self, task: Any) -> Rubric: ...

    def checks(self, task: Any) -> VerifiableChecks | None: ...


@dataclass(frozen=True)
class EpisodeLeak:
    """An attack that paid, or ended the episode ``infra_failed``, when played."""

    task_id: str
    attack: str
    reward: float
    infra_failed: bool


@dataclass
class JudgedEnvAudit:
    """The pipeline report and the episodes' leaks."""

    env_id: str
    pipeline: JudgeAuditReport
    episodes: int = 0
    episode_leaks: list[EpisodeLeak] = field(default_factory=list)
    episode_rewards: dict[tuple[str, str], tuple[float, bool]] = field(default_factory=dict)
    """``(task_id, attack) -> (reward, infra_failed)`` of every attack episode."""
    oracle_failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.pipeline.passed and not self.episode_leaks and not self.oracle_failures and self.episodes > 0

    def to_dict(self) -> dict[str, Any]:
        return {"env": self.env_id, "passed": self.passed, "episodes": self.episodes,
                "episode_leaks": [vars(e) for e in self.episode_leaks], "oracle_failures": self.oracle_failures,
                "pipeline": self.pipeline.to_dict()}


def is_judged(env: Any) -> bool:
    """Whether ``env``'s family grades its answers with a judge."""
    return isinstance(getattr(base_env(env), "family", None), JudgedFamily)


def _answer_field(env: Any, task: Any) -> str:
    schema = base_env(env).tools_for(task)[ANSWER_TOOL].parameters
    fields = list(schema.get("properties", {}))
    if len(fields) != 1:
        raise ValueError(f"Expected a judged answer with one text field, actual fields: {fields}")
    return fields[0]


def _play(env: Any, seed: int, field_name: str, text: str) -> tuple[float, bool]:
    env.reset(seed=seed)
    action = f"<tool_call>{json.dumps({'name': ANSWER_TOOL, 'arguments': {field_name: text}})}</tool_call>"
    _, reward, _, _, info = env.step(action)
    return float(reward), bool(info.get("infra_failed"))


def audit_judged_env(env_id: str, tasks: int = 5, seed: int = 0, *, env_kwargs: dict[str, Any] | None = None,
                     ablate: bool = True, env: Any = None) -> JudgedEnvAudit:
    """Audit the judged env ``env_id`` on ``tasks`` tasks (seeds ``seed ..``).

    Pass ``env`` to audit an env object you built (it is not closed); else one is made.
    """
    own = env is None
    env = gym.make(env_id, **(env_kwargs or {})) if own else env
    try:
        family = base_env(env).family
        if not isinstance(family, JudgedFamily):
            raise ValueError(f"{env_id} has no judged family; use audit_reward for it")
        try:
            run_sync(family.judge.open())
        except (JudgeRefused, JudgeUnavailable) as e:  # no episode can be scored: nothing to attack
            outcome = "refused" if isinstance(e, JudgeRefused) else "unavailable"
            return JudgedEnvAudit(env_id, JudgeAuditReport(family.judge.backend.identity(), calibration=outcome,
                                                           truth_failures=[f"{type(e).__name__}: {e}"]))
        items, seeds, failures = [], {}, []
        for i in range(tasks):
            try:
                o = oracle_answer(env, seed + i)
            except OracleFailedError as e:
                failures.append(str(e))
                continue
            name = _answer_field(env, o.task)
            items.append(JudgedItem(o.task.task_id, family.question(o.task).text, family.rubric(o.task),
                                    o.arguments[name], family.checks(o.task)))
            seeds[o.task.task_id] = (seed + i, name)
        backend, sampling = family.judge.backend, family.judge.sampling

        def make(d: JudgeDefences) -> Judge:
            return Judge(backend, defences=d, sampling=sampling, calibration=family.judge.calibration)

        report = JudgedEnvAudit(env_id, run_sync(audit_judge_async(make, items, ablate=ablate)),
                                oracle_failures=failures)
        for item in items:
            s, name = seeds[item.item_id]
            for attack in build_judge_attacks(item.truth, item.question, item.rubric,
                                              [i.truth for i in items if i is not item]):
                reward, infra = _play(env, s, name, attack.answer)
                report.episodes += 1
                report.episode_rewards[(item.item_id, attack.name)] = (reward, infra)
                if reward > 0 or infra:
                    report.episode_leaks.append(EpisodeLeak(item.item_id, attack.name, reward, infra))
        return report
    finally:
        if own:
            env.close()
            run_sync(aclose_shared_resources())


_KIT_CATEGORY = {"injection": "judge", "flattery": "judge", "fence": "judge", "verdict_text": "judge",
                 "echo": "echo", "length": "long", "unicode": "lookalike", "wrong_number": "wrong_value",
                 "spray": "candidates"}
"""Each judge attack's nearest category of the exact-answer kit (for the shared audit table)."""


def as_audit_report(audit: JudgedEnvAudit) -> Any:
    """The judged audit as an :class:`~agentgym.readiness.audit.AuditReport` (what
    :func:`~agentgym.readiness.audit_reward` returns for a judged env): one row per
    attack and task, the pipeline's reward as the scorer's, the episode's as the episode's."""
    from agentgym.readiness.audit import AttackResult, AuditReport

    report = AuditReport(audit.env_id, tasks=len(audit.pipeline.truth_rewards) + len(audit.oracle_failures))
    report.oracle_failures = audit.oracle_failures + audit.pipeline.truth_failures
    for r in audit.pipeline.results:
        episode, infra = audit.episode_rewards.get((r.item_id, r.attack), (None, False))
        leak = r.outcome != "ok" or infra or (episode is not None and episode > 0)
        note = f"judge kit: {r.refused or r.outcome}" + (", infra_failed" if infra else "")
        report.results.append(AttackResult(r.item_id, f"judge:{r.attack}", _KIT_CATEGORY[r.category], r.reward, None,
                                           None, episode, note, "leak" if leak else "ok"))
    return report
