"""Policies that ship with the suite: the oracle (the first test of every env) and a
random-text policy (a smoke test of robustness).

A policy maps ``(env, observation, info)`` to an action; it may be a coroutine function.
"""

from __future__ import annotations

import difflib
from typing import Any, Awaitable, Callable, Union

import numpy as np

from agentgym.env import ToolEnv
from agentgym.errors import ConfigError

__all__ = ["Policy", "oracle_policy", "random_text_policy", "get_policy"]

Policy = Callable[[ToolEnv, str, dict[str, Any]], Union[str, Awaitable[str]]]


def oracle_policy(env: ToolEnv, observation: str, info: dict[str, Any]) -> str:
    """Solve the task through the tools from its hidden solution."""
    return env.get_wrapper_attr("oracle_action")()


def random_text_policy(env: ToolEnv, observation: str, info: dict[str, Any]) -> str:
    """Random Unicode text: exercises the format hints and the turn limit."""
    return env.action_space.sample()


_POLICIES: dict[str, Policy] = {"oracle": oracle_policy, "random": random_text_policy}


def get_policy(name: str) -> Policy:
    try:
        return _POLICIES[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_POLICIES), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"Expected a policy in {sorted(_POLICIES)}, actual value: {name!r}{hint}") from None


def seeded_rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(seed)
