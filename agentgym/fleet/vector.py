"""A fleet's envs as one vector env for a caller that holds the policy (a trainer).

``FleetVectorEnv`` has ``ToolVectorEnv``'s shapes without autoreset: ``reset(seed=...)``
and ``step(actions)`` over all ``workers x slots`` envs, or over a subset (``indices``),
one Ray call per worker per batch. A worker that dies mid-episode does not raise: each of
its envs in the batch gets a truncated step flagged ``infra_failed`` (``fleet_error`` says
why), or at reset ``reset_error`` with ``infra_failed``, as ``ToolVectorEnv`` reports an env
whose reset failed; the episode is then dropped by the trainer, never counted as a zero.
Ray restarts the worker, and the next reset of those envs runs on the new one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.errors import ConfigError, InfraError
from agentgym.fleet.ray_support import await_restarted, require_ray, wait_restarted, worker_lost_errors
from agentgym.runtime import run_sync

__all__ = ["FleetVectorEnv", "FleetEnvHandle"]


@dataclass(frozen=True, eq=False)
class FleetEnvHandle:
    """One remote env of a :class:`FleetVectorEnv`, used where a local env would be.

    It has the async env API that :func:`agentgym.wrappers.areset`/``astep`` call (so an
    asynchronous rollout loop drives it unchanged) and the sync ``reset``/``step``. A
    worker lost at reset raises ``InfraError`` (as a ``ToolEnv`` whose resources cannot be
    had); lost mid-episode, the step comes back truncated and ``infra_failed``. Batches of
    handles are stepped together through :meth:`FleetVectorEnv.view`. ``close`` gives the
    handle back; the last one closed shuts the fleet down.
    """

    fleet_vector: "FleetVectorEnv"
    index: int

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if options:
            raise ConfigError(f"Expected no reset options for fleet envs, actual value: {options!r}")
        obs, info = await self.fleet_vector.aone("reset", self.index, seed)
        if info.get("reset_error"):
            raise InfraError(str(info["reset_error"]))
        return obs, info

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return await self.fleet_vector.aone("step", self.index, action)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        return run_sync(self.areset(seed=seed, options=options))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return run_sync(self.astep(action))

    def close(self) -> None:
        self.fleet_vector.release(self)


class FleetVectorEnv:
    """All envs of an :class:`~agentgym.fleet.EnvFleet`, reset and stepped in batches."""

    def __init__(self, fleet: Any, on_last_close: Callable[[], None] | None = None) -> None:
        self.fleet = fleet
        self._where = [(m, slot) for m in fleet.members for slot in range(m.slots)]
        self.num_envs = len(self._where)
        self.envs = [FleetEnvHandle(self, i) for i in range(self.num_envs)]
        self._open = set(range(self.num_envs))
        self._on_last_close = on_last_close or fleet.shutdown

    def release(self, handle: FleetEnvHandle) -> None:
        """A handle is closed; when none is left open, the fleet shuts down."""
        if handle.index in self._open:
            self._open.discard(handle.index)
            if not self._open:
                self._on_last_close()

    async def aone(self, method: str, index: int, arg: Any) -> tuple[Any, ...]:
        """``reset`` or ``step`` of one env, awaited on the caller's loop."""
        m, slot = self._where[index]
        failed = _reset_failed if method == "reset" else _step_failed
        try:
            parts = await getattr(m.handle, method).remote([slot], [arg])
        except worker_lost_errors() as e:
            if method != "reset":
                return failed(f"{m.name} died: {type(e).__name__}")
            try:  # nothing was under way: once Ray has restarted the worker, reset there
                if not await await_restarted(m.handle):
                    return failed(f"{m.name} died and was not restarted: {type(e).__name__}")
                parts = await m.handle.reset.remote([slot], [arg])
            except worker_lost_errors() as again:
                return failed(f"{m.name} died: {type(again).__name__}")
        return tuple(p[0] for p in parts)

    def view(self, handles: Sequence[FleetEnvHandle]) -> "_FleetView":
        """The envs behind ``handles`` as a vector env of their own (ToolVectorEnv's API)."""
        if any(h.fleet_vector is not self for h in handles):
            raise ConfigError("Expected handles of this fleet only, actual value: handles of another fleet")
        return _FleetView(self, [h.index for h in handles])

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              indices: Sequence[int] | None = None) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
        """Reset the envs (all, or ``indices``); ``seed=s`` seeds the k-th of them ``s + k``."""
        chosen = list(range(self.num_envs)) if indices is None else list(indices)
        seeds = _seeds(seed, len(chosen))
        results = self._call("reset", chosen, seeds, _reset_failed)
        return tuple(r[0] for r in results), [r[1] for r in results]

    def step(self, actions: Sequence[str], indices: Sequence[int] | None = None
             ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        chosen = list(range(self.num_envs)) if indices is None else list(indices)
        if len(actions) != len(chosen):
            raise ConfigError(f"Expected {len(chosen)} actions, actual value: {len(actions)}")
        results = self._call("step", chosen, list(actions), _step_failed)
        return (tuple(r[0] for r in results), np.array([r[1] for r in results], dtype=np.float64),
                np.array([r[2] for r in results], dtype=bool), np.array([r[3] for r in results], dtype=bool),
                [r[4] for r in results])

    def _call(self, method: str, chosen: list[int], args: list[Any], failed: Any) -> list[tuple[Any, ...]]:
        """One call per worker with its share of ``chosen``; results back in ``chosen`` order."""
        ray = require_ray()
        by_member: dict[int, tuple[Any, list[int], list[int], list[Any]]] = {}
        for k, i in enumerate(chosen):
            m, slot = self._where[i]
            entry = by_member.setdefault(id(m), (m, [], [], []))
            entry[1].append(k)
            entry[2].append(slot)
            entry[3].append(args[k])
        refs = [(getattr(m.handle, method).remote(slots, values), ks, m)
                for m, ks, slots, values in by_member.values()]
        out: list[tuple[Any, ...]] = [()] * len(chosen)
        for ref, ks, m in refs:
            try:
                rows = list(zip(*ray.get(ref)))
            except worker_lost_errors() as e:
                rows = self._after_death(ray, m, method, [args[k] for k in ks], [self._where[chosen[k]][1] for k in ks],
                                         failed, e)
            for k, row in zip(ks, rows):
                out[k] = row
        return out

    @staticmethod
    def _after_death(ray: Any, m: Any, method: str, values: list[Any], slots: list[int], failed: Any,
                     error: BaseException) -> list[tuple[Any, ...]]:
        """A step that was under way is lost (``infra_failed``); a reset had nothing under
        way, so it is tried once more on the worker Ray restarted."""
        if method == "reset" and wait_restarted(m.handle) is not None:
            try:
                return list(zip(*ray.get(m.handle.reset.remote(slots, values))))
            except worker_lost_errors() as again:
                error = again
        return [failed(f"{m.name} died: {type(error).__name__}")] * len(values)

    def close(self) -> None:
        """The fleet owns the envs; ``EnvFleet.shutdown`` closes them."""


class _FleetView:
    """A subset of a fleet's envs with ToolVectorEnv's ``reset``/``step``."""

    def __init__(self, vector: FleetVectorEnv, indices: list[int]) -> None:
        self.vector, self.indices, self.num_envs = vector, indices, len(indices)

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
        if options:
            raise ConfigError(f"Expected no reset options for fleet envs, actual value: {options!r}")
        return self.vector.reset(seed=seed, indices=self.indices)

    def step(self, actions: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        return self.vector.step(actions, indices=self.indices)


def _seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    if seed is None:
        return [None] * n
    if isinstance(seed, int):
        return [seed + k for k in range(n)]
    if len(seed) != n:
        raise ConfigError(f"Expected {n} seeds, actual value: {len(seed)}")
    return list(seed)


def _reset_failed(why: str) -> tuple[str, dict[str, Any]]:
    return "", {"infra_failed": True, "reset_error": why, "fleet_error": why}


def _step_failed(why: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    return "", 0.0, False, True, {"infra_failed": True, "fleet_error": why}
