"""How a fleet is sized and placed, and what it does when a worker dies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentgym.errors import ConfigError

__all__ = ["FleetConfig", "ENV_SLOTS"]

ENV_SLOTS = "agentgym_env_slots"
"""The custom Ray resource a node offers for env slots: ``ray start --resources
'{"agentgym_env_slots": 64}'`` on a CPU node whose Docker engine holds 64 sandboxes."""


@dataclass(frozen=True)
class FleetConfig:
    """A fleet of ``workers`` actors with ``slots`` envs each.

    Attributes:
        workers: env-worker actors.
        slots: envs per worker, i.e. episodes it runs at once (its sandbox demand).
        placement: ``cpus``: each worker takes ``cpus_per_worker`` CPUs; ``env_slots``:
            each worker takes ``slots`` units of the ``agentgym_env_slots`` resource (and
            no CPU), so workers land only on nodes that declared sandbox room.
        cpus_per_worker: CPUs a worker reserves under ``cpus`` placement.
        max_restarts: times Ray restarts a dead worker (on any node that fits).
        reruns: times an episode whose worker died mid-episode is re-run from scratch;
            after that it is reported ``infra_failed``. 0 reports it at once.
        start_timeout_s: how long workers may take to be placed and build their envs.
        shared_retriever: search envs query one retriever actor
            (:class:`~agentgym.fleet.retriever.SharedRetriever`) instead of an index per worker.
    """

    workers: int = 2
    slots: int = 16
    placement: Literal["cpus", "env_slots"] = "cpus"
    cpus_per_worker: float = 1.0
    max_restarts: int = 2
    reruns: int = 1
    start_timeout_s: float = 180.0
    shared_retriever: bool = False

    def __post_init__(self) -> None:
        checks = {"workers": self.workers >= 1, "slots": self.slots >= 1, "cpus_per_worker": self.cpus_per_worker >= 0,
                  "max_restarts": self.max_restarts >= 0, "reruns": self.reruns >= 0,
                  "start_timeout_s": self.start_timeout_s > 0}
        for name, ok in checks.items():
            if not ok:
                raise ConfigError(f"Expected fleet {name} in range (workers, slots >= 1; others >= 0), "
                                  f"actual value: {getattr(self, name)!r}")
        if self.placement not in ("cpus", "env_slots"):
            raise ConfigError(f"Expected fleet placement 'cpus' or 'env_slots', actual value: {self.placement!r}")

    def demand(self) -> dict[str, float]:
        """Resources one worker asks Ray for."""
        if self.placement == "env_slots":
            return {ENV_SLOTS: float(self.slots)}
        return {"CPU": self.cpus_per_worker}
