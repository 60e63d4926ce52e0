"""AnalysisReview-v1: an analyst and a reviewer answer the DataAnalysis-v1 questions.

The analyst explores the data with ``python`` in its sandbox and calls
``propose(answer, code)``. The reviewer, with its own sandbox holding the same files,
sees the proposal (answer and code), can run anything with its own ``python``, and calls
``accept()`` or ``reject(comment)``; a rejection goes back to the analyst with the
comment. The team is scored on the accepted answer with DataAnalysis-v1's scorer, and
every agent receives that reward. After ``max_proposals`` rejected proposals the episode
ends without an answer (``no_agreement``, truncated).

Tasks, tools, sandboxes and scoring are DataAnalysis-v1's own: each role holds a
``DataAnalysisFamily`` of its own (with its own sandbox), so sandboxes come from the same process-wide pool
through the same seam (``AGENTGYM_SANDBOX=process`` or ``backend="process"`` for no
Docker), the ``python`` tool and its failure statuses are the same, and
``reset(seed=s)`` draws the same question as DataAnalysis-v1 does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.envs.data_analysis import DataAnalysisFamily, DataAnalysisTask
from agentgym.family import ANSWER_TOOL
from agentgym.errors import AgentError, ConfigError
from agentgym.multi_agent.base import TeamEnv
from agentgym.tools import Tool
from tasks.data_analysis.grading import score_answer
from tasks.data_analysis.reference import answer_arguments

__all__ = ["AnalysisReviewEnv", "ANALYST", "REVIEWER"]

ANALYST, REVIEWER = "analyst", "reviewer"

_ANALYST_SYSTEM = (
    "You are a data analyst in a team. Answer the question about the CSV files by running pandas code "
    "with the python tool, then call propose with your answer (exactly the fields the question asks for) "
    "and the code that computes it. A reviewer checks every proposal; if it is sent back, read the "
    "comment, fix the analysis and propose again. Follow the question's instructions on missing values, "
    "bounds, rounding and ties exactly."
)
_REVIEWER_SYSTEM = (
    "You review a data analyst's answers. You have your own python sandbox with the same CSV files. When a "
    "proposal arrives, check its code and answer against the question (run them, or your own code), then "
    "call accept() if the answer is right, or reject(comment) with what is wrong and how to fix it. The "
    "team is scored on the answer you accept."
)


@dataclass
class _Proposal:
    number: int
    answer: dict[str, Any]
    code: str
    correct: bool
    verdict: str | None = None  # "accepted" | "rejected"


class AnalysisReviewEnv(TeamEnv):
    """An analyst and a reviewer on the DataAnalysis-v1 tasks.

    Args:
        tier, template, backend, python_timeout_s, generator: see ``DataAnalysisEnv``.
        max_proposals: rejected proposals after which the team gives up.
        analyst_max_turns, reviewer_max_turns: turns per agent; either one running out
            ends the episode (truncated).
        max_team_turns, parser, tool_output_budget_chars, max_action_chars,
            max_observation_chars, split, render_mode: see ``TeamEnv``.
    """

    env_name = "AnalysisReview"
    env_version = 1  # v1: DataAnalysis-v1's fingerprint fields
    metadata = {**TeamEnv.metadata, "name": "AnalysisReview-v1"}

    def __init__(self, tier: int | None = None, template: str | None = None, *, backend: Any = None,
                 python_timeout_s: float = 30.0, generator: Any = None, max_proposals: int = 3,
                 analyst_max_turns: int = 10, reviewer_max_turns: int = 8, max_team_turns: int = 30,
                 **team_kwargs: Any) -> None:
        if max_proposals < 1 or analyst_max_turns < 1 or reviewer_max_turns < 1:
            raise ConfigError("Expected max_proposals, analyst_max_turns and reviewer_max_turns >= 1, actual values: "
                              f"{max_proposals}, {analyst_max_turns}, {reviewer_max_turns}")
        self.max_proposals = max_proposals
        self.analyst_max_turns = analyst_max_turns
        self.reviewer_max_turns = reviewer_max_turns
        settings = dict(tier=tier, template=template, backend=backend, python_timeout_s=python_timeout_s,
                        generator=generator)
        # One DataAnalysis-v1 family per seat: its tasks, its python tool, its own sandbox.
        self.families = {ANALYST: DataAnalysisFamily(**settings), REVIEWER: DataAnalysisFamily(**settings)}
        super().__init__(max_team_turns=max_team_turns, **team_kwargs)
        self._reset_team_state()

    # ------------------------------------------------------------------ hooks
    def _agent_roles(self) -> dict[str, str]:
        return {ANALYST: "analyst", REVIEWER: "reviewer"}

    def _new_task(self, rng: np.random.Generator, options: dict[str, Any]) -> DataAnalysisTask:
        return self.families[ANALYST].new_task(rng, self.split, options)  # the same tasks as DataAnalysis-v1

    async def _start_episode(self, task: DataAnalysisTask) -> None:
        self._reset_team_state()
        await self.families[ANALYST].open_episode(task)  # acquire + upload, or InfraError
        try:
            await self.families[REVIEWER].open_episode(task)
        except BaseException:
            await self.families[ANALYST].close_episode()  # hold nothing when reset fails
            raise

    async def _end_episode(self) -> None:
        for family in self.families.values():
            await family.close_episode()  # safe to call twice

    def _tools(self, agent: str, task: DataAnalysisTask | None) -> list[Tool]:
        python = self.families[agent].tools(task)["python"]  # this seat's sandbox
        if agent == ANALYST:
            return [python, self._propose_tool(task)]
        return [python, self._accept_tool(), self._reject_tool()]

    def _system_prompt(self, agent: str) -> str:
        return _ANALYST_SYSTEM if agent == ANALYST else _REVIEWER_SYSTEM

    def _prompt(self, agent: str, task: DataAnalysisTask) -> str:
        base = self.families[agent].prompt(task)  # the files and the question
        if agent == REVIEWER:
            return f"{base}\n\nWait for the analyst's proposal; it will appear here."
        return base

    def _score(self, task: DataAnalysisTask, final: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        reward, diagnostics = self.families[ANALYST].score(task, final)  # DataAnalysis-v1's scorer
        return reward, {**diagnostics, "proposals": len(self._proposals)}

    def _wants_turn(self, agent: str) -> bool:
        pending = self._pending is not None
        return pending if agent == REVIEWER else not pending

    def _max_turns(self, agent: str) -> int:
        return self.analyst_max_turns if agent == ANALYST else self.reviewer_max_turns

    def _gave_up(self) -> bool:
        rejected = sum(p.verdict == "rejected" for p in self._proposals)
        return rejected >= self.max_proposals

    def _begin_step(self) -> None:
        self._pending_at_start = self._pending
        self._new_proposal: _Proposal | None = None
        self._verdict_given = False

    def _end_step(self) -> None:
        proposal = self._new_proposal
        if proposal is not None:
            self._pending = proposal
            self.tell(REVIEWER, ANALYST, f"Proposal {proposal.number}:\nAnswer: "
                                         f"{json.dumps(proposal.answer, ensure_ascii=False)}\nCode:\n{proposal.code}")

    def _agent_diagnostics(self, agent: str) -> dict[str, Any]:
        if agent == ANALYST:
            return {"proposals": len(self._proposals), "proposals_correct": sum(p.correct for p in self._proposals)}
        verdicts = [p for p in self._proposals if p.verdict is not None]
        return {
            "accepted": sum(p.verdict == "accepted" for p in verdicts),
            "rejected": sum(p.verdict == "rejected" for p in verdicts),
            "false_accepts": sum(p.verdict == "accepted" and not p.correct for p in verdicts),
            "false_rejects": sum(p.verdict == "rejected" and p.correct for p in verdicts),
        }

    def _fingerprint_fields(self) -> dict[str, Any]:
        return {**self.families[ANALYST].fingerprint_fields(), "max_proposals": self.max_proposals}

    # ------------------------------------------------------------------ tools
    def _propose_tool(self, task: DataAnalysisTask | None) -> Tool:
        answer_tool = self.families[ANALYST].tools(task)[ANSWER_TOOL]  # the question's answer schema

        async def propose(answer: dict[str, Any], code: str) -> str:
            if self._new_proposal is not None:
                raise AgentError("you already proposed in this turn; make one proposal at a time.")
            number = len(self._proposals) + 1
            correct = score_answer(self.task.question.schema, answer, self.task.question.truth).reward >= 1.0
            self._new_proposal = _Proposal(number, dict(answer), code, correct)
            self._proposals.append(self._new_proposal)
            return f"Proposal {number} sent to the reviewer; its verdict will appear here."

        schema = {
            "type": "object",
            "properties": {"answer": answer_tool.parameters,
                           "code": {"type": "string", "description": "the code that computes the answer"}},
            "required": ["answer", "code"],
            "additionalProperties": False,
        }
        return Tool("propose", "Propose the final answer (the fields the question asks for) and the code that "
                    "computes it to the reviewer.", schema, propose, max_output_chars=300, timeout_s=5.0)

    def _accept_tool(self) -> Tool:
        async def accept() -> str:
            proposal = self._claim_verdict()
            proposal.verdict = "accepted"
            self.submit_final(proposal.answer)
            return f"Proposal {proposal.number} accepted; it is the team's answer."

        return Tool("accept", "Accept the current proposal as the team's final answer. Ends the episode.",
                    {"type": "object", "properties": {}, "additionalProperties": False}, accept,
                    max_output_chars=200, timeout_s=5.0)

    def _reject_tool(self) -> Tool:
        async def reject(comment: str) -> str:
            if not comment.strip():
                raise AgentError("the comment is empty; say what is wrong with the proposal and how to fix it.")
            proposal = self._claim_verdict()
            proposal.verdict = "rejected"
            self._pending = None
            self.tell(ANALYST, REVIEWER, f"Proposal {proposal.number} rejected: {comment.strip()}")
            return f"Proposal {proposal.number} sent back to the analyst."

        schema = {"type": "object",
                  "properties": {"comment": {"type": "string", "description": "what is wrong and how to fix it"}},
                  "required": ["comment"], "additionalProperties": False}
        return Tool("reject", "Send the current proposal back to the analyst with a comment.", schema, reject,
                    max_output_chars=200, timeout_s=5.0)

    # ------------------------------------------------------------- internals
    def _claim_verdict(self) -> _Proposal:
        proposal = self._pending_at_start
        if proposal is None:
            raise AgentError("there is no proposal to review yet; wait for the analyst.")
        if self._verdict_given:
            raise AgentError("you already gave a verdict on this proposal in this turn.")
        self._verdict_given = True
        return proposal

    def _reset_team_state(self) -> None:
        self._proposals: list[_Proposal] = []
        self._pending: _Proposal | None = None
        self._begin_step()

    # ----------------------------------------------------------------- oracle
    def oracle_actions(self) -> dict[str, str]:
        """The oracle team: the analyst runs the reference code in its sandbox and proposes
        what it printed; the reviewer reruns the proposed code in its own sandbox and accepts
        when the proposal matches its result (by the DataAnalysis-v1 scorer)."""
        actions = {}
        if self.is_active(ANALYST):
            actions[ANALYST] = self._oracle_analyst()
        if self.is_active(REVIEWER):
            actions[REVIEWER] = self._oracle_reviewer()
        return actions

    def _printed_value(self, agent: str, code: str) -> Any:
        """What the agent's last turn printed by running ``code`` (``_MISSING`` if it did not)."""
        ran = [r for r in self.seats[agent].last_results
               if r.name == "python" and r.status == "ok" and r.arguments.get("code") == code]
        if not ran:
            return _MISSING
        stdout = ran[-1].output.split("\n[stderr]\n")[0].strip()
        try:
            return json.loads(stdout.splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            return _MISSING

    def _oracle_analyst(self) -> str:
        q = self.task.question
        value = self._printed_value(ANALYST, q.oracle_code())
        if value is _MISSING:
            return _call("python", {"code": q.oracle_code()})
        return _call("propose", {"answer": answer_arguments(q.schema, value), "code": q.oracle_code()})

    def _oracle_reviewer(self) -> str:
        proposal = self._pending
        assert proposal is not None
        value = self._printed_value(REVIEWER, proposal.code)
        if value is _MISSING:
            return _call("python", {"code": proposal.code})
        if score_answer(self.task.question.schema, proposal.answer, value).reward >= 1.0:
            return _call("accept", {})
        return _call("reject", {"comment": f"Running your code gives {json.dumps(value)}, not your answer."})


_MISSING = object()


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"

