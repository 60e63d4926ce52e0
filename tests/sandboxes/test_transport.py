"""The host-supervisor protocol: a resent request is answered, never run twice."""

from __future__ import annotations

import asyncio
import socket
import warnings

import pytest

from sandboxes import ProcessSandbox
from sandboxes.process import SandboxIsolationWarning
from sandboxes.runtime import wire


@pytest.fixture
async def process_sandbox():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxIsolationWarning)
        sb = await ProcessSandbox().start()
    yield sb
    await sb.close()


def _raw_request(path: str, header: dict, *, read_reply: bool) -> dict | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(path)
        conn.sendall(wire.encode(header))
        if not read_reply:
            return None  # the connection drops before the answer, as in a network fault
        reader = conn.makefile("rb")
        while True:
            reply, _ = wire.read_frame(reader.read)
            if not reply.get("heartbeat"):
                return reply


async def test_a_resent_request_is_answered_from_cache_not_run_again(process_sandbox):
    sb = process_sandbox
    await sb.run("counter = 0")
    client = sb._client
    client.close()  # free the supervisor's single connection for the raw ones below
    # (the raw requests run in threads so the loop can finish closing that connection)
    seq = client._seq + 1
    request = {"op": "run", "seq": seq, "code": "counter += 1\ncounter", "timeout": 10}
    path = client.socket_path
    await asyncio.to_thread(_raw_request, path, request, read_reply=False)
    first = await asyncio.to_thread(_raw_request, path, request, read_reply=True)
    again = await asyncio.to_thread(_raw_request, path, request, read_reply=True)
    assert first["value"] == again["value"] == "1"
    client._seq = seq  # the sandbox's own client continues after the raw requests
    assert (await sb.run("counter")).value == "1"


async def test_a_stale_sequence_number_is_refused(process_sandbox):
    sb = process_sandbox
    await sb.run("1")
    sb._client.close()
    request = {"op": "run", "seq": 0, "code": "2"}
    reply = await asyncio.to_thread(_raw_request, sb._client.socket_path, request, read_reply=True)
    assert "stale seq" in reply["error"]
