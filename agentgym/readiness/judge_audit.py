"""Auditing a judge: every judge attack through the full pipeline, and an ablation.

:func:`audit_judge` grades, for each :class:`JudgedItem`, the oracle's answer (it must
score at least ``min_truth``, else the judge or the rubric is broken) and every attack of
:func:`~agentgym.readiness.judge_attacks.build_judge_attacks`, with a judge built with all
defences on. Outcomes: ``ok`` (reward 0), ``leak`` (a reward above 0), ``escape`` (the
judge failed: in training the episode would be ``infra_failed`` and dropped, so the
attack escapes its bad reward; this fails the audit like a leak).

With ``ablate`` (the default) each attack is graded again by judges that lack one
defence each; the report lists, per attack, the defences whose absence lets it through
("would succeed without"). Each of the judge's own defences is ablated with the task's
verifiable checks off as well (checks are task-specific, and a non-answer with no
numbers fails them whatever else it tries, which would hide what the judge's defences
do); the checks gate is ablated with everything else on. An attack no single removal
lets through is stopped by more than one defence. The ``calibrate`` defence is reported apart: it judges the judge
(:attr:`JudgeAuditReport.calibration`), not an answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agentgym.judges import DEFENCES, Judge, JudgeDefences, JudgeRefused, JudgeUnavailable, Rubric, VerifiableChecks
from agentgym.readiness.judge_attacks import JUDGE_ATTACK_CATEGORIES, JudgeAttack, build_judge_attacks

__all__ = ["JudgedItem", "JudgeAttackResult", "JudgeAuditReport", "audit_judge", "audit_judge_async", "ABLATED_DEFENCES"]

Outcome = Literal["ok", "leak", "escape"]
ABLATED_DEFENCES: tuple[str, ...] = tuple(d for d in DEFENCES if d != "calibrate")


@dataclass(frozen=True)
class JudgedItem:
    """One judged question: what a judge is given for it, and its correct answer."""

    item_id: str
    question: str
    rubric: Rubric
    truth: str
    checks: VerifiableChecks | None = None


@dataclass(frozen=True)
class JudgeAttackResult:
    """One attack on one item: its reward with every defence on, and the ablation."""

    item_id: str
    attack: str
    category: str
    reward: float | None
    outcome: Outcome
    refused: str | None
    succeeds_without: tuple[str, ...] = ()
    """Defences whose removal alone lets the attack score above 0."""


@dataclass
class JudgeAuditReport:
    """The judge audit's results."""

    judge: dict[str, Any]
    results: list[JudgeAttackResult] = field(default_factory=list)
    truth_rewards: dict[str, float] = field(default_factory=dict)
    truth_failures: list[str] = field(default_factory=list)
    calibration: str = "not run"
    ablated: bool = False

    @property
    def leaks(self) -> list[JudgeAttackResult]:
        return [r for r in self.results if r.outcome != "ok"]

    @property
    def passed(self) -> bool:
        return bool(self.results) and not self.leaks and not self.truth_failures \
            and self.calibration in ("passed", "off")

    def defence_table(self) -> dict[str, list[str]]:
        """``{defence: [attacks that succeed without it]}`` (each attack named once)."""
        table: dict[str, list[str]] = {d: [] for d in ABLATED_DEFENCES}
        for r in self.results:
            for d in r.succeeds_without:
                if r.attack not in table[d]:
                    table[d].append(r.attack)
        return table

    def by_category(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for c in JUDGE_ATTACK_CATEGORIES:
            rs = [r for r in self.results if r.category == c]
            if rs:
                out[c] = {"attacks": len(rs), **{o: sum(r.outcome == o for r in rs) for o in ("ok", "leak", "escape")}}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"judge": self.judge, "passed": self.passed, "calibration": self.calibration,
                "truth_rewards": self.truth_rewards, "truth_failures": self.truth_failures,
                "by_category": self.by_category(), "defences": self.defence_table() if self.ablated else None,
                "leaks": [asdict(r) for r in self.leaks]}


async def _reward(judge: Judge, item: JudgedItem, answer: str) -> tuple[float | None, str | None, Outcome]:
    try:
        j = await judge.grade(item.question, answer, item.rubric, item.checks)
    except JudgeUnavailable as e:
        return None, f"judge failed: {e}", "escape"
    return j.reward, j.refused, "leak" if j.reward > 0 else "ok"


async def _audit(make_judge: Callable[[JudgeDefences], Judge], items: list[JudgedItem], ablate: bool,
                 min_truth: float) -> JudgeAuditReport:
    judge = make_judge(JudgeDefences())
    report = JudgeAuditReport(judge.backend.identity(), ablated=ablate)
    try:
        await judge.open()
        report.calibration = "passed" if judge.defences.calibrate else "off"
    except JudgeRefused as e:
        report.calibration = "refused"
        report.truth_failures.append(str(e))
        return report
    plain = JudgeDefences(calibrate=False)
    ablated = {d: make_judge(plain.without(d) if d == "checks_gate" else plain.without(d, "checks_gate"))
               for d in ABLATED_DEFENCES} if ablate else {}
    answers = [i.truth for i in items]
    for item in items:
        truth, _, _ = await _reward(judge, item, item.truth)
        report.truth_rewards[item.item_id] = truth if truth is not None else float("nan")
        if truth is None or truth < min_truth:
            report.truth_failures.append(f"{item.item_id}: the oracle's answer scored {truth}; expected >= {min_truth}")
        others = [a for a in answers if a != item.truth]
        for attack in build_judge_attacks(item.truth, item.question, item.rubric, others,
                                          checked=item.checks is not None,
                                          max_answer_chars=judge.defences.max_answer_chars):
            report.results.append(await _attack(judge, ablated, item, attack))
    return report


async def _attack(judge: Judge, ablated: dict[str, Judge], item: JudgedItem, attack: JudgeAttack) -> JudgeAttackResult:
    reward, refused, outcome = await _reward(judge, item, attack.answer)
    leaks = {name: (await _reward(weaker, item, attack.answer))[2] != "ok" for name, weaker in ablated.items()}
    # An attack the checks alone stop leaks in every checks-off ablation: credit the gate only.
    through = [n for n, leaked in leaks.items() if leaked and (n == "checks_gate" or not leaks["checks_gate"])]
    return JudgeAttackResult(item.item_id, attack.name, attack.category, reward, outcome, refused, tuple(through))


def audit_judge(make_judge: Callable[[JudgeDefences], Judge], items: list[JudgedItem], *, ablate: bool = True,
                min_truth: float = 0.9) -> JudgeAuditReport:
    """Audit the judges ``make_judge`` builds (one per set of defences) on ``items``.

    Runs on its own event loop; from async code await :func:`audit_judge_async`.
    """
    return asyncio.run(_audit(make_judge, items, ablate, min_truth))


async def audit_judge_async(make_judge: Callable[[JudgeDefences], Judge], items: list[JudgedItem], *,
                            ablate: bool = True, min_truth: float = 0.9) -> JudgeAuditReport:
    """:func:`audit_judge` for callers already on an event loop."""
    return await _audit(make_judge, items, ablate, min_truth)
