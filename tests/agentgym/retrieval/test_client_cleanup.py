"""The retriever client closes its kept-alive connections: no ``unclosed transport``."""

from __future__ import annotations

import asyncio
import gc
import time
import warnings
from pathlib import Path

import pytest

from agentgym.retrieval import RemoteRetriever, RunningService, start_service_in_thread
from agentgym.runtime import run_sync

CLOSE_WAIT = "08"


def _resource_warnings(action) -> list[str]:
    """ResourceWarnings raised while ``action`` runs and its garbage is collected."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()  # earlier tests' garbage is not this action's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        action()
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def _wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


async def _two_connections(client: RemoteRetriever, running: RunningService) -> None:
    await asyncio.gather(client.search(["capital of France"], 2), client.search(["Camus"], 2))
    assert running.service.open_connections == 2  # both kept alive, so there is something to close


def _half_closed_to(port: int) -> int:
    """Sockets on this host connected to ``port`` whose peer has closed and which are
    still open on our side (CLOSE_WAIT)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[2].split(":")[1], 16) == port and fields[3] == CLOSE_WAIT:
            count += 1
    return count


def test_aclose_closes_every_kept_alive_connection(service):
    def cycle() -> None:
        client = RemoteRetriever(service.url)

        async def scenario() -> None:
            await _two_connections(client, service)
            await client.aclose()

        asyncio.run(scenario())
        _wait_for(lambda: service.service.open_connections == 0)  # the service saw both close

    assert _resource_warnings(cycle) == []


def test_moving_to_another_loop_closes_the_old_loops_connections(service):
    def cycle() -> None:
        client = RemoteRetriever(service.url)
        run_sync(_two_connections(client, service))  # on the runtime loop, which lives on

        async def elsewhere() -> None:
            await client.search(["Tokyo"], 1)
            await client.aclose()

        asyncio.run(elsewhere())
        run_sync(asyncio.sleep(0.05))  # let the runtime loop run the closes it was handed
        _wait_for(lambda: service.service.open_connections == 0)

    assert _resource_warnings(cycle) == []


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads socket states from /proc/net/tcp")
def test_a_connection_the_service_closes_is_closed_on_the_client_side_too(index):
    """An env that is never closed keeps its client, and the client its idle connections;
    when the service goes away they must not stay open (CLOSE_WAIT) until the process ends
    and then be reported as ``unclosed``: the service's close closes ours.
    Any ResourceWarning fails the test (recorded: one raised in ``__del__`` cannot propagate)."""

    def cycle() -> None:
        running = start_service_in_thread(index, port=0)
        client = RemoteRetriever(running.url)
        run_sync(_two_connections(client, running))  # a round trip that leaves two kept-alive connections
        running.stop()  # the service drops them; the client is neither used nor closed again
        run_sync(asyncio.sleep(0.1))  # the runtime loop sees the service's close
        assert _half_closed_to(running.service.port) == 0
        del client

    assert _resource_warnings(cycle) == []
