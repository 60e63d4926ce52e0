"""``EnvFleet``: env workers as Ray actors, placed by resources, run and shut down as one.

A fleet is built for one env id and one set of kwargs. Its workers must all describe the
same env (one fingerprint): a node with another sandbox backend or image would train the
policy on a different environment without anyone seeing it, so that is refused. The
fleet plays whole episodes (:meth:`EnvFleet.run_episodes`, what ``agentgym run --ray``
prints) or lends its envs to a caller that steps them (:meth:`EnvFleet.vector_env`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from agentgym.errors import ConfigError
from agentgym.fleet.config import FleetConfig
from agentgym.fleet.ray_support import require_ray, worker_lost_errors
from agentgym.fleet.schedule import DrainResult, Member, drain_on_fleet
from agentgym.fleet.worker import EnvWorker, WorkerInfo
from agentgym.policies import Policy
from agentgym.runner import EpisodeRecord, RunReport, check_counts

__all__ = ["EnvFleet"]


class EnvFleet:
    """Start ``config.workers`` env workers for ``env_id`` and wait until all are ready.

    Args:
        env_id, env_kwargs: the env every worker hosts (``slots`` copies each).
        config: size, placement and fault handling.
        policy: a policy name or picklable callable, for :meth:`run_episodes`.

    Raises:
        ConfigError: the cluster cannot place the workers (it says what it lacks), or
            the workers disagree on the env's fingerprint.

    Use it as a context manager, or call :meth:`shutdown`: the actors hold sandboxes.
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None, config: FleetConfig | None = None,
                 policy: str | Policy | None = "oracle") -> None:
        ray = require_ray()
        if not ray.is_initialized():
            raise ConfigError("Expected a Ray connection; call agentgym.fleet.connect() first")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.config = config or FleetConfig()
        self.last_drain: DrainResult | None = None
        """The last :meth:`run_episodes`' accounting: re-runs and worker deaths."""
        self._check_capacity(ray)
        self.retriever = self._start_retriever() if self.config.shared_retriever else None
        actor = ray.remote(EnvWorker).options(
            max_restarts=self.config.max_restarts, max_task_retries=0,
            max_concurrency=self.config.slots + 4,  # the slots, plus ready/close calls beside them
            **_placement(self.config))
        self.members = [Member(actor.remote(env_id, self.env_kwargs, self.config.slots, policy), self.config.slots,
                               f"worker-{k}") for k in range(self.config.workers)]
        try:
            self.workers = self._wait_ready(ray)
        except BaseException:
            self.shutdown()
            raise

    def _check_capacity(self, ray: Any) -> None:
        offered = ray.cluster_resources()
        for name, per_worker in self.config.demand().items():
            need = per_worker * self.config.workers
            if offered.get(name, 0.0) < need:
                hint = (f"start nodes with: ray start --resources '{{\"{name}\": N}}'" if name != "CPU" else
                        "lower --workers or cpus_per_worker, or add nodes")
                raise ConfigError(f"Expected the Ray cluster to offer {need:g} {name} for {self.config.workers} "
                                  f"workers, actual value: {offered.get(name, 0.0):g}; {hint}")

    def _start_retriever(self) -> Any:
        """One retriever actor for the fleet; the workers' envs get its URL."""
        from agentgym.envs import check_env_kwargs
        from agentgym.fleet.retriever import SharedRetriever

        if "retriever_url" in self.env_kwargs:
            raise ConfigError("Expected either shared_retriever or a retriever_url env kwarg, actual value: both")
        check_env_kwargs(self.env_id, {"retriever_url": "http://127.0.0.1:1"})  # a search env takes it, or a clear error
        retriever = SharedRetriever(self.env_kwargs.get("corpus_path"))
        self.env_kwargs["retriever_url"] = retriever.url
        return retriever

    def _wait_ready(self, ray: Any) -> list[WorkerInfo]:
        refs = [m.handle.ready.remote() for m in self.members]
        try:
            infos: list[WorkerInfo] = ray.get(refs, timeout=self.config.start_timeout_s)
        except ray.exceptions.GetTimeoutError as e:
            raise ConfigError(f"Expected {len(refs)} fleet workers to start within {self.config.start_timeout_s:g} s; "
                              f"some could not be placed or built their envs too slowly (cluster offers "
                              f"{ray.available_resources()})") from e
        except ray.exceptions.RayTaskError as e:
            raise (e.cause if isinstance(e.cause, ConfigError) else e) from e
        prints = {i.fingerprint for i in infos}
        if len(prints) > 1:
            where = ", ".join(f"{i.hostname}: {i.fingerprint} ({i.sandbox})" for i in infos)
            raise ConfigError(f"Expected every fleet worker to host the same env, but their fingerprints differ ({where}); "
                              "give all nodes the same sandbox backend and image")
        return infos

    # ----------------------------------------------------------------- episodes
    def run_episodes(self, episodes: int, *, seed: int = 0,
                     on_episode: Callable[[EpisodeRecord], None] | None = None) -> RunReport:
        """Play episodes ``0..episodes-1`` (seed ``seed + i``) and summarise them as the
        in-process runner does. Episodes whose worker died are re-run up to
        ``config.reruns`` times, then reported ``infra_failed``; none is lost for it."""
        check_counts(episodes, 1)
        start = time.perf_counter()
        drained = drain_on_fleet(self.members, episodes, seed, self.config.reruns, on_episode,
                                 restart_timeout_s=self.config.start_timeout_s)
        self.last_drain = drained
        return self._report(drained, time.perf_counter() - start)

    def _report(self, drained: DrainResult, elapsed_s: float) -> RunReport:
        first = self.workers[0]
        return RunReport(self.env_id, drained.records, drained.lost, elapsed_s, drained.telemetry,
                         first.fingerprint, first.sandbox)

    def vector_env(self) -> Any:
        """All ``workers x slots`` envs as one vector env the caller steps
        (:class:`~agentgym.fleet.vector.FleetVectorEnv`)."""
        from agentgym.fleet.vector import FleetVectorEnv

        return FleetVectorEnv(self)

    # ----------------------------------------------------------------- lifecycle
    def shutdown(self, timeout_s: float = 60.0) -> None:
        """Close every worker's envs and pools, then end the actors (no restart). Idempotent."""
        ray = require_ray()
        closing = []
        for m in self.members:
            if m.state != "dead":
                closing.append(m.handle.close.remote())
        try:
            ray.wait(closing, num_returns=len(closing), timeout=timeout_s)
        except worker_lost_errors():
            pass
        for m in self.members:
            ray.kill(m.handle, no_restart=True)
            m.state = "dead"
        self.members = []
        retriever, self.retriever = getattr(self, "retriever", None), None
        if retriever is not None:
            retriever.stop()

    def __enter__(self) -> "EnvFleet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _placement(config: FleetConfig) -> dict[str, Any]:
    if config.placement == "env_slots":
        return {"num_cpus": 0, "resources": config.demand()}
    return {"num_cpus": config.cpus_per_worker}


def run_fleet_episodes(env_id: str, policy: str | Policy, episodes: int, *, address: str = "auto", workers: int = 2,
                       concurrency: int = 16, seed: int = 0, env_kwargs: dict[str, Any] | None = None,
                       on_episode: Callable[[EpisodeRecord], None] | None = None) -> RunReport:
    """``agentgym run --ray``: join (or start) a cluster, run the episodes on a fleet of
    ``workers`` sharing ``concurrency`` slots, and leave nothing behind: the actors end,
    and a local instance started here stops."""
    from agentgym.fleet.ray_support import connect

    check_counts(episodes, concurrency)
    config = FleetConfig(workers=workers, slots=max(1, -(-concurrency // workers)))
    session = connect(address, num_cpus=max(workers, os.cpu_count() or 1))  # logical: workers mostly wait on I/O
    try:
        with EnvFleet(env_id, env_kwargs, config, policy) as fleet:
            return fleet.run_episodes(episodes, seed=seed, on_episode=on_episode)
    finally:
        if session.started_here:
            session.shutdown()


def fleet_envs(env_id: str, env_kwargs: dict[str, Any] | None, count: int, *, workers: int = 2,
               address: str = "auto") -> list[Any]:
    """``count`` envs of ``env_id`` on a fleet of ``workers``, as handles a rollout loop
    drives like local envs (``areset``/``astep``; see :class:`~agentgym.fleet.FleetEnvHandle`).
    Closing the last handle shuts the fleet down, and the local Ray instance if this call
    started one."""
    from agentgym.fleet.ray_support import connect
    from agentgym.fleet.vector import FleetVectorEnv

    check_counts(count, workers)
    session = connect(address, num_cpus=max(workers, os.cpu_count() or 1))
    try:
        fleet = EnvFleet(env_id, env_kwargs, FleetConfig(workers=workers, slots=-(-count // workers)), policy=None)
    except BaseException:
        if session.started_here:
            session.shutdown()
        raise

    def shut_down() -> None:
        fleet.shutdown()
        if session.started_here:
            session.shutdown()

    vector = FleetVectorEnv(fleet, on_last_close=shut_down)
    for spare in vector.envs[count:]:
        vector.release(spare)
    return vector.envs[:count]
