"""``ToolEnv``: a Gymnasium env whose actions are text with tool calls in it.

``ToolEnv(family)`` drives a :class:`~agentgym.family.TaskFamily` for one agent: the family
says what the tasks, tools, prompts, scores and oracle are; ``ToolEnv`` does the rest the
same way for every family: the turns (:class:`~agentgym.turns.TurnEngine`, shared with
every seat of a ``TeamEnv``: parsing, execution with the status contract, truncation,
telemetry), budgets, the fingerprint and the episode ``info``. The async twins
(``areset``/``astep``) are the primitives; the sync API submits them to the process-wide
runtime loop (see ``agentgym.runtime``) so many envs can share pools and limits.

The registered envs are thin subclasses that name a ``family_class``: ``ToolEnv`` builds
it from the keyword arguments that are not its own, and ``check_env_kwargs`` reads the
family's signature, so ``gym.make(id, **kwargs)`` is checked without the env repeating it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar, Literal, SupportsFloat

import gymnasium as gym
import numpy as np

from agentgym.errors import (
    ConfigError,
    EpisodeFinishedError,
    InvalidOptionError,
    ResetNeededError,
)
from agentgym.executor import ToolResult
from agentgym.family import ANSWER_TOOL, EpisodeView, TaskFamily, family_from_kwargs
from agentgym.fingerprint import Fingerprint
from agentgym.parsing import Parser
from agentgym.runtime import run_sync
from agentgym.spaces import UnicodeText
from agentgym.telemetry import Telemetry
from agentgym.tools import Tool
from agentgym.turns import TurnEngine, TurnSettings, seat_fingerprint_fields

__all__ = ["ToolEnv", "ANSWER_TOOL", "Split", "ParserName"]

Split = Literal["train", "validation", "test"]
ParserName = Literal["hermes", "tags"]


class ToolEnv(TurnSettings, gym.Env[str, str]):
    """One agent working on the tasks of a :class:`~agentgym.family.TaskFamily`.

    Args:
        family: the tasks, tools, prompts, scoring and oracle. A subclass with a
            ``family_class`` builds it from the keyword arguments that are not
            ``ToolEnv``'s own (``**family_kwargs``), so its constructor need not repeat
            the family's signature (``check_env_kwargs`` reads the family's).
        parser: ``"hermes"`` (``<tool_call>{json}</tool_call>``), ``"tags"``
            (``<search>...</search>``) or a ``Parser``.
        max_turns: the episode is truncated after this many steps.
        tool_output_budget_chars: the episode is truncated once the tool outputs shown to
            the agent add up to this many characters (bounds context length).
        max_action_chars: longer actions are cut (and the agent is told).
        max_observation_chars: upper bound of one observation (head+tail cut beyond it).
        split: which task split to draw from (``train``, ``validation``, ``test``).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}
    env_name: ClassVar[str] = "ToolEnv"
    env_version: ClassVar[int] = 0
    splits: ClassVar[tuple[str, ...]] = ("train", "validation", "test")
    reset_options: ClassVar[frozenset[str]] = frozenset({"task_id"})
    family_class: ClassVar[type[TaskFamily] | None] = None
    """The family a subclass builds from ``**family_kwargs`` when no ``family`` is given."""

    def __init__(
        self,
        family: TaskFamily | None = None,
        *,
        parser: ParserName | Parser = "hermes",
        max_turns: int = 8,
        tool_output_budget_chars: int = 32_000,
        max_action_chars: int = 32_768,
        max_observation_chars: int = 65_536,
        split: Split = "train",
        render_mode: Literal["ansi"] | None = None,
        **family_kwargs: Any,
    ) -> None:
        # Every check that can refuse the env runs before a family is built from kwargs: a
        # family may take shared resources (a retriever client), and a refused env is never
        # closed, so it must hold nothing.
        if max_turns < 1:
            raise ConfigError(f"Expected max_turns >= 1, actual value: {max_turns}")
        if family is not None and family_kwargs:
            raise ConfigError(f"Unknown kwarg(s) {sorted(family_kwargs)} for {type(self).__name__}: the family is "
                              "given, so its settings are its own")
        described_by = family if family is not None else self.family_class  # splits are a class attribute
        if described_by is not None:
            self.splits, self.reset_options = described_by.splits, described_by.reset_options
        self._init_turn_settings(parser=parser, tool_output_budget_chars=tool_output_budget_chars,
                                 max_action_chars=max_action_chars, max_observation_chars=max_observation_chars,
                                 split=split, render_mode=render_mode)
        self.max_turns = max_turns
        self.observation_space = UnicodeText(max_observation_chars)
        self.action_space = UnicodeText(max_action_chars)
        self.telemetry = Telemetry()
        self.tool_middleware: list[Callable[[Tool], Tool]] = []
        """Functions applied to every episode tool (not ``answer``) at reset: the seam for
        instrumentation and fault injection. They never change the fingerprint."""
        self._fingerprint: Fingerprint | None = None
        self._task: Any = None
        self._started = False
        self._done = True
        self._live_resources = False
        self._turns = TurnEngine([], self.parser, self.telemetry, max_action_chars)
        self._episode_start = time.perf_counter()
        if family is None and (self.family_class is not None or family_kwargs):
            family = self.make_family(family_kwargs, parser=parser, split=split)  # last: nothing refuses after it
        self.family = family
        if family is not None:
            self.env_name, self.env_version = family.name, family.version
            self.splits, self.reset_options = family.splits, family.reset_options

    def _registration_id(self) -> str | None:
        return self.spec.id if self.spec is not None else None  # set by gym.make after __init__

    def make_family(self, family_kwargs: dict[str, Any], *, parser: ParserName | Parser, split: str) -> TaskFamily:
        """Build ``family_class`` from the constructor's extra keyword arguments. Override
        when the family also needs the env's own settings (Search's style follows the parser)."""
        if self.family_class is None:
            raise ConfigError(f"Unknown kwarg(s) {sorted(family_kwargs)} for {type(self).__name__}, which has no "
                              "family_class; pass a TaskFamily instead")
        return family_from_kwargs(self.family_class, family_kwargs, owner=type(self).__name__)

    # ------------------------------------------------------------------ the family
    # Every question about the task goes to the family through these; a subclass without
    # a family (some tests use one) overrides them instead.
    def _family(self) -> TaskFamily:
        if self.family is None:
            raise NotImplementedError(f"{type(self).__name__} has no TaskFamily; pass one to ToolEnv(family)")
        return self.family

    def _new_task(self, rng: np.random.Generator, options: dict[str, Any]) -> Any:
        return self._family().new_task(rng, self.split, options)

    def _tools(self, task: Any) -> list[Tool]:
        return list(self._family().tools(task).values())

    def _prompt(self, task: Any) -> str:
        return self._family().prompt(task)

    def _score(self, task: Any, answer_args: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        return self._family().score(task, answer_args)

    def _task_facts(self, task: Any) -> dict[str, Any]:
        return self.family.task_facts(task) if self.family is not None else {}

    def oracle_action(self) -> str:
        """The next action of the oracle policy (uses the hidden solution)."""
        view = EpisodeView(turn=self._turns.turns, results=tuple(self.last_results), parser=self.parser.name)
        return self._family().oracle_action(self.task, view)

    def _system_prompt(self) -> str:
        if self.family is None:
            return "You are an agent that solves the user's task by calling tools. Answer with the answer tool."
        return self.family.system_prompt()

    def _fingerprint_fields(self) -> dict[str, Any]:
        return self.family.fingerprint_fields() if self.family is not None else {}

    async def _start_episode(self, task: Any) -> None:
        if self.family is not None:
            await self.family.open_episode(task)

    async def _end_episode(self) -> None:
        if self.family is not None:
            await self.family.close_episode()

    # ------------------------------------------------------------ public API
    @property
    def task(self) -> Any:
        """The current task, including its hidden solution (for oracles and graders)."""
        return self._task

    @property
    def last_results(self) -> list[ToolResult]:
        """The results of the last step's calls (empty after a step with none, and after reset)."""
        return self._turns.last_results

    @property
    def transcript(self) -> list[dict[str, Any]]:
        """The episode's chat so far (system, user, then every action and its results)."""
        return self._turns.transcript

    @property
    def fingerprint(self) -> Fingerprint:
        """Hash over everything that changes what the agent sees or how it is scored."""
        if self._fingerprint is None:
            seat = seat_fingerprint_fields(self._tools(None), self._system_prompt(), self.max_turns)
            self._fingerprint = self._assemble_fingerprint(seat, self._fingerprint_fields())
        return self._fingerprint

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        return run_sync(self.areset(seed=seed, options=options))

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        return run_sync(self.astep(action))

    def close(self) -> None:
        self._finish_close(self._close_all())
        super().close()

    async def _close_all(self) -> None:
        await self._release()
        if self.family is not None:
            await self.family.aclose()

    def score_answer(self, task: Any, answer: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """The reward and diagnostics this env gives ``answer`` (an ``answer`` call's
        arguments) for ``task``, without the answer tool's schema check: the seam the
        reward audit uses."""
        return self._score(task, dict(answer))

    def tools_for(self, task: Any) -> dict[str, Tool]:
        """The tools an episode of ``task`` has, by name (``None``: the fingerprint's)."""
        return {t.name: t for t in self._tools(task)}

    async def aclose(self) -> None:
        """Release the episode's resources now (the async twin of ``close``; a runner that
        owns the env calls it on the runtime loop). The env can be reset again."""
        await self._release()

    @property
    def episode_done(self) -> bool:
        """True between the end of an episode (or before the first reset) and the next reset."""
        return self._done

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m['role']}] {m['content']}" for m in self.transcript)

    # ------------------------------------------------------------- async API
    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode. Raises ``InvalidOptionError`` for unknown options and
        ``InfraError`` when the episode's resources cannot be had after retries."""
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - set(self.reset_options)
        if unknown:
            raise InvalidOptionError(
                f"Unknown reset option(s) {sorted(unknown)} for {self.env_id}; expected a subset of {sorted(self.reset_options)}."
            )
        await self._release()
        self._task = self._new_task(self.np_random, options)
        self._turns = TurnEngine([], self.parser, self.telemetry, self.max_action_chars)
        self._episode_start = time.perf_counter()
        self._started, self._done = True, True  # stays "done" until resources are held
        await self._start_episode(self._task)
        self._live_resources = True
        tools = self._tools(self._task)
        for wrap in self.tool_middleware:
            tools = [t if t.name == ANSWER_TOOL else wrap(t) for t in tools]
        system, user = self._system_prompt(), self._prompt(self._task)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        self._turns = TurnEngine(tools, self.parser, self.telemetry, self.max_action_chars, opening=messages)
        self._done = False
        info = {
            "messages": messages,
            "tools": [t.spec() for t in tools],
            "task_id": self._task.task_id,
            "fingerprint": str(self.fingerprint),
        }
        return self.opening_observation(system, tools, user), info

    async def astep(self, action: str | bytes) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run the tool calls in ``action``. Never raises for anything the agent wrote."""
        if not self._started:
            raise ResetNeededError(f"{self.env_id}: call reset() before step().")
        if self._done:
            raise EpisodeFinishedError(f"{self.env_id}: the episode has ended; call reset() to start a new one.")
        turn = await self._turns.take(action)
        engine = self._turns
        reward, diagnostics, terminated, truncated, obs = 0.0, {}, False, False, turn.text
        if engine.infra_failed:
            truncated = True  # dropped by the trainer; reward is not a learning signal
        elif engine.answer is not None:
            terminated = True
            reward, diagnostics = self._score(self._task, engine.answer)
        elif engine.turns >= self.max_turns or engine.tool_chars >= self.tool_output_budget_chars:
            truncated = True
            limit = "turn limit" if engine.turns >= self.max_turns else "tool output budget"
            obs += f"\n[episode ended: {limit} reached]"
        info: dict[str, Any] = {"messages": turn.messages, "task_id": self._task.task_id,
                                "fingerprint": str(self.fingerprint), "turn": engine.turns,
                                "tool_results": [r.as_info() for r in turn.results],
                                "infra_failed": engine.infra_failed}
        fitted = self.fit_observation(obs)
        if fitted.truncated:  # visible in the text (marker), in info and in the episode's count
            engine.note_observation_truncated()
            info["observation_truncated"] = True
        if terminated or truncated:
            info.update(self._episode_info(reward, diagnostics))
            self._done = True
            await self._release()
        return fitted.text, float(reward), terminated, truncated, info

    # ------------------------------------------------------------- internals
    def _episode_info(self, reward: float, diagnostics: dict[str, Any]) -> dict[str, Any]:
        engine = self._turns
        self.telemetry.record_episode(engine.used_tools(), engine.tool_names)
        return {
            **engine.episode_fields(),
            "infra_failed": engine.infra_failed,
            "answer": engine.answer,
            "reward": reward,
            "success": bool(reward >= 1.0 and not engine.infra_failed),
            "episode_s": time.perf_counter() - self._episode_start,
            **self._task_facts(self._task),
            **diagnostics,
        }

    async def _release(self) -> None:
        if self._live_resources:
            self._live_resources = False
            await self._end_episode()
