"""Runs inside each vLLM worker process (``worker_extension_cls``): in-place weight loads.

Kept free of top-level vLLM imports so that it can be imported (and named in configs)
anywhere. ``self`` is the vLLM worker (``vllm.v1.worker.gpu_worker.Worker`` or its CPU
subclass), which has ``reload_weights`` in vLLM 0.32.

The weights arrive as a shared-memory file written by
:class:`baselines.engines.vllm_common.SharedWeights` plus a manifest; only the manifest crosses
the RPC boundary, so no tensor is serialised.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

__all__ = ["WeightSyncExtension", "shared_tensors"]


def shared_tensors(path: str, manifest: Sequence[Sequence], device: torch.device | str = "cpu") -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, tensor)`` views of the shared file, moved to ``device``."""
    size = max(int(off) + _nbytes(dtype, shape) for _, dtype, shape, off in manifest) if manifest else 1
    buf = torch.from_file(path, shared=True, size=size, dtype=torch.uint8)
    for name, dtype_name, shape, offset in manifest:
        dtype = getattr(torch, dtype_name)
        view = buf[int(offset) : int(offset) + _nbytes(dtype_name, shape)].view(dtype).view(list(shape))
        yield name, view.to(device)


def _reprocess_tied(model: torch.nn.Module) -> int:
    """Re-run post-load processing of modules that share a weight (a tied ``lm_head``).

    ``reload_weights`` processes each layer that received tensors; a tied head receives
    none (the checkpoint has no ``lm_head.weight``), so vLLM restores its old kernel
    tensors. Its parameter *is* the embedding's and holds the new values, but a derived
    kernel copy (the CPU build's packed GEMM weight) would stay stale. The processing is
    idempotent (it rebuilds from ``weight``); on GPU it is a no-op for embeddings.
    """
    groups: dict[int, list[torch.nn.Module]] = {}
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.Tensor) and not weight.is_meta and hasattr(module, "quant_method"):
            groups.setdefault(weight.data_ptr(), []).append(module)
    redone = 0
    for modules in groups.values():
        for module in modules if len(modules) > 1 else ():
            process = getattr(module.quant_method, "process_weights_after_loading", None)
            if process is not None:
                process(module)
                redone += 1
    return redone


def _nbytes(dtype_name: str, shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n * torch.empty((), dtype=getattr(torch, dtype_name)).element_size()


class WeightSyncExtension:
    """Mixed into vLLM's worker class; called with ``LLM.collective_rpc``."""

    def agentgym_reload_from_shared(self, path: str, manifest: Sequence[Sequence]) -> int:
        """Reload checkpoint-named tensors in place with the worker's ``reload_weights``
        (layer-wise post-load processing re-run, as after start-up); returns the count."""
        reload = getattr(self, "reload_weights", None)
        if reload is None:
            raise RuntimeError("This vLLM worker has no reload_weights (added in vLLM 0.2x); expected vLLM >= 0.32.")
        device = getattr(self, "device", torch.device("cpu"))
        reload(weights_iterator=shared_tensors(path, manifest, device), is_checkpoint_format=True)
        _reprocess_tied(self.model_runner.get_model())  # type: ignore[attr-defined]
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()
        return len(manifest)
