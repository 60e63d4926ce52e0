"""Checkers and fakes for team env authors (the multi-agent twin of ``agentgym.testing``).

* ``check_team_env(env)`` runs PettingZoo's ``parallel_api_test`` and then agentgym's
  contract: reset infos, hostile actions never raising, the oracle team finishing an
  episode with the episode-end fields in every agent's info, stepping after the end
  raising ``EpisodeFinishedError``.
* ``ProbeTeamEnv`` is a tiny team with knobs for tool latency and infrastructure faults,
  used by the package's own tests and benchmarks (no data, no Docker).
"""

from __future__ import annotations

import asyncio
import json
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from pettingzoo.test import parallel_api_test

from agentgym.env import ANSWER_TOOL
from agentgym.errors import AgentError, EpisodeFinishedError, InfraError
from agentgym.multi_agent.base import TeamEnv
from agentgym.testing import HOSTILE_ACTIONS
from agentgym.tools import Tool

__all__ = ["check_team_env", "ProbeTeamEnv", "ProbeTeamTask", "InFlight", "EPISODE_END_KEYS"]

EPISODE_END_KEYS = frozenset({"task_id", "fingerprint", "tool_calls", "truncations", "infra_failed", "answer",
                              "reward", "success", "end_reason", "role"})


def check_team_env(env: TeamEnv, *, num_cycles: int = 200, oracle_steps: int = 100) -> None:
    """Raise ``AssertionError`` (or the env's own error) when ``env`` breaks the contract."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the conformance test passes an unknown reset option on purpose
        parallel_api_test(env, num_cycles=num_cycles)
    obs, infos = env.reset(seed=0)
    for agent in env.possible_agents:
        for key in ("messages", "tools", "task_id", "fingerprint", "role", "active"):
            assert key in infos[agent], f"reset info of {agent} lacks {key!r}"
        assert env.observation_space(agent).contains(obs[agent])
    for action in HOSTILE_ACTIONS:
        if env.done:
            env.reset(seed=0)
        obs, *_ = env.step({a: action for a in env.agents if env.is_active(a)})
        assert all(env.observation_space(a).contains(o) for a, o in obs.items())
    env.reset(seed=1)
    final: dict[str, dict[str, Any]] = {}
    for _ in range(oracle_steps):
        obs, rewards, terms, truncs, infos = env.step(env.oracle_actions())
        final.update({a: infos[a] for a in infos if terms[a] or truncs[a]})
        if not env.agents:
            break
    else:
        raise AssertionError(f"the oracle team did not finish an episode in {oracle_steps} steps")
    assert set(final) == set(env.possible_agents), f"agents without an end: {set(env.possible_agents) - set(final)}"
    for agent, info in final.items():
        assert EPISODE_END_KEYS <= set(info), f"{agent}'s final info lacks {sorted(EPISODE_END_KEYS - set(info))}"
    try:
        env.step({})
    except EpisodeFinishedError:
        pass
    else:
        raise AssertionError("stepping after the end did not raise EpisodeFinishedError")


@dataclass
class InFlight:
    """Counts calls in flight at once (shared between envs to see overlap across them)."""

    now: int = 0
    peak: int = 0
    calls: int = 0

    async def hold(self, seconds: float) -> None:
        self.now += 1
        self.calls += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.now -= 1


@dataclass(frozen=True)
class ProbeTeamTask:
    task_id: str
    parts: tuple[int, ...]

    @property
    def secret(self) -> int:
        return sum(self.parts)


class ProbeTeamEnv(TeamEnv):
    """A lead and ``num_helpers`` helpers; each helper holds one part of a secret sum.

    Helpers act from the start: ``reveal`` shows the helper its part and ``send(text)``
    passes text to the lead (once; then the helper is done). The lead acts once every
    helper has sent (or left) and answers the sum with ``answer``. Knobs:

    Args:
        latency_s: ``wait`` sleeps this long; the oracle helpers call it alongside
            ``reveal`` when it is > 0 (tests overlap of tool calls).
        in_flight: an ``InFlight`` counter shared by the ``wait`` calls.
        infra_failures: the first N calls of ``flaky`` raise ``InfraError``.
        tool_max_retries: retries of ``flaky``.
        helper_max_turns, lead_max_turns: per-agent turn limits.
    """

    env_name = "ProbeTeam"

    def __init__(self, num_helpers: int = 2, *, latency_s: float = 0.0, in_flight: InFlight | None = None,
                 infra_failures: int = 0, tool_max_retries: int = 1, helper_max_turns: int = 4,
                 lead_max_turns: int = 3, **kwargs: Any) -> None:
        self.helpers = [f"helper_{i}" for i in range(num_helpers)]
        self.latency_s = latency_s
        self.in_flight = in_flight if in_flight is not None else InFlight()
        self.infra_failures = infra_failures
        self.tool_max_retries = tool_max_retries
        self.helper_max_turns, self.lead_max_turns = helper_max_turns, lead_max_turns
        self.flaky_calls = 0
        self.sent: dict[str, str] = {}
        super().__init__(**kwargs)

    def _agent_roles(self) -> dict[str, str]:
        return {"lead": "lead", **{h: "helper" for h in self.helpers}}

    def _new_task(self, rng: np.random.Generator, options: dict[str, Any]) -> ProbeTeamTask:
        parts = tuple(int(x) for x in rng.integers(0, 100, size=len(self.helpers)))
        return ProbeTeamTask(f"probe-team-{'-'.join(map(str, parts))}", parts)

    async def _start_episode(self, task: ProbeTeamTask) -> None:
        self.sent = {}

    def _tools(self, agent: str, task: ProbeTeamTask | None) -> list[Tool]:
        obj = lambda props, req: {"type": "object", "properties": props, "required": req,  # noqa: E731
                                  "additionalProperties": False}
        if agent == "lead":
            async def answer(answer: int) -> str:
                if answer < 0:
                    raise AgentError("the sum is never negative.")
                self.submit_final({"answer": answer})
                return "Answer recorded."
            return [Tool(ANSWER_TOOL, "Answer the sum.", obj({"answer": {"type": "integer"}}, ["answer"]), answer)]
        index = self.helpers.index(agent)

        async def reveal() -> str:
            assert task is not None
            return str(task.parts[index])

        async def send(text: str) -> str:
            if agent in self.sent:
                raise AgentError("you already sent your part.")
            self.sent[agent] = text
            self.tell("lead", agent, text)
            return "Sent."

        async def wait() -> str:
            await self.in_flight.hold(self.latency_s)
            return "waited"

        async def flaky() -> str:
            self.flaky_calls += 1
            if self.flaky_calls <= self.infra_failures:
                raise InfraError(f"injected failure {self.flaky_calls}")
            return "recovered"

        return [Tool("reveal", "Your part of the secret.", obj({}, []), reveal),
                Tool("send", "Send text to the lead (once).", obj({"text": {"type": "string"}}, ["text"]), send),
                Tool("wait", "Sleep a little.", obj({}, []), wait, timeout_s=30.0),
                Tool("flaky", "Fails with an infrastructure error at first.", obj({}, []), flaky,
                     max_retries=self.tool_max_retries)]

    def _system_prompt(self, agent: str) -> str:
        return "Find the secret sum as a team." if agent == "lead" else "Reveal your part and send it to the lead."

    def _prompt(self, agent: str, task: ProbeTeamTask) -> str:
        return f"You are {agent}."

    def _score(self, task: ProbeTeamTask, final: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        return float(final.get("answer") == task.secret), {"parts_sent": len(self.sent)}

    def _wants_turn(self, agent: str) -> bool:
        if agent == "lead":
            return all(h in self.sent or self.seats[h].retired is not None for h in self.helpers)
        return agent not in self.sent

    def _max_turns(self, agent: str) -> int:
        return self.lead_max_turns if agent == "lead" else self.helper_max_turns

    def _essential(self, agent: str) -> bool:
        return agent == "lead"

    def _agent_diagnostics(self, agent: str) -> dict[str, Any]:
        return {} if agent == "lead" else {"sent": agent in self.sent}

    def oracle_actions(self) -> dict[str, str]:
        actions = {}
        for agent in self.agents:
            if not self.is_active(agent):
                continue
            if agent == "lead":
                actions[agent] = _call(ANSWER_TOOL, {"answer": self.task.secret})
                continue
            revealed = [r for r in self.seats[agent].last_results if r.name == "reveal" and r.status == "ok"]
            if revealed:
                actions[agent] = _call("send", {"text": revealed[0].output})
            else:
                waits = _call("wait", {}) if self.latency_s > 0 else ""
                actions[agent] = _call("reveal", {}) + waits
        return actions


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"

