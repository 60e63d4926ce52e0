"""``TaskFamily``: what an environment is about, apart from how it is driven.

A family says what the tasks are, which tools an episode has, what the agent is told, how
an answer is scored and how the oracle solves a task. :class:`~agentgym.ToolEnv` drives a
family for one agent (one seat) and :class:`~agentgym.multi_agent.TeamEnv` drives several
seats with team rules, each over a family of its own: parsing, execution under the status
contract, truncation, budgets, telemetry and the episode ``info`` are theirs, done the
same way for every family.

Writing a family means implementing the abstract members below; everything else has a
sensible default. A family instance belongs to one seat: per-episode resources (a sandbox
lease) live on it between :meth:`open_episode` and :meth:`close_episode`.

>>> from agentgym.envs.calculator import CalculatorFamily
>>> family = CalculatorFamily(difficulty=1)
>>> sorted(family.tools(None))
['answer', 'calculate']
"""

from __future__ import annotations

import abc
import difflib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from agentgym.errors import ConfigError
from agentgym.tools import Tool

__all__ = ["TaskFamily", "EpisodeView", "ANSWER_TOOL", "family_from_kwargs"]

ANSWER_TOOL = "answer"
"""The tool whose ``ok`` call ends the episode; its arguments are what :meth:`TaskFamily.score` gets."""


@dataclass(frozen=True)
class EpisodeView:
    """What an oracle may know of the episode besides the task: how far it has gone."""

    turn: int
    """Turns taken so far in the episode (adversarial or not)."""
    results: Sequence[Any] = field(default_factory=tuple)
    """The last turn's ``ToolResult``s (name, status, output, arguments)."""
    parser: str = "hermes"
    """``"hermes"`` (``<tool_call>`` JSON) or ``"tags"`` (``<search>``, ``<answer>``)."""


class TaskFamily(abc.ABC):
    """The public contract of a task family (see the module docstring).

    Class attributes:
        name: the env name in ids (``agentgym/<name>-v<version>``).
        version: bumped whenever the fingerprint of the family's envs changes.
        splits: the task splits ``new_task`` accepts.
        reset_options: the ``options`` keys ``reset`` accepts (``task_id`` by default).
    """

    name: ClassVar[str] = "Family"
    version: ClassVar[int] = 0
    splits: ClassVar[tuple[str, ...]] = ("train", "validation", "test")
    reset_options: ClassVar[frozenset[str]] = frozenset({"task_id"})

    # ---------------------------------------------------------------- required
    @abc.abstractmethod
    def new_task(self, rng: np.random.Generator, split: str, options: dict[str, Any]) -> Any:
        """A task of ``split`` (its ``task_id`` must be set). A pure function of ``rng`` and
        ``options``, so ``reset(seed=s)`` is deterministic; ``options["task_id"]`` picks one."""

    @abc.abstractmethod
    def tools(self, task: Any | None) -> dict[str, Tool]:
        """The episode's tools by name, ``answer`` included. Called with ``None`` for the
        fingerprint, so names and schemas must not depend on the task there."""

    @abc.abstractmethod
    def prompt(self, task: Any) -> str:
        """The user message that states the task."""

    @abc.abstractmethod
    def score(self, task: Any, answer: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """Reward of the ``answer`` call's arguments, and diagnostics for ``info``."""

    @abc.abstractmethod
    def oracle_action(self, task: Any, episode: EpisodeView) -> str:
        """The oracle's next action (text), from the hidden solution and how far the
        episode has gone. If the oracle does not score ~100%, the family is broken."""

    # ---------------------------------------------------------------- optional
    def system_prompt(self) -> str:
        return "You are an agent that solves the user's task by calling tools. Answer with the answer tool."

    def task_facts(self, task: Any) -> dict[str, Any]:
        """What kind of task this is (template, tier, hop count), for slicing results.

        It goes into the ``info`` of every episode's end, answered or not: facts that only
        ``score`` reported were missing from truncated episodes, so a per-template success
        rate counted only the episodes that answered, and was too high wherever a model
        often ran out of turns."""
        return {}

    def fingerprint_fields(self) -> dict[str, Any]:
        """Everything else that changes what the agent sees or how it is scored. Must not
        start a resource (a sandbox pool): report what is known, or ``unresolved``."""
        return {}

    async def open_episode(self, task: Any) -> None:
        """Acquire the episode's resources. Raise ``InfraError`` if they cannot be had
        after retries, ``ConfigError`` if the setup cannot work at all."""

    async def close_episode(self) -> None:
        """Release the episode's resources. Must be safe to call twice."""

    async def aclose(self) -> None:
        """Release what the family holds for its whole life (a shared client); called by
        the env's ``close``. Must be safe to call twice."""


def family_from_kwargs(family_class: type[TaskFamily], kwargs: dict[str, Any], *, owner: str) -> TaskFamily:
    """``family_class(**kwargs)``, with a ``ConfigError`` naming ``owner`` (the env) and the
    closest parameter for a keyword the family does not take, instead of a ``TypeError``."""
    signature = inspect.signature(family_class)
    try:
        signature.bind(**kwargs)
    except TypeError as e:
        names = [p.name for p in signature.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        unknown = [k for k in kwargs if k not in names]
        close = difflib.get_close_matches(unknown[0], names, n=1) if unknown else []
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{owner}: {e}{hint} ({family_class.__name__} takes {sorted(names)})") from None
    return family_class(**kwargs)
