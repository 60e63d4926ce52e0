"""Asynchronous rollout: every episode its own coroutine, groups consumed as they finish.

The synchronous :class:`~baselines.agent_loop.AgentLoop` runs turn by turn: each turn
waits for the slowest generation and then for the slowest tool call, and the engine idles
while tools run (and the other way round). Here each episode runs on agentgym's runtime
loop as ``reset -> generate -> step -> generate -> ...`` through the env's async API
(:func:`agentgym.wrappers.areset` / :func:`~agentgym.wrappers.astep`, wrappers and all);
its generation requests go to a :class:`~baselines.engines.hf_async.BatchingEngine`,
which batches whatever is pending, so generation is batched across episodes at different
turns and tool calls overlap generation. Groups keep running while the trainer updates.

**Bounded staleness** (``max_staleness = k``). A group is *admitted* (its episodes
start) at the trainer step ``e`` whose :meth:`AsyncRollout.collect` let it in, and may be
trained on at steps ``e .. e + k`` only. At step ``s`` at most ``(s + k + 1) * B`` groups
have been admitted (``B`` groups per batch), which keeps at least ``B`` usable groups in
reach (at most ``k * B`` of the ``(k + 1) * B`` groups admitted at steps ``>= s - k``
were consumed before). Finished groups are consumed first-finished first; a group that
can no longer be used in time is dropped (``rollout/dropped_stale_groups``) and its
episodes stop at their next turn boundary. ``k = 0`` admits a batch only when the
previous one is consumed and the engine batches in lockstep turns seeded as the
synchronous loop seeds them: the same calls, the same tokens as ``AgentLoop``.

**Episodes in flight across a weight update continue under the new weights.** The
engine loads weights between calls, never inside one, and every generated token records
the version that sampled it (``Trajectory.token_versions``); its behaviour log-prob is
the engine's under that version, which is all PPO-EWMA's decoupled objective needs.
Finishing them under the old weights instead would need a second copy of the weights
in the engine (or a second engine) for up to ``k`` versions; continuing needs nothing and
makes the data fresher. An episode's staleness is its oldest token's.

**Failures.** Infra-failed episodes are dropped and counted, as in the synchronous loop.
An env step (or reset) that does not return within ``step_timeout_s`` is cancelled and
its episode counted as infra-failed (``rollout/dropped_stuck_episodes``): the env's own
tool deadlines already bound anything agent code can do, so the backstop (set it above
the env's worst tool timeout x attempts) only fires when the machinery hangs. Any other
exception in an episode (an engine error, a bug) is raised by the next :meth:`collect`.

**Checkpoints.** The queue is not saved: unfinished and unconsumed groups are
discarded at exit, and a resumed run admits afresh from the checkpoint's step (the same
task seeds), at most ``(k + 1) * B`` groups of rollout redone; their data is then no
staler than on the first run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentgym.errors import InfraError
from agentgym.runtime import run_sync
from agentgym.telemetry import Telemetry
from agentgym.wrappers import areset, astep
from baselines.agent_loop import (
    AgentLoopConfig,
    EnvStep,
    check_drift,
    finish_batch,
    record_generation,
    record_step,
    start_trajectory,
)
from baselines.chat_tokens import ChatTokenizer
from baselines.engines.async_contract import AsyncEngine, BusyClock
from baselines.staleness import staleness_stats
from baselines.trajectory import RolloutBatch, Trajectory

__all__ = ["AsyncRollout", "AsyncRolloutConfig", "BatchSchedule"]

logger = logging.getLogger(__name__)

BatchSchedule = Callable[[int], tuple[list[int], int | None]]
"""``step -> (task seeds of that step's batch, sampling seed)``, as the trainer draws them."""


@dataclass
class AsyncRolloutConfig:
    max_staleness: int = 1
    """A group admitted at step ``e`` is trained on at step ``e + max_staleness`` at the latest."""
    step_timeout_s: float = 600.0
    """Backstop for one env reset or step; past it the episode is infra-failed (module docstring)."""


@dataclass
class _Group:
    index: int
    admitted_at: int
    task_seed: int
    trajectories: list[Trajectory] = field(default_factory=list)
    tools: list[list[dict[str, Any]]] = field(default_factory=list)
    telemetry: Telemetry = field(default_factory=Telemetry)
    stats: dict[str, float] = field(default_factory=dict)
    pending: int = 0
    expired: bool = False


class AsyncRollout:
    """Produces :class:`RolloutBatch` es of ``tasks_per_batch`` groups of ``group_size``.

    Args:
        envs: ``(max_staleness + 1) * tasks_per_batch * group_size`` agentgym envs (one
            per episode that can be in flight), reused.
        engine: an asynchronous engine (``hf``: :class:`~baselines.engines.hf_async.BatchingEngine`;
            ``vllm``: :class:`~baselines.engines.vllm_async.AsyncVLLMEngine`); the trainer
            syncs weights through it.
        chat: token bookkeeping for the policy's tokenizer.
        config: per-episode limits (as for the synchronous loop).
        schedule: the task seeds and sampling seed of each step's batch.
        first_step: the trainer step of the first :meth:`collect` (a resumed run's step).
    """

    lockstep: bool = True
    """Batch ``max_staleness=0`` generation in the synchronous loop's turns (one request per
    running episode per call). A subclass whose episodes issue a varying number of
    requests per turn (:class:`~baselines.team_rollout.TeamRollout`) turns it off."""

    def __init__(self, envs: Sequence[Any], engine: AsyncEngine, chat: ChatTokenizer, config: AgentLoopConfig,
                 async_config: AsyncRolloutConfig, tasks_per_batch: int, group_size: int, schedule: BatchSchedule,
                 first_step: int = 0) -> None:
        need = (async_config.max_staleness + 1) * tasks_per_batch * group_size
        if len(envs) < need:
            raise ValueError(f"Expected (max_staleness + 1) x tasks x group_size = {need} envs, actual value: {len(envs)}")
        self.envs = list(envs)
        self.engine = engine
        self.chat = chat
        self.config = config
        self.async_config = async_config
        self.tasks_per_batch = tasks_per_batch
        self.group_size = group_size
        self.schedule = schedule
        self.first_step = first_step
        self._free = list(self.envs)
        self._admitted = 0
        self._finished: list[_Group] = []
        self._in_flight: dict[int, _Group] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._env_clock = BusyClock()
        self._rng = np.random.default_rng(0)
        self._counts = {"dropped_stale_groups": 0, "dropped_stuck_episodes": 0}
        self._window_start = time.perf_counter()
        self._window_engine_s = 0.0
        self._window_env_s = 0.0
        self._window_tokens = 0
        self._tokens = 0
        self.last_batch: RolloutBatch | None = None

    @property
    def max_staleness(self) -> int:
        return self.async_config.max_staleness

    # ------------------------------------------------------------ trainer API
    def collect(self, step: int) -> RolloutBatch:
        """The batch of trainer step ``step`` (call with consecutive steps, after the
        previous step's weights were synced through the engine)."""
        self.last_batch = run_sync(self._collect(step))
        return self.last_batch

    def close(self) -> None:
        """Stop every episode (cancelled where it stands) and forget the queue."""
        run_sync(self._cancel_all())

    @property
    def groups_in_flight(self) -> int:
        """Admitted groups not finished yet."""
        return len(self._in_flight)

    @property
    def episodes_running(self) -> int:
        """Episode coroutines not finished yet (0 after :meth:`close`)."""
        return len(self._tasks)

    # ------------------------------------------------------------- internals
    async def _collect(self, step: int) -> RolloutBatch:
        if self._changed is None:
            self._changed = asyncio.Event()
        self._expire(step)
        self._admit(step)
        t0 = time.perf_counter()
        while len(self._finished) < self.tasks_per_batch:
            self._raise_error()
            self._changed.clear()
            await self._changed.wait()
        self._raise_error()
        taken = sorted(self._finished[: self.tasks_per_batch], key=lambda g: g.index)
        del self._finished[: self.tasks_per_batch]
        batch = self._batch(taken, step)
        batch.stats["rollout/wait_s"] = time.perf_counter() - t0  # the trainer's time blocked on rollout
        return batch

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _expire(self, step: int) -> None:
        """Drop finished groups too old for ``step``; flag in-flight ones to stop."""
        fresh = [g for g in self._finished if step - g.admitted_at <= self.max_staleness]
        self._counts["dropped_stale_groups"] += len(self._finished) - len(fresh)
        self._finished = fresh
        for g in self._in_flight.values():
            if step - g.admitted_at > self.max_staleness and not g.expired:
                g.expired = True

    def _admit(self, step: int) -> None:
        target = (step - self.first_step + self.max_staleness + 1) * self.tasks_per_batch
        if self.max_staleness == 0 and self.lockstep and self._admitted < target:
            _, sampling_seed = self.schedule(step)
            self.engine.begin_lockstep(self.tasks_per_batch * self.group_size, sampling_seed)
        while self._admitted < target:
            batch_step, position = divmod(self._admitted, self.tasks_per_batch)
            seeds, _ = self.schedule(self.first_step + batch_step)
            group = _Group(self._admitted, step, int(seeds[position]), pending=self.group_size)
            group.trajectories = [Trajectory([], [], [], 0, 0, "", infra_failed=True) for _ in range(self.group_size)]
            group.tools = [[] for _ in range(self.group_size)]
            self._in_flight[group.index] = group
            for member in range(self.group_size):
                self._spawn(self._play(group, member, position * self.group_size + member))
            self._admitted += 1

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _play(self, group: _Group, member: int, order: int) -> None:
        env = self._free.pop()
        try:
            group.trajectories[member], group.tools[member] = await self._episode(env, group, order)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001  (an engine error or a bug: collect() raises it in the trainer)
            self._error = self._error or e
        finally:
            self._free.append(env)
            if self.max_staleness == 0 and self.lockstep:
                self.engine.lower_barrier()
            self._member_done(group)

    async def _episode(self, env: Any, group: _Group, order: int) -> tuple[Trajectory, list[dict[str, Any]]]:
        reset = await self._guarded(group, areset(env, seed=group.task_seed), reset=True)
        info = reset if isinstance(reset, dict) else reset[1]
        t = start_trajectory(self.chat, info, 0)
        tools = list(info.get("tools", []))
        live = not t.infra_failed
        while live and not group.expired:
            vg = await self.engine.agenerate(t.token_ids, self.config.sampling, order)
            action = record_generation(self.chat, t, vg.generation, vg.version)
            self._tokens += len(vg.generation.token_ids)
            result = await self._guarded(group, astep(env, action))
            if result is None:
                t.infra_failed = True
                break
            _, reward, terminated, truncated, step_info = result
            live = record_step(self.chat, self.config, t, vg.generation, EnvStep(float(reward), bool(terminated), bool(truncated), step_info),
                               group.telemetry, group.stats)
        if not t.infra_failed and not live:
            group.telemetry.record_episode([k for k, c in t.tool_calls.items() if c], info.get("tool_names", ()))
        return t, tools

    async def _guarded(self, group: _Group, call: Any, reset: bool = False) -> Any:
        """``await call`` within the step backstop; ``None`` (or an infra-failed reset
        info) when it failed on infrastructure or hung."""
        self._env_clock.enter()
        try:
            return await asyncio.wait_for(call, self.async_config.step_timeout_s)
        except InfraError as e:
            if not reset:
                raise
            return {"infra_failed": True, "reset_error": f"{type(e).__name__}: {e}"}
        except TimeoutError:
            self._counts["dropped_stuck_episodes"] += 1
            logger.warning("an env %s did not return within %.0f s; its episode is dropped as infra-failed",
                           "reset" if reset else "step", self.async_config.step_timeout_s)
            return {"infra_failed": True, "reset_error": "step_timeout_s exceeded"} if reset else None
        finally:
            self._env_clock.exit()

    def _member_done(self, group: _Group) -> None:
        group.pending -= 1
        if group.pending:
            return
        self._in_flight.pop(group.index, None)
        if group.expired:
            self._counts["dropped_stale_groups"] += 1
        else:
            self._finished.append(group)
        if self._changed is not None:
            self._changed.set()

    def _batch(self, groups: list[_Group], step: int) -> RolloutBatch:
        trajs: list[Trajectory] = []
        tools: list[list[dict[str, Any]]] = []
        for gid, g in enumerate(groups):
            for t in g.trajectories:
                t.group_id = gid
            trajs += g.trajectories
            tools += g.tools
        stats: dict[str, float] = {"rollout/no_tool_call_turns": sum(g.stats.get("rollout/no_tool_call_turns", 0.0) for g in groups)}
        check_drift(self.chat, trajs, tools, self._rng, self.config.drift_check_frac, stats)
        stats.update(self._window_stats())
        stats.update(staleness_stats([t for t in trajs if not t.infra_failed], self.engine.version))
        stats.update({
            "rollout/max_staleness": float(self.max_staleness),
            "rollout/groups_in_flight": float(len(self._in_flight)),
            "rollout/groups_ready": float(len(self._finished)),
            "rollout/admitted_lag_mean": float(np.mean([step - g.admitted_at for g in groups])),
            **{f"rollout/{k}": float(v) for k, v in self._counts.items()},
        })
        batch = finish_batch(trajs, Telemetry.merged(g.telemetry for g in groups), stats, stats["rollout/window_s"])
        batch.task_seeds = [g.task_seed for g in groups]
        # Engine throughput over the window: tokens of every call, not only this batch's groups.
        stats["rollout/tokens_per_s"] = stats["rollout/window_generated_tokens"] / stats["rollout/gen_s"] if stats["rollout/gen_s"] > 0 else 0.0
        return batch

    def _window_stats(self) -> dict[str, float]:
        """Engine and env busy time since the previous batch (training time included)."""
        now = time.perf_counter()
        wall = max(now - self._window_start, 1e-9)
        engine_s = self.engine.busy_seconds() - self._window_engine_s
        env_s = self._env_clock.seconds() - self._window_env_s
        tokens = self._tokens - self._window_tokens
        self._window_start, self._window_engine_s, self._window_env_s = now, self.engine.busy_seconds(), self._env_clock.seconds()
        self._window_tokens = self._tokens
        return {"rollout/window_s": wall, "rollout/gen_s": engine_s, "rollout/env_s": env_s,
                "rollout/window_generated_tokens": float(tokens),
                "perf/engine_idle_frac": max(0.0, 1.0 - engine_s / wall), "perf/env_idle_frac": max(0.0, 1.0 - env_s / wall)}

    async def _cancel_all(self) -> None:
        for g in self._in_flight.values():
            g.expired = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.engine.end_lockstep()
        self._in_flight.clear()
        self._finished.clear()
