"""DataAnalysis-v1: pandas questions over bundled real tables, answered from a sandbox.

Each episode draws a question from :mod:`tasks.data_analysis` (a template, a fresh
variant of one or two real tables, and a ground truth recomputed on that variant). Only
the CSV files go into the episode's sandbox; the question's truth, seed and reference
code stay on the host. The agent has two tools:

- ``python(code)``: runs in the episode's sandbox (state kept across turns), leased
  from a process-wide :class:`sandboxes.SandboxPool` at reset and released at the end.
  The pool picks Docker when an engine answers and the process fallback otherwise
  (``AGENTGYM_SANDBOX=process`` forces it). Only a sandbox failure the pool cannot hide
  raises ``InfraError`` (the episode is flagged ``infra_failed``). An interpreter that
  agent code ended — exit, crash, OOM, deadline kill, a replay its non-deterministic
  cells made fail — is the agent's outcome: the episode goes on, and the observation says
  what was lost.
- ``answer(...)``: the typed final answer; its JSON schema is the question's (``value``
  or named fields). Scoring is strict and by code (see ``tasks.data_analysis.grading``).

The fingerprint records the table manifest, the templates, the variant settings and
the sandbox's backend and library versions (pandas and numpy can differ between host
and sandbox image, and that changes float results at the last digits).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from agentgym.env import ToolEnv
from agentgym.family import ANSWER_TOOL, EpisodeView, TaskFamily
from agentgym.resources import shared_resources
from agentgym.errors import ConfigError, InfraError
from agentgym.reliability import RetryPolicy, call_budget, retrying
from agentgym.tools import Tool, ToolReply
from tasks.data_analysis.generator import GeneratorConfig, Question, generate_question
from tasks.data_analysis.grading import score_answer
from tasks.data_analysis.manifest import manifest_digest
from tasks.data_analysis.reference import answer_arguments
from tasks.data_analysis.tiers import TEMPLATES, template_by_id

__all__ = ["DataAnalysisEnv", "DataAnalysisFamily", "DataAnalysisTask", "PYTHON_OUTPUT_CHARS", "cell_reply", "format_exec_result", "name_hint"]

from sandboxes.protocol import BackendName as Backend

PYTHON_OUTPUT_CHARS = 10_000
"""The python tool's output cap: above what a cell reply can reach with the sandbox's
default limits (3 x 3,072 bytes of streams or error, plus notes), so the sandbox's cut is
the only one and the executor never cuts a cell's output a second time."""

EPISODE_START = RetryPolicy(attempts=3, initial_s=0.2, max_wait_s=2.0, deadline_s=180.0)
"""One episode start (a sandbox leased, the files uploaded): three tries in all, by this
env and the pool together, within three minutes; then the episode is ``infra_failed``."""

_TASK_ID = re.compile(r"^da-(all|t[1-4]|[a-z0-9_]+)-(\d+)$")


@dataclass
class DataAnalysisTask:
    """One episode's task. ``task_id`` (``da-<scope>-<seed>``) regenerates it exactly.

    ``question`` is generated when the episode starts, in a worker thread: drawing a
    question runs pandas on the host for tens of milliseconds, which must not stall the
    event loop that every env's tool calls share.
    """

    task_id: str
    scope: str
    seed: int
    question: Question | None = None


# ---- formatting ------------------------------------------------------------------

def format_exec_result(result: Any) -> str:
    """What the agent sees for an ``ok`` cell: stdout, then stderr, then the value."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.value is not None:
        parts.append(f"Out: {result.value}")
    return "\n".join(parts) if parts else "(no output)"


_FAILURES = {
    "error": "your code raised an exception",
    "timeout": "your code ran past its time limit and was interrupted",
    "oom": "your code ran out of memory",
    "crash": "the interpreter crashed while running your code",
}


def cell_reply(result: Any) -> ToolReply:
    """What the agent sees of a cell, with the sandbox's status carried as a value.

    Every non-ok status, and every loss of state, is caused by the agent's own code (the
    sandboxes contract): the episode goes on and the agent is told what it lost."""
    note = (f"\n[Your interpreter was restarted: {result.state_lost_reason or 'its state was lost'}. "
            "Variables and imports from earlier calls are gone.]" if result.state_lost else "")
    if result.status == "timeout":
        return ToolReply(_failure_text(result) + note, "timeout")
    if result.status != "ok":
        return ToolReply(_failure_text(result) + note, "agent_error")
    return ToolReply(format_exec_result(result) + note)


def _failure_text(result: Any) -> str:
    lines = [f"{_FAILURES.get(result.status, result.status)}: {result.error or ''}".rstrip(": ")]
    if result.stdout:
        lines.append("[stdout]\n" + result.stdout.rstrip("\n"))
    if result.stderr:
        lines.append("[stderr]\n" + agent_traceback(result.stderr).rstrip("\n"))
    return "\n".join(lines)


_LOOKUP_ERRORS = ("FileNotFoundError", "KeyError")
"""Exceptions that mean the code named a file or column the working directory lacks."""


def name_hint(error: str | None, files: Sequence[Any]) -> str | None:
    """The working directory's listing (as the prompt gives it) when a cell failed on a
    name lookup (``error`` is the sandbox's ``Exception: message`` line), else None.

    Why: a mistyped file or column name (``'nile'`` for ``nile.csv``) was the commonest
    mistake of the DataAnalysis CPU baseline on held-out tables, and pandas' error names
    only what the agent wrote. A person would look at the directory and the header
    again; the listing next to the error makes the fix a copy from the observation
    instead of from a prompt hundreds of tokens back. It repeats what the prompt already
    says, so it tells the agent nothing about the answer.
    """
    kind = (error or "").split(":", 1)[0].strip()
    if kind not in _LOOKUP_ERRORS or not files:
        return None
    listing = "\n".join(f"- {f.describe()}" for f in files)
    return f"[hint: {kind} names something that does not exist. Files in your working directory:]\n{listing}"


OBSERVATION_FORMAT = "tracebacks: the agent's frames, library frames counted/1"
"""Recorded in the fingerprint: how a failed cell is rendered changes what the agent sees."""

_FRAME = re.compile(r'^  File "([^"]*)", line \d+')


def agent_traceback(stderr: str) -> str:
    """``stderr`` with each Python traceback reduced to the agent's own frames
    (``<cell-N>``); each run of library frames becomes one line that counts them.

    Why: a wrong file name in ``pd.read_csv`` raises through nine pandas frames, about
    1,100 characters (900 tokens of the tiny model's tokenizer) that say nothing the
    exception line does not. The DataAnalysis CPU baseline's context is 1,024 tokens,
    so the full traceback ended every such episode (``context_limited``) before the
    agent could correct its call. The exception line and the agent's frames, with
    their source line and carets, are kept verbatim; text outside a traceback (the
    agent's own prints to stderr) is untouched.
    """
    out: list[str] = []
    hidden = 0
    in_trace = False
    keep_frame = False

    def flush() -> None:
        nonlocal hidden
        if hidden:
            out.append(f"  [{hidden} library frame{'s' if hidden > 1 else ''} hidden]\n")
            hidden = 0

    for line in stderr.splitlines(keepends=True):
        if line.startswith("Traceback (most recent call last):"):
            flush()
            in_trace = True
            out.append(line)
            continue
        if not in_trace:
            out.append(line)
            continue
        frame = _FRAME.match(line)
        if frame:
            keep_frame = frame.group(1).startswith("<cell-")
            if keep_frame:
                flush()
                out.append(line)
            else:
                hidden += 1
        elif line.startswith("    "):  # a frame's source line or carets
            if keep_frame:
                out.append(line)
        else:  # the exception (or "During handling ...") ends the frames
            flush()
            in_trace = False
            out.append(line)
    flush()
    return "".join(out)


def _host_versions() -> dict[str, str]:
    """The ground truth is computed on the host, so its library versions matter too."""
    import platform

    import pandas

    return {"python": platform.python_version(), "numpy": np.__version__, "pandas": pandas.__version__}


def _templates_digest() -> str:
    h = hashlib.sha256()
    for t in TEMPLATES:
        h.update(json.dumps([t.id, t.tier, t.wording, t.code, repr(t.schema), dict(t.knobs),
                             t.allow_rename, t.allow_missing, t.missing_rates]).encode())
    return h.hexdigest()[:16]


class DataAnalysisFamily(TaskFamily):
    """Pandas analysis questions over real tables, with a sandboxed ``python`` tool.

    One instance per seat: between :meth:`open_episode` and :meth:`close_episode` it holds
    the episode's sandbox lease (:attr:`sandbox`), taken from the process's shared pool.

    Args:
        tier: 1-4 to draw only that tier's templates; None draws tiers uniformly.
        template: a template id (e.g. ``"t4_ols"``) to draw only that template.
        backend: ``"docker"``, ``"process"``, ``"unsafe-process"`` (agent code unconfined:
            trusted code only) or ``"auto"``; None follows ``AGENTGYM_SANDBOX`` (the sandboxes
            package decides).
        python_timeout_s: deadline of one ``python`` cell inside the sandbox.
        generator: the question generator's settings.
        name_hints: show the working directory's listing under a failed cell's
            ``FileNotFoundError`` or ``KeyError`` (:func:`name_hint`); off by default.
    """

    name = "DataAnalysis"
    version = 1  # v1: the sandbox facts in the fingerprint (isolation, new limits) changed

    def __init__(
        self,
        tier: int | None = None,
        template: str | None = None,
        *,
        backend: Backend | None = None,
        python_timeout_s: float = 30.0,
        generator: GeneratorConfig | None = None,
        name_hints: bool = False,
    ) -> None:
        if tier is not None and tier not in (1, 2, 3, 4):
            raise ConfigError(f"Expected tier 1, 2, 3, 4 or None, actual value: {tier!r}")
        if template is not None:
            try:
                template_by_id(template)
            except KeyError as e:
                raise ConfigError(str(e)) from None
        if not isinstance(name_hints, bool):
            raise ConfigError(f"Expected name_hints True or False, actual value: {name_hints!r}")
        if python_timeout_s <= 0:
            raise ConfigError(f"Expected python_timeout_s > 0, actual value: {python_timeout_s}")
        from sandboxes.errors import SandboxConfigError
        from sandboxes.pool import requested_backend

        try:
            requested_backend(backend)  # fail at construction, not at the first reset
        except SandboxConfigError as e:
            raise ConfigError(str(e)) from None
        self.tier = tier
        self.template = template
        self.backend = backend
        self.python_timeout_s = python_timeout_s
        self.generator = generator or GeneratorConfig()
        self.name_hints = name_hints
        self._pool: Any = None
        self._sandbox: Any = None
        self._files: tuple[Any, ...] = ()  # the episode's file_info, for name_hint
        from sandboxes.reaper import install_signal_handlers

        install_signal_handlers()  # pools start on the runtime thread; signals need the main thread

    @property
    def sandbox(self) -> Any:
        """The episode's sandbox lease (a ``sandboxes.PooledSandbox``), or None between episodes."""
        return self._sandbox

    # ---- tasks ----------------------------------------------------------------
    @property
    def _scope(self) -> str:
        return self.template or (f"t{self.tier}" if self.tier else "all")

    def _question(self, scope: str, seed: int) -> Question:
        rng = np.random.default_rng(seed)
        if scope == "all":
            return generate_question(rng, config=self.generator)
        if scope[0] == "t" and scope[1:].isdigit():
            return generate_question(rng, tier=int(scope[1:]), config=self.generator)
        return generate_question(rng, template_id=scope, config=self.generator)

    def new_task(self, rng: np.random.Generator, split: str, options: dict[str, Any]) -> DataAnalysisTask:
        if "task_id" in options:
            match = _TASK_ID.match(str(options["task_id"]))
            if match is None:
                raise ConfigError(
                    f"Expected a task_id like 'da-all-123' or 'da-t2-7', actual value: {options['task_id']!r}"
                )
            scope, seed = match.group(1), int(match.group(2))
        else:
            scope, seed = self._scope, int(rng.integers(0, 2**62))
        return DataAnalysisTask(f"da-{scope}-{seed}", scope, seed)

    # ---- resources ------------------------------------------------------------
    async def open_episode(self, task: DataAnalysisTask) -> None:
        """Lease a sandbox and upload the episode's files; a sandbox that fails at this
        is retired (never reused) and a fresh one tried, so a poisoned sandbox can never
        break a later episode's reset."""
        from sandboxes.errors import SandboxError

        if task.question is None:
            task.question = await asyncio.to_thread(self._question, task.scope, task.seed)
        self._files = tuple(getattr(task.question, "file_info", ()))  # (AnalysisReport's questions list none)
        self._pool = await shared_resources().sandbox_pool(self.backend, user=self)
        try:
            with call_budget(EPISODE_START) as budget:
                async for attempt in retrying((SandboxError, OSError)):
                    with attempt:
                        await self._lease_and_upload(task)
        except (SandboxError, OSError) as e:
            raise InfraError(f"could not prepare a sandbox for the episode in {budget.retries + 1} "
                             f"tries: {e}") from e

    async def _lease_and_upload(self, task: DataAnalysisTask) -> None:
        self._sandbox = await self._pool.acquire()
        try:
            for name, data in task.question.files.items():
                await self._sandbox.upload(name, data)
        except BaseException as e:
            sandbox, self._sandbox = self._sandbox, None
            await sandbox.retire(f"episode start failed: {e}")
            raise

    async def close_episode(self) -> None:
        self._files = ()
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None and self._pool is not None:
            await self._pool.release(sandbox)

    async def aclose(self) -> None:
        """Let go of the shared pool: the last family to do so closes it, so no sandbox
        is reset or started in the background after the last env is closed."""
        await self.close_episode()
        if self._pool is not None:
            self._pool = None
            await shared_resources().release_sandbox_pool(self)

    # ---- tools ----------------------------------------------------------------
    def tools(self, task: DataAnalysisTask | None) -> dict[str, Tool]:
        async def python(code: str) -> ToolReply:
            return await self._run_python(code)

        async def answer(**_: Any) -> str:
            return "Answer recorded."

        if task is None:
            answer_schema: dict[str, Any] = {
                "type": "object",
                "description": "The question states the fields: 'value' or named fields.",
            }
        else:
            answer_schema = task.question.schema.json_schema()
        return {
            "python": Tool("python",
                 "Run Python code in your persistent sandbox (variables, imports and files are "
                 "kept across calls; pandas and numpy are installed; the data files are in the "
                 "working directory). Returns stdout, stderr and the value of the last expression.",
                 {"type": "object", "properties": {"code": {"type": "string"}},
                  "required": ["code"], "additionalProperties": False},
                 # The sandbox enforces the agent's deadline (ToolTimeout); this outer one is only a
                 # safety net and must leave room to replace a dead sandbox and replay the episode.
                 python, max_output_chars=PYTHON_OUTPUT_CHARS, timeout_s=2 * self.python_timeout_s + 120.0,
                 max_retries=2),
            ANSWER_TOOL: Tool(ANSWER_TOOL,
                 "Give the final answer with exactly the fields the question asks for (numbers as "
                 "JSON numbers). Ends the episode.",
                 answer_schema, answer, max_output_chars=200, timeout_s=5.0),
        }

    async def _run_python(self, code: str) -> ToolReply:
        from sandboxes.errors import SandboxClosedError, SandboxError

        if self._sandbox is None:
            raise InfraError("the episode holds no sandbox")
        try:
            result = await self._sandbox.run(code, timeout=self.python_timeout_s)
        except (SandboxError, SandboxClosedError) as e:
            raise InfraError(f"sandbox failure: {e}") from e
        reply = cell_reply(result)
        hint = name_hint(result.error, self._files) if self.name_hints and result.status == "error" else None
        return ToolReply(f"{reply.text}\n{hint}", reply.status) if hint else reply

    # ---- prompts --------------------------------------------------------------
    def system_prompt(self) -> str:
        return ("You are a data analyst. Answer the user's question about the CSV files by running "
                "pandas code with the python tool, then give the final answer with the answer tool. "
                "Follow the question's instructions on missing values, bounds, rounding and ties exactly.")

    def prompt(self, task: DataAnalysisTask) -> str:
        q = task.question
        files = "\n".join(f"- {f.describe()}" for f in q.file_info)
        return f"Files in your working directory:\n{files}\n\nQuestion: {q.text}"

    # ---- scoring --------------------------------------------------------------
    def score(self, task: DataAnalysisTask, answer: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        q = task.question
        score = score_answer(q.schema, answer, q.truth)
        return score.reward, {**self.task_facts(task), **score.diagnostics()}

    def task_facts(self, task: DataAnalysisTask) -> dict[str, Any]:
        q = task.question
        if q is None:  # v2 draws the question when the episode opens
            return {}
        return {"tier": q.tier, "template": q.template_id}

    # ---- fingerprint ----------------------------------------------------------
    def fingerprint_fields(self) -> dict[str, Any]:
        return {
            "task_source": "tasks.data_analysis/v1",
            "manifest_sha256": manifest_digest(),
            "templates": _templates_digest(),
            "scope": self._scope,
            "generator": asdict(self.generator),
            "python_timeout_s": self.python_timeout_s,
            "observation": OBSERVATION_FORMAT,
            **({"name_hints": True} if self.name_hints else {}),
            "host_versions": _host_versions(),
            "sandbox": self._facts_for_fingerprint(),
        }

    def _facts_for_fingerprint(self) -> dict[str, Any]:
        """The sandbox as described (backend, isolation, image and versions), without
        starting one: computing a fingerprint never starts a resource."""
        facts = shared_resources().sandbox_facts(self.backend)
        if isinstance(facts.get("image"), dict):
            facts = {**facts, "image": {k: v for k, v in facts["image"].items() if k != "built"}}
        return facts

    # ---- oracle ---------------------------------------------------------------
    def oracle_action(self, task: DataAnalysisTask, episode: EpisodeView) -> str:
        """Run the reference code in the sandbox, then answer what it printed.

        The answer comes from the sandbox's output, never from the host's truth, so the
        oracle's score measures the environment end to end (including library versions).
        """
        ran = [r for r in episode.results if r.name == "python" and r.status == "ok"]
        if not ran:
            call = {"name": "python", "arguments": {"code": task.question.oracle_code()}}
            return f"<tool_call>{json.dumps(call)}</tool_call>"
        stdout = ran[-1].output.split("\n[stderr]\n")[0]
        value = json.loads(stdout.strip().splitlines()[-1])
        call = {"name": ANSWER_TOOL, "arguments": answer_arguments(task.question.schema, value)}
        return f"<tool_call>{json.dumps(call)}</tool_call>"


class DataAnalysisEnv(ToolEnv):
    """Pandas analysis questions over real tables, with a sandboxed ``python`` tool:
    ``ToolEnv(DataAnalysisFamily(...))``, registered as ``agentgym/DataAnalysis-v1``.

    Args:
        max_turns: steps before truncation (the oracle needs two).
        **kwargs: ``DataAnalysisFamily``'s (``tier``, ``template``, ``backend``,
            ``python_timeout_s``, ``generator``) and :class:`agentgym.ToolEnv`'s (parser,
            split, budgets).
    """

    family_class = DataAnalysisFamily

    def __init__(self, *, max_turns: int = 10, **kwargs: Any) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        self.family: DataAnalysisFamily
