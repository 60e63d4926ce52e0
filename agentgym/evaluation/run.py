"""The one episode runner behind ``agentgym run --policy`` and ``agentgym eval --model``.

Many episodes in flight on the runtime loop, one env per concurrency slot (each reused
for its next episode); each episode's record is written to the run file the moment it
ends (:mod:`agentgym.evaluation.records`), so a killed run loses only the episodes in
flight, and ``resume=True`` plays only what the file does not already hold. Episode
``i`` is sample ``i % samples`` of task ``i // samples``, reset with
``seed + i // samples``, so the k samples of a task see the same task (pass@k) and a
resumed or repeated run sees the same tasks as the first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.errors import ConfigError
from agentgym.evaluation.episode import EpisodePlan, play_episode, play_team_episode
from agentgym.evaluation.records import RecordWriter, RunHeader, open_for_resume
from agentgym.runner import drain_episodes, sandbox_summary
from agentgym.runtime import run_sync
from agentgym.telemetry import Telemetry
from agentgym.wrappers import env_attr

__all__ = ["EvalPlan", "EvalResult", "run_eval", "arun_eval", "close_agent"]


@dataclass(frozen=True)
class EvalPlan:
    """What to run: ``tasks * samples`` episodes of ``env_id``, ``concurrency`` at a time."""

    env_id: str
    tasks: int
    samples: int = 1
    concurrency: int = 16
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.tasks < 1 or self.samples < 1 or self.concurrency < 1:
            raise ConfigError(f"Expected episodes >= 1, samples >= 1 and concurrency >= 1, actual values: "
                              f"{self.tasks}, {self.samples}, {self.concurrency}")

    @property
    def episodes(self) -> int:
        return self.tasks * self.samples

    def episode(self, index: int) -> EpisodePlan:
        task = index // self.samples
        return EpisodePlan(index, task, index % self.samples, self.seed + task, self.seed * 1_000_003 + index)


@dataclass
class EvalResult:
    """A finished (or resumed-and-finished) run: every record of the run file, the ones this
    invocation played, and what the envs measured."""

    header: RunHeader
    records: list[dict[str, Any]]
    played: int
    lost: list[tuple[int, str]]
    elapsed_s: float
    telemetry: Telemetry
    sandbox: dict[str, Any] | None = None
    tokens_played: int = 0


def run_eval(plan: EvalPlan, agent: Any, *, out: str | Path | None = None, resume: bool = False,
             on_record: Callable[[dict[str, Any]], None] | None = None) -> EvalResult:
    """Sync wrapper of :func:`arun_eval`."""
    return run_sync(arun_eval(plan, agent, out=out, resume=resume, on_record=on_record))


def _make_envs(env_id: str, env_kwargs: dict[str, Any], count: int) -> tuple[list[Any], bool]:
    from agentgym.multi_agent import is_multi_agent_env

    if is_multi_agent_env(env_id):
        from agentgym.multi_agent import make

        return [make(env_id, **env_kwargs) for _ in range(count)], True
    import gymnasium as gym

    return [gym.make(env_id, **env_kwargs) for _ in range(count)], False


async def arun_eval(plan: EvalPlan, agent: Any, *, out: str | Path | None = None, resume: bool = False,
                    on_record: Callable[[dict[str, Any]], None] | None = None) -> EvalResult:
    """Play the plan's episodes with ``agent``; see the module docstring.

    ``out`` is the run file (JSONL); without it records stay in memory. ``on_record`` sees
    each record as it is written (the progress display). The agent stays open (a run may
    be followed by another with the same model): close it with :func:`close_agent`."""
    envs, team = _make_envs(plan.env_id, plan.env_kwargs, max(1, min(plan.concurrency, plan.episodes)))
    fingerprint = env_attr(envs[0], "fingerprint")
    header = RunHeader(plan.env_id, dict(plan.env_kwargs), str(fingerprint), dict(fingerprint.fields),
                       agent.describe(), agent.sampling(), plan.seed, plan.tasks, plan.samples)
    writer, earlier = _open(out, header, resume)
    done = {int(r["episode"]) for r in earlier}
    pending = [i for i in range(plan.episodes) if i not in done]
    play = play_team_episode if team else play_episode
    played: list[dict[str, Any]] = []

    def record(rec: dict[str, Any]) -> None:
        rec.update(agent=header.agent, sampling=header.sampling)  # a line read alone still says who acted, how
        if writer is not None:
            writer.write(rec)
        played.append(rec)
        if on_record is not None:
            on_record(rec)

    start = time.perf_counter()
    try:
        if pending:
            _, lost = await drain_episodes(envs[:len(pending)], len(pending),
                                           lambda env, k: play(env, agent, plan.episode(pending[k])), record,
                                           sort_key=lambda rec: rec["episode"])
        else:
            lost = []
    finally:
        for env in envs:
            await env_attr(env, "aclose")()
        if writer is not None:
            writer.close()
    records = sorted(earlier + played, key=lambda r: r["episode"])
    tokens = sum(r["tokens"]["prompt"] + r["tokens"]["completion"] for r in played)
    return EvalResult(header, records, len(played), [(pending[k], tb) for k, tb in lost],
                      time.perf_counter() - start, Telemetry.merged(env_attr(e, "telemetry") for e in envs),
                      sandbox_summary(fingerprint.fields), tokens)


def close_agent(agent: Any) -> None:
    """Release what ``agent`` holds (an HTTP client, a local engine), on the runtime loop
    where it was used."""
    closer = getattr(agent, "aclose", None)
    if closer is not None:
        run_sync(closer())


def _open(out: str | Path | None, header: RunHeader, resume: bool) -> tuple[RecordWriter | None, list[dict[str, Any]]]:
    if out is None:
        if resume:
            raise ConfigError("Expected --out with --resume (the run file to continue), actual: no --out")
        return None, []
    path = Path(out)
    if resume and path.exists():
        writer, old = open_for_resume(path, header)
        return writer, old.records
    return RecordWriter.create(path, header), []
