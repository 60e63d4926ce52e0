"""The host-supervisor channel: the peer proves its key, any anomaly retires the sandbox,
and the channel is never re-opened (there is nothing to re-open it to)."""

from __future__ import annotations

import asyncio
import time
import warnings

import pytest

from sandboxes import ProcessSandbox, SandboxTransportError
from sandboxes.client import SupervisorClient
from sandboxes.process import SandboxIsolationWarning
from sandboxes.runtime import wire


@pytest.fixture
async def process_sandbox():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxIsolationWarning)
        sb = await ProcessSandbox().start()
    yield sb
    await sb.close()


class _ImpostorSandbox(ProcessSandbox):
    """Starts a real supervisor, but with a key the host does not hold."""

    async def _launch(self, key: str):
        return await super()._launch("0" * 64)


async def test_a_supervisor_without_the_sandbox_key_is_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxIsolationWarning)
        impostor = _ImpostorSandbox()
        with pytest.raises(SandboxTransportError, match="could not prove"):
            await impostor.start()
    assert impostor._proc is None  # terminated, not left running


async def test_a_reply_to_another_request_breaks_the_channel_for_good(process_sandbox):
    sb = process_sandbox
    client: SupervisorClient = sb._client
    assert (await sb.run("6 * 7")).value == "42"
    # A frame nobody asked for, as an impostor on the stream would send.
    sb._stream.reader.feed_data(wire.encode({"seq": 999, "status": "ok", "value": "forged"}))
    with pytest.raises(SandboxTransportError, match="reply to request 999"):
        await client.request("run", {"code": "1"}, deadline_s=10)
    with pytest.raises(SandboxTransportError, match="unusable"):
        await client.request("run", {"code": "1"}, deadline_s=10)  # no reconnect, ever


async def test_an_undecodable_frame_breaks_the_channel(process_sandbox):
    sb = process_sandbox
    sb._stream.reader.feed_data(b"\x00\x00\x00\x05\x00\x00\x00\x00{bad}")
    with pytest.raises(SandboxTransportError):
        await sb.run("1")
    assert not sb.healthy


async def test_the_supervisor_exits_when_its_host_goes_away(process_sandbox):
    sb = process_sandbox
    proc = sb._proc
    sb._stream.close()  # what the kernel does to the pipe when the host process dies
    end = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < end:
        await asyncio.sleep(0.05)
    assert proc.poll() is not None
