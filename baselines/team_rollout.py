"""Asynchronous rollout of team envs (:mod:`agentgym.multi_agent`) with one shared policy.

A team episode is one coroutine, as a single-agent episode is in
:class:`~baselines.async_rollout.AsyncRollout` (whose admission, staleness bound, step
backstop and batching this class inherits). Each team step, every seat that must act
(``infos[agent]["active"]``) sends one generation request to the engine, concurrently,
so they are batched with whatever else is pending (other seats, other teams, other
turns); the env is then stepped with all the seats' actions through its async API
(:func:`agentgym.wrappers.astep` -> ``TeamEnv.astep`` on the runtime loop).

**One trajectory per seat.** Each seat's trajectory is its own conversation: its opening
(system, tools, role prompt), its generated turns (loss mask 1, behaviour log-probs, the
policy version per token) and what the env delivered to it in between (mask 0). A team
env holds an inactive seat's messages back until it acts again, so a seat's deliveries
are kept and appended (as one observation) right before its next generation, which is
exactly the conversation the seat was shown (a seat that has not generated yet gets its
prompt rendered anew from its opening and those deliveries). Every seat gets the team's reward; a seat
that never acted has no generated tokens and is left out of the batch
(``rollout/idle_seats`` counts them): it has nothing to learn from, and its copy of the
team reward would only skew the group's baseline. The seats' trajectories of a team
episode share its group with the other episodes of the same task, so group baselines
compare teams on one task.

**Failures.** A team env ends every seat together and flags infrastructure failures
(``infra_failed``) on all of them: the seats' trajectories are dropped and counted
(``rollout/dropped_infra_failed`` counts trajectories, i.e. seats), as in the
single-agent rollout; a reset or step past ``step_timeout_s`` is counted in
``rollout/dropped_stuck_episodes`` (per team episode) and its seats dropped. A seat
whose next observation would leave no room for a turn within ``max_seq_len`` ends the
team episode: every seat truncated with reward 0, that one ``context_limited``.

**No lockstep.** The number of requests per team step varies (only active seats act),
so ``max_staleness=0`` keeps the synchronous admission (a batch starts when the previous
one is consumed) but batches whatever is pending; there is no synchronous team loop to
reproduce token for token.

**Per-episode seeds** (``episode_seed``, the trainer's sampled evaluation): each team
episode gets a seed from its task seed and its place in the group, and each request
``derived_seed(episode seed, seat, team step)``, so a team episode draws the same
whatever other episodes share the engine's calls (the single-agent evaluation's
``episode_seeds``). Without it the engine's own generator decides.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.wrappers import areset, astep, env_attr
from baselines.agent_loop import end_episode, record_generation, start_trajectory
from baselines.async_rollout import AsyncRollout, _Group
from baselines.engines.base import Generation, derived_seed
from baselines.trajectory import RolloutBatch, Trajectory

__all__ = ["TeamRollout"]

SeatTools = list[dict[str, Any]]


@dataclass
class _SeatState:
    """One seat's trajectory and what the env delivered to it since its last turn."""

    agent: str
    trajectory: Trajectory
    tools: SeatTools
    tool_names: list[str]
    opening: dict[str, Any]
    """The seat's reset info (its opening messages, tools and task id)."""
    backlog: list[dict[str, Any]] = field(default_factory=list)
    last: Generation | None = None


class TeamRollout(AsyncRollout):
    """:class:`~baselines.async_rollout.AsyncRollout` over team envs: ``envs`` are
    :class:`~agentgym.multi_agent.TeamEnv` s (``agentgym.multi_agent.make``), and each
    group member (a team episode) yields one :class:`Trajectory` per seat, in
    ``possible_agents`` order (see the module docstring)."""

    lockstep = False
    episode_seed: Callable[[int, int], int] | None = None
    """``(task seed, member) -> seed`` of a team episode's draws (module docstring); None:
    the engine's generator decides. Set after construction (the trainer's evaluation)."""

    async def _episode(self, env: Any, group: _Group, order: int) -> tuple[list[Trajectory], list[SeatTools]]:  # type: ignore[override]
        agents = list(env_attr(env, "possible_agents"))
        reset = await self._guarded(group, areset(env, seed=group.task_seed), reset=True)
        if isinstance(reset, dict):  # the reset failed on infrastructure (or hung)
            return [start_trajectory(self.chat, reset, 0) for _ in agents], [[] for _ in agents]
        _, infos = reset
        seats = {a: self._seat(a, infos[a]) for a in agents}
        member = order % self.group_size  # (order is the episode's place in the whole batch)
        episode_seed = None if self.episode_seed is None else self.episode_seed(group.task_seed, member)
        team_step = 0
        while env_attr(env, "agents") and not group.expired:
            acting = [a for a in env_attr(env, "agents") if infos[a].get("active")]
            if not all(self._deliver_backlog(seats[a]) for a in acting):
                await self._end_context_limited(env, seats, acting)
                break
            gens = await asyncio.gather(*(self.engine.agenerate(
                seats[a].trajectory.token_ids, self.config.sampling, order * len(agents) + agents.index(a),
                seed=None if episode_seed is None else derived_seed(episode_seed, agents.index(a), team_step)) for a in acting))
            team_step += 1
            actions = {}
            for a, vg in zip(acting, gens):
                seats[a].last = vg.generation
                actions[a] = record_generation(self.chat, seats[a].trajectory, vg.generation, vg.version)
                self._tokens += len(vg.generation.token_ids)
            result = await self._guarded(group, astep(env, actions))
            if result is None:  # hung past the backstop: every seat is dropped
                for s in seats.values():
                    s.trajectory.infra_failed = True
                break
            _, rewards, terminated, truncated, infos = result
            for a in acting:
                self._record_turn(seats[a], infos[a], group)
            for a, info in infos.items():
                seats[a].backlog.extend(info.get("messages", []))
                if terminated[a] or truncated[a]:
                    end_episode(seats[a].trajectory, info, float(rewards[a]), bool(terminated[a]), bool(truncated[a]))
                    seats[a].trajectory.info["agent"] = a
        for s in seats.values():
            # Which team episode the seat played in: per-episode counts (the trainer's team
            # eval) must not weight an episode by how many of its seats acted.
            s.trajectory.info["team_episode"] = f"{group.index}:{order}"
            if not s.trajectory.infra_failed and (s.trajectory.terminated or s.trajectory.truncated):
                group.telemetry.record_episode([k for k, c in s.trajectory.tool_calls.items() if c], s.tool_names)
        return [seats[a].trajectory for a in agents], [seats[a].tools for a in agents]

    def _seat(self, agent: str, info: dict[str, Any]) -> _SeatState:
        t = start_trajectory(self.chat, info, 0)
        return _SeatState(agent, t, list(info.get("tools", [])), list(info.get("tool_names", [])), info)

    def _deliver_backlog(self, seat: _SeatState) -> bool:
        """Append what the seat was shown since its last turn; False when it would leave
        no room for another turn within ``max_seq_len``."""
        if not seat.backlog:
            return True
        t = seat.trajectory
        if seat.last is None:  # nothing generated yet: the prompt is the opening and the deliveries, rendered anew
            t = seat.trajectory = start_trajectory(self.chat, {**seat.opening, "messages": seat.opening["messages"] + seat.backlog}, 0)
            seat.backlog = []
            if not self.config.room_for_turn(len(t.token_ids)):
                t.context_limited = True
                return False
            return True
        obs = self.chat.observation_ids(seat.backlog, turn_ended=seat.last.finish_reason == "stop")
        if not self.config.room_for_turn(len(t.token_ids) + len(obs)):
            t.context_limited = True
            return False
        t.append(obs, generated=False)
        t.messages.extend(seat.backlog)
        seat.backlog = []
        return True

    def _record_turn(self, seat: _SeatState, info: dict[str, Any], group: _Group) -> None:
        seat.trajectory.turns += 1
        results = info.get("tool_results", [])
        if not results:
            group.stats["rollout/no_tool_call_turns"] = group.stats.get("rollout/no_tool_call_turns", 0.0) + 1
        for r in results:
            group.telemetry.record_call(r["name"], r["status"], float(r.get("latency_ms", 0.0)), int(r.get("retries", 0)),
                                        bool(r.get("truncated", False)))

    @staticmethod
    async def _end_context_limited(env: Any, seats: dict[str, _SeatState], acting: list[str]) -> None:
        """A seat ran out of context: the team episode ends, every seat truncated with reward 0."""
        for s in seats.values():
            s.trajectory.reward, s.trajectory.truncated, s.trajectory.terminated = 0.0, True, False
            s.trajectory.info = {"agent": s.agent, "end_reason": "context_limited"}
        await env_attr(env, "aclose")()  # release the episode's resources now, not at the next reset

    def _batch(self, groups: list[_Group], step: int) -> RolloutBatch:
        idle = 0
        for g in groups:  # a member's slot holds its seats' trajectories (an infra-failed stub if it never ran)
            trajectories: list[Trajectory] = []
            tools: list[SeatTools] = []
            for slot, specs in zip(g.trajectories, g.tools):
                if isinstance(slot, list):
                    trajectories += slot
                    tools += specs
                else:
                    trajectories.append(slot)
                    tools.append(specs)
            acted = [(t, specs) for t, specs in zip(trajectories, tools) if t.num_generated or t.infra_failed]
            idle += len(trajectories) - len(acted)
            g.trajectories, g.tools = [t for t, _ in acted], [specs for _, specs in acted]
        batch = super()._batch(groups, step)
        batch.stats["rollout/idle_seats"] = float(idle)
        return batch
