"""The scorer seam: score any answer for an env's current task, the way an episode would.

Why a seam: the reward-hacking kit must score thousands of made-up answers without
playing an episode for each, and it must do so through the same code an episode uses.
Every ``ToolEnv`` scores with ``_score(task, answer_args)``; :func:`score_answer` is the
one public door to it, so when an env grows an LLM judge (or any other scorer) behind
``_score``, the kit audits it unchanged.

* :func:`score_answer` — reward and diagnostics of ``answer_args`` for a task
  (default: the env's current task, ``env.unwrapped.task``).
* :func:`answer_schema_problem` — what the executor's JSON-schema check would say about
  the arguments (``None`` when the ``answer`` tool accepts them).
* :func:`oracle_answer` — play the oracle on ``reset(seed=...)`` until it answers; its
  arguments are the truth the kit perturbs (they must score 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonschema

from agentgym.env import ANSWER_TOOL, ToolEnv
from agentgym.errors import AgentgymError
from agentgym.policies import play_oracle

__all__ = ["OracleAnswer", "OracleFailedError", "score_answer", "answer_schema_problem", "oracle_answer",
           "base_env"]


class OracleFailedError(AgentgymError, RuntimeError):
    """The oracle policy did not give an answer that scores 1: the env itself is broken,
    so no reward audit of it means anything. Fix the family's ``oracle_action`` or ``score``."""


@dataclass(frozen=True)
class OracleAnswer:
    """The oracle's final answer to one task and what it scored."""

    seed: int
    task: Any
    arguments: dict[str, Any]
    reward: float
    question: str
    diagnostics: dict[str, Any] = field(default_factory=dict)


def base_env(env: Any) -> ToolEnv:
    """The ``ToolEnv`` under any Gymnasium wrappers."""
    base = getattr(env, "unwrapped", env)
    if not isinstance(base, ToolEnv):
        raise TypeError(f"Expected an agentgym ToolEnv, actual value: {type(base).__name__}")
    return base


def score_answer(env: Any, answer_args: dict[str, Any], task: Any = None) -> tuple[float, dict[str, Any]]:
    """Reward and diagnostics the env gives ``answer_args`` for ``task``.

    This calls the env's scorer directly, *without* the schema check and the ``answer``
    tool that an episode runs first (see :func:`answer_schema_problem`), so it also shows
    how the scorer alone treats inputs those gates would stop.
    """
    base = base_env(env)
    task = base.task if task is None else task
    if task is None:
        raise ValueError("score_answer needs a task: call env.reset() first or pass task=")
    reward, diagnostics = base.score_answer(task, answer_args)
    return float(reward), dict(diagnostics)


def answer_schema_problem(env: Any, answer_args: Any, task: Any = None) -> str | None:
    """The JSON-schema error the executor would report for these ``answer`` arguments."""
    base = base_env(env)
    tools = base.tools_for(base.task if task is None else task)
    tool = tools.get(ANSWER_TOOL)
    if tool is None:
        return f"the env has no {ANSWER_TOOL!r} tool"
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(tool.parameters).iter_errors(answer_args))
    return None if error is None else error.message


def oracle_answer(env: Any, seed: int, *, max_steps: int = 50) -> OracleAnswer:
    """Reset with ``seed``, play the oracle until the episode ends, return its answer.

    Raises:
        OracleFailedError: the oracle gave no answer, or its answer scored below 1.
    """
    base = base_env(env)
    obs, info = env.reset(seed=seed)
    question = next((m["content"] for m in info["messages"] if m["role"] == "user"), obs)
    task = base.task
    last = play_oracle(env, max_steps)
    if last is None:
        raise OracleFailedError(f"{base.env_id}: the oracle did not finish task {task.task_id} in {max_steps} steps")
    obs, reward, _, _, info = last
    answer = info.get("answer")
    if not isinstance(answer, dict) or info.get("infra_failed"):
        raise OracleFailedError(f"{base.env_id}: the oracle gave no answer on task {task.task_id} "
                                f"(infra_failed={info.get('infra_failed')}, last observation {obs[-200:]!r})")
    if float(reward) < 1.0:
        raise OracleFailedError(f"{base.env_id}: the oracle's answer {answer!r} scored {reward} on task "
                                f"{task.task_id}; expected 1.0")
    diagnostics = {k: v for k, v in info.items() if k not in ("messages", "tool_results")}
    return OracleAnswer(seed, task, dict(answer), float(reward), question, diagnostics)
