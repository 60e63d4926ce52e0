"""``ReviewTeamEnv``: a solver and a reviewer on the tasks of any :class:`~agentgym.TaskFamily`.

The team rules need nothing from the family but its public contract, so any family gets
a team env for free (the docs' unit conversion does):

- the **solver** has the family's tools except ``answer`` and calls ``propose(answer)``,
  where ``answer`` is exactly what the family's ``answer`` tool takes (checked against its
  schema and by its own function, so the agent's mistakes are agent errors as in the
  single-agent env);
- the **reviewer** has a family instance of its own (its own episode resources, e.g. a
  sandbox holding the same files), the same tools except ``answer``, and ``accept()`` or
  ``reject(comment)``; a rejection goes back to the solver with the comment;
- the accepted answer is scored by the family's ``score`` and every agent gets that
  reward; after ``max_proposals`` rejections the episode ends without an answer
  (``no_agreement``, truncated).

The oracle team is the family's oracle proposing instead of answering, and a reviewer
that accepts what the family scores as right (it knows the hidden solution). A subclass
renames the roles, asks for supporting fields with each proposal (``proposal_fields``,
e.g. the code behind an answer) and overrides prompts or the oracle:
``agentgym.envs.analysis_review`` is one.

>>> from agentgym.envs.calculator import CalculatorFamily
>>> env = ReviewTeamEnv(CalculatorFamily, difficulty=2)
>>> env.possible_agents, env.env_id
(['solver', 'reviewer'], 'agentgym/CalculatorReview-v0')
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from agentgym.errors import AgentError, ConfigError
from agentgym.family import ANSWER_TOOL, EpisodeView, TaskFamily
from agentgym.multi_agent.base import TeamEnv
from agentgym.tools import Tool

__all__ = ["ReviewTeamEnv", "Proposal"]


@dataclass
class Proposal:
    """One answer the solver put to the reviewer."""

    number: int
    answer: dict[str, Any]
    support: dict[str, Any] = field(default_factory=dict)
    """The supporting fields the env asks for (``proposal_fields``), e.g. ``code``."""
    correct: bool = False
    """Whether the family scores it as right (for the reviewer's diagnostics, never shown)."""
    verdict: str | None = None  # "accepted" | "rejected"


class ReviewTeamEnv(TeamEnv):
    """A solver proposes, a reviewer accepts or sends back, over any task family.

    Args:
        family_class: the family (a ``TaskFamily`` subclass); a subclass of this env may
            name it as a class attribute instead. Each seat gets an instance of its own.
        max_proposals: rejected proposals after which the team gives up.
        solver_max_turns, reviewer_max_turns: turns per agent; either one running out ends
            the episode (truncated).
        max_team_turns: see ``TeamEnv``.
        **kwargs: the family's settings and ``TeamEnv``'s (parser, split, budgets, ...).
    """

    env_name = ""  # "<family name>Review" unless a subclass names itself
    solver: ClassVar[str] = "solver"
    reviewer: ClassVar[str] = "reviewer"
    solver_system: ClassVar[str] = (
        "You solve the task in a team: use your tools, then call propose with your answer (exactly what the "
        "task asks for). A reviewer checks every proposal; if it is sent back, read the comment, fix your work "
        "and propose again."
    )
    reviewer_system: ClassVar[str] = (
        "You review a teammate's answers. You have the same tools. When a proposal arrives, check it against "
        "the task (use your tools), then call accept() if the answer is right, or reject(comment) with what is "
        "wrong and how to fix it. The team is scored on the answer you accept."
    )
    propose_description: ClassVar[str] = "Propose the final answer (what the task asks for) to the reviewer."
    proposal_fields: ClassVar[dict[str, dict[str, Any]]] = {}
    """Supporting fields a proposal must carry besides the answer (name -> JSON schema)."""

    def __init__(self, family_class: type[TaskFamily] | None = None, *, max_proposals: int = 3,
                 solver_max_turns: int = 8, reviewer_max_turns: int = 8, max_team_turns: int = 24,
                 **kwargs: Any) -> None:
        if family_class is not None:
            self.family_class = family_class
        if self.family_class is None:
            raise ConfigError(f"Expected a TaskFamily subclass as {type(self).__name__}'s family_class (the first "
                              "argument, or a class attribute of a subclass), actual value: None")
        if max_proposals < 1 or solver_max_turns < 1 or reviewer_max_turns < 1:
            raise ConfigError(f"Expected max_proposals, {self.solver}_max_turns and {self.reviewer}_max_turns >= 1, "
                              f"actual values: {max_proposals}, {solver_max_turns}, {reviewer_max_turns}")
        if not self.env_name:
            self.env_name = f"{self.family_class.name}Review"
            self.env_version = self.family_class.version
            self.metadata = {**TeamEnv.metadata, "name": f"{self.env_name}-v{self.env_version}"}
        self.max_proposals = max_proposals
        self.seat_max_turns = {self.solver: solver_max_turns, self.reviewer: reviewer_max_turns}
        super().__init__(max_team_turns=max_team_turns, **kwargs)
        for seat in (self.solver, self.reviewer):  # each with its own episode resources
            self.new_family(seat)
        self._reset_team_state()

    # ------------------------------------------------------------------ hooks
    def _agent_roles(self) -> dict[str, str]:
        return {self.solver: self.solver, self.reviewer: self.reviewer}

    def _new_task(self, rng: np.random.Generator, options: dict[str, Any]) -> Any:
        return self.families[self.solver].new_task(rng, self.split, options)  # the single-agent env's tasks

    async def _start_episode(self, task: Any) -> None:
        self._reset_team_state()

    def _tools(self, agent: str, task: Any) -> list[Tool]:
        family_tools = self.families[agent].tools(task)  # this seat's own resources
        if ANSWER_TOOL not in family_tools:
            raise ConfigError(f"Expected {self.family_class.__name__}.tools() to include {ANSWER_TOOL!r}")  # type: ignore[union-attr]
        own = [t for name, t in family_tools.items() if name != ANSWER_TOOL]
        if agent == self.solver:
            return [*own, self._propose_tool(family_tools[ANSWER_TOOL])]
        return [*own, self._accept_tool(), self._reject_tool()]

    def _system_prompt(self, agent: str) -> str:
        return self.solver_system if agent == self.solver else self.reviewer_system

    def _prompt(self, agent: str, task: Any) -> str:
        base = self.families[agent].prompt(task)
        if agent == self.reviewer:
            return f"{base}\n\nWait for the {self.solver}'s proposal; it will appear here."
        return base

    def _score(self, task: Any, final: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        reward, diagnostics = self.families[self.solver].score(task, final)  # the family's scorer
        return reward, {**diagnostics, "proposals": len(self._proposals)}

    def _wants_turn(self, agent: str) -> bool:
        pending = self._pending is not None
        return pending if agent == self.reviewer else not pending

    def _max_turns(self, agent: str) -> int:
        return self.seat_max_turns[agent]

    def _gave_up(self) -> bool:
        return sum(p.verdict == "rejected" for p in self._proposals) >= self.max_proposals

    def _begin_step(self) -> None:
        self._pending_at_start = self._pending
        self._new_proposal: Proposal | None = None
        self._verdict_given = False

    def _end_step(self) -> None:
        proposal = self._new_proposal
        if proposal is not None:
            self._pending = proposal
            lines = [f"Proposal {proposal.number}:", f"Answer: {json.dumps(proposal.answer, ensure_ascii=False)}"]
            lines += [f"{name.capitalize()}:\n{value}" for name, value in proposal.support.items()]
            self.tell(self.reviewer, self.solver, "\n".join(lines))

    def _agent_diagnostics(self, agent: str) -> dict[str, Any]:
        if agent == self.solver:
            return {"proposals": len(self._proposals), "proposals_correct": sum(p.correct for p in self._proposals)}
        verdicts = [p for p in self._proposals if p.verdict is not None]
        return {
            "accepted": sum(p.verdict == "accepted" for p in verdicts),
            "rejected": sum(p.verdict == "rejected" for p in verdicts),
            "false_accepts": sum(p.verdict == "accepted" and not p.correct for p in verdicts),
            "false_rejects": sum(p.verdict == "rejected" and p.correct for p in verdicts),
        }

    def _fingerprint_fields(self) -> dict[str, Any]:
        return {**self.families[self.solver].fingerprint_fields(), "max_proposals": self.max_proposals}

    # ------------------------------------------------------------------ tools
    def _propose_tool(self, answer_tool: Tool) -> Tool:
        async def propose(answer: dict[str, Any], **support: Any) -> str:
            self._check_one_proposal()
            await answer_tool.fn(**answer)  # the family's own checks of an answer (AgentError: the agent's)
            self._check_one_proposal()  # again: another call of the turn may have proposed while it ran
            number = len(self._proposals) + 1
            correct = self.families[self.solver].score(self.task, answer)[0] >= 1.0
            self._new_proposal = Proposal(number, dict(answer), dict(support), correct)
            self._proposals.append(self._new_proposal)
            return f"Proposal {number} sent to the {self.reviewer}; its verdict will appear here."

        schema = {
            "type": "object",
            "properties": {"answer": answer_tool.parameters, **self.proposal_fields},
            "required": ["answer", *self.proposal_fields],
            "additionalProperties": False,
        }
        return Tool("propose", self.propose_description, schema, propose, max_output_chars=300, timeout_s=5.0)

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
            self.tell(self.solver, self.reviewer, f"Proposal {proposal.number} rejected: {comment.strip()}")
            return f"Proposal {proposal.number} sent back to the {self.solver}."

        schema = {"type": "object",
                  "properties": {"comment": {"type": "string", "description": "what is wrong and how to fix it"}},
                  "required": ["comment"], "additionalProperties": False}
        return Tool("reject", f"Send the current proposal back to the {self.solver} with a comment.", schema, reject,
                    max_output_chars=200, timeout_s=5.0)

    # ------------------------------------------------------------- internals
    def _check_one_proposal(self) -> None:
        if self._new_proposal is not None:
            raise AgentError("you already proposed in this turn; make one proposal at a time.")

    def _claim_verdict(self) -> Proposal:
        proposal = self._pending_at_start
        if proposal is None:
            raise AgentError(f"there is no proposal to review yet; wait for the {self.solver}.")
        if self._verdict_given:
            raise AgentError("you already gave a verdict on this proposal in this turn.")
        self._verdict_given = True
        return proposal

    def _reset_team_state(self) -> None:
        self._proposals: list[Proposal] = []
        self._pending: Proposal | None = None
        self._begin_step()

    @property
    def pending_proposal(self) -> Proposal | None:
        """The proposal waiting for the reviewer's verdict, if any."""
        return self._pending

    # ----------------------------------------------------------------- oracle
    def oracle_actions(self) -> dict[str, str]:
        """The oracle team: the family's oracle solves and proposes instead of answering;
        the reviewer accepts a proposal when it is right (see :meth:`oracle_review`)."""
        actions = {}
        if self.is_active(self.solver):
            actions[self.solver] = self.oracle_solve()
        if self.is_active(self.reviewer):
            actions[self.reviewer] = self.oracle_review()
        return actions

    def oracle_solve(self) -> str:
        """The family's oracle action for the solver, with its ``answer`` call made a proposal."""
        seat = self.seats[self.solver]
        view = EpisodeView(turn=seat.turns, results=tuple(seat.last_results), parser=self.parser.name)
        action = self.families[self.solver].oracle_action(self.task, view)
        answer = next((c for c in self.parser.parse(action) if c.name == ANSWER_TOOL and c.status == "ok"), None)
        if answer is None:
            return action
        return tool_call("propose", {"answer": answer.arguments, **self.oracle_support()})

    def oracle_support(self) -> dict[str, Any]:
        """The supporting fields of the oracle's proposal (``proposal_fields``)."""
        return {}

    def oracle_review(self) -> str:
        """Accept what the family scores as right, reject the rest (from the hidden solution)."""
        proposal = self._pending
        assert proposal is not None
        if proposal.correct:
            return tool_call("accept", {})
        return tool_call("reject", {"comment": "The answer does not solve the task; check your work again."})


def tool_call(name: str, arguments: dict[str, Any]) -> str:
    """One call in the hermes format the team envs use."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"
