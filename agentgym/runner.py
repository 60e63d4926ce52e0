"""Running many episodes of one env at a given concurrency and summarising them.

This is what ``agentgym run`` and the readiness tools use. Episodes run as coroutines on
the runtime loop, ``concurrency`` envs at a time, each env reused for its next episode.
An episode whose resources cannot be had (``InfraError`` at reset) counts as
infra-failed, not lost; anything else that escapes an episode counts as *lost* and is kept
with its traceback, because a lost episode is a bug the report must show.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import gymnasium as gym

from agentgym.env import ToolEnv
from agentgym.errors import ConfigError, InfraError
from agentgym.policies import Policy
from agentgym.runtime import run_sync
from agentgym.telemetry import Telemetry
from agentgym.wrappers import areset, astep, env_attr

__all__ = ["EpisodeRecord", "RunReport", "run_episodes", "arun_episodes", "play_episode", "drain_episodes",
           "run_report", "check_counts"]

E = TypeVar("E")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """The outcome of one episode."""

    index: int
    task_id: str | None
    reward: float
    success: bool
    infra_failed: bool
    turns: int
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunReport:
    """Everything ``agentgym run`` prints."""

    env_id: str
    episodes: list[EpisodeRecord]
    lost: list[tuple[int, str]]
    elapsed_s: float
    telemetry: Telemetry
    fingerprint: str
    sandbox: dict[str, Any] | None = None
    """``{"sandbox_backend", "isolation"}`` for envs that run agent code in a sandbox:
    train and eval on different backends must never go unnoticed."""

    @property
    def completed(self) -> int:
        return len(self.episodes)

    @property
    def infra_failed(self) -> int:
        return sum(e.infra_failed for e in self.episodes)

    @property
    def success_rate(self) -> float:
        """Successes over episodes that were not infra-failed (those carry no signal)."""
        valid = [e for e in self.episodes if not e.infra_failed]
        return sum(e.success for e in valid) / len(valid) if valid else 0.0

    @property
    def episodes_per_s(self) -> float:
        return self.completed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "env": self.env_id, "fingerprint": self.fingerprint, "episodes": self.completed,
            "success_rate": self.success_rate, "infra_failed": self.infra_failed, "lost": len(self.lost),
            "elapsed_s": self.elapsed_s, "episodes_per_s": self.episodes_per_s,
            "mean_reward": sum(e.reward for e in self.episodes) / max(1, self.completed),
            **(self.sandbox or {}),
        }


def run_episodes(env_id: str, policy: Policy, episodes: int, concurrency: int = 1, *, seed: int = 0,
                 env_kwargs: dict[str, Any] | None = None,
                 on_episode: Callable[[EpisodeRecord], None] | None = None) -> RunReport:
    """Sync wrapper of :func:`arun_episodes`."""
    return run_sync(arun_episodes(env_id, policy, episodes, concurrency, seed=seed,
                                  env_kwargs=env_kwargs, on_episode=on_episode))


async def arun_episodes(env_id: str, policy: Policy, episodes: int, concurrency: int = 1, *, seed: int = 0,
                        env_kwargs: dict[str, Any] | None = None,
                        on_episode: Callable[[EpisodeRecord], None] | None = None) -> RunReport:
    """Run ``episodes`` episodes; episode ``i`` is reset with ``seed + i`` (reproducible)."""
    check_counts(episodes, concurrency)
    envs = [gym.make(env_id, **(env_kwargs or {})) for _ in range(min(concurrency, episodes))]
    return await run_report(env_id, envs, episodes, lambda env, i: play_episode(env, policy, i, seed + i), on_episode)


def check_counts(episodes: int, concurrency: int) -> None:
    if episodes < 1 or concurrency < 1:
        raise ConfigError(f"Expected episodes >= 1 and concurrency >= 1, actual values: {episodes}, {concurrency}")


async def run_report(env_id: str, envs: Sequence[Any], episodes: int,
                     run_one: Callable[[Any, int], Awaitable[EpisodeRecord]],
                     on_episode: Callable[[EpisodeRecord], None] | None = None) -> RunReport:
    """Drain ``episodes`` over ``envs`` (single- or multi-agent, wrapped or not: anything
    with ``aclose``, ``telemetry`` and ``fingerprint``), release their resources, and summarise."""
    start = time.perf_counter()
    try:
        records, lost = await drain_episodes(envs, episodes, run_one, on_episode)
    finally:
        for env in envs:
            await env_attr(env, "aclose")()  # the runner owns these envs
    fingerprint = env_attr(envs[0], "fingerprint")
    return RunReport(env_id, records, lost, time.perf_counter() - start,
                     Telemetry.merged(env_attr(e, "telemetry") for e in envs), str(fingerprint),
                     sandbox_summary(fingerprint.fields))


def sandbox_summary(fields: dict[str, Any]) -> dict[str, Any] | None:
    """The sandbox backend and isolation level recorded in a fingerprint, if any."""
    sandbox = fields.get("sandbox")
    if not isinstance(sandbox, dict) or "backend" not in sandbox:
        return None
    return {"sandbox_backend": sandbox["backend"], "isolation": sandbox.get("isolation", "unknown")}


async def drain_episodes(envs: Sequence[E], episodes: int,
                         run_one: Callable[[E, int], Awaitable[R]],
                         on_episode: Callable[[R], None] | None = None,
                         *, timeout_s: float | None = None,
                         replace: Callable[[E], E] | None = None,
                         sort_key: Callable[[R], Any] = lambda rec: rec.index,  # type: ignore[attr-defined]
                         ) -> tuple[list[R], list[tuple[int, str]]]:
    """Run episode indices ``0..episodes-1`` over ``envs``, one worker per env.

    Returns the records sorted by ``sort_key`` (default: their ``index``) and the lost episodes
    with their tracebacks: an exception escaping ``run_one`` is a lost episode, reported and
    never swallowed. With ``timeout_s``, an episode that runs longer is lost too, and its
    env, which may be stuck, is handed to ``replace`` for a fresh one.
    """
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(episodes):
        queue.put_nowait(i)
    records: list[R] = []
    lost: list[tuple[int, str]] = []

    async def worker(env: E) -> None:
        while not queue.empty():
            i = queue.get_nowait()
            try:
                record = await asyncio.wait_for(run_one(env, i), timeout_s)
            except ConfigError:
                raise  # the user's setup (a sandbox backend that cannot run here): stop, say why
            except asyncio.TimeoutError:
                lost.append((i, f"episode hung for more than {timeout_s:g} s"))
                if replace is not None:
                    env = replace(env)
                continue
            except Exception:  # noqa: BLE001 - a lost episode is reported, never swallowed
                lost.append((i, traceback.format_exc()))
                continue
            records.append(record)
            if on_episode is not None:
                on_episode(record)

    await asyncio.gather(*(worker(e) for e in envs))
    records.sort(key=sort_key)
    return records, lost


async def play_episode(env: Any, policy: Policy, index: int, seed: int) -> EpisodeRecord:
    """Play one episode of ``env`` (reset with ``seed``) with ``policy`` and record it as
    episode ``index``: how the in-process runner and every fleet worker play, so both
    report the same. An ``InfraError`` at reset is an infra-failed record (no resources,
    no signal); anything else that escapes is the caller's lost episode."""
    try:
        obs, info = await areset(env, seed=seed)
    except InfraError as e:
        return EpisodeRecord(index, None, 0.0, False, True, 0, {"reset_error": str(e)})
    while True:
        action = policy(env, obs, info)
        if inspect.isawaitable(action):
            action = await action
        obs, reward, terminated, truncated, info = await astep(env, action)
        if terminated or truncated:
            return EpisodeRecord(index, info.get("task_id"), float(reward), bool(info.get("success")),
                                 bool(info.get("infra_failed")), int(info.get("turns", 0)), info)
