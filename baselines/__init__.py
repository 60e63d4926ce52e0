"""baselines: a PPO-EWMA trainer for LLM tool agents on agentgym environments.

Imports are lazy (``baselines.X`` loads torch only when used) so that ``agentgym`` and
its CLI stay cheap to import. Public names:

* algorithm: :func:`ppo_ewma_loss`, :class:`EWMAModel`, :func:`group_normalized_advantages`,
  :func:`mismatch_weights`, :class:`MismatchConfig`;
* rollout: :class:`HFEngine`, :class:`AsyncVLLMEngine`, :class:`SamplingConfig`,
  :class:`AgentLoop`, :class:`ChatTokenizer`, :class:`Trajectory`;
* training: :class:`TrainConfig`, :func:`load_config`, :class:`Trainer`, :class:`PolicyUpdater`;
* tooling: :func:`build_tiny_model`, :class:`MetricsLogger`, :func:`plot_run`.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ppo_ewma_loss", "EWMAModel", "group_normalized_advantages", "mismatch_weights", "MismatchConfig",
    "HFEngine", "AsyncVLLMEngine", "SamplingConfig", "AgentLoop", "AgentLoopConfig", "ChatTokenizer", "Trajectory",
    "TrainConfig", "load_config", "Trainer", "PolicyUpdater", "build_tiny_model", "MetricsLogger", "plot_run",
    "BaselinesError", "ConfigError",
]

_WHERE = {
    "ppo_ewma_loss": "baselines.loss", "EWMAModel": "baselines.ewma",
    "group_normalized_advantages": "baselines.advantages", "mismatch_weights": "baselines.mismatch",
    "MismatchConfig": "baselines.mismatch", "HFEngine": "baselines.engines.hf",
    "AsyncVLLMEngine": "baselines.engines.vllm_async", "SamplingConfig": "baselines.engines.base",
    "AgentLoop": "baselines.agent_loop", "AgentLoopConfig": "baselines.agent_loop",
    "ChatTokenizer": "baselines.chat_tokens", "Trajectory": "baselines.trajectory",
    "TrainConfig": "baselines.config", "load_config": "baselines.config", "Trainer": "baselines.trainer",
    "PolicyUpdater": "baselines.update", "build_tiny_model": "baselines.tiny_model",
    "MetricsLogger": "baselines.metrics", "plot_run": "baselines.plot",
    "BaselinesError": "baselines.errors", "ConfigError": "baselines.errors",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'baselines' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
