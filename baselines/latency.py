"""Injected env-step latency, for measuring and testing rollout loops on slow tools.

Real tools have long-tailed latency (a search service that sometimes takes half a
second, pandas on a big table). :class:`DelayedSteps` wraps any agentgym env (it is a
:class:`~agentgym.wrappers.ToolWrapper`, so batched paths honour it) and sleeps on the
event loop before each step, for as long as ``delay(task_seed, turn)`` says.
:func:`long_tail` makes the usual delay: most steps fast, a fraction ``p_slow`` slow.

>>> import gymnasium as gym, agentgym
>>> env = DelayedSteps(gym.make("agentgym/Calculator-v0"), long_tail(p_slow=0.0, fast_s=0.0))
>>> obs, info = env.reset(seed=0)
>>> info["task_id"].startswith("calc-")
True
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np

from agentgym.wrappers import ToolWrapper

__all__ = ["DelayedSteps", "StepDelay", "long_tail"]

StepDelay = Callable[[int | None, int], float]
"""``(task seed of the episode, turn) -> seconds`` to wait before that step."""


class DelayedSteps(ToolWrapper):
    """Waits ``delay(seed, turn)`` seconds (on the loop, never blocking it) before each step."""

    def __init__(self, env: Any, delay: StepDelay) -> None:
        super().__init__(env)
        self.delay = delay
        self._seed: int | None = None
        self._turn = 0

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        self._seed, self._turn = seed, 0
        return await super().areset(seed=seed, options=options)

    async def astep(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        seconds = self.delay(self._seed, self._turn)
        self._turn += 1
        if seconds > 0:
            await asyncio.sleep(seconds)
        return await super().astep(action)


def long_tail(p_slow: float = 0.05, slow_s: float = 0.5, fast_s: float = 0.02, seed: int = 0) -> StepDelay:
    """A step is slow (``slow_s``) with probability ``p_slow``, else ``fast_s``; each
    draw is a pure function of ``(seed, task seed, turn, draw count)``, so two loops
    that play the same tasks see the same distribution."""
    if not 0 <= p_slow <= 1:
        raise ValueError(f"Expected 0 <= p_slow <= 1, actual value: {p_slow}")
    counter = [0]

    def delay(task_seed: int | None, turn: int) -> float:
        counter[0] += 1
        u = np.random.default_rng([seed, task_seed or 0, turn, counter[0]]).random()
        return slow_s if u < p_slow else fast_s

    return delay
