"""The retriever client closes its kept-alive connections: no ``unclosed transport``."""

from __future__ import annotations

import asyncio
import gc
import warnings

from agentgym.retrieval import RemoteRetriever
from agentgym.runtime import run_sync


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


async def _two_connections(client: RemoteRetriever) -> None:
    await asyncio.gather(client.search(["capital of France"], 2), client.search(["Camus"], 2))
    assert len(client._idle) == 2  # noqa: SLF001 - both kept alive, so there is something to close


def test_aclose_closes_every_kept_alive_connection(service):
    def cycle() -> None:
        client = RemoteRetriever(service.url)

        async def scenario() -> None:
            await _two_connections(client)
            await client.aclose()
            assert client._idle == []  # noqa: SLF001

        asyncio.run(scenario())

    assert _resource_warnings(cycle) == []


def test_moving_to_another_loop_closes_the_old_loops_connections(service):
    def cycle() -> None:
        client = RemoteRetriever(service.url)
        run_sync(_two_connections(client))  # on the runtime loop, which lives on

        async def elsewhere() -> None:
            await client.search(["Tokyo"], 1)
            await client.aclose()

        asyncio.run(elsewhere())
        run_sync(asyncio.sleep(0.05))  # let the runtime loop run the closes it was handed

    assert _resource_warnings(cycle) == []


def test_a_connection_the_service_closes_is_closed_on_the_client_side_too(index):
    """An env that is never closed keeps its client, and the client its idle connections;
    when the service goes away they must not stay open (CLOSE_WAIT) until the process ends
    and then be reported as ``unclosed <StreamWriter>``: the service's close closes ours.
    Any ResourceWarning fails the test (recorded: one raised in ``__del__`` cannot propagate)."""
    from agentgym.retrieval import start_service_in_thread

    def cycle() -> None:
        running = start_service_in_thread(index, port=0)
        client = RemoteRetriever(running.url)
        run_sync(_two_connections(client))  # a round trip that leaves two kept-alive connections
        running.stop()  # the service drops them; the client is neither used nor closed again
        run_sync(asyncio.sleep(0.1))  # the runtime loop sees the service's close
        assert all(writer.is_closing() for _, writer in client._idle)  # noqa: SLF001
        del client

    assert _resource_warnings(cycle) == []
