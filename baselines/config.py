"""Training configuration: dataclasses that validate themselves, loaded from YAML.

``load_config(path, overrides)`` reads a YAML file into :class:`TrainConfig` and applies
``key=value`` overrides with dotted keys (``algo.lr=3e-4``, ``rollout.engine=vllm``);
values are parsed as YAML scalars. Unknown keys are errors that suggest the closest key.

Every numeric field carries its allowed range (``field(metadata=...)`` made by
:func:`at_least`, :func:`above`, :func:`between`), checked when the dataclass is built,
so ``steps: -5`` or ``top_p: 7`` fail at load with the key's dotted name instead of
starting a run; ``env.id`` must be a registered env and ``env.kwargs`` must be its kwargs.
An unreadable file (a directory, bad YAML, not UTF-8) is a one-line :class:`ConfigError`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from baselines.errors import ConfigError
from baselines.mismatch import MismatchConfig

__all__ = [
    "TrainConfig", "ModelConfig", "EnvConfig", "RolloutConfig", "VLLMConfig", "AlgoConfig",
    "SFTConfig", "LogConfig", "DistConfig", "TinySpecConfig", "Bound", "load_config", "config_from_dict",
    "config_to_dict", "apply_overrides",
]


@dataclass(frozen=True)
class Bound:
    """The allowed range of a numeric config field (always finite)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


def at_least(low: float, default: Any) -> Any:
    """A field whose value must be ``>= low``."""
    return field(default=default, metadata={"bound": Bound(low)})


def above(low: float, default: Any) -> Any:
    """A field whose value must be ``> low``."""
    return field(default=default, metadata={"bound": Bound(low, low_open=True)})


def between(low: float, high: float, default: Any, *, low_open: bool = False) -> Any:
    """A field whose value must be in ``[low, high]`` (``(low, high]`` when ``low_open``)."""
    return field(default=default, metadata={"bound": Bound(low, high, low_open=low_open)})


class _RangeChecked:
    """Checks every field's :class:`Bound` after construction; ``section`` is the dotted
    prefix the messages name (``rollout.``)."""

    section: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            bound, value = f.metadata.get("bound"), getattr(self, f.name)
            if bound is not None and value is not None and not bound.holds(value):
                raise ConfigError(f"Expected {self.section}{f.name} {bound}, actual value: {value!r}")


@dataclass
class TinySpecConfig(_RangeChecked):
    """Size of the locally built random-init model (used when ``model.path`` is empty)."""

    section: ClassVar[str] = "model.tiny."
    vocab_size: int = at_least(1, 1024)
    hidden_size: int = at_least(1, 128)
    intermediate_size: int = at_least(1, 384)
    num_hidden_layers: int = at_least(1, 2)
    num_attention_heads: int = at_least(1, 4)
    num_key_value_heads: int = at_least(1, 2)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden_size % self.num_attention_heads or self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(
                "Expected model.tiny.hidden_size divisible by num_attention_heads, and num_attention_heads by "
                f"num_key_value_heads, actual values: {self.hidden_size}, {self.num_attention_heads}, "
                f"{self.num_key_value_heads}"
            )


@dataclass
class ModelConfig:
    path: str | None = None
    """A local HF model directory; empty builds the tiny model into ``tiny_dir``."""
    tiny_dir: str = ".cache/agentgym-tiny-model"
    tiny: TinySpecConfig = field(default_factory=TinySpecConfig)
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Compute dtype of the trainer's forwards and of the rollout engine's weights. The
    trainer's parameters, gradients, optimiser state and EWMA always stay float32 (master
    weights): AdamW steps of ~1e-6 round away in bf16. ``bfloat16`` runs the forwards
    under autocast (one process, DDP) or FSDP2's ``MixedPrecisionPolicy(param_dtype=bf16,
    reduce_dtype=fp32)``."""
    gradient_checkpointing: bool = False


@dataclass
class EnvConfig:
    id: str = "agentgym/Calculator-v0"
    """A registered env id (checked at load, with the closest ids suggested)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Passed to ``gym.make`` (e.g. ``{difficulty: 1}``); checked against the env's constructor."""
    eval_split: str = "validation"

    @property
    def is_team(self) -> bool:
        """A multi-agent (team) env id: rolled out by :class:`~baselines.team_rollout.TeamRollout`."""
        from agentgym.multi_agent import is_multi_agent_env

        return is_multi_agent_env(self.id)

    def __post_init__(self) -> None:
        import agentgym  # noqa: F401 - registers the envs
        from agentgym.envs import check_env_id, check_env_kwargs
        from agentgym.errors import ConfigError as EnvConfigError

        try:
            check_env_id(self.id, multi_agent=True)  # a team id trains one shared policy in every seat
        except EnvConfigError as e:
            raise ConfigError(f"env.id: {e}") from e
        try:
            check_env_kwargs(self.id, self.kwargs)
        except EnvConfigError as e:
            raise ConfigError(f"env.kwargs: {e}") from e


@dataclass
class VLLMConfig(_RangeChecked):
    section: ClassVar[str] = "rollout.vllm."
    tensor_parallel_size: int = at_least(1, 1)
    gpu_memory_utilization: float = between(0, 1, 0.5, low_open=True)
    """Fraction of GPU memory for vLLM (GPU platforms; ignored by vLLM's CPU build, where
    a fraction would be of host RAM: size its KV cache with ``kv_cache_memory_bytes`` or
    ``VLLM_CPU_KVCACHE_SPACE`` in GiB)."""
    kv_cache_memory_bytes: int | None = at_least(1, None)
    """An explicit KV-cache size in bytes (any platform); None lets vLLM decide."""
    enforce_eager: bool = False
    max_model_len: int | None = at_least(1, None)


@dataclass
class RolloutConfig(_RangeChecked):
    section: ClassVar[str] = "rollout."
    engine: Literal["hf", "vllm"] = "hf"
    tasks_per_step: int = at_least(1, 8)
    """Distinct tasks per training step (across all processes)."""
    group_size: int = at_least(1, 8)
    """Samples per task; advantages are normalised within a group."""
    max_new_tokens: int = at_least(1, 64)
    temperature: float = at_least(0, 1.0)
    top_p: float = between(0, 1, 1.0, low_open=True)
    max_seq_len: int = at_least(2, 1024)
    """Prompt plus generated tokens; must leave room for ``max_new_tokens``."""
    max_batch_size: int = at_least(1, 64)
    """hf engine: prompts per ``generate`` call."""
    drift_check_frac: float = between(0, 1, 0.25)
    max_staleness: int = at_least(0, 1)
    """Asynchronous rollout (:mod:`baselines.async_rollout`): a group admitted at step
    ``e`` is trained on by step ``e + max_staleness``; episodes keep running while the
    trainer updates. 0 is the synchronous loop's behaviour, token for token."""
    step_timeout_s: float = above(0, 600.0)
    """Backstop for one env step in the asynchronous rollout: past it the episode is
    dropped as infra-failed. Keep it above the env's worst tool timeout x attempts."""
    fleet: Literal["none", "ray"] = "none"
    """Where the rollout's envs run: ``none``, in this process; ``ray``, on Ray env workers
    (``agentgym.fleet``, ``pip install 'agentgym[ray]'``; the cluster in ``RAY_ADDRESS`` or
    the last ``ray start``, else a local instance), driven through the same async env API."""
    fleet_workers: int = at_least(1, 2)
    """Ray env workers with ``fleet: ray``; the rollout's envs are spread evenly over them."""
    fleet_address: str = "auto"
    """The Ray cluster with ``fleet: ray``: ``auto``, ``local`` (a new local instance) or an address."""
    vllm: VLLMConfig = field(default_factory=VLLMConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.top_p < 1:
            raise ConfigError(
                f"Expected rollout.top_p = 1, actual value: {self.top_p}. With top_p < 1 the engine's log-probs are "
                "under the nucleus-truncated distribution while the trainer's are under the full softmax (temperature "
                "only), so every importance ratio would be biased. Sample with top_p=1 (shape the distribution with "
                "rollout.temperature instead)."
            )
        if self.max_seq_len <= self.max_new_tokens:
            raise ConfigError(f"Expected rollout.max_seq_len > rollout.max_new_tokens (room for the prompt), "
                              f"actual values: {self.max_seq_len}, {self.max_new_tokens}")


@dataclass
class AlgoConfig(_RangeChecked):
    section: ClassVar[str] = "algo."
    proximal: Literal["ewma", "behaviour"] = "ewma"
    """``ewma``: PPO-EWMA; ``behaviour``: plain PPO (proximal = behaviour policy)."""
    ewma_age: float = at_least(0, 4.0)
    """Mean age of the EWMA in optimiser steps; ``beta = age / (age + 1)``."""
    ewma_reference_batch_size: int | None = at_least(1, None)
    """If set, ``ewma_age`` was tuned at this many episodes per optimiser step and is
    rescaled to the actual minibatch size (batch size invariance)."""
    ewma_device: Literal["policy", "cpu"] = "policy"
    eps_low: float = field(default=0.2, metadata={"bound": Bound(0, 1, low_open=True, high_open=True)})
    eps_high: float = above(0, 0.2)
    imp_samp_max: float = at_least(1, 2.0)
    normalize_std: bool = True
    adv_eps: float = above(0, 1e-6)
    epochs: int = at_least(1, 1)
    num_minibatches: int = at_least(1, 1)
    """Optimiser steps per epoch; the batch is split into this many minibatches."""
    micro_batch_size: int = at_least(1, 8)
    """Sequences per forward/backward (gradient accumulation within a minibatch)."""
    lr: float = above(0, 1e-5)
    weight_decay: float = at_least(0, 0.0)
    max_grad_norm: float = above(0, 1.0)
    mismatch: MismatchConfig = field(default_factory=MismatchConfig)


@dataclass
class SFTConfig(_RangeChecked):
    """Supervised warm start on oracle-policy trajectories (before RL)."""

    section: ClassVar[str] = "sft."
    episodes: int = at_least(0, 0)
    """Oracle episodes to imitate; 0 disables SFT."""
    steps: int = at_least(1, 300)
    """Maximum SFT steps (fewer when ``stop_success`` is reached first)."""
    batch_size: int = at_least(1, 16)
    lr: float = above(0, 1e-3)
    schedule: Literal["linear", "constant"] = "linear"
    """lr after warm-up: linear decay over ``steps``, or constant (use with ``stop_success``)."""
    stop_success: float | None = between(0, 1, None, low_open=True)
    """Stop SFT once the success rate of the *sampling* policy (``rollout.temperature``)
    on ``check_tasks`` train-split tasks reaches this; None trains all ``steps``."""
    check_every: int = at_least(0, 20)
    """Steps between checks of the stop rule (0: never)."""
    check_from: int = at_least(0, 0)
    """First step at which the stop rule is checked (checks cost rollouts)."""
    check_tasks: int = at_least(1, 64)


@dataclass
class LogConfig:
    run_dir: str = "runs/default"
    tensorboard: bool = True
    wandb_project: str | None = None
    tool_usage_min: dict[str, float] = field(default_factory=dict)
    """Warn when a tool's per-batch usage fraction falls below this (``{search: 0.5}``)."""

    def __post_init__(self) -> None:
        for tool, fraction in self.tool_usage_min.items():
            if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
                raise ConfigError(f"Expected log.tool_usage_min.{tool} in [0, 1], actual value: {fraction!r}")


@dataclass
class DistConfig:
    strategy: Literal["none", "ddp", "fsdp2"] = "none"
    """Multi-process training under ``torchrun``; ``none`` for one process."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"


@dataclass
class TrainConfig(_RangeChecked):
    seed: int = at_least(0, 0)
    steps: int = at_least(1, 20)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    eval_every: int = at_least(0, 5)
    """Steps between evaluations (0: never)."""
    eval_tasks: int = at_least(1, 32)
    eval_temperature: float = at_least(0, 0.0)
    """Temperature of the headline eval (0: greedy)."""
    eval_sampled: bool = True
    """Also evaluate the sampling policy (``rollout.temperature``) on the same tasks:
    RL optimises that policy's success, which greedy success need not reflect."""
    checkpoint_every: int = at_least(0, 0)
    """Save every N steps into ``run_dir/checkpoint`` (0: only at the end)."""
    resume: bool = False
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    log: LogConfig = field(default_factory=LogConfig)
    dist: DistConfig = field(default_factory=DistConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.env.is_team:
            # What a team run does not have yet, said before any model is built.
            if self.sft.episodes > 0:
                raise ConfigError(f"Expected sft.episodes=0 with the team env {self.env.id} (the SFT warm start plays "
                                  f"a single-agent oracle), actual value: {self.sft.episodes}; a team run starts from "
                                  "model.path as it is")
            if self.rollout.fleet != "none":
                raise ConfigError(f"Expected rollout.fleet=none with the team env {self.env.id} (Ray env workers host "
                                  f"single-agent envs), actual value: {self.rollout.fleet!r}")


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
        try:
            node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as e:
            raise _yaml_error(f"override {item!r}", e) from e
    return data


def _yaml_error(where: str, error: Exception) -> ConfigError:
    """One line: where, the line and column (1-based) and what YAML objected to."""
    mark = getattr(error, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or str(error)
    return ConfigError(f"{where}: YAML syntax error{at}: {' '.join(str(problem).split())}")


def _read_yaml(p: Path) -> dict[str, Any]:
    import yaml

    if not p.exists():
        raise ConfigError(f"Config file {p} does not exist; pass a path like baselines/configs/calculator_cpu.yaml")
    if p.is_dir():
        raise ConfigError(f"{p} is a directory; pass a YAML file such as {p / 'calculator_cpu.yaml'}")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p} is not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                          "save it as UTF-8") from e
    except OSError as e:
        raise ConfigError(f"Cannot read {p}: {e.strerror or e}") from e
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise _yaml_error(str(p), e) from e
    if not isinstance(data, dict):
        raise ConfigError(f"Expected a mapping at the top of {p}, actual value: {type(data).__name__}")
    return data


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    """Read a YAML config (or defaults when ``path`` is None) and apply overrides.

    Every problem, from an unreadable file to a value out of range, is a one-line
    :class:`ConfigError` that names the file or the dotted key.
    """
    data = _read_yaml(Path(path)) if path is not None else {}
    return config_from_dict(apply_overrides(data, list(overrides or [])))
