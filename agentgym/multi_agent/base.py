"""``TeamEnv``: a PettingZoo ``ParallelEnv`` of text agents that call tools.

Each agent is a seat with its own tools whose turns are taken by the same
:class:`~agentgym.turns.TurnEngine` as ``ToolEnv``'s (parser, ``ToolExecutor``, telemetry),
the fingerprint is assembled by the same ``TurnSettings``, and the team works on one task
of its ``family_class``. ``astep`` runs the turns of every acting agent concurrently on the shared
runtime loop, so the tool calls of different agents (and of different envs) overlap.

Turn-taking. Every live agent receives an observation each step, but only *active*
agents act: ``infos[agent]["active"]`` says whether the agent's next action will be read.
An inactive agent (a worker with nothing to do, a planner waiting for reports) gets an
empty observation; whatever it should see is held back and delivered, in order, in the
step where it becomes active again. A training loop can therefore append every
observation to the agent's conversation and generate only for active agents; actions of
inactive agents, and missing actions, are ignored (a missing action of an active agent
means "not this round", which costs no turn). At reset every agent, active or not,
receives its system prompt, tool listing and role prompt: the base of its conversation.

Ending. The team ends together: an accepted final answer terminates every agent with the
same team reward; the team turn limit, an essential agent out of turns or output budget,
or an infrastructure failure truncates every agent. A non-essential agent that runs out
of turns is *retired* (it stays in ``agents`` but never acts again and still receives the
team reward at the end), so a worker that never reports cannot hang the episode.

Subclass hooks: ``_agent_roles()``, ``_new_task(rng, options)``, ``_tools(agent, task)``
(``task=None`` for the fingerprint), ``_system_prompt(agent)``, ``_prompt(agent, task)``,
``_score(task, final)``, ``_wants_turn(agent)``, ``_max_turns(agent)``; optional
``_essential(agent)``, ``_on_retire(agent)``, ``_begin_step()``, ``_end_step()``,
``_gave_up()``, ``_task_facts(task)``, ``_agent_diagnostics(agent)``, ``_fingerprint_fields()``,
``async _start_episode(task)``, ``async _end_episode()``; and ``oracle_actions()`` for the
oracle team policy. The episode resources of the families built with ``new_family()`` are opened before
``_start_episode`` and closed after ``_end_episode`` by the base class.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import numpy as np
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from agentgym.errors import ConfigError, EpisodeFinishedError, ResetNeededError
from agentgym.family import ANSWER_TOOL, TaskFamily, family_from_kwargs
from agentgym.fingerprint import Fingerprint
from agentgym.multi_agent.errors import UnknownAgentError
from agentgym.multi_agent.seat import Seat
from agentgym.parsing import Parser
from agentgym.runtime import run_sync
from agentgym.spaces import UnicodeText
from agentgym.telemetry import Telemetry
from agentgym.tools import Tool
from agentgym.turns import TurnSettings, seat_fingerprint_fields

__all__ = ["TeamEnv", "EndReason"]

EndReason = Literal["answered", "infra_failed", "team_turn_limit", "agent_exhausted", "no_agreement", "stalled"]

ResetResult = tuple[dict[str, str], dict[str, dict[str, Any]]]
StepResult = tuple[dict[str, str], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]


class TeamEnv(TurnSettings, ParallelEnv[str, str, str]):
    """Base class of agentgym's multi-agent envs. See the module docstring for hooks.

    A team env is team rules (roles, who acts when, what ends the episode) over a
    :class:`~agentgym.family.TaskFamily`: ``family_class`` names it, the constructor's
    extra keyword arguments (``**family_kwargs``) configure it, and :meth:`new_family`
    builds one per seat that needs its own episode resources (a sandbox).

    Args:
        parser: ``"hermes"`` or a ``Parser``. The tag parser cannot express tools with two
            arguments (``delegate``), so ``"tags"`` is refused.
        max_team_turns: the episode is truncated after this many steps of the team.
        tool_output_budget_chars: an agent whose tool outputs add up to this many
            characters is out of budget (like running out of turns).
        max_action_chars: longer actions are cut (and the agent is told).
        max_observation_chars: upper bound of one observation (head+tail cut beyond it).
        split: which task split to draw from (``train``, ``validation``, ``test``).
        **family_kwargs: the settings of ``family_class`` (refused when there is none).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "name": "TeamEnv", "is_parallelizable": True}
    env_name: ClassVar[str] = "Team"
    env_version: ClassVar[int] = 0
    splits: ClassVar[tuple[str, ...]] = ("train", "validation", "test")
    reset_options: ClassVar[frozenset[str]] = frozenset({"task_id"})
    family_class: ClassVar[type[TaskFamily] | None] = None
    """The family the team works over, built by :meth:`new_family` from ``**family_kwargs``."""

    def __init__(self, *, parser: Literal["hermes"] | Parser = "hermes", max_team_turns: int = 24,
                 tool_output_budget_chars: int = 32_000, max_action_chars: int = 32_768,
                 max_observation_chars: int = 65_536, split: Literal["train", "validation", "test"] = "train",
                 render_mode: Literal["ansi"] | None = None, **family_kwargs: Any) -> None:
        if parser == "tags":
            raise ConfigError("Expected parser 'hermes' (or a Parser object) for a team env, actual value: 'tags'; "
                              "the tag parser cannot express multi-argument tools such as delegate.")
        if max_team_turns < 1:
            raise ConfigError(f"Expected max_team_turns >= 1, actual value: {max_team_turns}")
        if family_kwargs and self.family_class is None:
            raise ConfigError(f"Unknown kwarg(s) {sorted(family_kwargs)} for {type(self).__name__}, which has no "
                              "family_class")
        self.family_kwargs = family_kwargs
        if self.family_class is not None:  # the family's splits and reset options are the team's
            self.splits, self.reset_options = self.family_class.splits, self.family_class.reset_options
        self.families: dict[str, TaskFamily] = {}
        """The families built by :meth:`new_family`, by the name it was given (a seat's, or
        what the seats sharing it have in common): the env opens and closes their episode
        resources around each episode and closes them with the env."""
        self._init_turn_settings(parser=parser, tool_output_budget_chars=tool_output_budget_chars,
                                 max_action_chars=max_action_chars, max_observation_chars=max_observation_chars,
                                 split=split, render_mode=render_mode)
        self.max_team_turns = max_team_turns
        self.tool_middleware: list[Callable[[Tool], Tool]] = []
        """Functions applied to every seat's tools (not ``answer``) at reset, as in ``ToolEnv``."""
        self.roles: dict[str, str] = dict(self._agent_roles())
        self.possible_agents: list[str] = list(self.roles)
        self.agents: list[str] = []
        self.observation_spaces = {a: UnicodeText(max_observation_chars) for a in self.possible_agents}
        self.action_spaces = {a: UnicodeText(max_action_chars) for a in self.possible_agents}
        self.telemetry = Telemetry()
        self.np_random, _ = seeding.np_random()
        self.seats: dict[str, Seat] = {}
        self._fingerprint: Fingerprint | None = None
        self._task: Any = None
        self._started = False
        self._live_resources = False
        self._team_turn = 0
        self._final: dict[str, Any] | None = None
        self._episode_start = time.perf_counter()
        self.acting: frozenset[str] = frozenset()  # the agents whose turns run in the current step

    def new_family(self, name: str, **overrides: Any) -> TaskFamily:
        """A new ``family_class`` instance with the env's family settings (and ``overrides``),
        kept as ``families[name]``: one per seat that holds episode resources of its own (a
        sandbox), or one that several seats share."""
        if self.family_class is None:
            raise ConfigError(f"{type(self).__name__} has no family_class")
        family = family_from_kwargs(self.family_class, {**self.family_kwargs, **overrides}, owner=type(self).__name__)
        self.families[name] = family
        return family

    # ------------------------------------------------------------------ hooks
    def _agent_roles(self) -> dict[str, str]:
        """Agent id -> role name, in a fixed order (the order of ``possible_agents``)."""
        raise NotImplementedError

    def _new_task(self, rng: np.random.Generator, options: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _tools(self, agent: str, task: Any) -> list[Tool]:
        raise NotImplementedError

    def _system_prompt(self, agent: str) -> str:
        raise NotImplementedError

    def _prompt(self, agent: str, task: Any) -> str:
        raise NotImplementedError

    def _score(self, task: Any, final: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        raise NotImplementedError

    def _wants_turn(self, agent: str) -> bool:
        """Whether the (not retired) agent has something to act on after this step."""
        raise NotImplementedError

    def _max_turns(self, agent: str) -> int:
        raise NotImplementedError

    def _essential(self, agent: str) -> bool:
        """Whether the team cannot go on without this agent (its exhaustion ends the episode)."""
        return True

    def _on_retire(self, agent: str) -> None:
        """A non-essential agent stopped for good; e.g. tell whoever waits for it."""

    def _begin_step(self) -> None:
        """Called before the turns of a step run (snapshot state the tools validate against)."""

    def _end_step(self) -> None:
        """Called after the turns of a step ran (apply what the tools scheduled)."""

    def _gave_up(self) -> bool:
        """Whether the team can no longer reach an answer (ends the episode as ``no_agreement``)."""
        return False

    def _task_facts(self, task: Any) -> dict[str, Any]:
        """What kind of task this is (``TaskFamily.task_facts``), in every agent's
        episode-end info, answered or not."""
        return {}

    def _agent_diagnostics(self, agent: str) -> dict[str, Any]:
        """Per-agent episode-end diagnostics beyond the ToolEnv fields."""
        return {}

    def _fingerprint_fields(self) -> dict[str, Any]:
        return {}

    async def _start_episode(self, task: Any) -> None:
        """Acquire per-episode resources. Raise ``InfraError`` if impossible."""

    async def _end_episode(self) -> None:
        """Release per-episode resources. Must be safe to call twice."""

    def oracle_actions(self) -> dict[str, str]:
        """The next actions of the oracle team (uses the hidden solution), for active agents."""
        raise NotImplementedError

    # ------------------------------------------------------------ public API
    @property
    def task(self) -> Any:
        """The current task, including its hidden solution (for oracles and graders)."""
        return self._task

    @property
    def team_turn(self) -> int:
        return self._team_turn

    @property
    def done(self) -> bool:
        """True between the end of an episode and the next reset (and before the first)."""
        return not self.agents

    def observation_space(self, agent: str) -> UnicodeText:
        """The same object on every call, as PettingZoo requires (seeding works through it)."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> UnicodeText:
        return self.action_spaces[agent]

    def has_news(self, agent: str) -> bool:
        """Whether messages from other agents wait in ``agent``'s next observation."""
        return self.seats[agent].pending.news > 0

    def is_active(self, agent: str) -> bool:
        """Whether ``agent``'s next action will be read."""
        seat = self.seats.get(agent)
        return bool(seat and agent in self.agents and seat.retired is None and self._wants_turn(agent))

    @property
    def fingerprint(self) -> Fingerprint:
        """Hash over everything that changes what any agent sees or how the team is scored."""
        if self._fingerprint is None:
            roles: dict[str, Any] = {}
            for agent, role in self.roles.items():
                if role not in roles:
                    roles[role] = seat_fingerprint_fields(self._tools(agent, None), self._system_prompt(agent),
                                                          self._max_turns(agent))
            seating = {"agents": self.roles, "roles": roles, "max_team_turns": self.max_team_turns}
            self._fingerprint = self._assemble_fingerprint(seating, self._fingerprint_fields())
        return self._fingerprint

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        return run_sync(self.areset(seed=seed, options=options))

    def step(self, actions: dict[str, Any]) -> StepResult:
        return run_sync(self.astep(actions))

    def close(self) -> None:
        self._finish_close(self._close_all())

    async def _close_all(self) -> None:
        await self._release()
        for family in self.families.values():
            await family.aclose()  # what a family holds for its life (a retriever client)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{a}:{m['role']}] {m['content']}" for a, s in self.seats.items() for m in s.transcript)

    # ------------------------------------------------------------- async API
    async def areset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        """Start an episode. Unknown options are ignored with a warning (PettingZoo's
        conformance test passes arbitrary ones); raises ``InfraError`` when the episode's
        resources cannot be had."""
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        options = dict(options or {})
        unknown = sorted(set(options) - set(self.reset_options))
        if unknown:
            warnings.warn(f"{self.env_id}: ignoring unknown reset option(s) {unknown}; "
                          f"known options: {sorted(self.reset_options)}", stacklevel=2)
            options = {k: v for k, v in options.items() if k in self.reset_options}
        await self._release()
        self.agents = []
        self._task = self._new_task(self.np_random, options)
        self._team_turn, self._final, self._started = 0, None, True
        self._episode_start = time.perf_counter()
        await self._open_families(self._task)  # before the tools, as in ToolEnv: it may complete the task
        try:
            await self._start_episode(self._task)
        except BaseException:
            await self._close_families()
            raise
        self._live_resources = True
        self.seats = {}
        for agent, role in self.roles.items():
            system, user = self._system_prompt(agent), self._prompt(agent, self._task)
            messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
            tools = self._tools(agent, self._task)
            for wrap in self.tool_middleware:
                tools = [t if t.name == ANSWER_TOOL else wrap(t) for t in tools]
            self.seats[agent] = Seat(agent, role, tools, self.parser, self.telemetry, self.max_action_chars, messages)
        self.agents = list(self.possible_agents)
        observations, infos = {}, {}
        for agent, seat in self.seats.items():
            system, user = (m["content"] for m in seat.transcript[:2])
            observations[agent] = self.opening_observation(system, seat.tools, user)
            infos[agent] = {**self._step_info(agent), "messages": list(seat.transcript[:2]),
                            "tools": [t.spec() for t in seat.tools]}
        return observations, infos

    async def astep(self, actions: dict[str, Any]) -> StepResult:
        """Run the turns of the active agents. Never raises for anything an agent wrote."""
        if not self._started:
            raise ResetNeededError(f"{self.env_id}: call reset() before step().")
        if not self.agents:
            raise EpisodeFinishedError(f"{self.env_id}: the episode has ended; call reset() to start a new one.")
        unknown = sorted(set(actions) - set(self.possible_agents))
        if unknown:
            raise UnknownAgentError(f"Expected actions keyed by agents in {self.possible_agents}, "
                                    f"actual unknown key(s): {unknown}")
        acting = [a for a in self.agents if a in actions and self.is_active(a)]
        self.acting = frozenset(acting)
        self._team_turn += 1
        self._begin_step()
        await asyncio.gather(*(self.seats[a].act(actions[a]) for a in acting))
        for agent in acting:
            self._check_exhausted(agent)
        self._end_step()
        reason = self._end_reason()
        return await self._deliver(acting, reason)

    # ------------------------------------------------------------- helpers for subclasses
    def submit_final(self, final: dict[str, Any]) -> bool:
        """Record the team's final answer (first one wins). Call it from the tool that ends
        the episode; the team is scored at the end of the step. Returns False if one was
        already recorded."""
        if self._final is not None:
            return False
        self._final = dict(final)
        return True

    def tell(self, agent: str, sender: str, text: str) -> None:
        """Queue a message for ``agent``'s next observation; it wakes the agent."""
        self.seats[agent].tell(sender, text)

    # ------------------------------------------------------------- internals
    def _check_exhausted(self, agent: str) -> None:
        seat = self.seats[agent]
        if seat.turns >= self._max_turns(agent):
            why = f"used all {self._max_turns(agent)} turns"
        elif seat.tool_chars >= self.tool_output_budget_chars:
            why = f"used its tool output budget of {self.tool_output_budget_chars} characters"
        else:
            return
        seat.retired = why
        if not self._essential(agent):
            seat.pending.add(f"[you have {why} and take no further turns]", [])
            self._on_retire(agent)

    def _end_reason(self) -> EndReason | None:
        live = [self.seats[a] for a in self.agents]
        if any(s.infra_failed for s in live):
            return "infra_failed"  # dropped by the trainer; the reward is not a learning signal
        if self._final is not None:
            return "answered"
        if any(s.retired is not None and self._essential(s.agent) for s in live):
            return "agent_exhausted"
        if self._gave_up():
            return "no_agreement"
        if self._team_turn >= self.max_team_turns:
            return "team_turn_limit"
        if not any(self.is_active(a) for a in self.agents):
            return "stalled"
        return None

    async def _deliver(self, acting: list[str], reason: EndReason | None) -> StepResult:
        reward, diagnostics = 0.0, {}
        if reason == "answered":
            reward, diagnostics = self._score(self._task, self._final or {})
        obs, rewards, terms, truncs, infos = {}, {}, {}, {}, {}
        for agent in self.agents:
            seat = self.seats[agent]
            if reason is not None or self.is_active(agent):
                text, messages = seat.pending.take()
            else:
                text, messages = "", []
            if reason is not None and reason != "answered":
                text += f"\n[episode ended: {reason.replace('_', ' ')}]"
            fitted = self.fit_observation(text)
            if fitted.truncated:  # visible in the text (marker), in info and in the agent's count
                seat.note_observation_truncated()
            obs[agent] = fitted.text
            rewards[agent] = float(reward)
            terms[agent] = reason == "answered"
            truncs[agent] = reason is not None and reason != "answered"
            infos[agent] = {**self._step_info(agent), "messages": messages, "acted": agent in acting,
                            "tool_results": [r.as_info() for r in seat.last_results] if agent in acting else []}
            if fitted.truncated:
                infos[agent]["observation_truncated"] = True
            if reason is not None:
                infos[agent].update(self._episode_info(agent, reason, reward, diagnostics), active=False)
        if reason is not None:
            self._record_team_episode()
            self.agents = []
            await self._release()
        return obs, rewards, terms, truncs, infos

    def _record_team_episode(self) -> None:
        """One telemetry episode per team episode; a tool counts as used if any agent used it."""
        seats = self.seats.values()
        used = {n for s in seats for n in s.used_tools()}
        self.telemetry.record_episode(used, sorted({n for s in seats for n in s.tool_names}))  # same order in every process

    def _step_info(self, agent: str) -> dict[str, Any]:
        seat = self.seats[agent]
        return {"task_id": self._task.task_id, "fingerprint": str(self.fingerprint), "role": seat.role,
                "active": self.is_active(agent), "turn": seat.turns, "team_turn": self._team_turn,
                "infra_failed": any(s.infra_failed for s in self.seats.values())}

    def _episode_info(self, agent: str, reason: EndReason, reward: float,
                      diagnostics: dict[str, Any]) -> dict[str, Any]:
        infra = reason == "infra_failed"
        return {
            **self.seats[agent].episode_info(),
            "infra_failed": infra,
            "answer": self._final,
            "reward": reward,
            "success": bool(reward >= 1.0 and not infra),
            "end_reason": reason,
            "team_turns": self._team_turn,
            "episode_s": time.perf_counter() - self._episode_start,
            **self._task_facts(self._task),
            **diagnostics,
            **self._agent_diagnostics(agent),
        }

    async def aclose(self) -> None:
        """Release the episode's resources now (the async twin of ``close``); the env can
        be reset again."""
        await self._release()

    async def _release(self) -> None:
        if self._live_resources:
            self._live_resources = False
            try:
                await self._end_episode()
            finally:
                await self._close_families()

    async def _open_families(self, task: Any) -> None:
        """Every family's episode resources, or none: a failure closes those already open."""
        opened: list[TaskFamily] = []
        for family in self.families.values():
            try:
                await family.open_episode(task)
            except BaseException:
                for earlier in opened:
                    await earlier.close_episode()
                raise
            opened.append(family)

    async def _close_families(self) -> None:
        for family in self.families.values():
            await family.close_episode()  # safe to call twice
