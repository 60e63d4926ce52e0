"""Training configuration: dataclasses that validate themselves, loaded from YAML.

``load_config(path, overrides)`` reads a YAML file into :class:`TrainConfig` and applies
``key=value`` overrides with dotted keys (``algo.lr=3e-4``, ``rollout.engine=vllm``);
values are parsed as YAML scalars. Unknown keys are errors that suggest the closest key.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from baselines.errors import ConfigError
from baselines.mismatch import MismatchConfig

__all__ = [
    "TrainConfig", "ModelConfig", "EnvConfig", "RolloutConfig", "VLLMConfig", "AlgoConfig",
    "SFTConfig", "LogConfig", "DistConfig", "TinySpecConfig", "load_config", "config_from_dict",
    "config_to_dict", "apply_overrides",
]


@dataclass
class TinySpecConfig:
    """Size of the locally built random-init model (used when ``model.path`` is empty)."""

    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2


@dataclass
class ModelConfig:
    path: str | None = None
    """A local HF model directory; empty builds the tiny model into ``tiny_dir``."""
    tiny_dir: str = ".cache/agentgym-tiny-model"
    tiny: TinySpecConfig = field(default_factory=TinySpecConfig)
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Training parameters' dtype (bf16 halves memory; keep fp32 on CPU)."""
    gradient_checkpointing: bool = False


@dataclass
class EnvConfig:
    id: str = "agentgym/Calculator-v0"
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Passed to ``gym.make`` (e.g. ``{difficulty: 1}``)."""
    eval_split: str = "validation"


@dataclass
class VLLMConfig:
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.5
    enable_sleep_mode: bool = True
    """Free vLLM's GPU memory while the trainer runs (colocated training)."""
    enforce_eager: bool = False
    max_model_len: int | None = None


@dataclass
class RolloutConfig:
    engine: Literal["hf", "vllm"] = "hf"
    tasks_per_step: int = 8
    """Distinct tasks per training step (across all processes)."""
    group_size: int = 8
    """Samples per task; advantages are normalised within a group."""
    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    max_seq_len: int = 1024
    max_batch_size: int = 64
    """hf engine: prompts per ``generate`` call."""
    drift_check_frac: float = 0.25
    vllm: VLLMConfig = field(default_factory=VLLMConfig)

    def __post_init__(self) -> None:
        if self.tasks_per_step < 1 or self.group_size < 1:
            raise ConfigError(
                f"Expected rollout.tasks_per_step >= 1 and rollout.group_size >= 1, actual values: "
                f"{self.tasks_per_step}, {self.group_size}"
            )


@dataclass
class AlgoConfig:
    proximal: Literal["ewma", "behaviour"] = "ewma"
    """``ewma``: PPO-EWMA; ``behaviour``: plain PPO (proximal = behaviour policy)."""
    ewma_age: float = 4.0
    """Mean age of the EWMA in optimiser steps; ``beta = age / (age + 1)``."""
    ewma_reference_batch_size: int | None = None
    """If set, ``ewma_age`` was tuned at this many episodes per optimiser step and is
    rescaled to the actual minibatch size (batch size invariance)."""
    ewma_device: Literal["policy", "cpu"] = "policy"
    eps_low: float = 0.2
    eps_high: float = 0.2
    imp_samp_max: float = 2.0
    normalize_std: bool = True
    adv_eps: float = 1e-6
    epochs: int = 1
    num_minibatches: int = 1
    """Optimiser steps per epoch; the batch is split into this many minibatches."""
    micro_batch_size: int = 8
    """Sequences per forward/backward (gradient accumulation within a minibatch)."""
    lr: float = 1e-5
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    mismatch: MismatchConfig = field(default_factory=MismatchConfig)

    def __post_init__(self) -> None:
        if self.imp_samp_max < 1:
            raise ConfigError(f"Expected algo.imp_samp_max >= 1, actual value: {self.imp_samp_max}")
        if not (0 < self.eps_low < 1 and self.eps_high > 0):
            raise ConfigError(f"Expected 0 < algo.eps_low < 1 and algo.eps_high > 0, actual values: {self.eps_low}, {self.eps_high}")
        if self.num_minibatches < 1 or self.epochs < 1 or self.micro_batch_size < 1:
            raise ConfigError("Expected algo.num_minibatches, algo.epochs and algo.micro_batch_size >= 1")


@dataclass
class SFTConfig:
    """Supervised warm start on oracle-policy trajectories (before RL)."""

    episodes: int = 0
    """Oracle episodes to imitate; 0 disables SFT."""
    steps: int = 300
    """Maximum SFT steps (fewer when ``stop_success`` is reached first)."""
    batch_size: int = 16
    lr: float = 1e-3
    schedule: Literal["linear", "constant"] = "linear"
    """lr after warm-up: linear decay over ``steps``, or constant (use with ``stop_success``)."""
    stop_success: float | None = None
    """Stop SFT once the success rate of the *sampling* policy (``rollout.temperature``)
    on ``check_tasks`` train-split tasks reaches this; None trains all ``steps``."""
    check_every: int = 20
    check_from: int = 0
    """First step at which the stop rule is checked (checks cost rollouts)."""
    check_tasks: int = 64


@dataclass
class LogConfig:
    run_dir: str = "runs/default"
    tensorboard: bool = True
    wandb_project: str | None = None
    tool_usage_min: dict[str, float] = field(default_factory=dict)
    """Warn when a tool's per-batch usage fraction falls below this (``{search: 0.5}``)."""


@dataclass
class DistConfig:
    strategy: Literal["none", "ddp", "fsdp2"] = "none"
    """Multi-process training under ``torchrun``; ``none`` for one process."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"


@dataclass
class TrainConfig:
    seed: int = 0
    steps: int = 20
    device: Literal["auto", "cpu", "cuda"] = "auto"
    eval_every: int = 5
    eval_tasks: int = 32
    eval_temperature: float = 0.0
    """Temperature of the headline eval (0: greedy)."""
    eval_sampled: bool = True
    """Also evaluate the sampling policy (``rollout.temperature``) on the same tasks:
    RL optimises that policy's success, which greedy success need not reflect."""
    checkpoint_every: int = 0
    """Save every N steps into ``run_dir/checkpoint`` (0: only at the end)."""
    resume: bool = False
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    log: LogConfig = field(default_factory=LogConfig)
    dist: DistConfig = field(default_factory=DistConfig)


def _check_value(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"Expected a mapping at {where}, actual value: {value!r}")
        return _build(tp, value, where)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"Expected {where} to be one of {list(typing.get_args(tp))}, actual value: {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        return _check_value(value, next(a for a in args if a is not type(None)), where)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):  # YAML 1.1 reads "3e-4" as a string
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"Expected {where} to be a number, actual value: {value!r}") from None
    if tp in (int, float, str, bool) and not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise ConfigError(f"Expected {where} to be {tp.__name__}, actual value: {value!r}")
    if origin is dict and not isinstance(value, dict):
        raise ConfigError(f"Expected a mapping at {where}, actual value: {value!r}")
    return value


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" Did you mean {where + '.' if where else ''}{close[0]}?" if close else ""
            raise ConfigError(f"Unknown config key {where + '.' if where else ''}{key}; expected one of {names}.{hint}")
        kwargs[key] = _check_value(value, hints[key], f"{where}.{key}" if where else key)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"Invalid config at {where or 'top level'}: {e}") from e


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Build and validate a :class:`TrainConfig` from nested plain data."""
    return _build(TrainConfig, data, "")


def config_to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set ``a.b.c=value`` entries in nested ``data`` (values parsed as YAML)."""
    import yaml

    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"Expected an override like 'algo.lr=1e-4', actual value: {item!r}")
        node = data
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"Cannot set {key}: {part} is not a mapping")
        node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else None
    return data


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    """Read a YAML config (or defaults when ``path`` is None) and apply overrides."""
    import yaml

    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"Config file {p} does not exist; pass a path like baselines/configs/calculator_cpu.yaml")
        data = yaml.safe_load(p.read_text()) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"Expected a mapping at the top of {p}, actual value: {type(data).__name__}")
    return config_from_dict(apply_overrides(data, list(overrides or [])))
