"""Any registered agentgym env as a verifiers environment (``pip install 'agentgym[verifiers]'``).

verifiers 0.4 (Prime Intellect's, used by prime-rl) composes an environment from a
*taskset* (the dataset rows), an *env* whose ``run(task, agents)`` plays one episode, and a
*harness* that produces each assistant turn through verifiers' interception server (so
every model call is recorded on the rollout's trace, tokens included when training).

- :class:`AgentgymTaskset`: one row per seed of ``env`` (``reset(seed=s)`` picks the same
  task every time, so a row is a task of the family).
- :class:`AgentgymEnv`: the env plays the user. It resets the agentgym env, opens the
  exchange with the env's chat messages, steps each assistant reply through the env and
  answers with its observation, until the episode ends. The reward is agentgym's score
  (``agentgym_score``), with the fingerprint, ``task_id`` and diagnostics on
  ``trace.info["agentgym"]``.
- An ``infra_failed`` episode (or a reset that failed after retries) is not a score: the
  env raises agentgym's ``InfraError``, which verifiers records as the episode's error
  (``episode.ok`` is False, ``errors[-1].type == "EnvError"``, its message naming
  ``InfraError``). Trainers drop failed episodes, and ``RetryRule(type="EnvError",
  message="InfraError", max_retries=N)`` in the env's ``retries`` replays them.
- :class:`AgentgymHarness`: the taskset's default harness, one chat completion per turn
  made in-process through the interception endpoint. agentgym's tools are called from the
  reply's text by the env's own parser, so the harness needs no program, no ``uv`` and no
  sandbox of its own.

verifiers loads a taskset by id as a top-level module, so the id is
``agentgym-verifiers`` (the ``agentgym_verifiers`` package re-exports these classes);
:func:`as_verifiers_env` builds the env without spelling it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from pydantic import Field

from agentgym.interop.extras import require

vf = require("verifiers.v1", "verifiers")

__all__ = [
    "REWARD_NAME",
    "TASKSET_ID",
    "AgentgymData",
    "AgentgymEnv",
    "AgentgymEnvConfig",
    "AgentgymHarness",
    "AgentgymHarnessConfig",
    "AgentgymTask",
    "AgentgymTaskset",
    "AgentgymTasksetConfig",
    "as_verifiers_env",
]

TASKSET_ID = "agentgym-verifiers"
"""The id verifiers resolves (``--env.taskset.id``) to the ``agentgym_verifiers`` package."""

REWARD_NAME = "agentgym_score"

T = TypeVar("T")


class AgentgymTasksetConfig(vf.TasksetConfig):
    """Which agentgym env the rows come from, and which of its tasks."""

    env: str = "agentgym/Calculator-v0"
    """A registered agentgym env id (``agentgym envs`` lists them)."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of ``gym.make(env, ...)`` (``split``, ``max_turns``, ...)."""
    seeds: list[int] | None = None
    """The rows' seeds; None means ``range(first_seed, first_seed + num_tasks)``."""
    first_seed: int = 0
    num_tasks: int = Field(100, ge=1)


class AgentgymData(vf.TaskData):
    info: dict[str, Any]
    """``env``, ``env_kwargs`` and ``seed``: what the env resets to play this row."""


class AgentgymTask(vf.Task[AgentgymData, vf.State, vf.TaskConfig]):
    """One row: a seed of an agentgym env."""


class AgentgymTaskset(vf.Taskset[AgentgymTask, AgentgymTasksetConfig]):
    """The rows of an agentgym env: one per seed. The prompt is left to the env (it comes
    from ``reset``), so loading the rows starts no env and no sandbox."""

    def load(self) -> Iterator[AgentgymTask]:
        import agentgym  # noqa: F401 - registers the envs
        from agentgym.envs import check_env_id, check_env_kwargs

        config = self.config
        check_env_id(config.env, multi_agent=False)
        check_env_kwargs(config.env, dict(config.env_kwargs))
        seeds = config.seeds if config.seeds is not None else range(config.first_seed,
                                                                      config.first_seed + config.num_tasks)
        for seed in seeds:
            info = {"env": config.env, "env_kwargs": dict(config.env_kwargs), "seed": int(seed)}
            yield AgentgymTask(AgentgymData(name=f"{config.env}#seed={seed}", prompt=None, info=info), config.task)


class AgentgymHarnessConfig(vf.HarnessConfig):
    pass


class AgentgymHarness(vf.Harness[AgentgymHarnessConfig]):
    """One chat completion per turn, in-process, through verifiers' interception endpoint
    (which records it on the trace); no tools of its own: the agentgym env parses them."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True  # each turn relaunches on the whole conversation (a stateless call)
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx: Any, trace: Any, runtime: Any, endpoint: str, secret: str,
                     mcp_urls: dict[str, str], data: Any, **kwargs: Any) -> Any:
        import openai
        from verifiers.v1.dialects.chat import message_to_wire

        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages.extend(message_to_wire(m) for m in prompt)
        async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0) as client:
            await client.chat.completions.create(model=ctx.model, messages=messages)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


class AgentgymEnvConfig(vf.EnvConfig):
    """One seat, ``player``; it runs on the host (the harness is a chat call, no program)."""

    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class AgentgymEnv(vf.Env[AgentgymEnvConfig]):
    """An agentgym episode played by verifiers' agent: the env is the user."""

    async def run(self, task: Any, agents: Any) -> None:
        import gymnasium as gym

        import agentgym  # noqa: F401 - registers the envs

        row = task.data.info
        env = gym.make(row["env"], **row["env_kwargs"])
        try:
            async with agents.player.interaction(task) as interaction:
                info = await _play(env, row["seed"], interaction)
        finally:
            await asyncio.to_thread(env.close)
        interaction.trace.record_reward(REWARD_NAME, float(info.get("reward", 0.0)))
        interaction.trace.info["agentgym"] = _episode_record(info)


async def _play(env: Any, seed: int, interaction: Any) -> dict[str, Any]:
    """Reset, then step each reply until the episode ends; the last ``info``.

    Raises ``InfraError`` when the episode is ``infra_failed``: its reward is not a score.
    """
    from agentgym.errors import InfraError
    from agentgym.wrappers import areset, astep

    _, info = await _on_agentgym_loop(areset(env, seed=seed))  # an InfraError here propagates
    segment = await interaction.turn(info["messages"])
    while not segment.terminated:
        observation, _, terminated, truncated, info = await _on_agentgym_loop(astep(env, segment.last_reply))
        if info.get("infra_failed"):
            raise InfraError(f"agentgym episode {info.get('task_id')} is infra_failed (not the agent's "
                             f"outcome; no reward): {_infra_detail(info)}")
        if terminated or truncated:
            return info
        segment = await interaction.turn(observation)
    interaction.trace.info["agentgym_unfinished"] = True  # the agent's limits ended it first
    return {**info, "reward": 0.0}


def _on_agentgym_loop(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """Run ``coro`` on agentgym's runtime loop, where the env's pools and clients live."""
    from agentgym.runtime import get_loop

    return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, get_loop()))


def _infra_detail(info: dict[str, Any]) -> str:
    failed = [r for r in info.get("tool_results", []) if r.get("status") == "infra_error"]
    return "; ".join(f"tool {r.get('name')} failed after {r.get('retries')} retries" for r in failed) or "see telemetry"


def _episode_record(info: dict[str, Any]) -> dict[str, Any]:
    from agentgym.interop.openenv_server import jsonable

    keep = {k: v for k, v in info.items() if k not in ("messages", "tool_results")}
    return jsonable(keep)


def as_verifiers_env(env_id: str, env_kwargs: dict[str, Any] | None = None, *, num_tasks: int = 100,
                  first_seed: int = 0, seeds: list[int] | None = None,
                  max_turns: int | None = None) -> AgentgymEnv:
    """``env_id`` as a verifiers env (an :class:`AgentgymEnv` over an :class:`AgentgymTaskset`).

    ``max_turns`` caps the verifiers agent's turns (agentgym's own ``max_turns`` kwarg caps
    the episode). Play it with verifiers' API: ``async with env.serving(): episode = await
    env.run_episode(task, vf.ModelContext(model=..., client=vf.EvalClientConfig(base_url=...)))``
    for each ``task`` in ``env.taskset``.
    """
    taskset = AgentgymTasksetConfig(id=TASKSET_ID, env=env_id, env_kwargs=dict(env_kwargs or {}),
                                    num_tasks=num_tasks, first_seed=first_seed, seeds=seeds)
    player = vf.AgentConfig(runtime=vf.SubprocessConfig(), max_turns=max_turns)
    return AgentgymEnv(AgentgymEnvConfig(taskset=taskset, player=player))
