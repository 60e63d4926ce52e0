"""SearchTeam-v1: a planner and k searchers answer the Search-v1 questions together.

The planner sees the question and has ``delegate(worker, subquestion)`` and ``answer``; it
cannot search. Each searcher has Search-v1's ``search`` and ``open`` and ``report(text)``,
which closes its task and puts the text into the planner's next observation. The team
gets one reward, the Search-v1 score of the planner's answer, and every agent receives it.

The tools, tasks and scorer are Search-v1's own: the team works over Search-v1's
``SearchFamily`` (it lives beside it), one instance shared by the searchers, so the corpus,
the retriever (in-process BM25 or a retriever service), the question splits, the tool
schemas and the grading are the same objects and the same fingerprint fields, and
``reset(seed=s)`` draws the same question as Search-v1 does.

Who acts when: the planner acts at the start and whenever a report (or a notice that a
searcher gave up) arrives, and also whenever nobody is working for it; a searcher acts
while it holds a task. A searcher that has not reported after ``searcher_turns_per_task``
turns loses the task (the planner is told), and one that used ``searcher_max_turns`` turns
retires; so no searcher can hang the episode.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.envs.search import SearchFamily, SearchTask
from agentgym.errors import AgentError, ConfigError
from agentgym.family import ANSWER_TOOL
from agentgym.multi_agent.base import TeamEnv
from agentgym.tools import Tool
from tasks.search import contains_answer

__all__ = ["SearchTeamEnv", "PLANNER"]

PLANNER = "planner"

_PLANNER_SYSTEM = (
    "You lead a team that answers questions using a search engine over Wikipedia summaries and "
    "country and city fact sheets. You cannot search yourself: give focused subquestions to your "
    "searchers with delegate(worker, subquestion); each searcher searches, reads and reports its "
    "findings back to you. Delegate to several searchers at once when the question has independent "
    "parts. When you know the answer, call answer exactly once with a short span naming a single "
    "entity (a name, a place or a year)."
)
_SEARCHER_SYSTEM = (
    "You are a searcher in a team led by a planner. When the planner gives you a subquestion, use "
    "search to find documents and open to read them, then call report with what you found (the facts "
    "and the doc ids they come from). You take turns only while you have a task; report exactly once "
    "per task."
)


@dataclass
class _Assignment:
    subquestion: str
    given_at: int  # team turn
    turns: int = 0


@dataclass(frozen=True)
class _Report:
    worker: str
    subquestion: str
    text: str
    team_turn: int


class SearchTeamEnv(TeamEnv):
    """A planner and ``num_searchers`` searchers on the Search-v1 tasks.

    Args:
        num_searchers: how many searchers (k >= 1).
        planner_max_turns: turns of the planner; out of turns without an answer ends the
            episode (truncated).
        searcher_max_turns: turns of each searcher in the episode; then it retires.
        searcher_turns_per_task: turns a searcher may spend on one task before the task
            is withdrawn and the planner told.
        max_team_turns: see ``TeamEnv``.
        **kwargs: ``SearchFamily``'s (retriever_url, corpus_path, qa_path, data_seed, topk,
            snippet_chars, page_chars, max_answer_chars, ...) and ``TeamEnv``'s (parser,
            split, budgets, render_mode).
    """

    env_name = "SearchTeam"
    env_version = 1  # v1: Search-v1's questions (search-data-4) in the fingerprint's search fields
    metadata = {**TeamEnv.metadata, "name": "SearchTeam-v1"}
    family_class = SearchFamily

    def __init__(self, num_searchers: int = 2, *, planner_max_turns: int = 6, searcher_max_turns: int = 12,
                 searcher_turns_per_task: int = 5, max_team_turns: int = 24, **kwargs: Any) -> None:
        if num_searchers < 1:
            raise ConfigError(f"Expected num_searchers >= 1, actual value: {num_searchers}")
        if kwargs.get("style", "tool_calls") != "tool_calls":  # the searchers' open exists in that style only
            raise ConfigError(f"Expected style 'tool_calls' for a team (hermes tool calls), actual value: "
                              f"{kwargs['style']!r}")
        if min(planner_max_turns, searcher_max_turns, searcher_turns_per_task) < 1:
            raise ConfigError("Expected planner_max_turns, searcher_max_turns and searcher_turns_per_task >= 1, "
                              f"actual values: {planner_max_turns}, {searcher_max_turns}, {searcher_turns_per_task}")
        self.num_searchers = num_searchers
        self.searchers = [f"searcher_{i}" for i in range(num_searchers)]
        self.planner_max_turns = planner_max_turns
        self.searcher_max_turns = searcher_max_turns
        self.searcher_turns_per_task = searcher_turns_per_task
        super().__init__(max_team_turns=max_team_turns, **kwargs)
        # Search-v1's family: its data, retriever, tools and scorer, shared by the searchers.
        self.family: SearchFamily = self.new_family("search", split=self.split)  # type: ignore[assignment]
        self._reset_team_state()

    # ------------------------------------------------------------------ hooks
    def _agent_roles(self) -> dict[str, str]:
        return {PLANNER: "planner", **{s: "searcher" for s in self.searchers}}

    def _new_task(self, rng: np.random.Generator, options: dict[str, Any]) -> SearchTask:
        return self.family.new_task(rng, self.split, options)  # the same tasks as Search-v1

    async def _start_episode(self, task: SearchTask) -> None:
        self._reset_team_state()  # the family's episode (the team's seen/opened docs) is open by now

    def _tools(self, agent: str, task: SearchTask | None) -> list[Tool]:
        if agent == PLANNER:
            return [self._delegate_tool(), self._answer_tool()]
        tools = self.family.tools(task)
        return [tools["search"], tools["open"], self._report_tool(agent)]

    def _system_prompt(self, agent: str) -> str:
        return _PLANNER_SYSTEM if agent == PLANNER else _SEARCHER_SYSTEM

    def _prompt(self, agent: str, task: SearchTask) -> str:
        if agent == PLANNER:
            return (f"Question: {task.question.question}\nYour searchers: {', '.join(self.searchers)}. "
                    "Their reports will appear here.")
        return f"You are {agent}. Wait for a task from the planner; it will appear here."

    def _score(self, task: SearchTask, final: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        reward, diagnostics = self.family.score(task, final)  # the Search-v1 scorer
        return reward, {**diagnostics, "reports": len(self._reports), "delegations": self._delegations}

    def _task_facts(self, task: SearchTask) -> dict[str, Any]:
        return self.family.task_facts(task)

    def _wants_turn(self, agent: str) -> bool:
        if agent == PLANNER:
            return self.has_news(PLANNER) or all(a is None for a in self._assignments.values())
        return self._assignments[agent] is not None

    def _max_turns(self, agent: str) -> int:
        return self.planner_max_turns if agent == PLANNER else self.searcher_max_turns

    def _essential(self, agent: str) -> bool:
        return agent == PLANNER

    def _on_retire(self, agent: str) -> None:
        self._withdraw(agent, f"{agent} ran out of turns before reporting and has left the team")

    def _begin_step(self) -> None:
        self._busy_at_start = {w for w, a in self._assignments.items() if a is not None}
        self._new_assignments: dict[str, str] = {}
        self._step_reports: list[_Report] = []

    def _end_step(self) -> None:
        for report in self._step_reports:
            self.tell(PLANNER, report.worker, f"Report on {report.subquestion!r}:\n{report.text}")
        for worker, assignment in self._assignments.items():
            if assignment is not None and worker in self._busy_at_start and worker in self.acting:
                assignment.turns += 1
                if assignment.turns >= self.searcher_turns_per_task:
                    self._withdraw(worker, f"{worker} did not report within {self.searcher_turns_per_task} turns; "
                                           "the task was withdrawn")
        for worker, subquestion in self._new_assignments.items():
            self._assignments[worker] = _Assignment(subquestion, self.team_turn)
            self.tell(worker, PLANNER, f"Task: {subquestion}")

    def _agent_diagnostics(self, agent: str) -> dict[str, Any]:
        answer = str((self._final or {}).get("answer", ""))
        answered_at = self._answered_at if self._answered_at is not None else self.team_turn + 1
        if agent == PLANNER:
            return {"delegations": self._delegations, "reports_received": len(self._reports),
                    "tasks_withdrawn": self._withdrawn}
        mine = [r for r in self._reports if r.worker == agent]
        used = [r for r in mine if r.team_turn < answered_at and answer and contains_answer(r.text, answer)]
        return {"tasks_received": self._tasks_received.get(agent, 0), "reports_sent": len(mine),
                "reports_used": len(used)}

    def _fingerprint_fields(self) -> dict[str, Any]:
        return {"search": self.family.fingerprint_fields(),
                "num_searchers": self.num_searchers, "searcher_turns_per_task": self.searcher_turns_per_task}

    # ------------------------------------------------------------------ tools
    def _delegate_tool(self) -> Tool:
        async def delegate(worker: str, subquestion: str) -> str:
            if not subquestion.strip():
                raise AgentError("the subquestion is empty; say what the searcher should find out.")
            if self.seats[worker].retired is not None:
                idle = self._idle_searchers()
                raise AgentError(f"{worker} has left the team; delegate to one of: {', '.join(idle) or 'nobody'}.")
            if worker in self._busy_at_start or worker in self._new_assignments:
                idle = self._idle_searchers()
                raise AgentError(f"{worker} is still working on a task; wait for its report or delegate to an idle "
                                 f"searcher: {', '.join(idle) or 'none is idle now'}.")
            self._new_assignments[worker] = subquestion.strip()
            self._delegations += 1
            self._tasks_received[worker] = self._tasks_received.get(worker, 0) + 1
            return f"Delegated to {worker}. Its report will appear here when it is ready."

        schema = {
            "type": "object",
            "properties": {
                "worker": {"type": "string", "enum": list(self.searchers), "description": "which searcher"},
                "subquestion": {"type": "string", "description": "what the searcher should find out"},
            },
            "required": ["worker", "subquestion"],
            "additionalProperties": False,
        }
        return Tool("delegate", "Give a subquestion to an idle searcher; its report comes back to you.",
                    schema, delegate, max_output_chars=400, timeout_s=2.0)

    def _answer_tool(self) -> Tool:
        search_answer = self.family.tools(None)[ANSWER_TOOL]  # Search-v1's schema and checks

        async def answer(answer: str | int | float) -> str:
            out = await search_answer.fn(answer=answer)
            if self.submit_final({"answer": answer}):
                self._answered_at = self.team_turn
            return out

        return dataclasses.replace(search_answer, fn=answer,
                                   description="Give the team's final answer (a short span, one entity). "
                                               "Ends the episode.")

    def _report_tool(self, worker: str) -> Tool:
        async def report(text: str) -> str:
            assignment = self._assignments[worker]
            if assignment is None:
                raise AgentError("you have no open task (you already reported on it); wait for the planner.")
            if not text.strip():
                raise AgentError("the report is empty; write what you found and the doc ids it comes from.")
            self._assignments[worker] = None
            self._reports.append(_Report(worker, assignment.subquestion, text.strip(), self.team_turn))
            self._step_reports.append(self._reports[-1])
            return "Report sent to the planner."

        schema = {"type": "object",
                  "properties": {"text": {"type": "string", "description": "your findings, with doc ids"}},
                  "required": ["text"], "additionalProperties": False}
        return Tool("report", "Send your findings on your current task to the planner (once per task).",
                    schema, report, max_output_chars=400, timeout_s=2.0)

    # ------------------------------------------------------------- internals
    def _reset_team_state(self) -> None:
        self._assignments: dict[str, _Assignment | None] = {w: None for w in self.searchers}
        self._reports: list[_Report] = []
        self._delegations = 0
        self._withdrawn = 0
        self._tasks_received: dict[str, int] = {}
        self._answered_at: int | None = None
        self._begin_step()

    def _withdraw(self, worker: str, notice: str) -> None:
        assignment = self._assignments[worker]
        if assignment is None:
            return
        self._assignments[worker] = None
        self._withdrawn += 1
        self.tell(PLANNER, "env", f"{notice} (task: {assignment.subquestion!r}).")
        self.tell(worker, "env", "Your task was withdrawn; wait for a new one.")

    def _idle_searchers(self) -> list[str]:
        return [w for w in self.searchers if self.seats[w].retired is None and w not in self._busy_at_start
                and w not in self._new_assignments]

    def assignment(self, worker: str) -> str | None:
        """The subquestion ``worker`` is working on, if any."""
        a = self._assignments[worker]
        return None if a is None else a.subquestion

    # ----------------------------------------------------------------- oracle
    def oracle_actions(self) -> dict[str, str]:
        """The oracle team: the planner splits the supporting documents among the
        searchers, each searcher searches each title and opens the document, then reports
        the hop facts; the planner answers once every task is closed."""
        actions = {}
        for agent in self.agents:
            if not self.is_active(agent):
                continue
            action = self._oracle_planner() if agent == PLANNER else self._oracle_searcher(agent)
            if action is not None:
                actions[agent] = action
        return actions

    def _oracle_plan(self) -> list[str]:
        q = self.task.question
        titles = [self._title(d) for d in q.supporting_doc_ids]
        if not titles:
            return [q.question]
        workers = min(len(self.searchers), len(titles))
        groups = [titles[i::workers] for i in range(workers)]
        return [f"Read the documents titled {', '.join(json.dumps(t, ensure_ascii=False) for t in g)} and report "
                f"what they say that helps answer: {q.question}" for g in groups]

    def _oracle_planner(self) -> str | None:
        if self._delegations == 0:
            idle = self._idle_searchers()
            calls = [{"name": "delegate", "arguments": {"worker": w, "subquestion": s}}
                     for w, s in zip(idle, self._oracle_plan())]
            return _calls(calls)
        if any(a is not None for a in self._assignments.values()):
            return None  # reports are still coming: skip this round (costs no turn)
        return _calls([{"name": ANSWER_TOOL, "arguments": {"answer": self.task.question.answer}}])

    def _oracle_searcher(self, worker: str) -> str:
        q = self.task.question
        subquestion = self.assignment(worker) or ""
        docs = [d for d in q.supporting_doc_ids if json.dumps(self._title(d), ensure_ascii=False) in subquestion]
        opened = any(r.name == "open" and r.status == "ok" for r in self.seats[worker].last_results)
        if not opened and docs:
            calls = [c for d in docs for c in ({"name": "search", "arguments": {"query": self._title(d)}},
                                               {"name": "open", "arguments": {"doc_id": d}})]
            return _calls(calls)
        lines = [f"{self._title(d)} [{d}]: " + "; ".join(dict.fromkeys(h.answer for h in q.hops if h.doc_id == d))
                 for d in docs] or [f"The answer is {q.answer}."]
        return _calls([{"name": "report", "arguments": {"text": "\n".join(lines)}}])

    def _title(self, doc_id: str) -> str:
        doc = self.family.dataset.corpus.get(doc_id)
        return doc.title if doc is not None else doc_id


def _calls(calls: list[dict[str, Any]]) -> str:
    return "".join(f"<tool_call>{json.dumps(c, ensure_ascii=False)}</tool_call>" for c in calls)
