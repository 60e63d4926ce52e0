"""A scripted OpenAI-compatible chat server: a real HTTP/1.1 server on a local port, in a
thread of its own, that can be told to rate-limit, fail and die.

Shipped (not only a test helper) so that an evaluation pipeline can be exercised end to
end without a model or a GPU: the eval tests kill it mid-run and restart it, the docs test
runs the documented commands against it, and ``benchmarks/eval_throughput.py`` measures
the runner's own overhead with it (``python -m agentgym.evaluation.fake_server --port P``
serves it in a process of its own).

Its "model" is a tiny scripted agent: on Calculator-v0 the first turn calls ``calculate``
on the two numbers of the question joined by the operation its wording suggests, the
next turn answers the tool's result; on a team env the planner delegates the question to
a searcher, which reports, and the planner then answers. In ``native`` requests
(``tool_choice="auto"``) it answers with ``tool_calls``; otherwise with Hermes text.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatServer", "Script", "scripted_reply"]

_OPS = (("gives away", "-"), ("loses", "-"), ("eats", "-"), ("spends", "-"), ("more", "+"), ("buys", "+"),
        ("gets", "+"), ("finds", "+"), ("each", "*"), ("times", "*"), ("share", "//"), ("split", "//"))


def scripted_reply(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion the scripted model gives for a request body."""
    messages = body["messages"]
    question = next(m["content"] for m in messages if m["role"] == "user")
    opening = " ".join(str(m["content"]) for m in messages[:2])  # a client that sends no tools= lists them here
    names = [t["function"]["name"] for t in body.get("tools", [])] or \
        [n for n in ("calculate", "delegate", "report", "answer") if n in opening]
    last = messages[-1]
    result = last["content"] if last["role"] == "tool" else None
    if last["role"] == "user" and last["content"].startswith("<tool_response>"):
        result = last["content"].split("\n")[1]
    if not any(m["role"] == "assistant" for m in messages):  # the first turn: use the seat's main tool
        if "calculate" in names:
            numbers = re.findall(r"\d+", question)
            op = next((o for word, o in _OPS if word in question), "+")
            name, args = "calculate", {"expression": f" {op} ".join(numbers[:2]) or "1"}
        elif "delegate" in names:  # a team's planner: hand the question to a searcher
            name, args = "delegate", {"worker": "searcher_0", "subquestion": question}
        else:
            name, args = "report", {"text": "nothing found"}
    elif "answer" in names:
        name, args = "answer", {"answer": (result or "unknown").strip()}
    else:
        name, args = "report", {"text": "nothing found"}
    native = body.get("tool_choice") == "auto"
    call = {"name": name, "arguments": args}
    message: dict[str, Any]
    if native:
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{len(messages)}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}]}
    else:
        message = {"role": "assistant", "content": f"<tool_call>{json.dumps(call)}</tool_call>"}
    return {"id": "x", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if native else "stop"}],
            "usage": {"prompt_tokens": 10 * len(messages), "completion_tokens": 7, "total_tokens": 10 * len(messages) + 7}}


@dataclass
class Script:
    """What the server does. ``die_after``: serve that many completions, then drop every
    connection and stop listening (the server was killed). ``rate_limit_first``: answer
    that many requests with 429 and ``Retry-After: retry_after``. ``fail_with``: an HTTP
    status (or ``"malformed"``) for every request."""

    die_after: int | None = None
    rate_limit_first: int = 0
    retry_after: str = "1"
    fail_with: int | str | None = None
    reply: dict[str, Any] | None = None
    """A fixed assistant message to answer every request with (a wrong one, say)."""
    delay_s: float = 0.0
    served: int = 0
    requests: int = 0
    limited: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)


class ChatServer:
    """Start with :meth:`start`; ``url`` is the API root. :meth:`kill` drops everything."""

    def __init__(self, script: Script | None = None, port: int = 0) -> None:
        self.script = script or Script()
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.dead = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "ChatServer":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def kill(self) -> None:
        asyncio.run_coroutine_threadsafe(self._kill(), self._loop).result(10)

    async def _kill(self) -> None:
        self.dead = True
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.transport.abort()

    def stop(self) -> None:
        if self._thread.is_alive():
            self.kill()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while not self.dead:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
                body = json.loads(await reader.readexactly(length))
                status, headers, payload = await self._answer(body)
                if status is None:  # killed while answering: drop the connection
                    writer.transport.abort()
                    return
                data = payload.encode()
                extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
                             f"\r\n{extra}\r\n".encode() + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _answer(self, body: dict[str, Any]) -> tuple[int | None, dict[str, str], str]:
        s = self.script
        s.requests += 1
        s.bodies.append(body)
        if s.delay_s:
            await asyncio.sleep(s.delay_s)
        if self.dead:
            return None, {}, ""
        if s.limited < s.rate_limit_first:
            s.limited += 1
            return 429, {"Retry-After": s.retry_after}, json.dumps({"error": "slow down"})
        if s.fail_with == "malformed":
            return 200, {}, json.dumps({"choices": []})
        if s.fail_with is not None:
            return int(s.fail_with), {}, json.dumps({"error": "failed"})
        if s.die_after is not None and s.served >= s.die_after:
            await self._kill()
            return None, {}, ""
        s.served += 1
        answer = scripted_reply(body)
        if s.reply is not None:
            answer["choices"][0]["message"] = s.reply
        return 200, {}, json.dumps(answer)


def main() -> None:  # pragma: no cover - a process of its own for benchmarks
    import argparse

    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible chat server (until killed).")
    parser.add_argument("--port", type=int, default=0)
    server = ChatServer(port=parser.parse_args().port).start()
    print(server.url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":  # pragma: no cover
    main()
