"""Training configuration: pydantic models loaded from YAML.

``load_config(path, overrides)`` reads a YAML file into :class:`TrainConfig` and applies
``key=value`` overrides with dotted keys (``algo.lr=3e-4``, ``rollout.engine=vllm``);
values are parsed as YAML scalars. Unknown keys are errors that suggest the closest key.

Every numeric field declares its allowed range on the field (``Field(ge=..., gt=...,
le=...)``) and must be finite, so ``steps: -5`` or ``top_p: 7`` fail at load with the
key's dotted name instead of starting a run; ``env.id`` must be a registered env and
``env.kwargs`` must be its kwargs. Integers, booleans and strings are taken as YAML typed
them (``steps: 2.5`` or ``tensorboard: 1`` is an error, never a silent conversion); a
float also accepts a numeric string, because YAML 1.1 reads ``1e-5`` as one.

Whatever goes wrong, from an unreadable file to a value out of range, is a one-line
:class:`ConfigError` naming the file or the dotted key: pydantic's first error,
rewritten as "Expected X, actual value: Y".
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from baselines.errors import ConfigError
from baselines.mismatch import MismatchConfig

__all__ = [
    "TrainConfig", "ModelConfig", "EnvConfig", "RolloutConfig", "VLLMConfig", "AlgoConfig",
    "SFTConfig", "LogConfig", "DistConfig", "RewardWatchConfig", "TinySpecConfig", "ConfigError", "load_config",
    "config_from_dict", "config_to_dict", "apply_overrides",
]


def _not_bool(value: Any) -> Any:
    # pydantic's lax float takes True as 1.0; a flag where a number belongs is a mistake.
    if isinstance(value, bool):
        raise PydanticCustomError("float_type", "Input should be a valid number")
    return value


Real = Annotated[float, BeforeValidator(_not_bool)]
"""A float field: ints and numeric strings (YAML 1.1's ``1e-5``) convert, bools do not."""


class _Section(BaseModel):
    """A config section: unknown keys refused, floats finite, and errors raised as one-line
    :class:`ConfigError` naming the key with ``section`` (``rollout.``) in front.

    pydantic builds a nested section through its ``__init__`` too (a custom ``__init__``
    is called for every instance), so each section words the errors of its own keys and
    its parent passes the :class:`ConfigError` on unchanged.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)
    section: ClassVar[str] = ""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise _one_line(e, type(self)) from e


class TinySpecConfig(_Section):
    """Size of the locally built random-init model (used when ``model.path`` is empty)."""

    section: ClassVar[str] = "model.tiny."
    vocab_size: StrictInt = Field(1024, ge=1)
    hidden_size: StrictInt = Field(128, ge=1)
    intermediate_size: StrictInt = Field(384, ge=1)
    num_hidden_layers: StrictInt = Field(2, ge=1)
    num_attention_heads: StrictInt = Field(4, ge=1)
    num_key_value_heads: StrictInt = Field(2, ge=1)
    # Learn the tokenizer's merges on bare words (no space or quote in front), so a name
    # is the same tokens in a tool result and in the call that copies it (tiny_model.py).
    isolate_words: StrictBool = False

    @model_validator(mode="after")
    def _heads_divide(self) -> TinySpecConfig:
        if self.hidden_size % self.num_attention_heads or self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(
                "Expected model.tiny.hidden_size divisible by num_attention_heads, and num_attention_heads by "
                f"num_key_value_heads, actual values: {self.hidden_size}, {self.num_attention_heads}, "
                f"{self.num_key_value_heads}"
            )
        return self


class ModelConfig(_Section):
    section: ClassVar[str] = "model."
    path: StrictStr | None = None
    """A local HF model directory; empty builds the tiny model under ``tiny_dir``, in a
    directory of its own named by the digest of its spec (seed included) and corpus."""
    tiny_dir: StrictStr = ".cache/agentgym-tiny-model"
    tiny: TinySpecConfig = Field(default_factory=TinySpecConfig)
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Compute dtype of the trainer's forwards and of the rollout engine's weights. The
    trainer's parameters, gradients, optimiser state and EWMA always stay float32 (master
    weights): AdamW steps of ~1e-6 round away in bf16. ``bfloat16`` runs the forwards
    under autocast (one process, DDP) or FSDP2's ``MixedPrecisionPolicy(param_dtype=bf16,
    reduce_dtype=fp32)``."""
    gradient_checkpointing: StrictBool = False
    tokenizer_names: Literal["env", "real"] = "env"
    """Which names the tiny model's tokenizer learns its merges from. ``env``: the env's
    text as configured, made-up training names included, so those names become a few long
    tokens while a held-out name the corpus never held splits into letters (DataAnalysis:
    2.7% against 42% one-letter pieces). ``real``: the corpus is built without the env's
    ``invent_*`` options, so made-up names split as unseen real names do."""


class EnvConfig(_Section):
    section: ClassVar[str] = "env."
    id: StrictStr = "agentgym/Calculator-v0"
    """A registered env id (checked at load, with the closest ids suggested)."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Passed to ``gym.make`` (e.g. ``{difficulty: 1}``); checked against the env's constructor."""
    eval_split: StrictStr = "validation"
    name_pieces: Literal["none", "tokenizer"] = "none"
    """``tokenizer``: pass the policy tokenizer's lowercase letter tokens to the env as its
    ``name_pieces`` (DataAnalysis-v2's ``invent_spelled`` spells made-up train names with
    them, so every token of a held-out name occurs in some training name)."""

    @property
    def is_team(self) -> bool:
        """A multi-agent (team) env id: rolled out by :class:`~baselines.team_rollout.TeamRollout`."""
        from agentgym.multi_agent import is_multi_agent_env

        return is_multi_agent_env(self.id)

    @model_validator(mode="after")
    def _registered(self) -> EnvConfig:
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
        if self.name_pieces == "tokenizer":
            try:
                check_env_kwargs(self.id, {**self.kwargs, "name_pieces": ["a"]})
            except EnvConfigError as e:
                raise ConfigError(f"env.name_pieces: tokenizer passes name_pieces to the env, which takes none: {e}") from e
        if self.kwargs.get("invent_spelled") and "name_pieces" not in self.kwargs and self.name_pieces == "none":
            raise ConfigError("Expected env.name_pieces: tokenizer (or env.kwargs.name_pieces) with "
                              "env.kwargs.invent_spelled, which spells made-up names with them; actual value: none")
        return self


class VLLMConfig(_Section):
    section: ClassVar[str] = "rollout.vllm."
    tensor_parallel_size: StrictInt = Field(1, ge=1)
    gpu_memory_utilization: Real = Field(0.5, gt=0, le=1)
    """Fraction of GPU memory for vLLM (GPU platforms; ignored by vLLM's CPU build, where
    a fraction would be of host RAM: size its KV cache with ``kv_cache_memory_bytes`` or
    ``VLLM_CPU_KVCACHE_SPACE`` in GiB)."""
    kv_cache_memory_bytes: StrictInt | None = Field(None, ge=1)
    """An explicit KV-cache size in bytes (any platform); None lets vLLM decide."""
    enforce_eager: StrictBool = False
    max_model_len: StrictInt | None = Field(None, ge=1)


class RolloutConfig(_Section):
    section: ClassVar[str] = "rollout."
    engine: Literal["hf", "vllm"] = "hf"
    tasks_per_step: StrictInt = Field(8, ge=1)
    """Distinct tasks per training step (across all processes)."""
    group_size: StrictInt = Field(8, ge=1)
    """Samples per task; advantages are normalised within a group."""
    max_new_tokens: StrictInt = Field(64, ge=1)
    temperature: Real = Field(1.0, ge=0)
    top_p: Real = Field(1.0, gt=0, le=1)
    max_seq_len: StrictInt = Field(1024, ge=2)
    """Prompt plus generated tokens; must leave room for ``max_new_tokens``."""
    max_batch_size: StrictInt = Field(64, ge=1)
    """hf engine: prompts per ``generate`` call."""
    drift_check_frac: Real = Field(0.25, ge=0, le=1)
    max_staleness: StrictInt = Field(1, ge=0)
    """Asynchronous rollout (:mod:`baselines.async_rollout`): a group admitted at step
    ``e`` is trained on by step ``e + max_staleness``; episodes keep running while the
    trainer updates. 0 is the synchronous loop's behaviour, token for token."""
    step_timeout_s: Real = Field(600.0, gt=0)
    """Backstop for one env step in the asynchronous rollout: past it the episode is
    dropped as infra-failed. Keep it above the env's worst tool timeout x attempts."""
    fleet: Literal["none", "ray"] = "none"
    """Where the rollout's envs run: ``none``, in this process; ``ray``, on Ray env workers
    (``agentgym.fleet``, ``pip install 'agentgym[ray]'``; the cluster in ``RAY_ADDRESS`` or
    the last ``ray start``, else a local instance), driven through the same async env API."""
    fleet_workers: StrictInt = Field(2, ge=1)
    """Ray env workers with ``fleet: ray``; the rollout's envs are spread evenly over them."""
    fleet_address: StrictStr = "auto"
    """The Ray cluster with ``fleet: ray``: ``auto``, ``local`` (a new local instance) or an address."""
    replay_frac: Real = Field(0.0, ge=0, le=1)
    """Share of each step's tasks replayed from a buffer of tasks whose last group's rewards
    differed (:mod:`baselines.task_replay`); 0 draws every task fresh."""
    replay_uses: StrictInt = Field(4, ge=1)
    """Replays of one task before it is retired (``replay_frac`` > 0)."""
    outage_frac: Real = Field(0.5, gt=0, le=1)
    """A step whose episodes infrastructure failed in more than this share (all processes
    together) counts toward an outage (see ``outage_steps``)."""
    outage_steps: StrictInt = Field(3, ge=0)
    """This many outage steps in a row stop the run, after a checkpoint, with the failures'
    commonest causes: a run on an engine that stalled learns nothing from its dropped
    episodes and would go on doing so for days. Resume with ``resume=true`` once the
    infrastructure is back. 0 never stops."""
    vllm: VLLMConfig = Field(default_factory=VLLMConfig)

    @model_validator(mode="after")
    def _sampling_matches_training(self) -> RolloutConfig:
        if self.top_p < 1:
            raise ConfigError(
                f"Expected rollout.top_p = 1, actual value: {self.top_p}. With top_p < 1 the engine's log-probs are "
                "under the nucleus-truncated distribution while the trainer's are under the full softmax (temperature "
                "only), so every importance ratio would be biased. Sample with top_p=1 (shape the distribution with "
                "rollout.temperature instead)."
            )
        if self.replay_frac > 0 and self.max_staleness > 0:
            raise ConfigError(f"Expected rollout.max_staleness = 0 with rollout.replay_frac > 0, actual value: "
                              f"{self.max_staleness}. A stale batch mixes groups admitted for several steps, so a "
                              "task can be observed twice and replayed past rollout.replay_uses; set "
                              "rollout.max_staleness=0 or rollout.replay_frac=0.")
        if self.max_seq_len <= self.max_new_tokens:
            raise ConfigError(f"Expected rollout.max_seq_len > rollout.max_new_tokens (room for the prompt), "
                              f"actual values: {self.max_seq_len}, {self.max_new_tokens}")
        return self


class AlgoConfig(_Section):
    section: ClassVar[str] = "algo."
    proximal: Literal["ewma", "behaviour"] = "ewma"
    """``ewma``: PPO-EWMA; ``behaviour``: plain PPO (proximal = behaviour policy)."""
    ewma_age: Real = Field(4.0, ge=0)
    """Mean age of the EWMA in optimiser steps; ``beta = age / (age + 1)``."""
    ewma_reference_batch_size: StrictInt | None = Field(None, ge=1)
    """If set, ``ewma_age`` was tuned at this many episodes per optimiser step and is
    rescaled to the actual minibatch size (batch size invariance)."""
    ewma_device: Literal["policy", "cpu"] = "policy"
    """Where the EWMA (and ``kl_coef``'s reference copy) live; ``cpu`` moves each to the
    policy's device for its forward only, keeping accelerator memory for training."""
    eps_low: Real = Field(0.2, gt=0, lt=1)
    eps_high: Real = Field(0.2, gt=0)
    imp_samp_max: Real = Field(2.0, ge=1)
    normalize_std: StrictBool = True
    adv_eps: Real = Field(1e-6, gt=0)
    epochs: StrictInt = Field(1, ge=1)
    num_minibatches: StrictInt = Field(1, ge=1)
    """Optimiser steps per epoch; the batch is split into this many minibatches."""
    micro_batch_size: StrictInt = Field(8, ge=1)
    """Sequences per forward/backward (gradient accumulation within a minibatch)."""
    lr: Real = Field(1e-5, gt=0)
    weight_decay: Real = Field(0.0, ge=0)
    max_grad_norm: Real = Field(1.0, gt=0)
    kl_coef: Real = Field(0.0, ge=0)
    """Weight of a per-token KL penalty to the weights RL starts from (the SFT start, or
    ``model.path``; :mod:`baselines.loss`): keeps a small policy near what it imitated
    while RL sharpens it. 0 keeps no reference copy."""
    copy_lr: Real = Field(0.0, ge=0)
    """lr of a copy task on random token spans over the whole tokenizer, one step of it
    after every policy step on an AdamW of its own (after PPO-ptx, with a copy task:
    ``baselines.update.PolicyUpdater._copy_step``): keeps the model copying tokens that
    only held-out questions hold. Its AdamW holds two more copies of the weights' size.
    0: none."""
    copy_batch_size: StrictInt = Field(16, ge=1)
    """Rows of that copy task per step."""
    mismatch: MismatchConfig = Field(default_factory=MismatchConfig)
    """Checked by :class:`~baselines.mismatch.MismatchConfig` itself (a dataclass)."""
    guidance: Literal["none", "rl", "imitate"] = "none"
    """Off-policy guidance (:mod:`baselines.guidance`, after LUFFY): ``sft.demonstrator``
    plays the task of each group in which every sample failed, and its episode joins the
    group. ``rl``: advantages over samples and demonstration together; ``imitate`` (the
    control): the demonstration alone is trained on, at the weight ``rl`` gives it."""


class SFTConfig(_Section):
    """Supervised warm start on oracle-policy trajectories (before RL)."""

    section: ClassVar[str] = "sft."
    episodes: StrictInt = Field(0, ge=0)
    """Oracle episodes to imitate; 0 disables SFT."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Merged over ``env.kwargs`` for the demonstration env only, e.g. Search's
    ``{train_part: [0, 2]}`` with ``env.kwargs.train_part: [1, 2]``: RL then trains on
    questions imitation never showed."""
    demonstrator: Literal["oracle", "search_reader", "names_first"] = "oracle"
    """Whom to imitate (``baselines.demonstrators``): ``oracle`` (the env's) or a policy
    whose tokens follow from what it has seen, e.g. ``search_reader`` for Search;
    ``names_first`` is DataAnalysis's oracle with its code's names bound first, one per
    line, so each copied name ends alike."""
    steps: StrictInt = Field(300, ge=1)
    """Maximum SFT steps (fewer when ``stop_success`` is reached first)."""
    batch_size: StrictInt = Field(16, ge=1)
    length_groups: StrictInt = Field(1, ge=1)
    """Draw the rows of this many steps at once and give each step rows of similar length
    (1: every step a uniform draw). Rows are as likely as with 1; a step pads to its
    longest row, so grouping cuts padding when lengths vary (``baselines.sft.minibatch_rows``)."""
    lr: Real = Field(1e-3, gt=0)
    schedule: Literal["linear", "constant"] = "linear"
    """lr after warm-up: linear decay over ``steps``, or constant (use with ``stop_success``)."""
    stop_success: Real | None = Field(None, gt=0, le=1)
    """Stop SFT once the success rate of the *sampling* policy (``rollout.temperature``)
    on ``check_tasks`` train-split tasks reaches this; None trains all ``steps``."""
    stop_patience: StrictInt | None = Field(None, ge=1)
    """Also stop after this many checks in a row without a new best success, and keep
    the best check's weights (``baselines.sft.EarlyStop``; counted from the first check
    above 0); None: only ``stop_success``
    or ``steps`` ends SFT. A small check set is noisy (+-0.07 at 32 tasks near 0.2), so
    a threshold alone can leave a run oscillating below it to the step limit."""
    check_every: StrictInt = Field(20, ge=0)
    """Steps between checks of the stop rule (0: never)."""
    check_from: StrictInt = Field(0, ge=0)
    """First step at which the stop rule is checked (checks cost rollouts)."""
    check_tasks: StrictInt = Field(64, ge=1)
    check_split: StrictStr | None = None
    """Split the stop rule's tasks come from (None: the training split). A held-out split
    stops on what generalises: on train tasks a model that memorised its demonstrations
    passes the rule while it fails every new question (docs/training.md)."""
    counterfactual: Real = Field(0.0, ge=0)
    """Extra demonstrations, as a fraction of ``episodes``, with the entity and answer
    swapped for another episode's (Search; DataAnalysis swaps the printed answer): they
    cannot be memorised, only read
    (``baselines.demonstrators.counterfactual``)."""
    invent: Real = Field(0.0, ge=0, le=1)
    """Fraction of the counterfactual copies whose names are made up: Search's entity
    (instead of another episode's), DataAnalysis's quoted columns, values and file stems.
    A model cannot memorise the set of names either, so it must copy the question's
    (``baselines.demonstrators.invented_name``)."""
    invent_spelled: Real = Field(0.0, ge=0, le=1)
    """Fraction of made-up names (``invent``) spelled with random lowercase tokens of the
    tokenizer instead of syllables. Syllables never hold ``ps``, ``x`` or ``qu``, so the
    tokens for such letters occur in no training name; held-out names hold them (``tips``
    is ``ti`` + ``ps``) and the model garbled exactly those
    (``baselines.demonstrators.invented_name``)."""
    recovery: Real = Field(0.0, ge=0, le=1)
    """Fraction of demonstrations whose first ``python`` call is a mistake the small model
    makes (a file name copied wrong, a copy cut short), so they show the error and then
    the right call (``baselines.demonstrators.recovering``). The mistake is context, never
    imitated; it needs ``max_turns >= 3``; such episodes are not counterfactually copied."""
    recovery_mistakes: list[Literal["name", "cut", "short", "column"]] = Field(default_factory=lambda: ["name", "cut"], min_length=1)
    """The kinds of mistake ``recovery`` demonstrates (``baselines.demonstrators.mistaken_call``):
    a file name with a letter or underscore dropped (``name``), the code cut off after a
    bracket (``cut``), a file name cut short without its extension (``short``: ``'nile'``
    for ``nile.csv``), a column with a letter or underscore dropped (``column``). The
    default is the original two, so older runs replay."""
    observation_weight: Real = Field(0.0, ge=0)
    """Weight of a language-modelling loss on the prompt and tool-result tokens, added
    to the imitation loss (0: imitation only). It teaches copying from what the agent
    reads (``baselines.sft.sft_train``)."""
    copy_warmup: StrictInt = Field(0, ge=0)
    """At most this many steps of copying random token spans before imitation (0: none),
    at ``lr`` and ``batch_size``, ending once the copy is learned (loss < 0.5): the model
    learns to copy first (``baselines.sft.copy_warmup``)."""
    copy_vocabulary: Literal["demonstrations", "tokenizer"] = "demonstrations"
    """Which tokens the copy warm-up draws its spans from: those in the SFT demonstrations,
    or every non-special token of the tokenizer. A token the warm-up never shows is not
    copied after it (measured on a 64-token model: 0.0 of never-shown tokens against 0.85
    when all were shown), and held-out tasks carry such tokens: 110 of 128 DataAnalysis-v2
    test questions hold a token that 1,500 train questions never do (``ps`` in
    ``tips.csv``). ``tokenizer`` is for tasks whose test names are not in training."""


class LogConfig(_Section):
    section: ClassVar[str] = "log."
    run_dir: StrictStr = "runs/default"
    tensorboard: StrictBool = True
    wandb_project: StrictStr | None = None
    tool_usage_min: dict[str, Annotated[Real, Field(ge=0, le=1)]] = Field(default_factory=dict)
    """Warn when a tool's per-batch usage fraction falls below this (``{search: 0.5}``)."""


class RewardWatchConfig(_Section):
    """The reward-jump alarm (:mod:`baselines.reward_watch`): a watched metric that rises
    faster than ``max_rise`` per ``window`` steps is investigated as a possible hack."""

    section: ClassVar[str] = "reward_watch."
    enabled: StrictBool = False
    metrics: list[StrictStr] = Field(default_factory=lambda: ["reward/mean", "eval/success_rate"])
    """The metrics watched for jumps (train reward, eval scores)."""
    max_rise: Real = Field(0.3, gt=0)
    """The largest rise of a watched metric over ``window`` steps that is not an alarm."""
    window: StrictInt = Field(1, ge=1)
    top_k: StrictInt = Field(8, ge=1)
    """Trajectories of the alarm's step saved and re-scored (the highest rewards)."""
    second_judge: Literal["honest", "none"] = "honest"
    """Re-score judged answers with a hardened scripted honest judge, or not."""
    pause: StrictBool = False
    """Stop the run (after a checkpoint) when the alarm fires."""


class DistConfig(_Section):
    section: ClassVar[str] = "dist."
    strategy: Literal["none", "ddp", "fsdp2"] = "none"
    """Multi-process training under ``torchrun``; ``none`` for one process."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"


class TrainConfig(_Section):
    seed: StrictInt = Field(0, ge=0)
    steps: StrictInt = Field(20, ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: StrictInt | None = Field(None, ge=1)
    """Torch intra-op threads (None: torch's default, one per core). Fixed, a CPU run does
    not depend on the machine's core count: a float sum split over another thread count
    rounds differently, and one flipped sample changes every step after it. (Another CPU
    model may still round differently.)"""
    eval_every: StrictInt = Field(5, ge=0)
    """Steps between evaluations (0: never)."""
    eval_tasks: StrictInt = Field(32, ge=1)
    eval_temperature: Real = Field(0.0, ge=0)
    """Temperature of the headline eval (0: greedy)."""
    eval_sampled: StrictBool = True
    """Also evaluate the sampling policy (``rollout.temperature``) on the same tasks:
    RL optimises that policy's success, which greedy success need not reflect."""
    checkpoint_every: StrictInt = Field(0, ge=0)
    """Save every N steps into ``run_dir/checkpoint`` (0: only at the end)."""
    resume: StrictBool = False
    model: ModelConfig = Field(default_factory=ModelConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    algo: AlgoConfig = Field(default_factory=AlgoConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    dist: DistConfig = Field(default_factory=DistConfig)
    reward_watch: RewardWatchConfig = Field(default_factory=RewardWatchConfig)

    @model_validator(mode="after")
    def _team_limits(self) -> TrainConfig:
        if self.env.is_team:
            # What a team run does not have yet, said before any model is built.
            if self.sft.episodes > 0:
                raise ConfigError(f"Expected sft.episodes=0 with the team env {self.env.id} (the SFT warm start plays "
                                  f"a single-agent oracle), actual value: {self.sft.episodes}; a team run starts from "
                                  "model.path as it is")
            if self.rollout.fleet != "none":
                raise ConfigError(f"Expected rollout.fleet=none with the team env {self.env.id} (Ray env workers host "
                                  f"single-agent envs), actual value: {self.rollout.fleet!r}")
        if self.algo.guidance != "none":
            if self.env.is_team:
                raise ConfigError(f"Expected algo.guidance=none with the team env {self.env.id} (a demonstration is a "
                                  f"single-agent episode), actual value: {self.algo.guidance!r}")
            if self.dist.strategy == "fsdp2":
                raise ConfigError("Expected algo.guidance=none with dist.strategy=fsdp2 (each process scores its own "
                                  f"demonstrations with an unsharded forward), actual value: {self.algo.guidance!r}")
        return self


# --- pydantic's errors as one line -------------------------------------------------------

_KINDS = {"int_type": "an integer", "bool_type": "true or false", "string_type": "a string",
          "float_type": "a number", "float_parsing": "a number", "finite_number": "a finite number"}
_MAPPINGS = {"model_type", "model_attributes_type", "dataclass_type", "dict_type"}
_UNKNOWN = {"extra_forbidden", "unexpected_keyword_argument"}


def _node(root: Any, loc: tuple[Any, ...]) -> tuple[Any, list[Any]]:
    """The type at ``loc`` under ``root`` (None unwrapped) and the constraints declared on it."""
    tp, constraints = root, []
    for part in loc:
        tp = _without_none(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel) and part in tp.model_fields:
            info = tp.model_fields[part]
            tp, constraints = info.annotation, list(info.metadata)
        elif dataclasses.is_dataclass(tp) and part in typing.get_type_hints(tp):
            tp, constraints = typing.get_type_hints(tp)[part], []
        elif typing.get_origin(tp) is dict:
            tp, constraints = typing.get_args(tp)[1], []
        else:
            return None, []
        tp = _without_none(tp)
        if typing.get_origin(tp) is Annotated:
            tp, *extra = typing.get_args(tp)
            constraints += [c for item in extra for c in getattr(item, "metadata", [item])]
    return tp, constraints


def _without_none(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        return rest[0] if len(rest) == 1 else tp
    return tp


def _range(constraints: list[Any]) -> str:
    """``>= 1``, ``> 0`` or ``in (0, 1]`` from the field's ``Ge``/``Gt``/``Le``/``Lt``."""
    bound = {name: getattr(c, name) for c in constraints for name in ("ge", "gt", "le", "lt") if hasattr(c, name)}
    low, high = bound.get("ge", bound.get("gt")), bound.get("le", bound.get("lt"))
    if high is None:
        return f"{'>' if 'gt' in bound else '>='} {low:g}"
    if low is None:
        return f"{'<' if 'lt' in bound else '<='} {high:g}"
    return f"in {'(' if 'gt' in bound else '['}{low:g}, {high:g}{')' if 'lt' in bound else ']'}"


def _names(tp: Any) -> list[str]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return list(tp.model_fields)
    return [f.name for f in dataclasses.fields(tp)] if dataclasses.is_dataclass(tp) else []


def _one_line(error: ValidationError, root: type[_Section]) -> ConfigError:
    """The first of pydantic's errors, as "Expected <dotted key> ..., actual value: ..."."""
    first = error.errors(include_url=False)[0]
    kind, loc, value = first["type"], first["loc"], first.get("input")
    key = root.section + ".".join(str(part) for part in loc)
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, ConfigError):  # a cross-field check: its message names its keys
        return ConfigError(str(cause))
    if kind == "value_error":
        return ConfigError(f"{key}: {cause}")
    if kind in _UNKNOWN:
        parent, _ = _node(root, loc[:-1])
        names = _names(parent)
        close = difflib.get_close_matches(str(loc[-1]), names, n=1)
        hint = f" Did you mean {key.rpartition('.')[0] + '.' if '.' in key else ''}{close[0]}?" if close else ""
        return ConfigError(f"Unknown config key {key}; expected one of {names}.{hint}")
    if kind in _MAPPINGS:
        return ConfigError(f"Expected a mapping at {key or 'the top level'}, actual value: {value!r}")
    if kind == "literal_error":
        return ConfigError(f"Expected {key} to be one of {list(typing.get_args(_node(root, loc)[0]))}, "
                           f"actual value: {value!r}")
    tp, constraints = _node(root, loc)
    if kind.startswith(("greater", "less")) or (kind == "finite_number" and constraints):
        shown = float(value) if tp is float and not isinstance(value, float) else value
        return ConfigError(f"Expected {key} {_range(constraints)}, actual value: {shown!r}")
    return ConfigError(f"Expected {key} to be {_KINDS.get(kind, first['msg'])}, actual value: {value!r}")


# --- loading ----------------------------------------------------------------------------

def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Build and validate a :class:`TrainConfig` from nested plain data."""
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as e:
        raise _one_line(e, TrainConfig) from e


def config_to_dict(config: BaseModel) -> dict[str, Any]:
    """Nested plain data (what checkpoints store); :func:`config_from_dict` reads it back."""
    return config.model_dump()


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
