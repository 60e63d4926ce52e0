"""Environment fleets on Ray: env workers as actors on CPU nodes, rollouts gathered by one client.

Each worker (:class:`EnvWorker`) hosts ``slots`` envs with its own sandbox pool on its
node's Docker engine and its own telemetry; workers are placed by CPUs or by the custom
resource ``agentgym_env_slots``. :class:`EnvFleet` plays whole episodes with backpressure
and reports them as ``agentgym run`` does (same telemetry names), or lends its envs to a
trainer as a vector env. A worker or node that dies mid-episode costs a re-run from
scratch (``FleetConfig.reruns``) or an ``infra_failed`` record, never a lost or doubled
episode; the next worker on that node reaps the containers the dead one left.

Ray is optional (``pip install 'agentgym[ray]'``): importing this package does not import
it, and whatever needs it says what to install.
"""

from agentgym.fleet.config import ENV_SLOTS, FleetConfig
from agentgym.fleet.fleet import EnvFleet, fleet_envs, run_fleet_episodes
from agentgym.fleet.ray_support import ClusterSession, RayMissingError, connect, require_ray
from agentgym.fleet.retriever import SharedRetriever
from agentgym.fleet.vector import FleetEnvHandle, FleetVectorEnv
from agentgym.fleet.worker import EnvWorker, EpisodeOutcome, WorkerInfo

__all__ = ["ENV_SLOTS", "FleetConfig", "EnvFleet", "fleet_envs", "run_fleet_episodes", "EnvWorker", "EpisodeOutcome", "WorkerInfo",
           "FleetVectorEnv", "FleetEnvHandle", "SharedRetriever", "ClusterSession", "RayMissingError", "connect", "require_ray"]
