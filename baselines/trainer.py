"""The PPO-EWMA trainer: rollout -> advantages -> update -> weight sync, every step.

Wiring only; each piece is its own tested module. One training step:

1. tasks: ``rollout.tasks_per_step`` task seeds (drawn from ``(seed, step)``), split over
   processes; each task is played ``rollout.group_size`` times by the rollout engine
   through the asynchronous rollout (:mod:`baselines.async_rollout`: groups are admitted
   up to ``rollout.max_staleness`` steps ahead and keep running while the trainer
   updates; 0 is the synchronous loop, token for token); infra-failed episodes are
   dropped and counted;
2. with ``algo.guidance``, the demonstrator's episode joins each group in which every
   sample failed (:mod:`baselines.guidance`); group-normalised outcome advantages
   (:mod:`baselines.advantages`);
3. the PPO-EWMA update (:mod:`baselines.update`), the EWMA updated after every
   optimiser step;
4. the new weights are pushed into the engine (``sync_weights``);
5. metrics (JSONL/TensorBoard/W&B) and, every ``checkpoint_every`` steps, a checkpoint.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.advantages import group_normalized_advantages
from baselines.agent_loop import AgentLoop, AgentLoopConfig, make_rollout_envs
from baselines.async_rollout import AsyncRollout, AsyncRolloutConfig
from baselines.chat_tokens import ChatTokenizer
from baselines.checkpoint import load_checkpoint, save_checkpoint
from baselines.config import TrainConfig, config_to_dict
from baselines.distributed import (DistInfo, all_gather_lists, all_reduce_max, all_reduce_sum, full_state_dict, init_distributed, shard_like,
                                   unwrap_model, wrap_model)
from baselines.engines.base import RolloutEngine, SamplingConfig, derived_seed
from baselines.engines.hf_async import BatchingEngine
from baselines.errors import ConfigError
from baselines.ewma import EWMAModel, ewma_age_for_batch_size
from baselines.guidance import FailedGroupGuide, guided_advantages, set_behaviour_logprobs
from baselines.metrics import MetricsLogger, tool_usage_alerts
from baselines.rollout_stats import global_rollout_stats
from baselines.outage import OutageWatch
from baselines.policy_versions import PolicyVersions
from baselines.reward_watch import make_reward_watch
from baselines.staleness import token_staleness
from baselines.task_replay import TaskReplay, observe_rollout
from baselines.team_rollout import TeamRollout
from baselines.trajectory import Trajectory, collate
from baselines.update import PolicyUpdater

__all__ = ["Trainer", "env_corpus", "resolve_model_path", "build_engine"]

logger = logging.getLogger(__name__)
MetricsCallback = Callable[[int, dict[str, float]], None]

EVAL_CHUNK_EPISODES = 64
"""An evaluation plays at most this many episodes at once (or a rollout batch, if more):
each holds an env and its sandbox for the run's lifetime (``Trainer._success``)."""

EVAL_START_DIR = "eval_start"
"""Under the run directory: the start's evaluation, one file per rank (its own tasks'
success), so that a resumed run's summary still measures its gain from the start."""


def env_corpus(env_id: str, env_kwargs: dict[str, Any], episodes: int = 300) -> list[str]:
    """Text an env shows and the oracle writes, to train the tiny model's tokenizer on."""
    import json

    import gymnasium as gym

    from agentgym.multi_agent import is_multi_agent_env
    from baselines.tiny_model import default_corpus

    if is_multi_agent_env(env_id):
        return _team_corpus(env_id, env_kwargs, episodes) + default_corpus()
    env = gym.make(env_id, **env_kwargs)
    texts: list[str] = []
    for seed in range(episodes):
        _, info = env.reset(seed=seed)
        if seed == 0:
            texts += [json.dumps(t) for t in info["tools"]] * 20
        texts += [m["content"] for m in info["messages"]]
        for _ in range(16):
            action = env.unwrapped.oracle_action()
            texts.append(action)
            _, _, term, trunc, info = env.step(action)
            texts += [m["content"] for m in info["messages"]]
            if term or trunc:
                break
    env.close()
    return texts + default_corpus()


def _team_corpus(env_id: str, env_kwargs: dict[str, Any], episodes: int) -> list[str]:
    """What every seat of a team env is shown and the oracle team writes."""
    import json

    from agentgym import multi_agent

    env = multi_agent.make(env_id, **env_kwargs)
    texts: list[str] = []
    try:
        for seed in range(episodes):
            _, infos = env.reset(seed=seed)
            if seed == 0:
                texts += [json.dumps(t) for info in infos.values() for t in info.get("tools", [])] * 20
            texts += [m["content"] for info in infos.values() for m in info.get("messages", [])]
            for _ in range(64):
                actions = env.oracle_actions()
                texts += list(actions.values())
                _, _, _, _, infos = env.step(actions)
                texts += [m["content"] for info in infos.values() for m in info.get("messages", [])]
                if not env.agents:
                    break
    finally:
        env.close()
    return texts


def corpus_env_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The env kwargs whose text trains the tiny model's tokenizer: ``env.kwargs`` less
    ``invent_spelled`` when its pieces come from that very tokenizer, and less
    ``invent_related``: stems made from a question's own columns hold no word its text
    lacks, and without them the tokenizer (so an SFT that does not see them either) is
    the one the run would have without the option, which makes it a clean A/B; less
    ``invent_values`` for the same A/B (its made-up values are spelled like the made-up
    names the corpus already holds), and less ``invent_column_levels`` (its levels are
    a made-up column's name and a number). With
    ``model.tokenizer_names: real``, less every ``invent_*`` option."""
    kwargs = dict(config.env.kwargs)
    if config.env.name_pieces == "tokenizer":
        kwargs.pop("invent_spelled", None)
    kwargs.pop("invent_related", None)
    kwargs.pop("invent_values", None)
    kwargs.pop("invent_column_levels", None)
    if config.model.tokenizer_names == "real":
        kwargs = {k: v for k, v in kwargs.items() if not k.startswith("invent_")}
    return kwargs


def resolve_model_path(config: TrainConfig, info: DistInfo) -> str:
    """``model.path``, or the tiny model built (once, by the main process) for the env."""
    if config.model.path:
        return config.model.path
    from baselines.tiny_model import TinyModelSpec, build_tiny_model

    path = ""
    if info.is_main:
        path = str(build_tiny_model(config.model.tiny_dir, env_corpus(config.env.id, corpus_env_kwargs(config)),
                                    TinyModelSpec(**config.model.tiny.model_dump(), seed=config.seed)))
    if info.enabled:  # (a collective: the other ranks wait for the build, then load the same directory)
        path = all_gather_lists([path], info)[0]
    return path


def build_engine(config: TrainConfig, path: str, tokenizer: Any, info: DistInfo, asynchronous: bool = False) -> RolloutEngine:
    """A rollout engine that holds its own copy of the weights; ``asynchronous``: one for
    :class:`~baselines.async_rollout.AsyncRollout` (the ``hf`` engine behind a
    :class:`~baselines.engines.hf_async.BatchingEngine`). ``vllm`` is vLLM's ``AsyncLLM``
    either way: it also serves the synchronous calls."""
    dtype = getattr(torch, config.model.dtype)
    eos = [tokenizer.eos_token_id]
    if config.rollout.engine == "vllm":
        from baselines.engines.vllm_async import AsyncVLLMEngine

        v = config.rollout.vllm
        return AsyncVLLMEngine(path, tensor_parallel_size=v.tensor_parallel_size, gpu_memory_utilization=v.gpu_memory_utilization,
                          enforce_eager=v.enforce_eager, dtype=config.model.dtype,
                          max_model_len=v.max_model_len or config.rollout.max_seq_len, seed=config.seed + info.rank,
                          kv_cache_memory_bytes=v.kv_cache_memory_bytes)
    from baselines.engines.hf import HFEngine

    engine = HFEngine(path, pad_token_id=tokenizer.pad_token_id, eos_token_ids=eos, device=info.device, dtype=dtype,
                      max_batch_size=config.rollout.max_batch_size)
    return BatchingEngine(engine, seed=config.seed * 7_919 + info.rank) if asynchronous else engine


class Trainer:
    """Builds policy, EWMA, optimiser, engine, envs and logger from a :class:`TrainConfig`.

    Args:
        config: the validated configuration.
        on_metrics: called on the main process with each step's metrics (the CLI and
            the demo print progress from it; the library itself never prints).
    """

    def __init__(self, config: TrainConfig, on_metrics: MetricsCallback | None = None) -> None:
        import gymnasium as gym
        from transformers import AutoModelForCausalLM, AutoTokenizer

        import agentgym  # noqa: F401  (registers the env ids)

        self.config = config
        self.on_metrics = on_metrics
        self.info = init_distributed(config.dist.strategy, config.device, config.dist.backend)
        if config.threads is not None:
            torch.set_num_threads(config.threads)
        self._seed(config.seed + self.info.rank)
        self.model_path = resolve_model_path(config, self.info)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.chat = ChatTokenizer(self.tokenizer)
        self.compute_dtype = getattr(torch, config.model.dtype)
        # float32 master weights whatever model.dtype says: bf16 parameters (and a bf16
        # EWMA) round small AdamW steps away. model.dtype is the compute dtype.
        policy = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32).to(self.info.device)
        # from_pretrained returns eval mode, and transformers checkpoints activations only
        # in training mode: without this, a run with no SFT warm start (which calls
        # .train()) kept every activation whatever model.gradient_checkpointing said.
        policy.train()
        if config.model.gradient_checkpointing:
            enable = getattr(policy, "activation_checkpointing_enable", None) or policy.gradient_checkpointing_enable
            enable()
        self.run_dir = Path(config.log.run_dir)
        self.step = 0
        self.last_sync_s = 0.0
        self.sft_metrics: dict[str, float] = {}
        self.engine = build_engine(config, self.model_path, self.tokenizer, self.info, asynchronous=True)  # baselines.async_rollout
        self._eval_envs: dict[str, list[Any]] = {}
        self.eval_per_task: dict[str, list[float] | None] = {}  # the last evaluation's success per task, this rank's tasks
        if config.sft.episodes > 0 and not self._resuming():
            self._warm_start(policy, gym)
        self.ewma = self._make_ewma(policy)
        self.reference = self._make_reference(policy)
        self.model = wrap_model(policy, self.info, self.compute_dtype)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.algo.lr, weight_decay=config.algo.weight_decay)
        # Stale tokens under TIS/MIS need the trainer's weights at the version that sampled
        # them, to keep policy drift out of the engine-mismatch ratio (baselines.update).
        stale_correction = config.rollout.max_staleness > 0 and config.algo.mismatch.mode != "none"
        self.versions = PolicyVersions(keep=config.rollout.max_staleness + 1) if stale_correction else None
        self.updater = PolicyUpdater(self.model, self.optimizer, self.ewma, config.algo, self.info, config.rollout.temperature,
                                     compute_dtype=self.compute_dtype, versions=self.versions, reference=self.reference,
                                     copy_vocabulary=self._copy_vocabulary())
        n_local = self._local_tasks(config.rollout.tasks_per_step)
        envs = make_rollout_envs(config.env.id, self.env_kwargs,
                                 (config.rollout.max_staleness + 1) * n_local * config.rollout.group_size,
                                 fleet=config.rollout.fleet, fleet_workers=config.rollout.fleet_workers,
                                 fleet_address=config.rollout.fleet_address)
        self.logger = MetricsLogger(self.run_dir, tensorboard=config.log.tensorboard, wandb_project=config.log.wandb_project,
                                    config=config_to_dict(config), fresh=not self._resuming()) if self.info.is_main else None
        self.watch = make_reward_watch(config, self.run_dir, self.info.is_main, self.env_kwargs, self.info)  # reward-jump alarm
        self.outage = OutageWatch(config.rollout.outage_frac, config.rollout.outage_steps)
        self.last_infra_causes: dict[str, int] = {}
        self.replay = TaskReplay(config.rollout.tasks_per_step, config.rollout.replay_frac, config.rollout.replay_uses, config.seed)
        if self._resuming():
            restored = load_checkpoint(self.run_dir / "checkpoint", model=self.model, optimizer=self.optimizer, ewma=self.ewma, info=self.info,
                                       copy_optimizer=self.updater.copy_optimizer)
            self.step = restored["step"]
            if self.logger is not None:
                self.logger.drop_after(self.step)
            if "task_replay" in restored["extra"]:  # a checkpoint saved without replay starts it with an empty buffer
                self.replay.load_state_dict(restored["extra"]["task_replay"])
        self.guide = self._make_guide(gym)  # algo.guidance: demonstrations for groups that failed every sample
        rollout_class = TeamRollout if config.env.is_team else AsyncRollout
        self.loop = rollout_class(envs, self.engine, self.chat, self._loop_config(config.rollout.temperature, config.rollout.drift_check_frac),
                                 AsyncRolloutConfig(config.rollout.max_staleness, config.rollout.step_timeout_s), n_local,
                                 config.rollout.group_size, self._batch_schedule, first_step=self.step)
        self.sync_engine()

    # ----------------------------------------------------------------- setup
    @staticmethod
    def _seed(seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)

    def _resuming(self) -> bool:
        return self.config.resume and (self.run_dir / "checkpoint" / "trainer.pt").exists()

    def _local_tasks(self, total: int) -> int:
        if total % self.info.world_size:
            raise ConfigError(f"Expected a task count divisible by the {self.info.world_size} processes, actual value: {total}")
        return total // self.info.world_size

    @functools.cached_property
    def _tokenizer_pieces(self) -> list[str]:
        """The tokenizer's lowercase-letter tokens, sorted: what made-up names are spelled
        with (``sft.invent_spelled``, the env's ``invent_spelled``). Read once: every env
        the run makes, and every evaluation, asks for them."""
        tokens = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        return sorted({t for t in tokens if re.fullmatch(r"[a-z]+", t)})

    def _name_pieces(self) -> list[str]:
        """The pieces SFT's made-up names are spelled with; none when ``sft.invent_spelled`` is 0."""
        return list(self._tokenizer_pieces) if self.config.sft.invent_spelled else []

    @property
    def env_kwargs(self) -> dict[str, Any]:
        """``env.kwargs``, with the tokenizer's pieces as ``name_pieces`` when ``env.name_pieces``
        asks for them: every env the run makes (rollout, evaluation, demonstrations) gets them."""
        kwargs = dict(self.config.env.kwargs)
        if self.config.env.name_pieces == "tokenizer":
            kwargs["name_pieces"] = list(self._tokenizer_pieces)
        return kwargs

    def _loop_config(self, temperature: float, drift_check_frac: float = 0.0) -> AgentLoopConfig:
        """The rollout's limits (``max_new_tokens``, ``max_seq_len``, ``top_p``) at ``temperature``:
        one place for what training, evaluation and SFT's demonstration check assume."""
        r = self.config.rollout
        return AgentLoopConfig(SamplingConfig(r.max_new_tokens, temperature, r.top_p), r.max_seq_len, drift_check_frac)

    def _warm_start(self, policy: torch.nn.Module, gym: Any) -> None:
        from baselines.demonstrators import demonstrator, recovering
        from baselines.sft import EarlyStop, check_demonstrations_fit, copy_warmup, oracle_trajectories, sft_train, warmup_vocabulary

        if self.info.strategy == "fsdp2":
            raise ConfigError("sft.episodes > 0 is not supported with dist.strategy=fsdp2; run SFT in one process first.")
        env = gym.make(self.config.env.id, **{**self.env_kwargs, **self.config.sft.env_kwargs})
        trajs = oracle_trajectories(env, self.chat, range(10_000, 10_000 + self.config.sft.episodes),
                                    policy=recovering(demonstrator(self.config.sft.demonstrator), self.config.sft.recovery,
                                                      seed=self.config.seed, mistakes=self.config.sft.recovery_mistakes),
                                    counterfactual=self.config.sft.counterfactual, seed=self.config.seed,
                                    invent=self.config.sft.invent, pieces=self._name_pieces(), spelled=self.config.sft.invent_spelled)
        env.close()
        longest_turn, latest_turn = check_demonstrations_fit(trajs, self._loop_config(self.config.rollout.temperature))
        sft = self.config.sft
        stop = EarlyStop(sft.stop_success, sft.stop_patience)

        def should_stop(done: int) -> bool:
            """Sampled success on ``check_split`` tasks (not the SFT data) crossed ``stop_success``, or
            ``stop_patience`` checks passed without a new best (:class:`EarlyStop`)?"""
            if done < sft.check_from:
                return False
            self.engine.sync_weights({k: v.detach() for k, v in policy.state_dict().items()})
            seeds = range(20_000, 20_000 + sft.check_tasks)  # same tasks on every rank: same decision
            split = sft.check_split or self.config.env.kwargs.get("split", "train")
            success = self._success(split, seeds, self.config.rollout.temperature)
            if math.isnan(success):  # infrastructure failed every check episode: no evidence either way
                logger.warning("SFT step %d: no check episode ran (infrastructure failed them all); not counted", done)
                return False
            logger.info("SFT step %d: sampled success %.3f on %d %s tasks", done, success, sft.check_tasks, split)
            return stop.observe(done, success, policy)

        t0 = time.perf_counter()

        every = max(1, min(100, sft.steps // 10))

        def progress(step: int, loss: float) -> None:
            """A line every tenth of the run (at most 100 steps): SFT is most of a CPU run's wall time."""
            if (step + 1) % every == 0 and self.info.is_main:
                per_step = (time.perf_counter() - t_imitate) / (step + 1)
                logger.info("SFT step %d/%d: loss %.3f, %.2f s/step, at most %.0f min left",
                            step + 1, sft.steps, loss, per_step, per_step * (sft.steps - step - 1) / 60)

        warm_metrics: dict[str, float] = {}
        if sft.copy_warmup:
            vocabulary = warmup_vocabulary(sft.copy_vocabulary, trajs, vocab_size=len(self.tokenizer),
                                           special_ids=self.tokenizer.all_special_ids)
            warm = copy_warmup(policy, vocabulary, steps=sft.copy_warmup, batch_size=sft.batch_size, lr=sft.lr,
                               device=self.info.device, seed=self.config.seed)
            warm_metrics = {"sft/copy_warmup_loss_last": float(np.mean(warm[-10:])), "sft/copy_warmup_seconds": time.perf_counter() - t0,
                            "sft/copy_warmup_tokens": float(len(vocabulary))}
            logger.info("SFT copy warm-up: %d steps in %.0f s over %d token ids (%s), loss %.3f -> %.3f", len(warm),
                        warm_metrics["sft/copy_warmup_seconds"], len(vocabulary), sft.copy_vocabulary, warm[0],
                        warm_metrics["sft/copy_warmup_loss_last"])
        t_imitate = time.perf_counter()
        logger.info("SFT: %d demonstrations, up to %d steps of %d", len(trajs), sft.steps, sft.batch_size)
        losses = sft_train(policy, trajs, steps=sft.steps, batch_size=sft.batch_size, lr=sft.lr, pad_token_id=self.tokenizer.pad_token_id,
                           device=self.info.device, seed=self.config.seed, schedule=sft.schedule, on_step=progress,
                           should_stop=should_stop if sft.stop_success is not None or sft.stop_patience else None,
                           check_every=sft.check_every, observation_weight=sft.observation_weight,
                           length_groups=sft.length_groups)
        restored = stop.restore_best(policy)
        if restored is not None:
            logger.info("SFT: %d checks without a new best; keeping step %d's weights (success %.3f)",
                        sft.stop_patience, restored, stop.best[1])
        self.sft_metrics = {"sft/loss_first": losses[0], "sft/loss_last": float(np.mean(losses[-10:])), "sft/steps": float(len(losses)),
                            "sft/oracle_success": float(np.mean([t.success for t in trajs])), "sft/seconds": time.perf_counter() - t0,
                            "sft/episodes": float(len(trajs)),
                            "sft/tokens": float(len(losses) * sft.batch_size * np.mean([len(t.token_ids) for t in trajs])),
                            "sft/longest_turn_tokens": float(longest_turn),
                            "sft/latest_turn_start": float(latest_turn), **warm_metrics}
        if stop.checks:
            self.sft_metrics["sft/check_sampled_success"] = stop.checks[-1][1]
            self.sft_metrics["sft/best_check_success"] = stop.best[1]
            self.sft_metrics["sft/best_check_step"] = float(stop.best[0])
        if restored is not None:
            self.sft_metrics["sft/restored_step"] = float(restored)
        if self.info.is_main:  # the SFT start, loadable with model.path=... sft.episodes=0 (one SFT, many RL runs)
            policy.save_pretrained(self.run_dir / "sft_model")
            self.tokenizer.save_pretrained(self.run_dir / "sft_model")

    def _copy_vocabulary(self) -> list[int] | None:
        """Every token id but the special ones, for ``algo.copy_lr``'s copy task (None when 0)."""
        if self.config.algo.copy_lr == 0:
            return None
        from baselines.sft import warmup_vocabulary

        return warmup_vocabulary("tokenizer", (), vocab_size=len(self.tokenizer), special_ids=self.tokenizer.all_special_ids)

    def _make_guide(self, gym: Any) -> FailedGroupGuide | None:
        """The demonstrator and its own env for ``algo.guidance`` (None when off). The env
        has the rollout's kwargs, so a group's task seed gives the group's task."""
        if self.config.algo.guidance == "none":
            return None
        from baselines.demonstrators import demonstrator

        env = gym.make(self.config.env.id, **self.env_kwargs)
        return FailedGroupGuide(env, self.chat, demonstrator(self.config.sft.demonstrator), self._loop_config(self.config.rollout.temperature))

    def _guided(self, trajs: list[Trajectory], task_seeds: Sequence[int]) -> tuple[list[Trajectory], dict[str, float]]:
        """The rows to train on (the policy's samples, then the demonstrations) and
        ``guidance/*``, summed over every process."""
        guided = self.guide.guide(trajs, task_seeds)
        demos = guided.trajectories[len(trajs):]
        t0 = time.perf_counter()
        model = unwrap_model(self.model)
        set_behaviour_logprobs(demos, lambda rows: self.updater.token_logprobs(model, rows),
                               pad_token_id=self.tokenizer.pad_token_id, version=self.engine.version, device=self.info.device)
        n_groups = all_reduce_sum(len({t.group_id for t in trajs}), self.info)
        metrics = {"guidance/demonstrations": all_reduce_sum(guided.demonstrations, self.info),
                   "guidance/failed_group_frac": all_reduce_sum(guided.failed_groups, self.info) / max(n_groups, 1),
                   "guidance/demonstration_tokens": all_reduce_sum(sum(t.num_generated for t in demos), self.info)}
        metrics.update({f"guidance/skipped_{why}": all_reduce_sum(n, self.info) for why, n in guided.skipped.items()})
        metrics["perf/guidance_s"] = guided.seconds + time.perf_counter() - t0  # on the trainer's critical path
        return guided.trajectories, metrics

    def _make_ewma(self, policy: torch.nn.Module) -> EWMAModel | None:
        algo = self.config.algo
        if algo.proximal != "ewma":
            return None
        age = algo.ewma_age
        if algo.ewma_reference_batch_size:
            per_step = self.config.rollout.tasks_per_step * self.config.rollout.group_size / algo.num_minibatches
            age = ewma_age_for_batch_size(age, algo.ewma_reference_batch_size, int(per_step))
        ewma = EWMAModel(policy, age, device="cpu" if algo.ewma_device == "cpu" else None)
        if self.info.strategy == "fsdp2":
            shard_like(ewma.module, self.info, self.compute_dtype)
        return ewma

    def _make_reference(self, policy: torch.nn.Module) -> torch.nn.Module | None:
        """A frozen copy of the weights RL starts from, for ``algo.kl_coef``'s penalty.

        On resume ``policy`` holds ``model.path``'s weights (SFT is not rerun), so a run
        that did SFT takes the reference from the SFT start it saved (``RUN/sft_model``).
        """
        import copy

        if self.config.algo.kl_coef == 0:
            return None
        reference = copy.deepcopy(policy)
        if self._resuming() and self.config.sft.episodes > 0:
            from transformers import AutoModelForCausalLM

            saved = self.run_dir / "sft_model"
            if not saved.is_dir():
                raise ConfigError(f"algo.kl_coef > 0 on resume needs the SFT start the run saved at {saved}; it is missing")
            reference.load_state_dict(AutoModelForCausalLM.from_pretrained(saved).state_dict())
        reference.requires_grad_(False)
        reference.eval()
        if self.config.algo.ewma_device == "cpu":
            reference.to("cpu")
        if self.info.strategy == "fsdp2":
            shard_like(reference, self.info, self.compute_dtype)
        return reference

    def sync_engine(self) -> None:
        """Push the trainer's current weights into the rollout engine."""
        t0 = time.perf_counter()
        self.engine.sync_weights(full_state_dict(self.model, self.info))
        if self.versions is not None:  # the weights of the version the engine samples from now on
            self.versions.record(self.engine.version, unwrap_model(self.model))
        self.last_sync_s = time.perf_counter() - t0

    # -------------------------------------------------------------- training
    def _task_seeds(self, step: int) -> list[int]:
        rng = np.random.default_rng([self.config.seed, step])
        seeds = self.replay.seeds(step, rng.integers(0, 2**31 - 1, size=self.config.rollout.tasks_per_step).tolist())
        return seeds[self.info.rank :: self.info.world_size]

    def _batch_schedule(self, step: int) -> tuple[list[int], int]:
        """Task seeds and sampling seed of step ``step``'s batch (the async rollout admits ahead)."""
        return self._task_seeds(step), self.config.seed * 100_003 + step * 101 + self.info.rank

    def train_step(self) -> dict[str, float]:
        """Collect a batch, update the policy once (epochs x minibatches), sync the engine."""
        cfg = self.config
        self.engine.wake_up()
        batch = self.loop.collect(self.step)
        if cfg.rollout.max_staleness == 0:  # else episodes keep generating while the trainer runs
            self.engine.sleep()
        trajs = self.last_trajectories = batch.trajectories
        self.last_infra_causes = batch.infra_causes
        rewards = torch.tensor([t.reward for t in trajs], dtype=torch.float32)
        adv = sample_adv = group_normalized_advantages(rewards, [t.group_id for t in trajs], normalize_std=cfg.algo.normalize_std,
                                                       eps=cfg.algo.adv_eps)
        rows, counted, guide_metrics = trajs, None, {}
        if self.guide is not None:  # a demonstration joins each group that failed every sample
            rows, guide_metrics = self._guided(trajs, batch.task_seeds)
            adv = group_normalized_advantages(torch.tensor([t.reward for t in rows], dtype=torch.float32), [t.group_id for t in rows],
                                              normalize_std=cfg.algo.normalize_std, eps=cfg.algo.adv_eps)
            adv, counted = guided_advantages(rows, adv, cfg.algo.guidance)
            guide_metrics["guidance/pushed_down_samples"] = all_reduce_sum(float((adv[: len(trajs)] < 0)[counted[: len(trajs)]].sum()),
                                                                           self.info)
        tokens = collate(rows, adv, self.tokenizer.pad_token_id)  # no rows when every local episode infra-failed
        tokens.counted = counted
        tokens.staleness = token_staleness(rows, self.engine.version)
        gen = torch.Generator().manual_seed(cfg.seed * 7919 + self.step)  # the same on every rank: one global minibatch partition
        metrics = self.updater.update(tokens, generator=gen)
        if metrics["train/optimizer_steps"] > 0:
            self.sync_engine()
        stats = global_rollout_stats(batch, self.info)  # every process's episodes, not this one's
        metrics.update(stats)
        metrics.update(self._episode_metrics(trajs, sample_adv))  # the policy's own samples, as without guidance
        metrics.update(guide_metrics)
        if self.replay.enabled:
            metrics.update(observe_rollout(self.replay, self.step, batch, self.info))
        metrics.update(tool_usage_alerts(metrics, cfg.log.tool_usage_min, warn=self.info.is_main))
        metrics["perf/rollout_tokens_per_s"] = stats["rollout/tokens_per_s"]
        metrics["perf/sync_s"] = self.last_sync_s if metrics["train/optimizer_steps"] > 0 else 0.0
        if self.ewma is not None:
            metrics["memory/ewma_bytes"] = float(self.ewma.memory_bytes())
        if self.versions is not None:
            metrics["memory/policy_versions_bytes"] = float(self.versions.memory_bytes())
        if torch.cuda.is_available() and self.info.device.type == "cuda":
            metrics["memory/peak_gpu_bytes"] = float(torch.cuda.max_memory_allocated(self.info.device))
        self.step += 1
        return metrics

    def _episode_metrics(self, trajs: list[Trajectory], adv: torch.Tensor) -> dict[str, float]:
        n = all_reduce_sum(len(trajs), self.info)
        r = [t.reward for t in trajs]
        s1, s2 = all_reduce_sum(sum(r), self.info), all_reduce_sum(sum(x * x for x in r), self.info)
        mean = s1 / max(n, 1)
        return {
            "reward/mean": mean,
            "reward/std": math.sqrt(max(s2 / max(n, 1) - mean * mean, 0.0)),
            "reward/success_rate": all_reduce_sum(sum(t.success for t in trajs), self.info) / max(n, 1),
            "reward/zero_adv_frac": all_reduce_sum(float((adv == 0).sum()), self.info) / max(n, 1),
            "rollout/response_tokens_mean": all_reduce_sum(sum(t.num_generated for t in trajs), self.info) / max(n, 1),
            "rollout/turns_mean": all_reduce_sum(sum(t.turns for t in trajs), self.info) / max(n, 1),
            "rollout/seq_len_max": all_reduce_max(float(max((len(t.token_ids) for t in trajs), default=0)), self.info),
            "rollout/context_limited_frac": all_reduce_sum(sum(t.context_limited for t in trajs), self.info) / max(n, 1),
        }

    def _success(self, split: str, seeds: Sequence[int], temperature: float, samples: int = 1) -> float:
        """Success rate of the engine's current policy on ``seeds`` of ``split`` (one
        process), over the episodes infrastructure did not fail (NaN if it failed all)."""
        return self._success_per_task(split, seeds, temperature, samples).rate

    def _success_per_task(self, split: str, seeds: Sequence[int], temperature: float,
                          samples: int = 1) -> "EvalScore":
        """Wins over the episodes of ``seeds`` of ``split`` that infrastructure did not
        fail (one process), how many it failed, and each seed's own success (the mean
        over its samples that ran; NaN where none did), so two evaluations of the same
        tasks can be compared task by task. Team envs give no per-task success
        (``None``): a team episode is not one task's.

        An episode that infrastructure failed is left out, never scored 0: an engine
        that stalled during an evaluation would otherwise show as a policy that forgot.

        Tasks run in chunks of at most a rollout batch's episodes (or
        :data:`EVAL_CHUNK_EPISODES`, if more), on envs kept for the
        next call: every env holds its sandbox (a DataAnalysis container with pandas
        loaded), and one env per eval task (256) in each of two runs exhausted 24 GiB."""
        cfg = self.config
        per_chunk = max(1, max(EVAL_CHUNK_EPISODES, cfg.rollout.tasks_per_step * cfg.rollout.group_size) // samples)
        envs = self._eval_envs.setdefault(split, [])
        kwargs = {k: v for k, v in self.env_kwargs.items() if k != "split"}
        envs += make_rollout_envs(cfg.env.id, {**kwargs, "split": split}, min(len(seeds), per_chunk) * samples - len(envs))
        limits = self._loop_config(temperature)
        score = EvalScore(per_task=None if cfg.env.is_team else [])
        for start in range(0, len(seeds), per_chunk):
            chunk = list(seeds[start:start + per_chunk])
            if cfg.env.is_team:
                wins, ran = self._team_success(envs[:len(chunk) * samples], chunk, samples, limits)
                score.wins, score.episodes = score.wins + wins, score.episodes + ran
                score.infra_failed += len(chunk) * samples - ran
                continue
            loop = AgentLoop(envs, self.engine, self.chat, limits)
            self.engine.wake_up()
            # Each episode samples from its own seed (the run's, its task's, its sample's), so
            # a task draws the same whatever chunk it falls in: two evaluations of the same
            # tasks share their noise task by task (the paired gain's premise).
            episode_seeds = [derived_seed(cfg.seed, task, k) for task in chunk for k in range(samples)]
            batch = loop.collect(chunk, samples, episode_seeds=episode_seeds if temperature > 0 else None)
            self.engine.sleep()
            score.wins += sum(t.success for t in batch.trajectories)
            score.episodes += len(batch.trajectories)
            score.infra_failed += batch.dropped_infra_failed
            score.per_task += _success_by_group(batch.trajectories, len(chunk))
        return score

    def _team_success(self, envs: list[Any], seeds: Sequence[int], samples: int,
                      limits: AgentLoopConfig) -> tuple[float, int]:
        """Wins and count of the team episodes that ran (one per seed and sample; not per
        seat), played by the current policy in every seat through a one-batch
        :class:`TeamRollout`. A team episode infrastructure failed (or that hung) has no
        seat in the batch, so the caller counts it as failed, never as a loss."""
        cfg = self.config
        loop = TeamRollout(envs, self.engine, self.chat, limits,
                           AsyncRolloutConfig(0, cfg.rollout.step_timeout_s), len(seeds), samples,
                           lambda _step: (list(seeds), cfg.seed))
        if limits.sampling.temperature > 0:  # each team episode draws from its own seed, as a single-agent one does
            loop.episode_seed = lambda task, k: derived_seed(cfg.seed, task, k)
        self.engine.wake_up()
        try:
            batch = loop.collect(0)
        finally:
            loop.close()
            self.engine.sleep()
        episodes = {t.info["team_episode"]: t.success for t in batch.trajectories}
        return float(sum(episodes.values())), len(episodes)

    def evaluate(self, num_tasks: int | None = None) -> dict[str, float]:
        """Success on fixed tasks of ``env.eval_split`` (same tasks at every call):
        ``eval/success_rate`` at ``eval_temperature`` (greedy by default) and, with
        ``eval_sampled``, ``eval/sampled_success_rate`` at the training temperature."""
        cfg = self.config
        n = self._local_tasks(num_tasks or cfg.eval_tasks)
        seeds = list(range(self.info.rank * n, (self.info.rank + 1) * n))
        out: dict[str, float] = {}
        passes = [("success", "eval/success_rate", "eval/episodes", "eval/infra_failed", cfg.eval_temperature)]
        if cfg.eval_sampled:
            passes.append(("sampled_success", "eval/sampled_success_rate", "eval/sampled_episodes",
                           "eval/sampled_infra_failed", cfg.rollout.temperature))
            out["eval/sampled_temperature"] = cfg.rollout.temperature
        for name, rate_key, episodes_key, failed_key, temperature in passes:
            score = self._success_per_task(cfg.env.eval_split, seeds, temperature)
            self.eval_per_task[name] = score.per_task
            wins, episodes, failed = (all_reduce_sum(x, self.info) for x in (score.wins, score.episodes, score.infra_failed))
            out[rate_key] = wins / episodes if episodes else math.nan
            out[episodes_key], out[failed_key] = episodes, failed
            if failed:
                logger.warning("evaluation (%s): infrastructure failed %d of %d episodes; %s is over the %d that ran%s",
                               name, failed, episodes + failed, rate_key, episodes,
                               "" if episodes else " (none: NaN, null in metrics.jsonl)")
        return out

    def train(self) -> dict[str, float]:
        """Run ``config.steps`` steps (from a resumed step if any); returns a summary.

        Its ``eval/*_before`` figures are the run's start (after SFT, ``eval/before_step``
        0) also when the run was resumed: the start's evaluation is kept in the run
        directory (:data:`EVAL_START_DIR`), so a run stopped and resumed reports the same
        gain as one that ran through. Its ``*_after`` figures are the policy's at the last
        step run, which a reward-watch pause makes the pause's step."""
        cfg = self.config
        summary: dict[str, float] = dict(self.sft_metrics)
        last_eval: dict[str, float] = {}
        evaluated_at = -1
        started, rollout_tokens = time.perf_counter(), 0.0
        before_per_task: dict[str, list[float] | None] = {}
        if cfg.eval_every:
            kept = self._load_eval_start() if self.step else None
            # One decision for every rank (an evaluation is collective): any rank without
            # its kept start makes them all evaluate.
            if all_reduce_sum(float(kept is None), self.info) > 0:
                last_eval, evaluated_at = self.evaluate(), self.step
                before_eval, before_per_task, before_step = last_eval, dict(self.eval_per_task), self.step
                self._log(self.step, {**self.sft_metrics, **last_eval})
                if self.step == 0:
                    self._save_eval_start(last_eval)
                else:
                    logger.warning("resumed at step %d without the start's evaluation in %s: the summary's "
                                   "eval/*_before (and gains) are step %d's", self.step,
                                   self.run_dir / EVAL_START_DIR, self.step)
            else:
                assert kept is not None
                before_eval, before_per_task, before_step = kept
            summary.update(_eval_summary(before_eval, "before"))
            summary["eval/before_step"] = float(before_step)
        while self.step < cfg.steps:
            metrics = self.train_step()
            rollout_tokens += metrics.get("rollout/generated_tokens", 0.0)
            if cfg.eval_every and (self.step % cfg.eval_every == 0 or self.step == cfg.steps):
                last_eval, evaluated_at = self.evaluate(), self.step
                metrics.update(last_eval)
            paused = False
            if self.watch is not None:
                metrics.update(self.watch.observe(self.step, self.last_trajectories, metrics))
                # One decision for every rank (the watch fires on every rank together).
                paused = all_reduce_sum(float(self.watch.paused), self.info) > 0
                if paused and cfg.eval_every and evaluated_at != self.step:  # "after" is the paused policy's
                    last_eval, evaluated_at = self.evaluate(), self.step
                    metrics.update(last_eval)
            self._log(self.step, metrics)
            if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
                self.save()
            if paused:
                summary["alarm/paused_at_step"] = float(self.step)
                break
            if self.outage.observe(metrics, self.last_infra_causes):  # the same decision on every rank (summed counts)
                summary["alarm/infra_outage_at_step"] = float(self.step)
                break  # (the checkpoint below is the one to resume from)
        if cfg.eval_every and "alarm/infra_outage_at_step" not in summary:  # (an outage's last evaluation says nothing)
            if evaluated_at != self.step:  # resumed at the last step with the start kept: nothing ran, evaluate now
                last_eval, evaluated_at = self.evaluate(), self.step
                self._log(self.step, last_eval)
            summary.update(_eval_summary(last_eval, "after"))
            summary.update(_gains(summary))
            for name, before in before_per_task.items():
                paired = _paired_difference_sums(before, self.eval_per_task.get(name))
                if paired is not None:  # summed over ranks: each holds its own tasks
                    se = _paired_gain_se(*(all_reduce_sum(x, self.info) for x in paired))
                    if se is not None:
                        summary[f"eval/{name}_gain_se_paired"] = se
        summary["run/rl_seconds"] = time.perf_counter() - started  # what a run costs (with its evaluations)
        summary["run/rl_rollout_tokens"] = rollout_tokens
        self.save()
        self.save_model(self.run_dir / "model")
        return summary

    def _eval_identity(self) -> dict[str, Any]:
        """What the start's evaluation depends on: the start policy (model, SFT, seed), the
        eval tasks and how they are played, and how they are split over ranks."""
        data = config_to_dict(self.config)
        return {"model": data["model"], "sft": data["sft"], "env": data["env"], "seed": data["seed"],
                "eval": [data[k] for k in ("eval_tasks", "eval_temperature", "eval_sampled")],
                "rollout": {k: data["rollout"][k] for k in ("temperature", "top_p", "max_new_tokens", "max_seq_len")},
                "world_size": self.info.world_size}

    def _eval_start_path(self) -> Path:
        return self.run_dir / EVAL_START_DIR / f"rank-{self.info.rank:03d}.json"

    def _save_eval_start(self, metrics: dict[str, float]) -> None:
        """Keep the start's evaluation (this rank's tasks) for a resumed run's summary."""
        path = self._eval_start_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"identity": self._eval_identity(), "metrics": metrics, "per_task": self.eval_per_task}
        path.write_text(json.dumps(record, default=str))

    def _load_eval_start(self) -> tuple[dict[str, float], dict[str, list[float] | None], int] | None:
        """The start's evaluation a run kept, if it was made for the same evaluation
        (``None`` otherwise, with a warning when it differs: the summary then says
        which step its "before" is)."""
        path = self._eval_start_path()
        if not path.exists():
            return None
        record = json.loads(path.read_text())
        if record.get("identity") != json.loads(json.dumps(self._eval_identity(), default=str)):
            logger.warning("the start's evaluation in %s was made with another model, SFT, env or evaluation "
                           "setting than this run's; not used", path)
            return None
        return record["metrics"], record["per_task"], 0

    def save(self) -> Path:
        return save_checkpoint(self.run_dir / "checkpoint", model=self.model, optimizer=self.optimizer, ewma=self.ewma,
                               copy_optimizer=self.updater.copy_optimizer,
                               step=self.step, info=self.info, extra={"task_replay": self.replay.state_dict()})

    def save_model(self, path: Path) -> Path:
        """The trained policy as a Hugging Face model directory (weights, config, tokenizer).

        Why: a checkpoint is for resuming; evaluating the policy RL made (``agentgym eval
        run --model RUN/model``, vLLM, transformers) needs a directory they load by path,
        like the SFT start's ``sft_model/``. Collective under FSDP2: call on every rank."""
        state = full_state_dict(self.model, self.info)
        if self.info.is_main:
            unwrap_model(self.model).save_pretrained(path, state_dict={k: v.detach().cpu() for k, v in state.items()})
            self.tokenizer.save_pretrained(path)
        return path

    def _log(self, step: int, metrics: dict[str, float]) -> None:
        if self.logger is not None:
            self.logger.log(step, metrics)
            if self.on_metrics is not None:
                self.on_metrics(step, metrics)

    def close(self) -> None:
        self.loop.close()  # in-flight episodes stop; the queue is not kept (baselines.async_rollout)
        if self.guide is not None:
            self.guide.close()
        for env in self.loop.envs + [e for envs in self._eval_envs.values() for e in envs]:
            env.close()
        if self.logger is not None:
            self.logger.close()
        if self.watch is not None:
            self.watch.close()
        close_engine = getattr(self.engine, "close", None)  # engines with a process or files of their own
        if close_engine is not None:
            close_engine()


@dataclass
class EvalScore:
    """One evaluation pass on one process: wins over the episodes that ran, and the
    episodes infrastructure failed (left out of the rate, see ``_success_per_task``)."""

    wins: float = 0.0
    episodes: int = 0
    infra_failed: int = 0
    per_task: list[float] | None = None

    @property
    def rate(self) -> float:
        return self.wins / self.episodes if self.episodes else math.nan


def _eval_summary(metrics: dict[str, float], when: str) -> dict[str, float]:
    """Greedy and sampled success with their binomial standard errors, sqrt(p(1-p)/n),
    n the episodes that ran (infrastructure-failed ones are not in the rate)."""
    out: dict[str, float] = {}
    for name, key, episodes in (("success", "eval/success_rate", "eval/episodes"),
                                ("sampled_success", "eval/sampled_success_rate", "eval/sampled_episodes")):
        if key in metrics:
            n = max(metrics.get(episodes, metrics.get("eval/episodes", 1.0)), 1.0)
            p = metrics[key]
            out[f"eval/{name}_{when}"] = p
            out[f"eval/{name}_{when}_se"] = math.sqrt(p * (1 - p) / n)
    return out


def _success_by_group(trajectories: Sequence[Trajectory], groups: int) -> list[float]:
    """Each group's (task's) mean success over its trajectories; NaN for a group with none
    (infrastructure failed every sample, so the batch dropped them)."""
    wins, counts = [0.0] * groups, [0] * groups
    for t in trajectories:
        wins[t.group_id] += float(t.success)
        counts[t.group_id] += 1
    return [w / c if c else math.nan for w, c in zip(wins, counts)]


def _paired_difference_sums(before: list[float] | None, after: list[float] | None) -> tuple[float, float, float] | None:
    """(m, sum d, sum d^2) of d_i = after_i - before_i over the tasks scored both times."""
    if before is None or after is None or len(before) != len(after):
        return None
    diffs = [a - b for b, a in zip(before, after) if not (math.isnan(a) or math.isnan(b))]
    return float(len(diffs)), sum(diffs), sum(d * d for d in diffs)


def _paired_gain_se(m: float, total: float, squares: float) -> float | None:
    """Standard error of the mean of paired differences, s_d / sqrt(m), with
    s_d^2 = (sum d^2 - (sum d)^2 / m) / (m - 1).

    Why: before and after are scored on the same tasks (not the same draws per task: a
    batch is seeded, not each episode), so their errors are correlated: a task the start
    solves, the end mostly solves too.
    The unpaired ``gain_se`` treats them as independent and overstates the noise; the
    paired one is the usual test for two policies on one fixed evaluation set."""
    if m < 2:
        return None
    variance = max(squares - total * total / m, 0.0) / (m - 1)
    return math.sqrt(variance / m)


def _gains(summary: dict[str, float]) -> dict[str, float]:
    """after - before, with the standard error of a difference of two independent
    estimates, sqrt(se_before^2 + se_after^2) (conservative: the tasks are the same)."""
    out = {}
    for name in ("success", "sampled_success"):
        if f"eval/{name}_before" in summary and f"eval/{name}_after" in summary:
            out[f"eval/{name}_gain"] = summary[f"eval/{name}_after"] - summary[f"eval/{name}_before"]
            out[f"eval/{name}_gain_se"] = math.hypot(summary[f"eval/{name}_before_se"], summary[f"eval/{name}_after_se"])
    return out
