"""Drive a batch of tool envs turn by turn with a rollout engine, token-in/token-out.

Each turn, the engine generates for every live episode from its exact token ids; the
decoded text is the env action; the env's observation delta (``info["messages"]``) is
tokenised against a fixed base (:class:`~baselines.chat_tokens.ChatTokenizer`) and
appended with loss mask 0. Envs are stepped together through ``agentgym.vector`` so
their tool calls overlap on agentgym's event loop.

Episodes flagged ``info["infra_failed"]`` are dropped from the batch and counted; their
reward says nothing about the policy. An episode whose context would exceed
``max_seq_len`` ends with its reward so far (0) and is marked ``context_limited``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentgym.telemetry import Telemetry
from agentgym.vector import ToolVectorEnv
from baselines.chat_tokens import ChatTokenizer
from baselines.engines.base import Generation, RolloutEngine, SamplingConfig, derived_seed, generate_rows
from baselines.trajectory import RolloutBatch, Trajectory

__all__ = ["AgentLoop", "AgentLoopConfig", "make_rollout_envs", "EnvStep", "start_trajectory", "record_generation", "record_step", "end_episode",
           "check_drift", "finish_batch"]

logger = logging.getLogger(__name__)


def make_rollout_envs(env_id: str, env_kwargs: dict[str, Any], count: int, *, fleet: str = "none",
                      fleet_workers: int = 2, fleet_address: str = "auto") -> list[Any]:
    """The envs a rollout drives: made here (``gym.make``; ``agentgym.multi_agent.make`` for a
    team id), or with ``fleet="ray"`` hosted by Ray env workers
    (:func:`agentgym.fleet.fleet_envs`) and driven through the same ``areset``/``astep``.
    Closing every env (the trainer's ``close``) ends the fleet."""
    from agentgym.multi_agent import is_multi_agent_env

    if is_multi_agent_env(env_id):
        if fleet != "none":
            raise ValueError(f"Expected fleet='none' for the team env {env_id} (Ray env workers host single-agent "
                             f"envs), actual value: {fleet!r}")
        from agentgym import multi_agent

        return [multi_agent.make(env_id, **env_kwargs) for _ in range(count)]
    if fleet == "ray":
        from agentgym.fleet import fleet_envs

        return fleet_envs(env_id, env_kwargs, count, workers=fleet_workers, address=fleet_address)
    import gymnasium as gym

    return [gym.make(env_id, **env_kwargs) for _ in range(count)]


@dataclass
class AgentLoopConfig:
    """Limits of one rollout."""

    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    max_seq_len: int = 2048
    """An episode ends (``context_limited``) before its ids would exceed this length."""
    drift_check_frac: float = 1.0
    """Fraction of finished episodes compared against a full re-tokenisation."""

    def room_for_turn(self, start: int) -> bool:
        """Whether a turn starting at token ``start`` may run to ``max_new_tokens`` within
        ``max_seq_len``: the one rule every rollout (and SFT's demonstration check) applies."""
        return start + self.sampling.max_new_tokens <= self.max_seq_len


class AgentLoop:
    """Runs ``len(envs)`` episodes at a time: ``len(envs) // group_size`` tasks x group.

    Args:
        envs: agentgym envs (``gym.make`` results), reused across batches.
        engine: the rollout engine.
        chat: token bookkeeping for the policy's tokenizer.
    """

    def __init__(self, envs: Sequence[Any], engine: RolloutEngine, chat: ChatTokenizer, config: AgentLoopConfig) -> None:
        self.envs = list(envs)
        self.engine = engine
        self.chat = chat
        self.config = config
        self._rng = np.random.default_rng(0)
        self.last_batch: RolloutBatch | None = None

    def collect(self, task_seeds: Sequence[int], group_size: int, sampling_seed: int | None = None,
                episode_seeds: Sequence[int] | None = None) -> RolloutBatch:
        """Run one episode per env: env ``i`` plays task ``task_seeds[i // group_size]``.

        Turn ``n``'s engine call is seeded ``sampling_seed + n``, so an episode's draws
        depend on the episodes that share the call. ``episode_seeds`` (one per episode)
        seed each episode's turn ``n`` with ``derived_seed(episode_seed, n)`` instead: an
        evaluation's task then draws the same whatever it is batched with, which a paired
        comparison of two policies on the same tasks relies on."""
        n = len(task_seeds) * group_size
        if n > len(self.envs):
            raise ValueError(f"Expected at most {len(self.envs)} episodes (one per env), actual value: {n}")
        if episode_seeds is not None and len(episode_seeds) != n:
            raise ValueError(f"Expected one episode seed per episode ({n}), actual: {len(episode_seeds)}")
        envs = self.envs[:n]
        seeds = [int(s) for s in task_seeds for _ in range(group_size)]
        t0 = time.perf_counter()
        trajs, infos = self._reset(envs, seeds, group_size)
        telemetry = Telemetry()
        stats = {"rollout/gen_s": 0.0, "rollout/env_s": 0.0, "rollout/no_tool_call_turns": 0.0}
        live = [i for i, t in enumerate(trajs) if not t.infra_failed]
        turn = 0
        while live:
            rows = None if episode_seeds is None else [derived_seed(episode_seeds[i], turn) for i in live]
            gens = self._generate([trajs[i] for i in live], stats, None if sampling_seed is None else sampling_seed + turn, rows)
            actions = [record_generation(self.chat, trajs[i], g) for i, g in zip(live, gens)]
            t_env = time.perf_counter()
            _, rewards, terms, truncs, step_infos = ToolVectorEnv([envs[i] for i in live], autoreset=False).step(actions)
            stats["rollout/env_s"] += time.perf_counter() - t_env
            live = self._advance(trajs, live, gens, rewards, terms, truncs, step_infos, telemetry, stats)
            turn += 1
        for i, t in enumerate(trajs):
            if not t.infra_failed:
                telemetry.record_episode([k for k, c in t.tool_calls.items() if c], infos[i].get("tool_names", ()))
        self._check_drift(trajs, infos, stats)
        self.last_batch = self._finish(trajs, telemetry, stats, time.perf_counter() - t0)
        return self.last_batch

    def _reset(self, envs: list[Any], seeds: list[int], group_size: int) -> tuple[list[Trajectory], list[dict[str, Any]]]:
        # The vector env isolates each env's infrastructure failure at reset (``reset_error``
        # in that env's info); bugs still raise.
        _, infos = ToolVectorEnv(envs, autoreset=False).reset(seed=seeds)
        return [start_trajectory(self.chat, info, i // group_size) for i, info in enumerate(infos)], infos

    def _generate(self, trajs: list[Trajectory], stats: dict[str, float], seed: int | None,
                  row_seeds: list[int] | None = None) -> list[Generation]:
        t = time.perf_counter()
        gens = generate_rows(self.engine, [tr.token_ids for tr in trajs], self.config.sampling, seed, row_seeds)
        stats["rollout/gen_s"] += time.perf_counter() - t
        return gens

    def _advance(self, trajs, live, gens, rewards, terms, truncs, step_infos, telemetry, stats) -> list[int]:
        steps = [EnvStep(float(r), bool(te), bool(tr), info) for r, te, tr, info in zip(rewards, terms, truncs, step_infos)]
        return [i for k, i in enumerate(live) if record_step(self.chat, self.config, trajs[i], gens[k], steps[k], telemetry, stats)]

    def _check_drift(self, trajs: list[Trajectory], infos: list[dict[str, Any]], stats: dict[str, float]) -> None:
        check_drift(self.chat, trajs, [info.get("tools", []) for info in infos], self._rng, self.config.drift_check_frac, stats)

    @staticmethod
    def _finish(trajs: list[Trajectory], telemetry: Telemetry, stats: dict[str, float], wall_s: float) -> RolloutBatch:
        return finish_batch(trajs, telemetry, stats, wall_s)


# --------------------------------------------------------------------------------------
# One episode's bookkeeping, shared by this loop and the asynchronous one
# (:mod:`baselines.async_rollout`), so that both build exactly the same trajectories.


@dataclass
class EnvStep:
    """What one ``env.step`` returned for one episode."""

    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


def start_trajectory(chat: ChatTokenizer, info: dict[str, Any], group: int) -> Trajectory:
    """The trajectory of a freshly reset env: its prompt ids (mask 0), or an infra-failed
    stub when the reset failed (``info["reset_error"]``). Adds ``info["tool_names"]``."""
    if "reset_error" in info:
        return Trajectory([], [], [], 0, group, "", infra_failed=True, info={"infra_cause": str(info["reset_error"])})
    ids = chat.prompt_ids(info["messages"], info["tools"])
    t = Trajectory([], [], [], len(ids), group, str(info["task_id"]), messages=list(info["messages"]), tools=list(info["tools"]))
    t.append(ids, generated=False)
    info["tool_names"] = [spec["function"]["name"] for spec in info["tools"]]
    return t


def record_generation(chat: ChatTokenizer, t: Trajectory, gen: Generation, version: int = 0) -> str:
    """Append a generated turn (mask 1, its log-probs, the policy version) and return the env action."""
    t.append(gen.token_ids, generated=True, logprobs=gen.logprobs, version=version)
    action = chat.decode_action(gen.token_ids)
    t.messages.append({"role": "assistant", "content": action})
    return action


def record_step(chat: ChatTokenizer, config: AgentLoopConfig, t: Trajectory, gen: Generation, step: EnvStep,
                telemetry: Telemetry, stats: dict[str, float]) -> bool:
    """Record the env's answer to turn ``gen``; True while the episode goes on.

    The episode ends when the env says so, or (``context_limited``) when the observation
    would leave no room for another turn within ``max_seq_len``."""
    t.turns += 1
    results = step.info.get("tool_results", [])
    if not results:
        stats["rollout/no_tool_call_turns"] = stats.get("rollout/no_tool_call_turns", 0.0) + 1
    for r in results:
        telemetry.record_call(r["name"], r["status"], float(r.get("latency_ms", 0.0)), int(r.get("retries", 0)), bool(r.get("truncated", False)))
    if step.terminated or step.truncated:
        end_episode(t, step.info, step.reward, step.terminated, step.truncated)
        return False
    obs = chat.observation_ids(step.info["messages"], turn_ended=gen.finish_reason == "stop")
    if not config.room_for_turn(len(t.token_ids) + len(obs)):
        t.truncated = t.context_limited = True
        return False
    t.append(obs, generated=False)
    t.messages.extend(step.info["messages"])
    return True


def end_episode(t: Trajectory, info: dict[str, Any], reward: float, terminated: bool, truncated: bool) -> None:
    """Copy the final step's outcome into ``t`` (``infra_failed`` decides whether it is kept)."""
    t.reward, t.terminated, t.truncated = reward, terminated, truncated
    t.infra_failed = bool(info.get("infra_failed", False))
    t.success = bool(info.get("success", reward >= 1.0))
    t.tool_calls = dict(info.get("tool_calls", {}))
    t.info = {k: v for k, v in info.items() if k not in ("messages", "tool_results")}
    if t.infra_failed:
        failed = [r for r in info.get("tool_results", []) if r.get("status") == "infra_error"]
        t.info["infra_cause"] = (f"{failed[-1].get('name')}: {failed[-1].get('error', '')}" if failed
                                 else "infrastructure (no tool result says which)")


def check_drift(chat: ChatTokenizer, trajs: Sequence[Trajectory], tools: Sequence[list[dict[str, Any]]], rng: np.random.Generator,
                frac: float, stats: dict[str, float]) -> None:
    """Compare a ``frac`` sample of kept episodes with a full re-tokenisation (one ``rng`` draw each, in order)."""
    checked = bad = 0
    for t, specs in zip(trajs, tools):
        if t.infra_failed or rng.random() >= frac:
            continue
        report = chat.drift(t.token_ids, t.messages, specs)
        t.drift_ok = report.matches
        checked += 1
        bad += int(not report.matches)
    stats["tokens/drift_checked"] = float(checked)
    stats["tokens/drift_frac"] = bad / checked if checked else 0.0


def finish_batch(trajs: Sequence[Trajectory], telemetry: Telemetry, stats: dict[str, float], wall_s: float) -> RolloutBatch:
    """Drop (and count) infra-failed episodes; add telemetry and throughput to ``stats``."""
    kept = [t for t in trajs if not t.infra_failed]
    dropped = len(trajs) - len(kept)
    generated = sum(t.num_generated for t in kept)
    stats.update(telemetry.metrics())
    stats.update({
        "rollout/episodes": float(len(kept)),
        "rollout/dropped_infra_failed": float(dropped),
        "rollout/generated_tokens": float(generated),
        "rollout/wall_s": wall_s,
        "rollout/tokens_per_s": generated / stats["rollout/gen_s"] if stats["rollout/gen_s"] > 0 else 0.0,
    })
    causes = Counter(_first_line(t.info.get("infra_cause", "unknown")) for t in trajs if t.infra_failed)
    if dropped:
        logger.warning("dropped %d infra-failed episode(s) from the batch; most often: %s", dropped,
                       causes.most_common(1)[0][0])
    return RolloutBatch(kept, dropped, stats, infra_causes=dict(causes), telemetry=telemetry)


def _first_line(text: str, limit: int = 300) -> str:
    """A failure's cause, short enough to count and to quote in a log line."""
    line = text.strip().splitlines()[0] if text.strip() else "unknown"
    return line if len(line) <= limit else line[:limit] + "..."
