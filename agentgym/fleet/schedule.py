"""Draining episodes over fleet workers: backpressure, worker deaths, exact accounting.

Every episode index ends in exactly one place: a record (played, or ``infra_failed``
because its worker died and it may not be re-run), or the lost list (an exception from
our own code, with its text). A result is taken only from the call that produced it, so
an episode re-run after its worker died is never counted twice. At most ``slots`` calls
are in flight per worker (the backpressure: the driver holds no more work than the
fleet can run); a worker whose call failed because it died gets no more work until a
probe says Ray restarted it, or is dropped when Ray gave up on it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentgym.errors import ConfigError
from agentgym.fleet.ray_support import RESTART_POLL_S, require_ray, worker_lost_errors
from agentgym.fleet.worker import EpisodeOutcome
from agentgym.runner import EpisodeRecord
from agentgym.telemetry import Telemetry

__all__ = ["Member", "DrainResult", "drain_on_fleet"]


@dataclass(eq=False)
class Member:
    """A worker actor as the scheduler sees it."""

    handle: Any
    slots: int
    name: str
    state: Literal["up", "probing", "dead"] = "up"
    in_flight: int = 0
    deaths: int = 0
    probing_since: float = 0.0


@dataclass
class DrainResult:
    records: list[EpisodeRecord]
    lost: list[tuple[int, str]]
    telemetry: Telemetry
    reruns: int = 0
    worker_deaths: int = 0
    deaths_by_worker: dict[str, int] = field(default_factory=dict)


def drain_on_fleet(members: Sequence[Member], episodes: int, seed: int, reruns: int,
                   on_episode: Callable[[EpisodeRecord], None] | None = None,
                   restart_timeout_s: float = 180.0) -> DrainResult:
    """Run episode ``i`` with seed ``seed + i`` for ``i < episodes`` on ``members``.

    A worker that died is written off when Ray has not restarted it within
    ``restart_timeout_s`` (no node with room for it, restarts used up); the others go on
    meanwhile, and what no worker is left to run is reported ``infra_failed``.
    """
    return _Drain(list(members), episodes, seed, reruns, on_episode, restart_timeout_s).run()


class _Drain:
    def __init__(self, members: list[Member], episodes: int, seed: int, reruns: int,
                 on_episode: Callable[[EpisodeRecord], None] | None, restart_timeout_s: float) -> None:
        self.ray, self.lost_errors = require_ray(), worker_lost_errors()
        self.members, self.seed, self.reruns = members, seed, reruns
        self.on_episode, self.restart_timeout_s = on_episode, restart_timeout_s
        self.pending: deque[int] = deque(range(episodes))
        self.tries = [0] * episodes
        self.calls: dict[Any, tuple[Member, int]] = {}
        self.probes: dict[Any, Member] = {}
        self.reprobe_at: dict[Member, float] = {}
        self.result = DrainResult([], [], Telemetry())

    def run(self) -> DrainResult:
        while self.pending or self.calls or self.probes or self.reprobe_at:
            self._start_due_probes()
            self._submit()
            waitables = list(self.calls) + list(self.probes)
            if not waitables and not self.reprobe_at:  # every worker is gone: the rest cannot run
                for i in self.pending:
                    self._finish(_worker_lost(i, "no live fleet worker was left to run it"))
                break
            for ref in self._ready(waitables):
                if ref in self.probes:
                    self._settle_probe(self.probes.pop(ref), ref)
                else:
                    self._take(ref)
        self.result.records.sort(key=lambda r: r.index)
        return self.result

    def _submit(self) -> None:
        """Fill every live worker up to its slots: the backpressure."""
        for m in self.members:
            while m.state == "up" and m.in_flight < m.slots and self.pending:
                i = self.pending.popleft()
                self.calls[m.handle.run_episode.remote(i, self.seed + i)] = (m, i)
                m.in_flight += 1

    def _ready(self, waitables: list[Any]) -> list[Any]:
        """Wait for a result, a probe, or the next re-probe; then take all that are ready."""
        timeout = (max(0.0, min(self.reprobe_at.values()) - time.monotonic()) if self.reprobe_at else None)
        if not waitables:
            time.sleep(timeout or 0.0)
            return []
        ready, _ = self.ray.wait(waitables, num_returns=1, timeout=timeout)
        if ready:
            ready, _ = self.ray.wait(waitables, num_returns=len(waitables), timeout=0)
        return ready

    def _take(self, ref: Any) -> None:
        m, i = self.calls.pop(ref)
        m.in_flight -= 1
        try:
            outcome: EpisodeOutcome = self.ray.get(ref)
        except self.lost_errors as e:
            self._on_death(m)
            if self.tries[i] < self.reruns:
                self.tries[i] += 1
                self.result.reruns += 1
                self.pending.appendleft(i)
            else:
                self._finish(_worker_lost(i, f"{m.name} died mid-episode: {type(e).__name__}"))
            return
        except self.ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, ConfigError):
                raise e.cause from e  # the user's setup: stop and say why
            self.result.lost.append((i, str(e)))
            return
        self.result.telemetry.merge(Telemetry.from_dict(outcome.telemetry))
        self._finish(outcome.record)

    def _finish(self, record: EpisodeRecord) -> None:
        self.result.records.append(record)
        if self.on_episode is not None:
            self.on_episode(record)

    def _on_death(self, m: Member) -> None:
        """The first failed call of a dead worker starts probing it; its other calls only count."""
        if m.state != "up":
            return
        m.state, m.probing_since = "probing", time.monotonic()
        m.deaths += 1
        self.result.worker_deaths += 1
        self.result.deaths_by_worker[m.name] = m.deaths
        self.probes[m.handle.ready.remote()] = m

    def _start_due_probes(self) -> None:
        now = time.monotonic()
        for m, at in list(self.reprobe_at.items()):
            if at <= now:
                del self.reprobe_at[m]
                self.probes[m.handle.ready.remote()] = m

    def _settle_probe(self, m: Member, ref: Any) -> None:
        try:
            self.ray.get(ref)
            m.state = "up"  # Ray restarted it; its ``__init__`` reaped what its predecessor left
        except self.ray.exceptions.ActorUnavailableError:  # still restarting: ask again shortly
            if time.monotonic() - m.probing_since > self.restart_timeout_s:
                m.state = "dead"
            else:
                self.reprobe_at[m] = time.monotonic() + RESTART_POLL_S
        except self.lost_errors:
            m.state = "dead"


def _worker_lost(index: int, why: str) -> EpisodeRecord:
    return EpisodeRecord(index, None, 0.0, False, True, 0, {"infra_failed": True, "fleet_error": why})
