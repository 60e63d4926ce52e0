"""The hardened rubric judge: one answer in, a reward or a judge failure out.

:meth:`Judge.grade` runs an answer through the defences in a fixed order, each one
switchable (:class:`JudgeDefences`) so the audit can show what each one stops:

1. ``normalise`` — NFKC, invisible and bidirectional controls out, look-alikes folded
   (:mod:`~agentgym.judges.normalise`); every later step reads this text;
2. ``length_cap`` — an answer over ``max_answer_chars`` is refused (reward 0);
3. ``neutralise`` — text addressed to the judge (:mod:`~agentgym.judges.neutralise`) makes
   the answer refused (``on_injection="zero"``) or is cut out (``"strip"``);
4. ``echo`` — an answer that mostly restates the question or stuffs the rubric's words is
   refused (:mod:`~agentgym.judges.echo`);
5. ``checks_gate`` — the task's verifiable checks run; a check score of 0 refuses the
   answer, otherwise it caps the judge's score (:mod:`~agentgym.judges.checks`);
6. ``quote`` — the answer goes to the judge between fences with a per-call random token,
   fence-like runs escaped (:mod:`~agentgym.judges.prompt`);
7. ``strict_verdict`` — the reply must fit the verdict schema; the score is computed from
   the marks (:mod:`~agentgym.judges.verdict`).

A refused answer never reaches the judge. A judge that does not answer, times out or
replies with something that is not a verdict raises
:class:`~agentgym.judges.errors.JudgeUnavailable` after the retries of :attr:`Judge.policy`
(the project's one retry policy; inside a tool call the judge joins the call's budget):
that is infrastructure, never 0 and never 1. ``calibrate`` runs the calibration items
when the judge is opened and refuses a judge that disagrees with them.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from agentgym.judges.backends import JudgeBackend, SamplingSettings
from agentgym.judges.calibration import CALIBRATION_ITEMS, CalibrationItem, calibration_digest
from agentgym.judges.checks import CheckResult, VerifiableChecks, gate
from agentgym.judges.echo import measure_echo
from agentgym.judges.errors import JudgeRefused, JudgeUnavailable
from agentgym.judges.neutralise import find_injections, strip_injections
from agentgym.judges.normalise import normalise_answer
from agentgym.judges.prompt import escape_fences, new_fence_token, prompt_digest, render_prompt
from agentgym.judges.rubric import Rubric
from agentgym.judges.verdict import lenient_score, parse_verdict, verdict_json_schema
from agentgym.reliability import RetryPolicy, call_budget, current_budget, remaining_s, retrying

__all__ = ["JudgeDefences", "DEFENCES", "Judgement", "Judge"]

DEFENCES: tuple[str, ...] = ("normalise", "length_cap", "neutralise", "echo", "checks_gate", "quote",
                             "strict_verdict", "calibrate")
"""The switchable defences, in pipeline order."""


@dataclass(frozen=True)
class JudgeDefences:
    """Which defences a :class:`Judge` applies (all on by default; turning one off is
    for the audit's ablation and for tests, never for training).

    Attributes:
        normalise, length_cap, neutralise, echo, checks_gate, quote, strict_verdict,
            calibrate: the defences of the module docstring.
        on_injection: ``"zero"`` refuses an answer addressing the judge; ``"strip"``
            judges it with that text cut out.
        max_answer_chars: the length cap (on the normalised text).
        max_restated: the largest share of 4-grams taken from the question or rubric.
        max_stuffed: the largest share of words that are the rubric's content words.
    """

    normalise: bool = True
    length_cap: bool = True
    neutralise: bool = True
    echo: bool = True
    checks_gate: bool = True
    quote: bool = True
    strict_verdict: bool = True
    calibrate: bool = True
    on_injection: Literal["zero", "strip"] = "zero"
    max_answer_chars: int = 3000
    max_restated: float = 0.5
    max_stuffed: float = 0.5

    def __post_init__(self) -> None:
        if self.on_injection not in ("zero", "strip"):
            raise ValueError(f"Expected on_injection 'zero' or 'strip', actual value: {self.on_injection!r}")
        if self.max_answer_chars < 1 or not 0 < self.max_restated <= 1 or not 0 < self.max_stuffed <= 1:
            raise ValueError(f"Expected max_answer_chars >= 1 and echo limits in (0, 1], actual: {self}")

    def without(self, *names: str) -> "JudgeDefences":
        """These defences with ``names`` turned off."""
        unknown = set(names) - set(DEFENCES)
        if unknown:
            raise ValueError(f"Expected defence names from {DEFENCES}, actual: {sorted(unknown)}")
        return replace(self, **{n: False for n in names})


@dataclass(frozen=True)
class Judgement:
    """The outcome of grading one answer.

    Attributes:
        reward: the final reward in [0, 1] (the judge's score capped by the checks).
        judge_score: the judge's own score, or ``None`` when it was not asked.
        refused: why the answer was refused without a judge call (``None`` if it was not).
        marks: the judge's mark per criterion.
        findings: the patterns of text addressed to the judge that were found.
        checks: the verifiable checks' result, if any ran.
        retries: judge calls retried after a failure.
    """

    reward: float
    judge_score: float | None = None
    refused: str | None = None
    marks: dict[str, bool] = field(default_factory=dict)
    findings: tuple[str, ...] = ()
    checks: CheckResult | None = None
    retries: int = 0

    def diagnostics(self) -> dict[str, Any]:
        """The flat fields an episode's ``info`` carries."""
        out: dict[str, Any] = {"judge_score": self.judge_score, "judge_refused": self.refused,
                               "judge_marks": dict(self.marks), "judge_findings": list(self.findings),
                               "judge_retries": self.retries}
        if self.checks is not None:
            out.update(check_score=self.checks.score, checks_failed=list(self.checks.failed))
        return out


class Judge:
    """A rubric judge over a backend, hardened by :class:`JudgeDefences`.

    Args:
        backend: where replies come from (:class:`~agentgym.judges.OpenAIChatBackend`,
            :class:`~agentgym.judges.TransformersBackend`, or a scripted test double).
        defences: which defences apply.
        sampling: the judge's sampling settings (fingerprinted).
        policy: attempts and deadline of one grading call (joins the caller's budget
            when one is open, e.g. the answer tool's).
        timeout_s: the limit of one judge request.
        calibration: the items :meth:`open` grades.
    """

    def __init__(self, backend: JudgeBackend, *, defences: JudgeDefences = JudgeDefences(),
                 sampling: SamplingSettings = SamplingSettings(),
                 policy: RetryPolicy = RetryPolicy(attempts=3, initial_s=0.5, max_wait_s=4.0, deadline_s=180.0),
                 timeout_s: float = 60.0, calibration: tuple[CalibrationItem, ...] = CALIBRATION_ITEMS) -> None:
        if timeout_s <= 0:
            raise ValueError(f"Expected timeout_s > 0, actual value: {timeout_s}")
        self.backend = backend
        self.defences = defences
        self.sampling = sampling
        self.policy = policy
        self.timeout_s = timeout_s
        self.calibration = calibration
        self._opened = False
        self._open_lock: asyncio.Lock | None = None

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        """Grade the calibration items (when ``calibrate`` is on) and refuse the judge
        if it disagrees with any; later calls return at once."""
        if self._opened:
            return
        self._open_lock = self._open_lock or asyncio.Lock()
        async with self._open_lock:
            if self._opened:
                return
            if self.defences.calibrate:
                wrong = []
                for item in self.calibration:
                    got = await self._grade(item.question, item.answer, item.rubric, None)
                    if abs(got.reward - item.expected) > item.tolerance:
                        wrong.append(f"{item.name}: expected {item.expected:.2f}, judged {got.reward:.2f}")
                if wrong:
                    raise JudgeRefused(f"the judge {self.backend.identity()} disagrees with {len(wrong)} of "
                                       f"{len(self.calibration)} calibration items ({'; '.join(wrong)}); "
                                       "use another judge model or settings")
            self._opened = True

    async def aclose(self) -> None:
        await self.backend.aclose()

    def fingerprint_fields(self) -> dict[str, Any]:
        """The judge's identity, sampling, defences, prompt and calibration: another
        judge is another reward, so all of it is in the env's fingerprint."""
        return {"backend": self.backend.identity(), "sampling": self.sampling.to_dict(),
                "defences": asdict(self.defences), "calibration": calibration_digest(self.calibration),
                "prompt": prompt_digest(), "timeout_s": self.timeout_s,
                "policy": {"attempts": self.policy.attempts, "deadline_s": self.policy.deadline_s}}

    # ------------------------------------------------------------------ grading
    async def grade(self, question: str, answer: str, rubric: Rubric,
                    checks: VerifiableChecks | None = None) -> Judgement:
        """Grade ``answer`` to ``question`` against ``rubric``, gated by ``checks``.

        Raises:
            JudgeUnavailable: the judge gave no verdict within the retry policy.
            JudgeRefused: the judge failed calibration when it was opened.
        """
        await self.open()
        return await self._grade(question, answer, rubric, checks)

    async def _grade(self, question: str, answer: str, rubric: Rubric,
                     checks: VerifiableChecks | None) -> Judgement:
        d = self.defences
        text = normalise_answer(answer).text if d.normalise else answer
        if d.length_cap and len(text) > d.max_answer_chars:
            return Judgement(0.0, refused=f"over the length cap ({len(text)} > {d.max_answer_chars} characters)")
        findings: tuple[str, ...] = ()
        if d.neutralise:
            stripped, found = strip_injections(text)
            findings = tuple(f.pattern for f in found)
            if found and d.on_injection == "zero":
                return Judgement(0.0, refused="addresses the judge: " + ", ".join(sorted(set(findings))),
                                 findings=findings)
            text = stripped
        if d.echo:
            echo = measure_echo(text, question, rubric.text())
            if echo.restated > d.max_restated or echo.stuffed > d.max_stuffed:
                return Judgement(0.0, refused=f"echoes the question or rubric (restated {echo.restated:.2f}, "
                                              f"stuffed {echo.stuffed:.2f})", findings=findings)
        checked = checks(text) if checks is not None and d.checks_gate else None
        if checked is not None and checked.score == 0.0:
            return Judgement(0.0, refused="fails its verifiable checks: " + "; ".join(checked.failed),
                             findings=findings, checks=checked)
        quoted = escape_fences(text) if d.quote else text
        prompt = render_prompt(question, rubric, quoted, token=new_fence_token() if d.quote else "")
        score, marks, retries = await self._ask(prompt.messages, rubric)
        return Judgement(gate(score, checked), score, None, marks, findings, checked, retries)

    async def _ask(self, messages: list[dict[str, str]], rubric: Rubric) -> tuple[float, dict[str, bool], int]:
        schema = verdict_json_schema(rubric)
        outer = current_budget()
        before = outer.retries if outer is not None else 0
        with call_budget(self.policy) as budget:
            async for attempt in retrying(JudgeUnavailable):
                with attempt:
                    reply = await self._reply(messages, schema)
                    if not self.defences.strict_verdict:
                        return lenient_score(reply, rubric), {}, budget.retries - before
                    verdict = parse_verdict(reply, rubric)
                    marks = {k: v.met for k, v in verdict.criteria.items()}
                    return rubric.score(marks), marks, budget.retries - before
        raise AssertionError("unreachable: retrying re-raises when it gives up")

    async def _reply(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> str:
        limit = remaining_s(self.timeout_s)
        try:
            return await asyncio.wait_for(
                self.backend.complete(messages, sampling=self.sampling, timeout_s=limit, schema=schema), limit)
        except TimeoutError as e:
            raise JudgeUnavailable(f"the judge did not reply within {limit:.3g} s") from e
