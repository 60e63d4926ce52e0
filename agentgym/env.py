"""``ToolEnv``: a Gymnasium env whose actions are text with tool calls in it.

``ToolEnv(family)`` drives a :class:`~agentgym.family.TaskFamily` for one agent: the family
says what the tasks, tools, prompts, scores and oracle are; ``ToolEnv`` does the rest the
same way for every family: parsing, execution with the status contract, truncation,
budgets, telemetry, the fingerprint and the episode ``info``. The async twins
(``areset``/``astep``) are the primitives; the sync API submits them to the process-wide
runtime loop (see ``agentgym.runtime``) so many envs can share pools and limits.

The registered envs are thin subclasses that build their family from the env's keyword
arguments (so ``gym.make(id, **kwargs)`` and its checks see real signatures).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
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
from agentgym.executor import UNPARSED, ToolExecutor, ToolResult
from agentgym.family import ANSWER_TOOL, EpisodeView, TaskFamily
from agentgym.fingerprint import Fingerprint, make_fingerprint
from agentgym.parsing import FORMAT_NOTE, Parser, make_parser, normalise_action
from agentgym.runtime import in_runtime_loop, run_sync
from agentgym.spaces import UnicodeText
from agentgym.telemetry import Telemetry
from agentgym.tools import Tool
from agentgym.truncation import truncate_head_tail

__all__ = ["ToolEnv", "ANSWER_TOOL", "Split", "ParserName"]

Split = Literal["train", "validation", "test"]
_closing: set[asyncio.Task[None]] = set()
"""Closes started on the runtime loop, kept referenced until they finish."""
ParserName = Literal["hermes", "tags"]


def check_split_and_render_mode(split: str, splits: tuple[str, ...], render_mode: str | None) -> None:
    """Constructor checks shared by single- and multi-agent envs."""
    if split not in splits:
        raise ConfigError(f"Expected split in {splits}, actual value: {split!r}")
    if render_mode not in (None, "ansi"):
        raise ConfigError(f"Expected render_mode None or 'ansi', actual value: {render_mode!r}")


class ToolEnv(gym.Env[str, str]):
    """One agent working on the tasks of a :class:`~agentgym.family.TaskFamily`.

    Args:
        family: the tasks, tools, prompts, scoring and oracle.
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
    ) -> None:
        if max_turns < 1:
            raise ConfigError(f"Expected max_turns >= 1, actual value: {max_turns}")
        self.family = family
        if family is not None:
            self.env_name, self.env_version = family.name, family.version
            self.splits, self.reset_options = family.splits, family.reset_options
        check_split_and_render_mode(split, self.splits, render_mode)
        self.parser = make_parser(parser)
        self.max_turns = max_turns
        self.tool_output_budget_chars = tool_output_budget_chars
        self.max_action_chars = max_action_chars
        self.max_observation_chars = max_observation_chars
        self.split = split
        self.render_mode = render_mode
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
        self._executor: ToolExecutor | None = None
        self._tool_names: list[str] = []
        self.last_results: list[ToolResult] = []
        self.transcript: list[dict[str, Any]] = []
        self._reset_episode_counters()

    # ------------------------------------------------------------------ the family
    # Every question about the task goes to the family through these; a subclass that
    # predates families (tests use some) may still override them.
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

    def oracle_action(self) -> str:
        """The next action of the oracle policy (uses the hidden solution)."""
        view = EpisodeView(turn=self._turn, results=tuple(self.last_results), parser=self.parser.name)
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
    def env_id(self) -> str:
        return f"agentgym/{self.env_name}-v{self.env_version}"

    @property
    def fingerprint(self) -> Fingerprint:
        """Hash over everything that changes what the agent sees or how it is scored."""
        if self._fingerprint is None:
            tools = self._tools(None)
            self._fingerprint = make_fingerprint({
                "env": self.env_id,
                "split": self.split,
                "parser": self.parser.fingerprint(),
                "tools": {t.name: t.schema_fields() for t in tools},
                "system_prompt": self._system_prompt(),
                "max_turns": self.max_turns,
                "tool_output_budget_chars": self.tool_output_budget_chars,
                "max_action_chars": self.max_action_chars,
                "max_observation_chars": self.max_observation_chars,
                **self._fingerprint_fields(),
            })
        return self._fingerprint

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        return run_sync(self.areset(seed=seed, options=options))

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        return run_sync(self.astep(action))

    def close(self) -> None:
        if in_runtime_loop():  # closed from a coroutine on the loop: finish there, do not block it
            task = asyncio.get_running_loop().create_task(self._close_all())
            _closing.add(task)
            task.add_done_callback(_closing.discard)
        else:
            run_sync(self._close_all())
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
        self._reset_episode_counters()
        self._started, self._done = True, True  # stays "done" until resources are held
        await self._start_episode(self._task)
        self._live_resources = True
        tools = self._tools(self._task)
        for wrap in self.tool_middleware:
            tools = [t if t.name == ANSWER_TOOL else wrap(t) for t in tools]
        self._tool_names = [t.name for t in tools]
        self._executor = ToolExecutor(tools, self.telemetry)
        system, user = self._system_prompt(), self._prompt(self._task)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        self.transcript = list(messages)
        self._done = False
        obs = self._fit(f"{system}\n\n{self._tool_listing(tools)}\n\n{user}")
        info = {
            "messages": messages,
            "tools": [t.spec() for t in tools],
            "task_id": self._task.task_id,
            "fingerprint": str(self.fingerprint),
        }
        return obs, info

    async def astep(self, action: str | bytes) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run the tool calls in ``action``. Never raises for anything the agent wrote."""
        if not self._started:
            raise ResetNeededError(f"{self.env_id}: call reset() before step().")
        if self._done:
            raise EpisodeFinishedError(f"{self.env_id}: the episode has ended; call reset() to start a new one.")
        text, notes = normalise_action(action, self.max_action_chars)
        self._turn += 1
        self.transcript.append({"role": "assistant", "content": text})
        calls = self.parser.parse(text)
        assert self._executor is not None
        if not calls:
            self.telemetry.record_call(UNPARSED, "parse_error", 0.0, 0, False)
            self.last_results = []
            outputs = [(FORMAT_NOTE, "\n".join(notes + [self.parser.format_hint(self._tool_names)]))]
        else:
            results = await self._execute(calls)
            self.last_results = results
            outputs = [(r.name, r.output) for r in results]
            if notes:
                outputs.insert(0, (FORMAT_NOTE, "\n".join(notes)))
        return await self._finish_step(outputs)

    # ------------------------------------------------------------- internals
    def _reset_episode_counters(self) -> None:
        self.last_results = []
        self._turn = 0
        self._tool_chars = 0
        self._truncations = 0
        self._tool_calls: Counter[str] = Counter()
        self._infra_failed = False
        self._answer: dict[str, Any] | None = None
        self._reward = 0.0
        self._diagnostics: dict[str, Any] = {}
        self._step_results: list[dict[str, Any]] = []
        self._episode_start = time.perf_counter()

    async def _execute(self, calls: list[Any]) -> list[ToolResult]:
        assert self._executor is not None
        results = await self._executor.execute_turn(calls, ANSWER_TOOL)
        for r in results:
            self._tool_calls[r.name] += 1
            self._truncations += int(r.truncated)
            self._step_results.append(r.as_info())
            if r.status == "infra_error":
                self._infra_failed = True
            if r.name == ANSWER_TOOL and r.status == "ok" and self._answer is None:
                self._answer = dict(r.arguments)
        return results

    async def _finish_step(self, outputs: list[tuple[str, str]]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, messages = self.parser.render_results(outputs)
        self._tool_chars += sum(len(o) for _, o in outputs)
        reward, terminated, truncated = 0.0, False, False
        if self._infra_failed:
            truncated = True  # dropped by the trainer; reward is not a learning signal
        elif self._answer is not None:
            terminated = True
            reward, self._diagnostics = self._score(self._task, self._answer)
        elif self._turn >= self.max_turns or self._tool_chars >= self.tool_output_budget_chars:
            truncated = True
            limit = "turn limit" if self._turn >= self.max_turns else "tool output budget"
            obs += f"\n[episode ended: {limit} reached]"
        self.transcript.extend(messages)
        info: dict[str, Any] = {"messages": messages, "task_id": self._task.task_id,
                                "fingerprint": str(self.fingerprint), "turn": self._turn,
                                "tool_results": [r.as_info() for r in self.last_results],
                                "infra_failed": self._infra_failed}
        fitted = truncate_head_tail(obs, self.max_observation_chars)
        if fitted.truncated:  # visible in the text (marker), in info and in the episode's count
            self._truncations += 1
            info["observation_truncated"] = True
        if terminated or truncated:
            info.update(self._episode_info(reward))
            self._done = True
            await self._release()
        return fitted.text, float(reward), terminated, truncated, info

    def _episode_info(self, reward: float) -> dict[str, Any]:
        self.telemetry.record_episode(
            (n for n, c in self._tool_calls.items() if c and n in self._tool_names), self._tool_names
        )
        return {
            "tool_calls": dict(self._tool_calls),
            "truncations": self._truncations,
            "infra_failed": self._infra_failed,
            "answer": self._answer,
            "reward": reward,
            "success": bool(reward >= 1.0 and not self._infra_failed),
            "turns": self._turn,
            "tool_output_chars": self._tool_chars,
            "episode_s": time.perf_counter() - self._episode_start,
            **self._diagnostics,
        }

    async def _release(self) -> None:
        if self._live_resources:
            self._live_resources = False
            await self._end_episode()

    def _fit(self, text: str) -> str:
        return truncate_head_tail(text, self.max_observation_chars).text

    def _tool_listing(self, tools: list[Tool]) -> str:
        lines = ["Tools:"]
        for t in tools:
            params = ", ".join(t.parameters.get("properties", {}))
            lines.append(f"- {t.name}({params}): {t.description}")
        return "\n".join(lines)
