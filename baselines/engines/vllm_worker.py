"""Runs inside each vLLM worker process (``worker_extension_cls``): in-place weight loads.

Kept free of top-level vLLM imports so that it can be imported (and named in configs)
anywhere. ``self`` is the vLLM worker, which has ``model_runner`` and ``device``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["WeightSyncExtension"]


class WeightSyncExtension:
    """Mixed into vLLM's worker class; called with ``LLM.collective_rpc``."""

    def agentgym_load_weights(self, items: Sequence[tuple[str, torch.Tensor]]) -> int:
        """Load checkpoint-named tensors with the model's own ``load_weights``."""
        device = getattr(self, "device", torch.device("cuda"))
        model = self.model_runner.model  # type: ignore[attr-defined]
        model.load_weights(weights=((name, t.to(device, non_blocking=True)) for name, t in items))
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return len(items)
