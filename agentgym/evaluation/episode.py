"""Playing one evaluated episode with an agent and writing down everything about it.

Single-agent envs and team envs (every seat played by the agent) end in the same record:
the messages, every tool call with its status, the reward and final ``info``, token
counts and latency, and the episode's plan (index, task, sample, seed). Failures are
sorted by who caused them: an env that cannot start (``InfraError`` at reset) or a model
server that failed (:class:`~agentgym.evaluation.agents.ModelInfraError`) makes the
episode ``infra_failed`` with the source named; a request the server rejected as invalid
(:class:`~agentgym.evaluation.agents.ModelRejectedError`) ends the episode as the agent's
outcome.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from agentgym.errors import InfraError
from agentgym.evaluation.agents import ModelInfraError, ModelRejectedError, SeatState, Turn
from agentgym.wrappers import areset, astep, env_attr

__all__ = ["EpisodePlan", "play_episode", "play_team_episode"]

_DROPPED_INFO = ("messages", "tool_results", "fingerprint", "tools", "agents")


@dataclass(frozen=True)
class EpisodePlan:
    """Which episode to play: episode ``index`` is sample ``sample`` of task ``task_index``,
    reset with ``seed``."""

    index: int
    task_index: int
    sample: int
    seed: int
    sampling_seed: int | None = None


@dataclass
class _Tally:
    """What accumulates over an episode's turns."""

    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    agent_s: float = 0.0
    model_turns: int = 0

    def add_turn(self, turn: Turn) -> None:
        self.prompt_tokens += turn.prompt_tokens
        self.completion_tokens += turn.completion_tokens
        self.agent_s += turn.latency_s
        self.model_turns += 1

    def add_results(self, results: list[dict[str, Any]], turn: int, seat: str | None = None) -> None:
        for r in results:
            call = {"turn": turn, "name": r.get("name"), "status": r.get("status"),
                    "latency_ms": r.get("latency_ms"), "retries": r.get("retries", 0), "truncated": r.get("truncated", False)}
            self.tool_calls.append(call if seat is None else {"seat": seat, **call})


def _record(plan: EpisodePlan, start: float, tally: _Tally, **fields: Any) -> dict[str, Any]:
    base = {"episode": plan.index, "task_index": plan.task_index, "sample": plan.sample, "seed": plan.seed,
            "task_id": None, "reward": 0.0, "success": False, "infra_failed": False, "turns": 0}
    return {**base, **fields, "tool_calls": tally.tool_calls,
            "tokens": {"prompt": tally.prompt_tokens, "completion": tally.completion_tokens},
            "latency_s": round(time.perf_counter() - start, 6), "agent_s": round(tally.agent_s, 6)}


def _final_info(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k not in _DROPPED_INFO}


async def play_episode(env: Any, agent: Any, plan: EpisodePlan) -> dict[str, Any]:
    """Play one episode of a single-agent env (``gym.make`` result) with ``agent``."""
    start, tally = time.perf_counter(), _Tally()
    try:
        obs, info = await areset(env, seed=plan.seed)
    except InfraError as e:
        return _record(plan, start, tally, infra_failed=True, infra_source="env", error=str(e), messages=[])
    state = SeatState(env, obs, info, list(info["messages"]), list(info["tools"]), plan.index,
                      extra={"parser": env_attr(env, "parser"), "sampling_seed": plan.sampling_seed})
    fields: dict[str, Any] = {"task_id": info.get("task_id")}
    while True:
        try:
            turn = await agent.act(state)
        except ModelInfraError as e:
            return _record(plan, start, tally, **fields, infra_failed=True, infra_source="model", error=str(e),
                           turns=state.turn, messages=state.messages)
        except ModelRejectedError as e:
            return _record(plan, start, tally, **fields, end="model_rejected", error=str(e), turns=state.turn,
                           messages=state.messages)
        tally.add_turn(turn)
        state.messages.append(turn.message)
        obs, reward, terminated, truncated, info = await astep(env, turn.action)
        tally.add_results(info.get("tool_results", []), state.turn)
        state.messages.extend(info.get("messages", []))
        state.observation, state.info, state.turn = obs, info, state.turn + 1
        if terminated or truncated:
            infra = bool(info.get("infra_failed"))
            return _record(plan, start, tally, **fields, reward=float(reward), success=bool(info.get("success")),
                           infra_failed=infra, **({"infra_source": "env"} if infra else {}),
                           end="answered" if terminated else "truncated", turns=state.turn,
                           messages=state.messages, info=_final_info(info))


async def play_team_episode(env: Any, agent: Any, plan: EpisodePlan) -> dict[str, Any]:
    """Play one episode of a team env with every seat played by ``agent`` (or, for a scripted
    team policy wrapped by :class:`TeamPolicyAgent`, the team acting as one)."""
    start, tally = time.perf_counter(), _Tally()
    try:
        observations, infos = await env.areset(seed=plan.seed)
    except InfraError as e:
        return _record(plan, start, tally, infra_failed=True, infra_source="env", error=str(e), seats={})
    parser = getattr(env, "parser", None)
    seats = {a: SeatState(env, observations[a], infos[a], list(infos[a]["messages"]), list(infos[a]["tools"]),
                          plan.index, seat=a, extra={"parser": parser, "sampling_seed": plan.sampling_seed})
             for a in env.agents}
    task_id = next(iter(infos.values())).get("task_id")
    final: dict[str, dict[str, Any]] = {}
    team_turn = 0
    while env.agents:
        active = [a for a in env.agents if env.is_active(a)]
        try:
            turns = await _team_turns(agent, env, seats, active)
        except ModelInfraError as e:
            return _record(plan, start, tally, task_id=task_id, infra_failed=True, infra_source="model", error=str(e),
                           turns=team_turn, seats=_seat_messages(seats))
        except ModelRejectedError as e:
            return _record(plan, start, tally, task_id=task_id, end="model_rejected", error=str(e), turns=team_turn,
                           seats=_seat_messages(seats))
        for a, turn in turns.items():
            tally.add_turn(turn)
            seats[a].messages.append(turn.message)
        observations, _, terminated, truncated, infos = await env.astep({a: t.action for a, t in turns.items()})
        for a, info in infos.items():
            tally.add_results(info.get("tool_results", []), team_turn, seat=a)
            seat = seats[a]
            seat.messages.extend(info.get("messages", []))
            seat.observation, seat.info = observations.get(a, ""), info
            seat.turn += int(a in turns)
            if terminated[a] or truncated[a]:
                final[a] = info
        team_turn += 1
    first = final[env.possible_agents[0]]
    infra = bool(first.get("infra_failed"))
    return _record(plan, start, tally, task_id=task_id, reward=float(first.get("reward", 0.0)),
                   success=bool(first.get("success")), infra_failed=infra, **({"infra_source": "env"} if infra else {}),
                   end=first.get("end_reason"), turns=int(first.get("team_turns", team_turn)),
                   seats=_seat_messages(seats),
                   info={**_final_info(first), "agents": {a: _final_info(i) for a, i in final.items()}})


def _seat_messages(seats: dict[str, SeatState]) -> dict[str, Any]:
    return {a: {"role": s.info.get("role"), "messages": s.messages} for a, s in seats.items()}


async def _team_turns(agent: Any, env: Any, seats: dict[str, SeatState], active: list[str]) -> dict[str, Turn]:
    """This round's turns: a scripted team acts as one; a model acts for each active seat
    at once (a failed seat fails the round after the others have answered)."""
    if hasattr(agent, "act_team"):
        return await agent.act_team(env, seats)
    results = await asyncio.gather(*(agent.act(seats[a]) for a in active), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return dict(zip(active, results))  # type: ignore[arg-type]
