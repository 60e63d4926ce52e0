"""Any registered agentgym env over OpenEnv's protocol (``agentgym serve-env``).

OpenEnv (``openenv-core``) serves an ``Environment`` subclass over HTTP and WebSocket,
with pydantic ``Action``/``Observation`` types; each WebSocket session gets an env of
its own from a factory. :class:`AgentgymEnvironment` is that subclass around
``gym.make(env_id)``: the action is the model's text (:class:`TextAction`), the
observation carries the text, the reward, ``done`` and agentgym's whole ``info``
(:class:`ToolEnvObservation`): fingerprint, ``infra_failed``, tool results, reward
diagnostics. OpenEnv drops ``Observation.metadata`` on the wire, so ``info`` is a field
of its own.

The env's coroutines run on agentgym's runtime loop, as in-process (pools, semaphores and
retriever clients are shared by every session); the server's loop only waits for them.
An error at reset or step reaches the client as OpenEnv's error message, starting with
the exception class (``InfraError: ...``), so a client can tell infrastructure from
misuse (see :mod:`agentgym.interop.openenv_client`).
"""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

from agentgym.interop.extras import require

__all__ = ["env_description", "jsonable", "openenv_app", "openenv_types"]

T = TypeVar("T")

DEFAULT_MAX_SESSIONS = 64


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (numpy scalars and arrays, tuples, sets, non-finite
    floats as strings), so ``info`` survives the wire unchanged where it can.

    >>> import numpy as np
    >>> jsonable({"r": np.float32(0.5), "ids": (1, 2), "nan": float("nan")})
    {'r': 0.5, 'ids': [1, 2], 'nan': 'nan'}
    """
    def default(obj: Any) -> Any:
        if hasattr(obj, "tolist"):
            return obj.tolist()
        if isinstance(obj, (set, frozenset)):
            return sorted(obj, key=str)
        return str(obj)

    def finite(obj: Any) -> Any:
        if isinstance(obj, float) and not math.isfinite(obj):
            return str(obj)
        if isinstance(obj, dict):
            return {str(k): finite(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [finite(v) for v in obj]
        return obj

    return finite(json.loads(json.dumps(value, default=default)))


def env_description(env: Any) -> str:
    """The first paragraph of an env's docstring on one line (OpenEnv's ``/metadata``
    description, and the packaged env's README), or a plain fallback.

    >>> import gymnasium as gym
    >>> env = gym.make("agentgym/Search-v1"); env_description(env)[:43]
    'Multi-hop question answering with search to'
    >>> env.close()
    """
    unwrapped = env.unwrapped
    doc = (type(unwrapped).__doc__ or "").strip().split("\n\n")[0]
    return " ".join(doc.split()) or f"agentgym's {unwrapped.spec.id if unwrapped.spec else type(unwrapped).__name__}"


def _on_runtime_loop(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    from agentgym.runtime import get_loop

    return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, get_loop()))


class _Types:
    """The pydantic models, built on first use so the module imports without openenv."""

    def __init__(self) -> None:
        types = require("openenv.core.env_server.types", "openenv")
        from pydantic import Field

        class TextAction(types.Action):
            """The agent's message: text with tool calls in it, as for ``ToolEnv.step``."""

            text: str = Field(..., description="The model's message (tool calls in the env's format)")

        class ToolEnvObservation(types.Observation):
            """What ``ToolEnv.reset``/``step`` returned, with ``done = terminated or truncated``."""

            text: str = Field(default="", description="The observation text")
            info: dict[str, Any] = Field(default_factory=dict, description="agentgym's info dict")
            terminated: bool = Field(default=False, description="The episode ended with an answer")
            truncated: bool = Field(default=False, description="The episode was cut (budget or infra failure)")

        class ToolEnvState(types.State):
            """The session's episode: OpenEnv's id and step count, and agentgym's identity."""

            env_id: str = ""
            task_id: str | None = None
            fingerprint: str = ""

        self.TextAction, self.ToolEnvObservation, self.ToolEnvState = TextAction, ToolEnvObservation, ToolEnvState


_types: _Types | None = None


def openenv_types() -> _Types:
    """The OpenEnv models of agentgym's envs (``TextAction``, ``ToolEnvObservation``,
    ``ToolEnvState``); raises ``MissingExtraError`` without ``agentgym[openenv]``."""
    global _types
    if _types is None:
        _types = _Types()
    return _types


def _environment_class() -> type:
    interfaces = require("openenv.core.env_server.interfaces", "openenv")
    types_module = require("openenv.core.env_server.types", "openenv")
    types = openenv_types()

    class AgentgymEnvironment(interfaces.Environment):
        """One session's agentgym env, driven through OpenEnv's ``Environment`` API."""

        SUPPORTS_CONCURRENT_SESSIONS = True  # each session has its own env; shared pools are safe

        def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None) -> None:
            import gymnasium as gym

            import agentgym  # noqa: F401 - registers the envs

            super().__init__()
            self.env_id = env_id
            self.env = gym.make(env_id, **(env_kwargs or {}))
            self._state = types.ToolEnvState(env_id=env_id)

        # OpenEnv awaits the *_async methods on the server's loop when they are overridden.
        async def reset_async(self, seed: int | None = None, episode_id: str | None = None,
                              options: dict[str, Any] | None = None, **kwargs: Any) -> Any:
            from agentgym.errors import InvalidOptionError
            from agentgym.wrappers import areset

            if kwargs:
                raise _tagged(InvalidOptionError(
                    f"Unknown reset argument(s) {sorted(kwargs)}; expected seed, episode_id and options "
                    f"(e.g. options={{'task_id': ...}})"))
            try:
                text, info = await _on_runtime_loop(areset(self.env, seed=seed, options=options))
            except Exception as e:
                raise _tagged(e) from e
            self._state = types.ToolEnvState(episode_id=episode_id or str(uuid.uuid4()), step_count=0,
                                             env_id=self.env_id, task_id=info.get("task_id"),
                                             fingerprint=str(info.get("fingerprint", "")))
            return types.ToolEnvObservation(text=text, info=jsonable(info), done=False, reward=0.0)

        async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            from agentgym.wrappers import astep

            try:
                text, reward, terminated, truncated, info = await _on_runtime_loop(astep(self.env, action.text))
            except Exception as e:
                raise _tagged(e) from e
            self._state.step_count += 1
            return types.ToolEnvObservation(text=text, info=jsonable(info), reward=float(reward),
                                            done=bool(terminated or truncated),
                                            terminated=bool(terminated), truncated=bool(truncated))

        # The sync twins, for callers off any loop (OpenEnv itself awaits the async ones).
        def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
            return asyncio.run(self.reset_async(seed=seed, episode_id=episode_id, **kwargs))

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            return asyncio.run(self.step_async(action))

        @property
        def state(self) -> Any:
            return self._state

        def get_metadata(self) -> Any:
            """OpenEnv's ``/metadata``: the env id, the first paragraph of its docstring, and
            its fingerprint as the version (what a client checks before training on it)."""
            return types_module.EnvironmentMetadata(name=self.env_id, description=env_description(self.env),
                                                    version=str(self.env.unwrapped.fingerprint), documentation_url=None)

        def close(self) -> None:
            self.env.close()

    return AgentgymEnvironment


class _ServedError(RuntimeError):
    """An error OpenEnv sends to the client as its message: the class name goes first."""


def _tagged(error: Exception) -> _ServedError:
    return _ServedError(f"{type(error).__name__}: {' '.join(str(error).split())}")


def _make_one_before_serving(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """Make (and close) one env, so a bad kwarg value is the user's error now rather
    than every session's failure later."""
    import gymnasium as gym

    gym.make(env_id, **env_kwargs).close()


def openenv_app(env_id: str, env_kwargs: dict[str, Any] | None = None, *,
                max_sessions: int = DEFAULT_MAX_SESSIONS) -> Any:
    """A FastAPI app serving ``env_id`` over OpenEnv's protocol (WebSocket ``/ws``,
    ``/reset``, ``/step``, ``/state``, ``/schema``, ``/health``).

    Each WebSocket session gets its own env, made here with ``env_kwargs``; at most
    ``max_sessions`` at once (OpenEnv refuses more with ``CAPACITY_REACHED``).
    """
    import functools

    import agentgym  # noqa: F401 - registers the envs
    from agentgym.envs import check_env_id, check_env_kwargs

    check_env_id(env_id, multi_agent=False)
    check_env_kwargs(env_id, dict(env_kwargs or {}))
    _make_one_before_serving(env_id, dict(env_kwargs or {}))
    http_server = require("openenv.core.env_server.http_server", "openenv")
    types = openenv_types()
    factory = functools.partial(_environment_class(), env_id, dict(env_kwargs or {}))
    return http_server.create_fastapi_app(factory, types.TextAction, types.ToolEnvObservation,
                                          max_concurrent_envs=max_sessions)
