"""Rollout engines behind one interface (:class:`RolloutEngine`).

``hf`` runs everywhere; ``vllm`` is imported only when asked for (GPU, optional extra).
"""

from __future__ import annotations

from baselines.engines.base import FinishReason, Generation, RolloutEngine, SamplingConfig, strip_wrapper_prefixes

__all__ = ["FinishReason", "Generation", "RolloutEngine", "SamplingConfig", "strip_wrapper_prefixes"]
