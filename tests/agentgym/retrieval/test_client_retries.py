"""What the retriever client retries, and for how long: transport errors, 5xx and 429
(after its Retry-After, within the call's deadline) under one budget; other 4xx never."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from agentgym.reliability import RetryPolicy, call_budget
from agentgym.retrieval import RemoteRetriever, RetrieverProtocolError, RetrieverUnavailableError

RESULT = json.dumps({"result": [[{"document": {"id": "a", "contents": '"A"\ntext'}, "score": 1.0}]]}).encode()


def answer(status: int, body: bytes, extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
            ).encode() + body


class CannedService:
    """Answers each request with the next canned response; records when each came."""

    def __init__(self, responses: list[bytes]) -> None:
        self.responses, self.arrivals = list(responses), []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while self.responses:
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(int(re.search(rb"content-length: (\d+)", head, re.I).group(1)))
                self.arrivals.append(time.monotonic())
                writer.write(self.responses.pop(0))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def test_a_429_is_retried_after_its_retry_after():
    canned = CannedService([answer(429, b'{"error": "full"}', "Retry-After: 0.3\r\n"), answer(200, RESULT)])
    async with canned as url:
        client = RemoteRetriever(url, max_retries=2, backoff_s=0.001)
        [[doc]] = await client.search(["x"], 1)
        await client.aclose()
    assert doc.doc_id == "a" and len(canned.arrivals) == 2
    assert canned.arrivals[1] - canned.arrivals[0] >= 0.3


async def test_a_long_retry_after_is_cut_to_the_calls_deadline():
    canned = CannedService([answer(429, b'{"error": "full"}', "Retry-After: 30\r\n")] * 3)
    async with canned as url:
        client = RemoteRetriever(url, max_retries=2, backoff_s=0.001)
        start = time.monotonic()
        with call_budget(RetryPolicy(attempts=3, deadline_s=0.5)):
            with pytest.raises(RetrieverUnavailableError, match="429"):
                await client.search(["x"], 1)
        await client.aclose()
    assert time.monotonic() - start < 1.5


@pytest.mark.parametrize("status", [400, 413, 404])
async def test_other_4xx_are_not_retried_and_say_what_the_service_said(status):
    canned = CannedService([answer(status, b'{"error": "topk must be at most 5"}')] * 3)
    async with canned as url:
        client = RemoteRetriever(url, max_retries=2, backoff_s=0.001)
        with pytest.raises(RetrieverProtocolError, match="topk must be at most 5") as e:
            await client.search(["x"], 1)
        await client.aclose()
    assert e.value.status == status and len(canned.arrivals) == 1


async def test_5xx_are_retried_until_the_budget_is_spent():
    canned = CannedService([answer(503, b'{"error": "down"}')] * 5)
    async with canned as url:
        client = RemoteRetriever(url, max_retries=2, backoff_s=0.001)
        with pytest.raises(RetrieverUnavailableError, match="3 attempt"):
            await client.search(["x"], 1)
        await client.aclose()
    assert len(canned.arrivals) == 3


async def test_inside_a_callers_budget_the_client_adds_no_attempts_of_its_own():
    canned = CannedService([answer(503, b'{"error": "down"}')] * 5)
    async with canned as url:
        client = RemoteRetriever(url, max_retries=4, backoff_s=0.001)
        with call_budget(RetryPolicy(attempts=2, initial_s=0.001)) as budget:
            with pytest.raises(RetrieverUnavailableError, match="2 attempt"):
                await client.search(["x"], 1)
        await client.aclose()
    assert len(canned.arrivals) == 2 and budget.retries == 1
