"""Running many team episodes at once, with every agent's tool calls overlapping.

The multi-agent twin of ``agentgym.runner``: ``concurrency`` team envs run as coroutines
on the runtime loop, each reused for its next episode, and the result is the same
``RunReport`` (one ``EpisodeRecord`` per team episode), so ``agentgym run`` and the
readiness tools print and judge it the same way. Episode ``i`` is reset with
``seed + i``; an ``InfraError`` at reset counts as infra-failed, anything else that
escapes an episode counts as lost, with its traceback.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from agentgym.errors import InfraError
from agentgym.multi_agent.base import TeamEnv
from agentgym.multi_agent.policies import TeamPolicy, get_team_policy
from agentgym.multi_agent.registry import make, spec
from agentgym.runner import EpisodeRecord, RunReport, check_counts, run_report
from agentgym.runtime import run_sync

__all__ = ["run_team_episodes", "arun_team_episodes", "run_team_episode"]

_TEAM_FIELDS = ("task_id", "fingerprint", "answer", "reward", "success", "infra_failed", "end_reason", "team_turns",
                "episode_s")


def run_team_episodes(env_id: str, policy: str | TeamPolicy, episodes: int, concurrency: int = 1, *, seed: int = 0,
                      env_kwargs: dict[str, Any] | None = None,
                      on_episode: Callable[[EpisodeRecord], None] | None = None) -> RunReport:
    """Sync wrapper of :func:`arun_team_episodes` (what ``agentgym run`` calls)."""
    return run_sync(arun_team_episodes(env_id, policy, episodes, concurrency, seed=seed,
                                       env_kwargs=env_kwargs, on_episode=on_episode))


async def arun_team_episodes(env_id: str, policy: str | TeamPolicy, episodes: int, concurrency: int = 1, *,
                             seed: int = 0, env_kwargs: dict[str, Any] | None = None,
                             on_episode: Callable[[EpisodeRecord], None] | None = None) -> RunReport:
    """Run ``episodes`` team episodes, ``concurrency`` at a time; see the module docstring."""
    check_counts(episodes, concurrency)
    team_policy = get_team_policy(policy) if isinstance(policy, str) else policy
    env_id = spec(env_id).env_id
    envs = [make(env_id, **(env_kwargs or {})) for _ in range(min(concurrency, episodes))]
    return await run_report(env_id, envs, episodes,
                            lambda env, i: run_team_episode(env, team_policy, i, seed + i), on_episode)


async def run_team_episode(env: TeamEnv, policy: TeamPolicy, index: int = 0, seed: int | None = None) -> EpisodeRecord:
    """Play one episode to its end. The record's ``info`` holds the team fields and, under
    ``"agents"``, every agent's episode-end info."""
    try:
        observations, infos = await env.areset(seed=seed)
    except InfraError as e:
        return EpisodeRecord(index, None, 0.0, False, True, 0, {"reset_error": str(e)})
    final: dict[str, dict[str, Any]] = {}
    while env.agents:
        actions = policy(env, observations, infos)
        if inspect.isawaitable(actions):
            actions = await actions
        observations, _, terminated, truncated, infos = await env.astep(actions)
        final.update({a: infos[a] for a in infos if terminated[a] or truncated[a]})
    first = final[env.possible_agents[0]]
    info = {**{k: first[k] for k in _TEAM_FIELDS if k in first}, "agents": final}
    return EpisodeRecord(index, first.get("task_id"), float(first.get("reward", 0.0)), bool(first.get("success")),
                         bool(first.get("infra_failed")), int(first.get("team_turns", 0)), info)
