"""One member of a fleet: a Ray actor hosting ``slots`` envs of one id on its node.

The worker plays whole episodes (``run_episode``) or steps envs the caller drives
(``reset``/``step``, for a trainer whose policy lives elsewhere). Its envs take their
sandboxes from the worker's own pool on its node's Docker engine, and tool coroutines run
on the worker's agentgym runtime loop, as in one process. Each finished episode carries
the telemetry it produced, so nothing the driver aggregates is lost with a worker that
dies later.

This class is plain Python; :mod:`agentgym.fleet.fleet` turns it into an actor with the
placement, concurrency and restart options of a :class:`~agentgym.fleet.FleetConfig`.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from agentgym.policies import Policy, get_policy
from agentgym.runner import EpisodeRecord, play_episode, sandbox_summary
from agentgym.runtime import get_loop, run_sync
from agentgym.telemetry import Telemetry
from agentgym.vector import ToolVectorEnv
from agentgym.wrappers import env_attr

__all__ = ["EnvWorker", "EpisodeOutcome", "WorkerInfo", "reap_dead_owners"]

T = TypeVar("T")


@dataclass(frozen=True)
class EpisodeOutcome:
    """A finished episode and the telemetry its env recorded during it."""

    record: EpisodeRecord
    telemetry: dict[str, Any]


@dataclass(frozen=True)
class WorkerInfo:
    """Where a worker runs and what its envs are (all workers of a fleet must agree)."""

    pid: int
    hostname: str
    node_id: str
    fingerprint: str
    sandbox: dict[str, Any] | None
    reaped_containers: int
    """Orphaned sandbox containers removed from this node when the worker started (those
    of a worker that died here before it)."""
    slots: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def reap_dead_owners() -> int:
    """Remove this node's sandbox containers whose owner process is dead; 0 without Docker.

    A worker SIGKILLed mid-episode cannot clean up; its containers end with their attach
    stream, and the next worker on the node removes whatever is left.
    """
    from sandboxes.errors import SandboxError
    from sandboxes.reaper import reap_orphans, remove_dead_sandbox_dirs

    try:
        return len(reap_orphans())
    except (SandboxError, ConnectionError, OSError):
        remove_dead_sandbox_dirs()
        return 0


async def _on_runtime(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on agentgym's runtime loop (where the pools live) from the actor's loop."""
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, get_loop()))


class EnvWorker:
    """``slots`` envs of ``env_id``; at most ``slots`` episodes run at once.

    Args:
        env_id, env_kwargs: what ``gym.make`` builds, once per slot.
        slots: envs hosted (concurrent episodes).
        policy: a policy name (``oracle``, ``random``) or a picklable policy callable;
            needed only for ``run_episode``.
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], slots: int, policy: str | Policy | None = None) -> None:
        import gymnasium as gym

        import agentgym  # noqa: F401 - registers the env ids

        self._reaped = reap_dead_owners()
        self.envs = [gym.make(env_id, **env_kwargs) for _ in range(slots)]
        self._policy = get_policy(policy) if isinstance(policy, str) else policy
        self._idle: asyncio.Queue[Any] = run_sync(self._idle_queue())

    async def _idle_queue(self) -> asyncio.Queue[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for env in self.envs:
            queue.put_nowait(env)
        return queue

    def ready(self) -> WorkerInfo:
        """Answer once the envs are built: where this worker runs and what it hosts."""
        import ray

        fingerprint = env_attr(self.envs[0], "fingerprint")
        return WorkerInfo(os.getpid(), socket.gethostname(), ray.get_runtime_context().get_node_id(),
                          str(fingerprint), sandbox_summary(fingerprint.fields), self._reaped, len(self.envs))

    async def run_episode(self, index: int, seed: int) -> EpisodeOutcome:
        """Play episode ``index`` (reset with ``seed``) on a free env with the policy."""
        return await _on_runtime(self._episode(index, seed))

    async def _episode(self, index: int, seed: int) -> EpisodeOutcome:
        if self._policy is None:
            raise ValueError("this worker was built without a policy; pass one to play whole episodes")
        env = await self._idle.get()
        try:
            record = await play_episode(env, self._policy, index, seed)
            kept = {k: v for k, v in record.info.items() if k != "messages"}  # the transcript stays on the worker
            return EpisodeOutcome(replace(record, info=kept), _take_telemetry(env).to_dict())
        finally:
            self._idle.put_nowait(env)

    async def reset(self, slots: Sequence[int], seeds: Sequence[int | None]) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
        """Reset the envs in ``slots`` (no autoreset): ``ToolVectorEnv.reset`` semantics."""
        vec = ToolVectorEnv([self.envs[s] for s in slots], autoreset=False)
        return await _on_runtime(vec.areset(seed=list(seeds)))

    async def step(self, slots: Sequence[int], actions: Sequence[str]) -> tuple[Any, ...]:
        """Step the envs in ``slots``: ``ToolVectorEnv.step`` results, arrays as lists."""
        vec = ToolVectorEnv([self.envs[s] for s in slots], autoreset=False)
        obs, rewards, terms, truncs, infos = await _on_runtime(vec.astep(list(actions)))
        return obs, rewards.tolist(), terms.tolist(), truncs.tolist(), infos

    async def close(self) -> None:
        """Release every env's episode resources and this process's sandbox pools."""
        from agentgym.resources import shared_resources

        async def close_all() -> None:
            for env in self.envs:
                await env_attr(env, "aclose")()
            await shared_resources().aclose()

        await _on_runtime(close_all())


def _take_telemetry(env: Any) -> Telemetry:
    """The env's telemetry since its last episode, leaving it a fresh object (its next
    reset's executor records into that one)."""
    core = env.unwrapped
    taken, core.telemetry = core.telemetry, Telemetry()
    return taken

