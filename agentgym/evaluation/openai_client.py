"""A chat-completions client for any OpenAI-compatible server, with the suite's failure rules.

Who is at fault decides what happens to an episode (DESIGN.md, "Who is at fault"):

- The server failed (connection refused or reset, HTTP 5xx or 408, a timeout, a body
  that is not a chat completion): infrastructure. The call is retried under the one
  reliability policy (:mod:`agentgym.reliability`); when its budget is spent the call
  raises :class:`~agentgym.evaluation.agents.ModelInfraError` and the episode is
  ``infra_failed``, reported apart and never scored 0.
- The server is rate limiting (HTTP 429): nobody's fault, and no episode should pay for
  it. The ``Retry-After`` it sends closes a :class:`RateGate` that *every* request of the
  run waits on, so the whole run slows down instead of hammering the server; the call is
  then made again, without spending its infrastructure retries.
- The server refused the request as invalid (HTTP 400/413/422, e.g. the conversation no
  longer fits the context): :class:`~agentgym.evaluation.agents.ModelRejectedError`, the
  agent's outcome.
- The server refused us (401/403/404: wrong key, model name or URL): a
  :class:`~agentgym.errors.ConfigError` that stops the run with one line, since every
  other episode would fail the same way.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from agentgym.errors import ConfigError
from agentgym.evaluation.agents import ModelInfraError, ModelRejectedError
from agentgym.reliability import Budget, RetryPolicy, call_budget, remaining_s, retrying

__all__ = ["ChatSettings", "ChatClient", "ChatCompletion", "RateGate", "ToolMode", "DEFAULT_RETRY"]

ToolMode = Literal["native", "text"]

DEFAULT_RETRY = RetryPolicy(attempts=4, initial_s=0.5, max_wait_s=8.0, deadline_s=None)
"""A model call's infrastructure budget: 4 tries, waits of at most 0.5, 1 and 2 s
(full jitter), each try bounded by ``ChatSettings.timeout_s``."""


@dataclass(frozen=True)
class ChatSettings:
    """Where the model is and how to sample it.

    Attributes:
        base_url: the server's OpenAI API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name the server knows.
        tool_mode: ``native`` sends ``tools=`` and reads ``tool_calls``; ``text`` sends the
            tools for the chat template to render but asks for no tool calls
            (``tool_choice="none"``), and the env parses the plain text.
        api_key_env: the environment variable holding the API key (none needed if unset).
        temperature / top_p / max_tokens: sampling; ``temperature=0`` is greedy.
        timeout_s: one request's limit (connect, write, read), capped by the call's deadline.
        rate_limit_wait_s: how long rate limiting may hold one call in all before the call
            counts as an infrastructure failure (a server that never lets us in is down).
    """

    base_url: str
    model: str
    tool_mode: ToolMode = "native"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024
    timeout_s: float = 120.0
    rate_limit_wait_s: float = 3600.0
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.tool_mode not in ("native", "text"):
            raise ConfigError(f"Expected --tool-mode native or text, actual value: {self.tool_mode!r}")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"Expected --base-url to start with http:// or https://, actual value: {self.base_url!r}")
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_tokens < 1 or self.timeout_s <= 0:
            raise ConfigError("Expected temperature >= 0, 0 < top_p <= 1, max_tokens >= 1 and timeout > 0, actual "
                              f"values: {self.temperature}, {self.top_p}, {self.max_tokens}, {self.timeout_s}")

    def sampling(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                **self.extra_body}

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None


@dataclass
class ChatCompletion:
    """The parts of a chat completion an episode uses."""

    message: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None


class _ServerFailure(Exception):
    """An infrastructure failure of one request (retried)."""


class _RateLimited(Exception):
    def __init__(self, wait_s: float) -> None:
        super().__init__(f"rate limited (Retry-After {wait_s:g} s)")
        self.wait_s = wait_s


class RateGate:
    """One gate per run that every model request passes: a 429's ``Retry-After`` closes
    it for every episode at once, so a rate-limited run slows down as a whole."""

    def __init__(self) -> None:
        self._open_at = 0.0
        self.limited = 0
        """429 answers seen."""
        self.held_s = 0.0
        """Seconds the gate was closed in all (overlapping holds counted once)."""

    def hold(self, seconds: float) -> None:
        now = time.monotonic()
        until = now + max(0.0, seconds)
        self.held_s += max(0.0, until - max(now, self._open_at))
        self._open_at = max(self._open_at, until)
        self.limited += 1

    async def wait(self) -> None:
        while (left := self._open_at - time.monotonic()) > 0:
            await asyncio.sleep(left)


def retry_after_s(value: str | None, default: float = 1.0) -> float:
    """Seconds from a ``Retry-After`` header (delta seconds or an HTTP date).

    >>> retry_after_s("2"), retry_after_s(None), retry_after_s("soon")
    (2.0, 1.0, 1.0)
    """
    if not value:
        return default
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    return max(0.0, when.timestamp() - time.time())


class ChatClient:
    """Chat completions over ``httpx`` for many concurrent episodes of one run.

    Args:
        settings: the server, model and sampling.
        retry: the infrastructure budget of one call.
        gate: the run's rate gate (a new one if not given).
        transport: an ``httpx`` transport (tests pass one; default: the network).
    """

    def __init__(self, settings: ChatSettings, *, retry: RetryPolicy = DEFAULT_RETRY, gate: RateGate | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        self.retry = retry
        self.gate = gate or RateGate()
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self.retries = 0
        """Infrastructure retries made by all calls."""

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:  # made on the loop that uses it (the runtime loop)
            key = self.settings.api_key()
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            self._client = httpx.AsyncClient(base_url=self.settings.base_url.rstrip("/") + "/", headers=headers,
                                             transport=self._transport,
                                             limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                     seed: int | None = None) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {"model": s.model, "messages": messages, **s.sampling()}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto" if s.tool_mode == "native" else "none"
        if seed is not None and s.temperature > 0:
            body["seed"] = seed
        return body

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                       seed: int | None = None) -> ChatCompletion:
        """One completion; raises ``ModelInfraError``, ``ModelRejectedError`` or ``ConfigError``
        (see the module docstring)."""
        body = self.request_body(messages, tools, seed)
        try:
            with call_budget(self.retry) as budget:
                before = budget.retries
                try:
                    async for attempt in retrying(_ServerFailure):
                        with attempt:
                            return await self._through_gate(body)
                finally:
                    self.retries += budget.retries - before
        except _ServerFailure as e:
            raise ModelInfraError(f"the model server failed after {self.retry.attempts} tries: {e}") from e
        except _RateLimited as e:
            raise ModelInfraError(f"the model server rate limited one call for more than "
                                  f"{self.settings.rate_limit_wait_s:g} s") from e
        raise AssertionError("unreachable")  # pragma: no cover - retrying() returns or raises

    async def _through_gate(self, body: dict[str, Any]) -> ChatCompletion:
        """Wait for the gate, then post; a 429 closes the gate and asks again, under a budget
        of its own (time only) so rate limiting never spends the infrastructure retries."""
        patience = Budget(RetryPolicy(attempts=1 << 30, initial_s=0.0, max_wait_s=0.0,
                                      deadline_s=self.settings.rate_limit_wait_s))
        async for attempt in retrying(_RateLimited, budget=patience):
            with attempt:
                await self.gate.wait()
                return await self._post(body)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _post(self, body: dict[str, Any]) -> ChatCompletion:
        timeout = remaining_s(self.settings.timeout_s)
        try:
            response = await self._http().post("chat/completions", json=body, timeout=timeout)
        except httpx.TransportError as e:  # refused, reset, timed out, protocol broken
            raise _ServerFailure(f"{type(e).__name__}: {e or 'no detail'}") from e
        status = response.status_code
        if status == 429:
            wait = retry_after_s(response.headers.get("retry-after"))
            self.gate.hold(wait)
            raise _RateLimited(wait)
        if status >= 500 or status == 408:
            raise _ServerFailure(f"HTTP {status}: {response.text[:200]}")
        if status in (401, 403, 404):
            raise ConfigError(f"Expected the model server at {self.settings.base_url} to accept model "
                              f"{self.settings.model!r} (check --base-url, --model and ${self.settings.api_key_env}), "
                              f"actual: HTTP {status}: {response.text[:200]}")
        if status >= 400:
            raise ModelRejectedError(f"the model server refused the request: HTTP {status}: {response.text[:300]}")
        return _completion(response)


def _completion(response: httpx.Response) -> ChatCompletion:
    """The completion in a 2xx body, or ``_ServerFailure`` when the body is not one."""
    try:
        data = response.json()
        choice = data["choices"][0]
        message = choice["message"]
        if not isinstance(message, dict) or not isinstance(message.get("content") or "", str):
            raise TypeError(f"message is {type(message).__name__}")
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("function"), dict)
                                                  for c in calls):
            raise TypeError("tool_calls is not a list of function calls")
        usage = data.get("usage") or {}
        return ChatCompletion(message, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                              choice.get("finish_reason"))
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise _ServerFailure(f"malformed chat completion ({type(e).__name__}: {e}): {response.text[:200]!r}") from e
