"""AnalysisReport-v0: open questions over DataAnalysis tables, answered by a judged report.

"What drives X in this table?" The agent has DataAnalysis-v1's sandboxed ``python`` tool
(the family *is* v1's, with its sandbox lease and pool) and answers with
``answer(report=...)``: a short report that names the column most strongly associated
with the target, its correlation, the rows it rests on, and a caveat
(:mod:`tasks.analysis_report`).

The reward is a judge's rubric score gated by verifiable claims
(:class:`agentgym.judges.Judge`): every number in the report is checked against the
table by code (:func:`tasks.analysis_report.check_claims`), a report with a figure that
is not a fact scores 0, and otherwise the judge's score is capped by the share of
required claims made. The judge grades inside the ``answer`` tool, so a judge that
fails is that tool's ``infra_error``: retried, then the episode is ``infra_failed``.

The judge: ``judge=`` a :class:`~agentgym.judges.Judge`, or ``judge_url=`` and
``judge_model=`` for an OpenAI-compatible server (``vllm serve``), or ``judge="honest"``
(the default: :class:`~agentgym.judges.testing.HonestJudge`, which grades by the rubric's
reference notes and needs no model; use it for tests and oracle checks, a model for
real runs). The judge's identity, sampling settings, defences and the rubric are in the
fingerprint. The judge is opened (its calibration items graded) at the first reset; a
judge that fails calibration makes that reset raise ``ConfigError``.
"""

from __future__ import annotations

import asyncio
import platform
import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from agentgym.env import ToolEnv
from agentgym.envs.data_analysis import DataAnalysisFamily
from agentgym.errors import ConfigError
from agentgym.family import ANSWER_TOOL, EpisodeView
from agentgym.judges import CheckResult, Criterion, Judge, Judgement, OpenAIChatBackend, Rubric, VerifiableChecks
from agentgym.judges.testing import GullibleJudge, HonestJudge
from agentgym.runtime import run_sync
from agentgym.tools import Tool
from sandboxes.protocol import BackendName as Backend
from tasks.analysis_report import ReportQuestion, check_claims, generate_report_question
from tasks.analysis_report.generator import MAX_REPORT_WORDS, oracle_values
from tasks.data_analysis.manifest import manifest_digest

__all__ = ["AnalysisReportEnv", "AnalysisReportFamily", "AnalysisReportTask", "report_rubric"]

_TASK_ID = re.compile(r"^ar-(\d+)$")
ScriptedJudge = Literal["honest", "gullible"]


@dataclass
class AnalysisReportTask:
    """One episode's task; ``task_id`` (``ar-<seed>``) regenerates it. The question is
    drawn when the episode starts, off the event loop (pandas work)."""

    task_id: str
    seed: int
    scope: str = "report"
    question: ReportQuestion | None = None


def report_rubric(q: ReportQuestion | None) -> Rubric:
    """The rubric of a report question (``None``: its shape, without references)."""
    d = q.driver if q is not None else None
    names = (d.column, d.column.replace("_", " ")) if d else ()
    return Rubric((
        Criterion("names_driver", "Names the numeric column most strongly associated with the target.", 2.0, names),
        Criterion("quantifies", "Gives that correlation coefficient to two decimals.", 1.0,
                  (f"{d.r:.2f}",) if d else ()),
        Criterion("sample", "Says how many rows that figure rests on.", 1.0, (str(d.n),) if d else ()),
        Criterion("caveat", "Adds a caveat, e.g. that association is not causation or a third variable may "
                  "explain it.", 1.0, ("causation|causal|third variable|confound",)),
    ), name="analysis-report-v0", notes=("Numbers in the report are checked against the table by code.",))


def _judge(judge: Judge | ScriptedJudge | None, judge_url: str | None, judge_model: str | None) -> Judge:
    if judge_url is not None or judge_model is not None:
        if judge is not None or not (judge_url and judge_model):
            raise ConfigError("Expected judge_url and judge_model together, and no judge= beside them; actual: "
                              f"judge={judge!r}, judge_url={judge_url!r}, judge_model={judge_model!r}")
        return Judge(OpenAIChatBackend(judge_url, judge_model))
    if judge is None or judge == "honest":
        return Judge(HonestJudge())
    if judge == "gullible":
        return Judge(GullibleJudge())
    if isinstance(judge, Judge):
        return judge
    raise ConfigError(f"Expected judge= a Judge, 'honest' or 'gullible', actual value: {judge!r}")


class AnalysisReportFamily(DataAnalysisFamily):
    """DataAnalysis-v1's family (sandbox, ``python`` tool) with report questions and a
    judged ``answer(report)``.

    Args:
        judge: a :class:`~agentgym.judges.Judge`, or ``"honest"`` / ``"gullible"`` for
            the scripted judges (default ``"honest"``).
        judge_url, judge_model: an OpenAI-compatible judge server instead.
        backend, python_timeout_s: the sandbox's, as in DataAnalysis-v1.
    """

    name = "AnalysisReport"
    version = 0

    def __init__(self, *, judge: Judge | ScriptedJudge | None = None, judge_url: str | None = None,
                 judge_model: str | None = None, backend: Backend | None = None,
                 python_timeout_s: float = 30.0) -> None:
        super().__init__(backend=backend, python_timeout_s=python_timeout_s)
        self.judge = _judge(judge, judge_url, judge_model)
        self._judged: dict[tuple[str, str], Judgement] = {}

    # ---- tasks ----------------------------------------------------------------
    def _question(self, scope: str, seed: int) -> ReportQuestion:  # type: ignore[override]
        return generate_report_question(seed)

    def new_task(self, rng: np.random.Generator, split: str, options: dict[str, Any]) -> AnalysisReportTask:
        if "task_id" in options:
            match = _TASK_ID.match(str(options["task_id"]))
            if match is None:
                raise ConfigError(f"Expected a task_id like 'ar-123', actual value: {options['task_id']!r}")
            seed = int(match.group(1))
        else:
            seed = int(rng.integers(0, 2**62))
        return AnalysisReportTask(f"ar-{seed}", seed)

    def question(self, task: AnalysisReportTask) -> ReportQuestion:
        """The task's question (drawn now if the episode has not started it)."""
        if task.question is None:
            task.question = self._question(task.scope, task.seed)
        return task.question

    async def open_episode(self, task: AnalysisReportTask) -> None:  # type: ignore[override]
        """Open the judge (its calibration runs once, at the first episode), then lease
        the sandbox as v1 does."""
        await self.judge.open()
        await super().open_episode(task)  # type: ignore[arg-type]

    async def close_episode(self) -> None:
        self._judged.clear()
        await super().close_episode()

    async def aclose(self) -> None:
        await super().aclose()
        await self.judge.aclose()

    # ---- tools ----------------------------------------------------------------
    def tools(self, task: AnalysisReportTask | None) -> dict[str, Tool]:  # type: ignore[override]
        async def answer(report: str) -> str:
            await self.grade(task, report)
            return "Report received."

        deadline = self.judge.policy.deadline_s or 180.0
        return {
            "python": super().tools(None)["python"],
            ANSWER_TOOL: Tool(ANSWER_TOOL, f"Submit your report (at most {MAX_REPORT_WORDS} words). Ends the episode.",
                              {"type": "object", "properties": {"report": {"type": "string"}},
                               "required": ["report"], "additionalProperties": False},
                              answer, max_output_chars=200, timeout_s=deadline, max_retries=2),
        }

    # ---- judging --------------------------------------------------------------
    def checks(self, task: AnalysisReportTask) -> VerifiableChecks:
        """The task's verifiable checks (:func:`tasks.analysis_report.check_claims`)."""
        q = self.question(task)

        def check(report: str) -> CheckResult:
            c = check_claims(report, q)
            return CheckResult(c.score, c.made, c.failed)

        return check

    def rubric(self, task: AnalysisReportTask) -> Rubric:
        return report_rubric(self.question(task))

    async def grade(self, task: AnalysisReportTask, report: str, judge: Judge | None = None) -> Judgement:
        """Judge ``report`` for ``task`` (with ``judge``, default the family's); the
        verdict is kept for :meth:`score`. Raises ``JudgeUnavailable`` (an ``InfraError``)."""
        q = await asyncio.to_thread(self.question, task)
        judgement = await (judge or self.judge).grade(q.text, report, self.rubric(task), self.checks(task))
        if judge is None:
            self._judged[(task.task_id, report)] = judgement
        return judgement

    # ---- scoring --------------------------------------------------------------
    def score(self, task: AnalysisReportTask, answer: dict[str, Any]) -> tuple[float, dict[str, Any]]:  # type: ignore[override]
        report = answer.get("report")
        if not isinstance(report, str):
            return 0.0, {"judge_refused": "the report is not text"}
        judgement = self._judged.pop((task.task_id, report), None)
        if judgement is None:  # scored outside an episode (the reward audit's scorer seam)
            judgement = run_sync(self.grade(task, report))
        q = self.question(task)
        return judgement.reward, {"table": q.table, "target": q.target, **judgement.diagnostics()}

    def task_facts(self, task: AnalysisReportTask) -> dict[str, Any]:  # type: ignore[override]
        """A report question's table and target (it has no tier or template, unlike v1's)."""
        q = task.question
        return {} if q is None else {"table": q.table, "target": q.target}

    # ---- prompts --------------------------------------------------------------
    def system_prompt(self) -> str:
        return ("You are a data analyst. Investigate the CSV file with pandas through the python tool, then submit "
                "a short, factual report with the answer tool. Quote only figures you computed.")

    def prompt(self, task: AnalysisReportTask) -> str:  # type: ignore[override]
        q = self.question(task)
        header = next(iter(q.files.values())).split(b"\n", 1)[0].decode()
        return f"Files in your working directory:\n- {q.file} ({q.rows} rows): {header}\n\nQuestion: {q.text}"

    # ---- fingerprint ----------------------------------------------------------
    def fingerprint_fields(self) -> dict[str, Any]:
        import pandas

        return {"task_source": "tasks.analysis_report/v0", "manifest_sha256": manifest_digest(),
                "rubric": report_rubric(None).digest(), "max_report_words": MAX_REPORT_WORDS,
                "judge": self.judge.fingerprint_fields(), "python_timeout_s": self.python_timeout_s,
                "host_versions": {"python": platform.python_version(), "numpy": np.__version__,
                                  "pandas": pandas.__version__},
                "sandbox": self._facts_for_fingerprint()}

    # ---- oracle ---------------------------------------------------------------
    def oracle_action(self, task: AnalysisReportTask, episode: EpisodeView) -> str:  # type: ignore[override]
        """Compute the driver in the sandbox, then report what the sandbox printed."""
        import json

        q = self.question(task)
        ran = [r for r in episode.results if r.name == "python" and r.status == "ok"]
        if not ran:
            return f"<tool_call>{json.dumps({'name': 'python', 'arguments': {'code': q.oracle_code()}})}</tool_call>"
        column, r, n = oracle_values(ran[-1].output.split("\n[stderr]\n")[0])
        call = {"name": ANSWER_TOOL, "arguments": {"report": q.report_from(column, r, n)}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"


class AnalysisReportEnv(ToolEnv):
    """Open analysis questions answered by a judged report: ``ToolEnv(AnalysisReportFamily(...))``,
    registered as ``agentgym/AnalysisReport-v0``.

    Args:
        max_turns: steps before truncation (the oracle needs two).
        **kwargs: ``AnalysisReportFamily``'s (``judge``, ``judge_url``, ``judge_model``,
            ``backend``, ``python_timeout_s``) and :class:`agentgym.ToolEnv`'s.
    """

    family_class = AnalysisReportFamily

    def __init__(self, *, max_turns: int = 10, **kwargs: Any) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        self.family: AnalysisReportFamily
