"""Team policies: a function from ``(env, observations, infos)`` to actions per agent.

A team policy returns actions only for the agents it wants to act this round (the active
ones, ``infos[agent]["active"]``); it may be a coroutine function.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Union

from agentgym.errors import ConfigError
from agentgym.multi_agent.base import TeamEnv

__all__ = ["TeamPolicy", "oracle_team_policy", "random_team_policy", "get_team_policy"]

TeamPolicy = Callable[[TeamEnv, dict[str, str], dict[str, dict[str, Any]]],
                      Union[dict[str, str], Awaitable[dict[str, str]]]]


def oracle_team_policy(env: TeamEnv, observations: dict[str, str], infos: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Every role solves its part through the tools from the task's hidden solution."""
    return env.oracle_actions()


def random_team_policy(env: TeamEnv, observations: dict[str, str], infos: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Random Unicode text from every active agent: exercises format hints and the limits."""
    return {a: env.action_space(a).sample() for a in env.agents if env.is_active(a)}


_POLICIES: dict[str, TeamPolicy] = {"oracle": oracle_team_policy, "random": random_team_policy}


def get_team_policy(name: str) -> TeamPolicy:
    try:
        return _POLICIES[name]
    except KeyError:
        raise ConfigError(f"Expected a team policy in {sorted(_POLICIES)}, actual value: {name!r}") from None
