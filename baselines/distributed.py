"""Process-group setup and model wrapping for multi-process training (``torchrun``).

* ``ddp``: every process holds the whole model; gradients are averaged.
* ``fsdp2``: parameters, gradients and optimiser state are sharded with
  ``torch.distributed.fsdp.fully_shard`` (one call per decoder layer, then the root), for
  models that do not fit one GPU. The EWMA copy is sharded the same way, so its update
  is elementwise on local shards.

Both average gradients over processes; the loss therefore multiplies by the world size
and divides by the *global* token count, which makes the update equal to a
single-process update on the concatenated batch. For that to hold with several
minibatches, the minibatches are a partition of the global batch drawn once, alike on
every process (:func:`baselines.update.global_minibatch_rows`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["DistInfo", "Strategy", "init_distributed", "wrap_model", "unwrap_model", "full_state_dict", "all_reduce_sum", "all_reduce_max", "all_gather_counts", "all_gather_lists", "shard_like", "local_shard", "reshard"]

Strategy = Literal["none", "ddp", "fsdp2"]


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    strategy: Strategy = "none"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1 and dist.is_initialized()


def init_distributed(strategy: Strategy, device: str = "auto", backend: str = "auto") -> DistInfo:
    """Join the process group that ``torchrun`` describes (``WORLD_SIZE`` etc.).

    Without ``WORLD_SIZE > 1`` this is a single process and ``strategy`` is ignored.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(f"cuda:{local}") if device == "cuda" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        if backend == "auto":
            backend = "nccl" if dev.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
    return DistInfo(rank, world, local, dev, strategy if world > 1 else "none")


def _decoder_layers(model: nn.Module) -> Sequence[nn.Module]:
    inner = getattr(model, "model", None)
    return list(getattr(inner, "layers", [])) if inner is not None else []


def shard_like(model: nn.Module, info: DistInfo, compute_dtype: torch.dtype = torch.float32) -> nn.Module:
    """Apply FSDP2 to ``model`` in place: each decoder layer, then the root.

    The parameters stay float32 (master weights); with a bf16 ``compute_dtype`` the
    all-gathered copies used in forward/backward are bf16 and gradients are reduced in
    float32 (``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``).
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    for layer in _decoder_layers(model):
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


def wrap_model(model: nn.Module, info: DistInfo, compute_dtype: torch.dtype = torch.float32) -> nn.Module:
    """Return the module to train: ``model`` itself, a DDP wrapper, or ``model`` sharded.

    ``model`` holds float32 master weights; ``compute_dtype`` is applied by FSDP2 here and
    by autocast in :class:`baselines.update.PolicyUpdater` otherwise.
    """
    if info.strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [info.device.index] if info.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)
    if info.strategy == "fsdp2":
        return shard_like(model, info, compute_dtype)
    return model


def unwrap_model(model: nn.Module) -> nn.Module:
    """The HF model inside a DDP wrapper (FSDP2 shards in place, nothing to unwrap)."""
    return getattr(model, "module", model)


def full_state_dict(model: nn.Module, info: DistInfo) -> dict[str, torch.Tensor]:
    """Unsharded weights with checkpoint names (collective under FSDP2: call on all ranks)."""
    if info.strategy == "fsdp2":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=False))
    return unwrap_model(model).state_dict()


def all_reduce_sum(value: float, info: DistInfo) -> float:
    if not info.enabled:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64, device=info.device)
    dist.all_reduce(t)
    return float(t.item())


def all_reduce_max(value: float, info: DistInfo) -> float:
    if not info.enabled:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64, device=info.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def all_gather_counts(value: int, info: DistInfo) -> list[int]:
    """Every process's ``value`` (a count), indexed by rank; ``[value]`` in one process."""
    if not info.enabled:
        return [int(value)]
    t = torch.zeros(info.world_size, dtype=torch.float64, device=info.device)
    t[info.rank] = float(value)
    dist.all_reduce(t)
    return [int(v) for v in t.tolist()]


def all_gather_lists(values: list[Any], info: DistInfo) -> list[Any]:
    """Every process's ``values`` concatenated in rank order; ``values`` in one process."""
    if not info.enabled:
        return list(values)
    gathered: list[Any] = [None] * info.world_size
    dist.all_gather_object(gathered, list(values))
    return [v for part in gathered for v in part]


def local_shard(t: torch.Tensor) -> torch.Tensor:
    """This process's part of a parameter: the local shard of an FSDP2 DTensor, else ``t``."""
    return t.to_local() if hasattr(t, "to_local") else t


def reshard(module: nn.Module) -> None:
    """Shard FSDP2 parameters again (a forward may leave the root's gathered), so that
    :func:`local_shard` reads and writes the shards; nothing to do without FSDP2."""
    for sub in module.modules():
        if hasattr(sub, "reshard") and callable(sub.reshard):
            sub.reshard()
