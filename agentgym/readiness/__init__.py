"""Readiness: prove an env holds load, survives faults and cannot be reward-hacked.

* :func:`run_stress` / :class:`StressConfig` — many episodes at a concurrency, the oracle
  mixed with adversarial actions, infrastructure faults injected; guarantees checked.
* :class:`FaultPlan` / :class:`FaultInjector` — fault injection through public seams.
* :func:`adversarial_actions` — the adversarial action library.
* :func:`build_attacks` / :func:`audit_reward` — the reward-hacking kit and its audit.
* :func:`score_answer` — **the scorer seam**: score any answer for an env's task, through
  the env's own ``_score``.
* :func:`build_judge_attacks` / :func:`audit_judge` / :func:`audit_judged_env` — the judge
  kit for envs whose answers a judge grades (:class:`JudgedFamily`).
"""

from agentgym.readiness.adversarial import AdversarialAction, MixedPolicy, adversarial_actions
from agentgym.readiness.audit import AttackResult, AuditReport, audit_reward
from agentgym.readiness.faults import FaultInjector, FaultPlan
from agentgym.readiness.judge_attacks import JudgeAttack, build_judge_attacks
from agentgym.readiness.judge_audit import JudgeAuditReport, JudgedItem, audit_judge
from agentgym.readiness.judge_env_audit import JudgedEnvAudit, JudgedFamily, audit_judged_env, is_judged
from agentgym.readiness.reward_kit import Attack, build_attacks
from agentgym.readiness.scoring import OracleAnswer, OracleFailedError, answer_schema_problem, oracle_answer, score_answer
from agentgym.readiness.services import RetrieverProcess
from agentgym.readiness.stress import EpisodeOutcome, StressConfig, StressReport, run_stress

__all__ = [
    "AdversarialAction", "MixedPolicy", "adversarial_actions",
    "Attack", "build_attacks", "AttackResult", "AuditReport", "audit_reward",
    "FaultPlan", "FaultInjector", "RetrieverProcess",
    "JudgeAttack", "build_judge_attacks", "JudgedItem", "JudgeAuditReport", "audit_judge",
    "JudgedFamily", "JudgedEnvAudit", "audit_judged_env", "is_judged",
    "OracleAnswer", "OracleFailedError", "score_answer", "answer_schema_problem", "oracle_answer",
    "StressConfig", "StressReport", "EpisodeOutcome", "run_stress",
]
