"""Any OpenEnv environment as a Gymnasium text env, under agentgym's status contract.

``openenv_env(url)`` connects to an OpenEnv server (``openenv-core``'s WebSocket session
protocol, through its own ``GenericEnvClient``): the action is text, put into the field
the server's action schema asks for; the observation is the text field of the server's
observation (the whole observation goes to ``info["openenv_observation"]``).

Who is at fault (DESIGN.md):

- the server cannot be reached, refuses a session (capacity), cannot make its env, or
  the connection drops: an infrastructure failure. At reset it is retried with backoff on
  a fresh connection, then ``InfraError``; during an episode the server's episode is gone
  with the connection, so the episode ends ``truncated`` with ``info["infra_failed"]``
  (the trainer drops it), never a fake zero reward;
- the server rejects or fails on an action (validation or execution error): the agent's
  error. The episode goes on, and the observation says what was wrong;
- an agentgym server (``agentgym serve-env``) names the exception class of an error, so
  its ``InfraError`` stays an infrastructure failure here.

Steps are counted in ``telemetry`` under the tool name ``openenv`` with those statuses.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym

from agentgym.errors import (
    EpisodeFinishedError,
    InfraError,
    InvalidOptionError,
    ResetNeededError,
)
from agentgym.interop.extras import require
from agentgym.reliability import RetryPolicy, call_budget, retrying
from agentgym.runtime import run_sync
from agentgym.spaces import UnicodeText
from agentgym.telemetry import Telemetry

__all__ = ["TELEMETRY_NAME", "OpenEnvTextEnv", "openenv_env"]

TELEMETRY_NAME = "openenv"
_INFRA_CODES = ("CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR")
_TEXT_FIELDS = ("text", "prompt", "message", "content", "observation")


class _ConnectionLost(Exception):
    """Internal: the server or the connection failed (infrastructure)."""


class _ActionRejected(Exception):
    """Internal: the server refused or failed on the agent's action."""


class OpenEnvTextEnv(gym.Env[str, str]):
    """A text env whose episodes run on an OpenEnv server (see the module docstring).

    Args:
        base_url: the server's HTTP address (``http://host:port``).
        action_field: the action's text field; ``None`` reads it from the server's
            ``/schema`` (the one required string field, else ``text``).
        observation_field: the observation's text field; ``None`` takes the first of
            ``text``, ``prompt``, ``message``, ``content``, ``observation`` present, else
            the observation as JSON.
        max_retries: reconnections at reset after an infrastructure failure (the
            reset's attempts are ``max_retries + 1``; ``retry`` sets their backoff).
        connect_timeout_s, message_timeout_s: the client's deadlines.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, base_url: str, *, action_field: str | None = None, observation_field: str | None = None,
                 max_retries: int = 3, connect_timeout_s: float = 10.0, message_timeout_s: float = 120.0,
                 max_observation_chars: int = 1 << 20, retry: RetryPolicy | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.action_field = action_field
        self.observation_field = observation_field
        self.max_retries = max_retries
        self.connect_timeout_s = connect_timeout_s
        self.message_timeout_s = message_timeout_s
        self.retry = retry or RetryPolicy()
        self.observation_space = UnicodeText(max_observation_chars)
        self.action_space = UnicodeText(max_observation_chars)
        self.telemetry = Telemetry()
        self._client: Any = None
        self._done = True
        self._started = False

    # ------------------------------------------------------------------ sync API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        return run_sync(self.areset(seed=seed, options=options))

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        return run_sync(self.astep(action))

    def close(self) -> None:
        run_sync(self.aclose())
        super().close()

    @property
    def episode_done(self) -> bool:
        return self._done

    # ----------------------------------------------------------------- async API
    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode (on the open session, or a new one after a failure);
        ``InfraError`` if the server cannot give one after ``max_retries`` reconnections."""
        super().reset(seed=seed)
        kwargs = {k: v for k, v in (("seed", seed), ("options", options)) if v is not None}
        policy = RetryPolicy(attempts=self.max_retries + 1, initial_s=self.retry.initial_s,
                             max_wait_s=self.retry.max_wait_s, deadline_s=self.retry.deadline_s)
        start = time.perf_counter()
        with call_budget(policy, fresh=True) as budget:
            try:
                async for attempt in retrying(_ConnectionLost):
                    with attempt:
                        if self._client is None or budget.retries:  # a live session serves episode after episode
                            await self._reconnect()
                        result = await self._call(self._client.reset(**kwargs))
            except _ConnectionLost as e:
                self.telemetry.record_call(TELEMETRY_NAME, "infra_error", 0.0, budget.retries, False)
                raise InfraError(f"could not start an episode on the OpenEnv server at {self.base_url} "
                                 f"after {budget.retries + 1} attempts: {e}") from e
            except _ActionRejected as e:  # the server refused the reset's arguments: the caller's mistake
                raise InvalidOptionError(f"the OpenEnv server at {self.base_url} refused the reset: {e}") from e
        self.telemetry.record_call(TELEMETRY_NAME, "ok", (time.perf_counter() - start) * 1e3, budget.retries, False)
        self._started, self._done = True, False
        return self._unpack(result)

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Send ``action``; never raises for what the agent wrote or a lost server."""
        if not self._started:
            raise ResetNeededError(f"OpenEnv env at {self.base_url}: call reset() before step().")
        if self._done:
            raise EpisodeFinishedError(f"OpenEnv env at {self.base_url}: the episode has ended; call reset().")
        start = time.perf_counter()
        field = await self._action_field()
        try:
            result = await self._call(self._client.step({field: action}))
        except _ActionRejected as e:
            self.telemetry.record_call(TELEMETRY_NAME, "agent_error", (time.perf_counter() - start) * 1e3, 0, False)
            return (f"Error: the environment rejected your action: {e}", 0.0, False, False,
                    {"infra_failed": False, "status": "agent_error"})
        except _ConnectionLost as e:
            self.telemetry.record_call(TELEMETRY_NAME, "infra_error", (time.perf_counter() - start) * 1e3, 0, False)
            self._done = True
            await self.aclose()
            return (f"[episode ended: the environment server was lost ({e}); this is not your fault]", 0.0, False,
                    True, {"infra_failed": True, "status": "infra_error"})
        self.telemetry.record_call(TELEMETRY_NAME, "ok", (time.perf_counter() - start) * 1e3, 0, False)
        text, info = self._unpack(result)
        terminated, truncated = _ends(result)
        info.setdefault("infra_failed", False)
        if result.done:
            self._done = True
        return text, float(result.reward or 0.0), terminated, truncated, info

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.close()
            except Exception:  # noqa: BLE001 - the connection may already be gone
                pass

    # ----------------------------------------------------------------- internals
    async def _reconnect(self) -> None:
        core = require("openenv.core", "openenv")
        await self.aclose()
        client = core.GenericEnvClient(base_url=self.base_url, connect_timeout_s=self.connect_timeout_s,
                                       message_timeout_s=self.message_timeout_s)
        try:
            await client.connect()
        except Exception as e:
            raise _ConnectionLost(f"{type(e).__name__}: {e}") from e
        self._client = client

    async def _call(self, request: Any) -> Any:
        try:
            return await request
        except RuntimeError as e:
            message = str(e)
            if message.startswith("Server error:"):
                if "InfraError:" in message or any(code in message for code in _INFRA_CODES):
                    raise _ConnectionLost(message) from e
                raise _ActionRejected(message.removeprefix("Server error:").strip()) from e
            raise _ConnectionLost(f"{type(e).__name__}: {e}") from e
        except Exception as e:  # the socket closed, a timeout, a refused connection
            raise _ConnectionLost(f"{type(e).__name__}: {e}") from e

    async def _action_field(self) -> str:
        if self.action_field is None:
            import asyncio

            self.action_field = await asyncio.to_thread(_action_field_from_schema, self.base_url)
        return self.action_field

    def _unpack(self, result: Any) -> tuple[str, dict[str, Any]]:
        observation = dict(result.observation or {})
        info = dict(observation.get("info") or {}) if isinstance(observation.get("info"), dict) else {}
        info["openenv_observation"] = observation
        return self._text_of(observation), info

    def _text_of(self, observation: dict[str, Any]) -> str:
        if self.observation_field is not None:
            return str(observation.get(self.observation_field, ""))
        for name in _TEXT_FIELDS:
            if isinstance(observation.get(name), str):
                return observation[name]
        return json.dumps(observation, ensure_ascii=False, default=str)


def _ends(result: Any) -> tuple[bool, bool]:
    """(terminated, truncated): the server's own split when it gives one (agentgym's
    servers do), else ``done`` counts as terminated."""
    observation = result.observation or {}
    if "terminated" in observation or "truncated" in observation:
        return bool(observation.get("terminated")), bool(observation.get("truncated"))
    return bool(result.done), False


def _action_field_from_schema(base_url: str) -> str:
    """The action's one required string field from ``GET /schema``, else ``text``."""
    try:
        with urllib.request.urlopen(f"{base_url}/schema", timeout=10) as response:
            schema = json.load(response).get("action", {})
    except (OSError, ValueError):
        return "text"
    props = schema.get("properties", {})
    strings = [name for name in schema.get("required", []) if props.get(name, {}).get("type") == "string"]
    return strings[0] if len(strings) == 1 else "text"


def openenv_env(base_url: str, **kwargs: Any) -> OpenEnvTextEnv:
    """An OpenEnv server as a Gymnasium text env (see :class:`OpenEnvTextEnv`).

    >>> env = openenv_env("http://127.0.0.1:8000")   # nothing connects until reset
    >>> env.episode_done
    True
    """
    return OpenEnvTextEnv(base_url, **kwargs)
