"""AnalysisReview-v1: an analyst and a reviewer answer the DataAnalysis-v1 questions.

The analyst explores the data with ``python`` in its sandbox and calls
``propose(answer, code)``. The reviewer, with its own sandbox holding the same files,
sees the proposal (answer and code), can run anything with its own ``python``, and calls
``accept()`` or ``reject(comment)``; a rejection goes back to the analyst with the
comment. The team is scored on the accepted answer with DataAnalysis-v1's scorer, and
every agent receives that reward. After ``max_proposals`` rejected proposals the episode
ends without an answer (``no_agreement``, truncated).

The team rules are :class:`~agentgym.multi_agent.ReviewTeamEnv`'s over the DataAnalysis
family (it lives beside that family): each role holds a ``DataAnalysisFamily`` of its own
(with its own sandbox), so sandboxes come from the same process-wide pool through the
same seam (``AGENTGYM_SANDBOX=process`` or ``backend="process"`` for no Docker), the
``python`` tool and its failure statuses are the same, and ``reset(seed=s)`` draws the same
question as DataAnalysis-v1 does. What is this env's own: the role names and prompts, the
``code`` every proposal carries, and an oracle reviewer that reruns that code in its own
sandbox.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from agentgym.envs.data_analysis import DataAnalysisFamily
from agentgym.multi_agent.review import ReviewTeamEnv, tool_call
from tasks.data_analysis.grading import score_answer

__all__ = ["AnalysisReviewEnv", "ANALYST", "REVIEWER"]

ANALYST, REVIEWER = "analyst", "reviewer"


class AnalysisReviewEnv(ReviewTeamEnv):
    """An analyst and a reviewer on the DataAnalysis-v1 tasks.

    Args:
        max_proposals: rejected proposals after which the team gives up.
        analyst_max_turns, reviewer_max_turns: turns per agent; either one running out
            ends the episode (truncated).
        max_team_turns: see ``TeamEnv``.
        **kwargs: ``DataAnalysisFamily``'s (tier, template, backend, python_timeout_s,
            generator) and ``TeamEnv``'s (parser, split, budgets, render_mode).
    """

    env_name = "AnalysisReview"
    env_version = 1  # v1: DataAnalysis-v1's fingerprint fields
    metadata = {**ReviewTeamEnv.metadata, "name": "AnalysisReview-v1"}
    family_class = DataAnalysisFamily
    solver: ClassVar[str] = ANALYST
    reviewer: ClassVar[str] = REVIEWER
    solver_system: ClassVar[str] = (
        "You are a data analyst in a team. Answer the question about the CSV files by running pandas code "
        "with the python tool, then call propose with your answer (exactly the fields the question asks for) "
        "and the code that computes it. A reviewer checks every proposal; if it is sent back, read the "
        "comment, fix the analysis and propose again. Follow the question's instructions on missing values, "
        "bounds, rounding and ties exactly."
    )
    reviewer_system: ClassVar[str] = (
        "You review a data analyst's answers. You have your own python sandbox with the same CSV files. When a "
        "proposal arrives, check its code and answer against the question (run them, or your own code), then "
        "call accept() if the answer is right, or reject(comment) with what is wrong and how to fix it. The "
        "team is scored on the answer you accept."
    )
    propose_description: ClassVar[str] = ("Propose the final answer (the fields the question asks for) and the "
                                          "code that computes it to the reviewer.")
    proposal_fields: ClassVar[dict[str, dict[str, Any]]] = {
        "code": {"type": "string", "description": "the code that computes the answer"},
    }

    def __init__(self, *, max_proposals: int = 3, analyst_max_turns: int = 10, reviewer_max_turns: int = 8,
                 max_team_turns: int = 30, **kwargs: Any) -> None:
        super().__init__(max_proposals=max_proposals, solver_max_turns=analyst_max_turns,
                         reviewer_max_turns=reviewer_max_turns, max_team_turns=max_team_turns, **kwargs)

    # ----------------------------------------------------------------- oracle
    def oracle_support(self) -> dict[str, Any]:
        return {"code": self.task.question.oracle_code()}

    def oracle_review(self) -> str:
        """The oracle reviewer reruns the proposed code in its own sandbox and accepts when
        the proposal matches what it printed (by the DataAnalysis-v1 scorer)."""
        proposal = self.pending_proposal
        assert proposal is not None
        code = proposal.support["code"]
        value = self._printed_value(REVIEWER, code)
        if value is _MISSING:
            return tool_call("python", {"code": code})
        if score_answer(self.task.question.schema, proposal.answer, value).reward >= 1.0:
            return tool_call("accept", {})
        return tool_call("reject", {"comment": f"Running your code gives {json.dumps(value)}, not your answer."})

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


_MISSING = object()
