"""Task replay: put part of each step's groups on tasks that last gave a learning signal.

Why: a group whose ``G`` samples all succeed (or all fail) has advantage 0 everywhere
(:mod:`baselines.advantages`) and teaches nothing. On DataAnalysis after SFT three groups
in four are like that (``reward/zero_adv_frac`` 0.75, median of run T2's 60 steps): the
policy's sampled outcomes on a task rarely differ. A task whose samples *did* differ is
one the policy is still deciding, and it is likely to differ again.

So, with ``rollout.replay_frac = f``, the first ``round(f x tasks_per_step)`` positions of
a step's task list are seeds drawn from a buffer of recently *informative* tasks (a
group's rewards not all equal), and the rest are the fresh seeds the step would have had.
A task leaves the buffer when a group of it gives no signal (a group lost to
infrastructure, under two kept episodes, changes nothing), after ``rollout.replay_uses``
replays, or when the buffer (``4 x tasks_per_step``) overflows (the oldest goes). It needs
``rollout.max_staleness = 0`` (the config refuses more): a stale batch mixes groups
admitted for several steps, so one task could be observed twice in a batch. The idea follows Prioritized Level Replay (Jiang, Grefenstette and
Rocktaschel, 2021), which replays levels by their recent learning potential; here the
score is binary (informative or not), which needs no tuning.

Determinism: a step's draw depends only on the run's seed, the step and the buffer, and
the buffer only on the outcomes observed in step order, so a run replays exactly and the
state (buffer, retired tasks, draws already made for steps not trained yet) is part of the
checkpoint. With ``replay_frac = 0`` nothing is drawn: a run's tasks are those it had
before this module existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from baselines.distributed import DistInfo, all_gather_lists
from baselines.trajectory import RolloutBatch

__all__ = ["TaskReplay", "informative_groups", "observe_rollout"]


def informative_groups(rewards: Sequence[float], group_ids: Sequence[int], groups: int) -> list[bool | None]:
    """For each of ``groups`` groups: did its kept episodes' rewards differ (a learning signal)?

    None for a group with fewer than two kept episodes (the rest infra-failed): unknown,
    so an env outage neither adds the task to the buffer nor takes it out."""
    seen: list[list[float]] = [[] for _ in range(groups)]
    for r, g in zip(rewards, group_ids):
        seen[int(g)].append(float(r))
    return [None if len(rs) < 2 else max(rs) != min(rs) for rs in seen]


class TaskReplay:
    """Chooses each step's task seeds: some replayed from a buffer of informative tasks.

    Args:
        tasks_per_step: tasks in a step (across all processes).
        replay_frac: share of them drawn from the buffer (all of it when it holds fewer).
        max_uses: replays of one task before it is retired for the rest of the run.
        seed: the run's seed (the draws' random stream).
    """

    def __init__(self, tasks_per_step: int, replay_frac: float, max_uses: int, seed: int) -> None:
        if not 0.0 <= replay_frac <= 1.0:
            raise ValueError(f"Expected 0 <= replay_frac <= 1, actual value: {replay_frac}")
        if max_uses < 1:
            raise ValueError(f"Expected max_uses >= 1, actual value: {max_uses}")
        self.tasks_per_step = tasks_per_step
        self.replay_count = int(round(replay_frac * tasks_per_step))
        self.max_uses = max_uses
        self.seed = seed
        self.capacity = 4 * tasks_per_step
        self._buffer: dict[int, int] = {}  # seed -> replays so far; insertion order = age (oldest first)
        self._retired: set[int] = set()
        self._drawn: dict[int, tuple[list[int], int]] = {}  # step -> (seeds, how many were replays)

    @property
    def enabled(self) -> bool:
        return self.replay_count > 0

    def __len__(self) -> int:
        return len(self._buffer)

    def seeds(self, step: int, fresh: Sequence[int]) -> list[int]:
        """The step's task seeds: ``fresh`` with its first positions replaced by replays.

        The same list for every call with the same ``step`` (the rollout asks once per
        admitted group); the buffer is read at the first call."""
        if not self.enabled:  # nothing memoised: a run without replay keeps no per-step state
            return [int(s) for s in fresh]
        if step not in self._drawn:
            self._drawn[step] = self._draw(step, [int(s) for s in fresh])
        return list(self._drawn[step][0])

    def replayed(self, step: int) -> int:
        """How many of step ``step``'s tasks were replays (0 before it was drawn)."""
        return self._drawn[step][1] if step in self._drawn else 0

    def _draw(self, step: int, fresh: list[int]) -> tuple[list[int], int]:
        if not self.enabled or not self._buffer:
            return fresh, 0
        rng = np.random.default_rng([self.seed, step, 0x7EA1])
        pool = list(self._buffer)
        chosen = [pool[i] for i in rng.permutation(len(pool))[: self.replay_count]]
        for s in chosen:  # a use is spent when it is drawn; the last one retires the task
            self._buffer[s] += 1
            if self._buffer[s] >= self.max_uses:
                del self._buffer[s]
                self._retired.add(s)
        return chosen + fresh[len(chosen):], len(chosen)

    def observe(self, step: int, seeds: Sequence[int], informative: Sequence[bool | None]) -> None:
        """Record the outcome of step ``step``'s groups (every process's).

        The groups are taken in seed order, so the buffer's order (what a draw permutes)
        does not depend on how the tasks were spread over processes: N ranks draw what one
        process draws."""
        for s, useful in sorted((int(s), bool(f)) for s, f in zip(seeds, informative) if f is not None):
            if not useful:
                self._buffer.pop(s, None)
            elif s not in self._buffer and s not in self._retired:
                self._buffer[s] = 0
        while len(self._buffer) > self.capacity:
            del self._buffer[next(iter(self._buffer))]
        for done in [k for k in self._drawn if k <= step]:
            del self._drawn[done]

    def state_dict(self) -> dict[str, Any]:
        return {"buffer": [[s, u] for s, u in self._buffer.items()], "retired": sorted(self._retired),
                "drawn": {int(k): [list(v[0]), int(v[1])] for k, v in self._drawn.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._buffer = {int(s): int(u) for s, u in state["buffer"]}
        self._retired = {int(s) for s in state["retired"]}
        self._drawn = {int(k): ([int(s) for s in v[0]], int(v[1])) for k, v in state["drawn"].items()}


def observe_rollout(replay: TaskReplay, step: int, batch: RolloutBatch, info: DistInfo = DistInfo()) -> dict[str, float]:
    """Tell ``replay`` which of step ``step``'s groups gave a signal, gathered from every
    process (collective when distributed); return the ``rollout/`` replay metrics."""
    local = informative_groups([t.reward for t in batch.trajectories], [t.group_id for t in batch.trajectories],
                               len(batch.task_seeds))
    seeds = all_gather_lists(batch.task_seeds, info)
    informative = all_gather_lists(local, info)
    replayed = replay.replayed(step)
    replay.observe(step, seeds, informative)
    return {"rollout/replayed_tasks": float(replayed), "rollout/replay_buffer": float(len(replay)),
            "rollout/informative_tasks_frac": sum(bool(f) for f in informative) / max(len(informative), 1)}
