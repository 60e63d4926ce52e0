"""Stepping N tool envs at once, with their tool calls overlapping on one event loop.

Why not ``gymnasium.vector.AsyncVectorEnv``: it runs one process per env, while tool envs
spend their time waiting on I/O (a sandbox, a retriever) and share pools and limits that
live on one loop. ``ToolVectorEnv`` keeps Gymnasium's vector method names and shapes
(``reset``/``step`` returning batched observations, an array of rewards and of flags) but
returns ``infos`` as a list with one dict per env, because tool-env infos are nested and
differ per env, and uses same-step autoreset: when an env ends, it is reset at once, its
final observation and info go to ``infos[i]["final_observation"]``/``["final_info"]`` and
the returned observation is the new episode's first one. If a reset (the first one, or an
autoreset) fails with an infrastructure error, ``infos[i]["reset_error"]`` says why and the
reset is retried at the env's next step (its action is ignored); a second failure gives a
truncated step with ``infra_failed`` for that env only, never an exception that would
lose the batch.

The envs are stepped as given, wrappers and all (see :mod:`agentgym.wrappers`):
``ToolVectorEnv([gym.make(id)])`` honours every wrapper ``gym.make`` or the user added.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agentgym.env import ToolEnv
from agentgym.errors import ConfigError, InfraError
from agentgym.runtime import run_sync
from agentgym.telemetry import Telemetry
from agentgym.wrappers import areset, astep

__all__ = ["ToolVectorEnv"]


def _checked(env: Any) -> Any:
    core = getattr(env, "unwrapped", env)
    if not isinstance(core, ToolEnv):
        raise ConfigError(f"Expected agentgym ToolEnv instances (or wrappers of them), actual value: "
                          f"{type(core).__name__}")
    return env


class ToolVectorEnv:
    """A batch of ``ToolEnv`` stepped concurrently.

    Args:
        envs: envs, or zero-argument callables that build them (``lambda: gym.make(...)``).
        autoreset: reset an env in the same step in which it ends.
    """

    def __init__(self, envs: Sequence[ToolEnv | Callable[[], Any]], autoreset: bool = True) -> None:
        built = [e() if callable(e) and not hasattr(e, "step") else e for e in envs]
        if not built:
            raise ConfigError("Expected at least one env, actual value: an empty sequence")
        self.envs: list[Any] = [_checked(e) for e in built]
        self.num_envs = len(self.envs)
        self.autoreset = autoreset
        self._needs_reset: set[int] = set()

    @property
    def telemetry(self) -> Telemetry:
        """Telemetry of all envs merged (a fresh object; the envs keep their own)."""
        return Telemetry.merged(e.get_wrapper_attr("telemetry") for e in self.envs)

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
        return run_sync(self.areset(seed=seed, options=options))

    def step(self, actions: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        return run_sync(self.astep(actions))

    def close(self) -> None:
        for e in self.envs:
            e.close()

    async def areset(self, *, seed: int | Sequence[int | None] | None = None,
                     options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
        """Reset every env; ``seed=s`` seeds env ``i`` with ``s + i``. An env whose reset
        fails with an infrastructure error gets an empty observation and
        ``info["reset_error"]``, and is reset again at its next step; the others stand."""
        seeds = self._seeds(seed)
        self._needs_reset.clear()
        results = await asyncio.gather(*(self._reset_one(i, e, s, options)
                                         for i, (e, s) in enumerate(zip(self.envs, seeds))))
        return tuple(o for o, _ in results), [i for _, i in results]

    async def _reset_one(self, i: int, env: Any, seed: int | None,
                         options: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        try:
            return await areset(env, seed=seed, options=options)
        except InfraError as e:
            self._needs_reset.add(i)
            return "", {"infra_failed": True, "reset_error": f"{type(e).__name__}: {e}"}

    async def astep(self, actions: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if len(actions) != self.num_envs:
            raise ConfigError(f"Expected {self.num_envs} actions, actual value: {len(actions)}")
        results = await asyncio.gather(*(self._step_one(i, e, a) for i, (e, a) in enumerate(zip(self.envs, actions))))
        obs = tuple(r[0] for r in results)
        rewards = np.array([r[1] for r in results], dtype=np.float64)
        terminated = np.array([r[2] for r in results], dtype=bool)
        truncated = np.array([r[3] for r in results], dtype=bool)
        return obs, rewards, terminated, truncated, [r[4] for r in results]

    async def _step_one(self, i: int, env: Any, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if i in self._needs_reset:
            # Its autoreset failed last step: try again; if it fails again, this env reports an
            # infra-failed, truncated step instead of raising (the other envs' results stand).
            try:
                obs, info = await areset(env)
            except InfraError as e:
                return "", 0.0, False, True, {"infra_failed": True, "reset_error": f"{type(e).__name__}: {e}"}
            self._needs_reset.discard(i)
            return obs, 0.0, False, False, {**info, "reset_retried": True}
        obs, reward, terminated, truncated, info = await astep(env, action)
        if self.autoreset and (terminated or truncated):
            final_obs, final_info = obs, info
            try:
                obs, info = await areset(env)
            except InfraError as e:  # retried at the next step; the caller sees why
                self._needs_reset.add(i)
                info = {"reset_error": f"{type(e).__name__}: {e}"}
            info = {**info, "final_observation": final_obs, "final_info": final_info}
        return obs, reward, terminated, truncated, info

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int):
            return [seed + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ConfigError(f"Expected {self.num_envs} seeds, actual value: {len(seed)}")
        return list(seed)
