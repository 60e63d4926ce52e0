"""Where a judge's replies come from: an OpenAI-compatible server or a local model.

A backend turns chat messages into reply text and says who it is
(:meth:`JudgeBackend.identity`: goes into the env fingerprint with the sampling
settings, because another judge model is another reward). It raises
:class:`~agentgym.judges.errors.JudgeUnavailable` for anything that is not a reply
(connection refused, timeout, a 5xx or 4xx answer, a malformed body); it never retries:
:class:`agentgym.judges.Judge` does, under the project's one retry policy.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from agentgym.judges.errors import JudgeUnavailable

__all__ = ["SamplingSettings", "JudgeBackend", "OpenAIChatBackend", "TransformersBackend"]


@dataclass(frozen=True)
class SamplingSettings:
    """The judge's sampling settings (greedy by default: the same answer, the same verdict).

    Attributes:
        temperature: 0 for greedy decoding.
        top_p: nucleus sampling mass.
        max_tokens: the reply's length limit.
        seed: the sampling seed, for servers that take one.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = 0

    def __post_init__(self) -> None:
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_tokens < 1:
            raise ValueError(f"Expected temperature >= 0, 0 < top_p <= 1 and max_tokens >= 1, actual: {self}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class JudgeBackend(Protocol):
    """What :class:`agentgym.judges.Judge` needs of a model."""

    def identity(self) -> dict[str, Any]:
        """The model's identity (kind, name or path, revision): fingerprinted."""

    async def complete(self, messages: list[dict[str, str]], *, sampling: SamplingSettings, timeout_s: float,
                       schema: dict[str, Any] | None = None) -> str:
        """The reply to ``messages``; ``schema`` is the verdict's JSON schema, for
        servers that can constrain decoding to it."""

    async def aclose(self) -> None:
        """Release connections or the model."""


class OpenAIChatBackend:
    """A judge model behind any OpenAI-compatible ``/v1/chat/completions`` (vLLM, TGI,
    llama.cpp, a hosted API).

    Args:
        base_url: up to and including ``/v1``, e.g. ``http://127.0.0.1:8000/v1``.
        model: the served model's name.
        api_key: sent as a bearer token; default ``$AGENTGYM_JUDGE_API_KEY``, else none.
        structured: ask the server to constrain decoding to the verdict's JSON schema
            (``response_format`` ``json_schema``; vLLM supports it). The reply is parsed
            strictly either way.
        transport: an ``httpx`` transport (tests use ``httpx.MockTransport``).

    The HTTP client is made on first use in each event loop: a client's connections belong
    to the loop that opened them, and a judge may be used from the runtime loop and from
    ``asyncio.run`` alike.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, structured: bool = True,
                 transport: Any = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.structured = structured
        key = api_key if api_key is not None else os.environ.get("AGENTGYM_JUDGE_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._transport = transport
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> Any:
        import httpx

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:  # a client of a finished loop is dropped
            self._client = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, transport=self._transport)
            self._loop = loop
        return self._client

    def identity(self) -> dict[str, Any]:
        return {"kind": "openai-chat", "base_url": self.base_url, "model": self.model, "structured": self.structured}

    def _body(self, messages: list[dict[str, str]], sampling: SamplingSettings,
              schema: dict[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": sampling.temperature,
                                "top_p": sampling.top_p, "max_tokens": sampling.max_tokens}
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if self.structured and schema is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "verdict", "schema": schema, "strict": True}}
        return body

    async def complete(self, messages: list[dict[str, str]], *, sampling: SamplingSettings, timeout_s: float,
                       schema: dict[str, Any] | None = None) -> str:
        import httpx

        try:
            response = await self._http().post("/chat/completions", json=self._body(messages, sampling, schema),
                                               timeout=timeout_s)
        except httpx.HTTPError as e:
            raise JudgeUnavailable(f"judge server {self.base_url}: {type(e).__name__}: {e}") from e
        if response.status_code != 200:
            raise JudgeUnavailable(f"judge server {self.base_url} answered HTTP {response.status_code}: "
                                   f"{response.text[:200]}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise JudgeUnavailable(f"judge server {self.base_url} sent a malformed body: {response.text[:200]}") from e
        if not isinstance(content, str):
            raise JudgeUnavailable(f"judge server {self.base_url} sent no text content: {content!r}")
        return content

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.aclose()


class TransformersBackend:
    """A local judge model run with transformers (CPU or GPU), loaded on first use.

    Args:
        model: a hub name or a local directory with a chat template.
        device: a torch device string.
        revision: the model revision, recorded in the identity.
    """

    def __init__(self, model: str, *, device: str = "cpu", revision: str | None = None) -> None:
        self.model_name = model
        self.device = device
        self.revision = revision
        self._loaded: tuple[Any, Any] | None = None

    def identity(self) -> dict[str, Any]:
        return {"kind": "transformers", "model": self.model_name, "revision": self.revision}

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tok = AutoTokenizer.from_pretrained(self.model_name, revision=self.revision)
            model = AutoModelForCausalLM.from_pretrained(self.model_name, revision=self.revision).to(self.device).eval()
            self._loaded = (tok, model)
        return self._loaded

    def _generate(self, messages: list[dict[str, str]], sampling: SamplingSettings) -> str:
        import torch

        tok, model = self._load()
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt").to(self.device)
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        greedy = sampling.temperature == 0
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=sampling.max_tokens, do_sample=not greedy,
                                 temperature=None if greedy else sampling.temperature,
                                 top_p=None if greedy else sampling.top_p, pad_token_id=tok.eos_token_id)
        return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)

    async def complete(self, messages: list[dict[str, str]], *, sampling: SamplingSettings, timeout_s: float,
                       schema: dict[str, Any] | None = None) -> str:
        try:
            return await asyncio.wait_for(asyncio.to_thread(self._generate, messages, sampling), timeout_s)
        except TimeoutError as e:
            raise JudgeUnavailable(f"local judge {self.model_name} took longer than {timeout_s:g} s") from e
        except (OSError, RuntimeError) as e:
            raise JudgeUnavailable(f"local judge {self.model_name}: {type(e).__name__}: {e}") from e

    async def aclose(self) -> None:
        self._loaded = None
