"""Checkpoint and resume: policy, EWMA, optimiser, RNG states and step.

Saved with ``torch.save`` as one file per part in ``run_dir/checkpoint`` by the main
process, with full (unsharded) state dicts, so a run can resume on another number of
processes. Written to a temporary directory and renamed, so a crash mid-save leaves the
previous checkpoint intact.

RNG states are saved per process (gathered to the main process): on resume with the
same number of processes each one gets its own stream back. On another number of
processes the streams cannot continue; each process is then re-seeded from the step and
its rank (distinct streams, logged).
"""

from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from agentgym.seeding import derived_seed
from baselines.distributed import DistInfo, full_state_dict
from baselines.errors import CheckpointError
from baselines.ewma import EWMAModel

__all__ = ["save_checkpoint", "load_checkpoint", "rng_state", "set_rng_state"]

logger = logging.getLogger(__name__)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _all_rng_states(info: DistInfo) -> list[dict[str, Any]]:
    """Every process's :func:`rng_state`, in rank order (collective when distributed)."""
    mine = rng_state()
    if not info.enabled:
        return [mine]
    states: list[Any] = [None] * info.world_size
    torch.distributed.all_gather_object(states, mine)
    return states


def _restore_rng(saved: dict[str, Any], step: int, info: DistInfo) -> None:
    states = saved.get("rng_per_rank") or [saved["rng"]]  # checkpoints before per-rank states: one state
    if len(states) == info.world_size:
        set_rng_state(states[info.rank])
        return
    logger.warning("Checkpoint has RNG states of %d process(es), this run has %d: re-seeding each process from the step and its rank.",
                   len(states), info.world_size)
    seed = derived_seed(step, info.rank)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, info: DistInfo) -> dict[str, Any]:
    if info.strategy == "fsdp2":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return optimizer.state_dict()


def _load_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any], info: DistInfo) -> None:
    """The inverse of :func:`_optimizer_state` (collective under FSDP2), once the model's weights are loaded."""
    if info.strategy == "fsdp2":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))
    else:
        optimizer.load_state_dict(state)


def save_checkpoint(path: str | Path, *, model: nn.Module, optimizer: torch.optim.Optimizer, ewma: EWMAModel | None,
                    step: int, info: DistInfo = DistInfo(), extra: dict[str, Any] | None = None,
                    copy_optimizer: torch.optim.Optimizer | None = None) -> Path:
    """Save everything needed to continue training at ``step`` (collective under FSDP2);
    ``copy_optimizer`` is ``algo.copy_lr``'s, when the run has one."""
    path = Path(path)
    policy = {k: v.detach().cpu() for k, v in full_state_dict(model, info).items()}
    optim = _optimizer_state(model, optimizer, info)
    copy_optim = _optimizer_state(model, copy_optimizer, info) if copy_optimizer is not None else None
    ewma_state = None
    if ewma is not None:
        ewma_state = ewma.state_dict()
        if info.strategy == "fsdp2":
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            ewma_state["module"] = get_model_state_dict(ewma.module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    rngs = _all_rng_states(info)
    if not info.is_main:
        return path
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.save(policy, tmp / "policy.pt")
    torch.save(optim, tmp / "optimizer.pt")
    if copy_optim is not None:
        torch.save(copy_optim, tmp / "copy_optimizer.pt")
    torch.save(ewma_state, tmp / "ewma.pt")
    torch.save({"step": step, "rng_per_rank": rngs, "extra": extra or {}}, tmp / "trainer.pt")
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    return path


def load_checkpoint(path: str | Path, *, model: nn.Module, optimizer: torch.optim.Optimizer, ewma: EWMAModel | None,
                    info: DistInfo = DistInfo(), copy_optimizer: torch.optim.Optimizer | None = None) -> dict[str, Any]:
    """Restore a checkpoint written by :func:`save_checkpoint`; returns ``{"step", "extra"}``."""
    path = Path(path)
    needed = ["policy.pt", "optimizer.pt", "ewma.pt", "trainer.pt"] + (["copy_optimizer.pt"] if copy_optimizer is not None else [])
    missing = [n for n in needed if not (path / n).exists()]
    if missing == ["copy_optimizer.pt"]:
        raise CheckpointError(f"Checkpoint {path} was saved by a run without algo.copy_lr; resume it with the copy "
                              "task off (algo.copy_lr=0), or start a new run.")
    if missing:
        raise CheckpointError(f"Checkpoint {path} lacks {missing}; it is incomplete or not a baselines checkpoint.")
    policy = torch.load(path / "policy.pt", map_location="cpu", weights_only=False)
    optim = torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False)
    if info.strategy == "fsdp2":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        set_model_state_dict(model, policy, options=StateDictOptions(full_state_dict=True))
    else:
        getattr(model, "module", model).load_state_dict(policy)
    _load_optimizer(model, optimizer, optim, info)
    if copy_optimizer is not None:
        _load_optimizer(model, copy_optimizer, torch.load(path / "copy_optimizer.pt", map_location="cpu", weights_only=False), info)
    ewma_state = torch.load(path / "ewma.pt", map_location="cpu", weights_only=False)
    if ewma is not None:
        if ewma_state is None:
            raise CheckpointError(f"Checkpoint {path} has no EWMA model but this run uses proximal='ewma'.")
        if info.strategy == "fsdp2":
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

            set_model_state_dict(ewma.module, ewma_state.pop("module"), options=StateDictOptions(full_state_dict=True))
            ewma.total_weight, ewma.num_updates = float(ewma_state["total_weight"]), int(ewma_state["num_updates"])
        else:
            ewma.load_state_dict(ewma_state)
    trainer = torch.load(path / "trainer.pt", map_location="cpu", weights_only=False)
    _restore_rng(trainer, int(trainer["step"]), info)
    return {"step": int(trainer["step"]), "extra": trainer.get("extra", {})}
