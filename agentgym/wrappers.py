"""Async-aware wrappers: batched paths step exactly what ``gym.make`` returned.

``ToolEnv``'s primitives are ``areset``/``astep`` on the shared runtime loop; Gymnasium's
wrappers only know ``reset``/``step``. The vector env, the runner and ``agentgym stress``
therefore go through :func:`areset` and :func:`astep` here, which walk the wrapper chain:

- a :class:`ToolWrapper` (write your own by subclassing it) is awaited: its ``areset`` /
  ``astep`` run on the loop;
- Gymnasium's ``OrderEnforcing`` is passed through (``ToolEnv`` enforces the order itself,
  with ``ResetNeededError``), and ``PassiveEnvChecker``'s checks run on the first reset
  and step results, as its own first calls would;
- any other wrapper runs its own sync ``reset``/``step`` in a thread of a pool of its own
  (not the loop's default executor, which the env itself may need meanwhile), so its
  logic is never skipped; that costs a thread hop per call: make it a ``ToolWrapper``.

>>> import gymnasium as gym, agentgym
>>> env = gym.make("agentgym/Calculator-v0")
>>> from agentgym.runtime import run_sync
>>> obs, info = run_sync(areset(env, seed=0))
>>> info["task_id"].startswith("calc-")
True
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
from gymnasium.utils.passive_env_checker import check_obs
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker

from agentgym.runtime import run_sync

__all__ = ["ToolWrapper", "areset", "astep", "env_attr"]


class ToolWrapper(gym.Wrapper):
    """Base class of wrappers around a ``ToolEnv`` that also work in batched paths.

    Override the async methods; the sync ``reset``/``step`` run them on the runtime loop.
    """

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        return await areset(self.env, seed=seed, options=options)

    async def astep(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return await astep(self.env, action)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        return run_sync(self.areset(seed=seed, options=options))

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return run_sync(self.astep(action))


@functools.lru_cache(maxsize=1)
def _sync_wrappers_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=256, thread_name_prefix="agentgym-sync-wrapper")


async def _in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_sync_wrappers_pool(), functools.partial(fn, *args, **kwargs))


async def areset(env: Any, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
    """Reset ``env`` (a ``ToolEnv`` or anything ``gym.make`` built around one) on the loop."""
    if isinstance(env, gym.Wrapper) and not isinstance(env, ToolWrapper):
        if isinstance(env, OrderEnforcing):
            return await areset(env.env, seed=seed, options=options)
        if isinstance(env, PassiveEnvChecker):
            result = await areset(env.env, seed=seed, options=options)
            if not env.checked_reset:
                check_obs(result[0], env.observation_space, "reset")
                env.checked_reset = True
            return result
        return await _in_thread(env.reset, seed=seed, options=options)
    return await env.areset(seed=seed, options=options)


async def astep(env: Any, action: Any) -> tuple[Any, float, bool, bool, dict]:
    """Step ``env`` (see :func:`areset`) on the loop."""
    if isinstance(env, gym.Wrapper) and not isinstance(env, ToolWrapper):
        if isinstance(env, OrderEnforcing):
            return await astep(env.env, action)
        if isinstance(env, PassiveEnvChecker):
            result = await astep(env.env, action)
            if not env.checked_step:
                check_obs(result[0], env.observation_space, "step")
                env.checked_step = True
            return result
        return await _in_thread(env.step, action)
    return await env.astep(action)


def env_attr(env: Any, name: str) -> Any:
    """Attribute ``name`` of the env under any wrappers (``telemetry``, ``fingerprint``,
    ``aclose``, ``oracle_action``): Gymnasium's ``get_wrapper_attr`` where there is one."""
    getter = getattr(env, "get_wrapper_attr", None)
    return getter(name) if getter is not None else getattr(env, name)
