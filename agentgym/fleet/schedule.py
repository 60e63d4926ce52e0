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

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentgym.errors import ConfigError
from agentgym.fleet.ray_support import require_ray, wait_restarted, worker_lost_errors
from agentgym.fleet.worker import EpisodeOutcome
from agentgym.runner import EpisodeRecord
from agentgym.telemetry import Telemetry

__all__ = ["Member", "DrainResult", "drain_on_fleet"]


@dataclass
class Member:
    """A worker actor as the scheduler sees it."""

    handle: Any
    slots: int
    name: str
    state: Literal["up", "probing", "dead"] = "up"
    in_flight: int = 0
    deaths: int = 0


@dataclass
class DrainResult:
    records: list[EpisodeRecord]
    lost: list[tuple[int, str]]
    telemetry: Telemetry
    reruns: int = 0
    worker_deaths: int = 0
    deaths_by_worker: dict[str, int] = field(default_factory=dict)


def drain_on_fleet(members: Sequence[Member], episodes: int, seed: int, reruns: int,
                   on_episode: Callable[[EpisodeRecord], None] | None = None) -> DrainResult:
    """Run episode ``i`` with seed ``seed + i`` for ``i < episodes`` on ``members``."""
    ray = require_ray()
    lost_errors = worker_lost_errors()
    pending: deque[int] = deque(range(episodes))
    tries = [0] * episodes
    calls: dict[Any, tuple[Member, int]] = {}
    probes: dict[Any, Member] = {}
    result = DrainResult([], [], Telemetry())

    def finish(record: EpisodeRecord) -> None:
        result.records.append(record)
        if on_episode is not None:
            on_episode(record)

    while pending or calls or probes:
        for m in members:
            while m.state == "up" and m.in_flight < m.slots and pending:
                i = pending.popleft()
                calls[m.handle.run_episode.remote(i, seed + i)] = (m, i)
                m.in_flight += 1
        if not calls and not probes:  # every worker is gone: what is left cannot run
            for i in pending:
                finish(_worker_lost(i, "no live fleet worker was left to run it"))
            break
        ready, _ = ray.wait(list(calls) + list(probes), num_returns=1)
        ready, _ = ray.wait(list(calls) + list(probes), num_returns=len(calls) + len(probes), timeout=0)
        for ref in ready:
            if ref in probes:
                _settle_probe(ray, probes.pop(ref), ref, lost_errors)
                continue
            m, i = calls.pop(ref)
            m.in_flight -= 1
            try:
                outcome: EpisodeOutcome = ray.get(ref)
            except lost_errors as e:
                _on_death(m, probes, result)
                if tries[i] < reruns:
                    tries[i] += 1
                    result.reruns += 1
                    pending.appendleft(i)
                else:
                    finish(_worker_lost(i, f"{m.name} died mid-episode: {type(e).__name__}"))
                continue
            except ray.exceptions.RayTaskError as e:
                if isinstance(e.cause, ConfigError):
                    raise e.cause from e  # the user's setup: stop and say why
                result.lost.append((i, str(e)))
                continue
            result.telemetry.merge(Telemetry.from_dict(outcome.telemetry))
            finish(outcome.record)
    result.records.sort(key=lambda r: r.index)
    return result


def _on_death(m: Member, probes: dict[Any, Member], result: DrainResult) -> None:
    """The first failed call of a dead worker starts a probe; the rest of its calls only count."""
    if m.state != "up":
        return
    m.state = "probing"
    m.deaths += 1
    result.worker_deaths += 1
    result.deaths_by_worker[m.name] = m.deaths
    probes[m.handle.ready.remote()] = m


def _settle_probe(ray: Any, m: Member, ref: Any, lost_errors: tuple[type[BaseException], ...]) -> None:
    try:
        ray.get(ref)
        m.state = "up"  # Ray restarted it; its ``__init__`` reaped what its predecessor left
    except ray.exceptions.ActorUnavailableError:  # still restarting: wait for it here
        m.state = "up" if wait_restarted(m.handle) is not None else "dead"
    except lost_errors:
        m.state = "dead"


def _worker_lost(index: int, why: str) -> EpisodeRecord:
    return EpisodeRecord(index, None, 0.0, False, True, 0, {"infra_failed": True, "fleet_error": why})
