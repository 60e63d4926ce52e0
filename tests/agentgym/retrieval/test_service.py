"""The retriever service and its client: Search-R1 format, batching, load, failures."""

import asyncio
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from agentgym.errors import InfraError
from agentgym.retrieval import RemoteRetriever, RetrieverUnavailableError
from agentgym.retrieval.client import RetrieverProtocolError


def post(url, payload):
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_retrieve_matches_the_search_r1_response_shape(service):
    out = post(service.url + "/retrieve", {"queries": ["capital of France", "Yen"], "topk": 2, "return_scores": True})
    assert len(out["result"]) == 2 and len(out["result"][0]) == 2
    first = out["result"][0][0]
    assert set(first) == {"document", "score"} and set(first["document"]) == {"id", "contents"}
    assert first["document"]["id"] == "fr" and first["document"]["contents"].startswith('"France')
    assert out["result"][1][0]["document"]["id"] == "jp"
    plain = post(service.url + "/retrieve", {"queries": ["Tokyo"], "topk": 1})
    assert plain == {"result": [[{"id": "jp", "contents": plain["result"][0][0]["contents"]}]]}
    single = post(service.url + "/retrieve", {"query": "Tokyo", "topk": 1})  # one-query clients
    assert single == plain


def test_documents_and_health_routes(service, corpus):
    docs = post(service.url + "/documents", {"ids": ["camus", "nope"]})["documents"]
    assert docs[0]["id"] == "camus" and docs[1] is None
    health = json.loads(urllib.request.urlopen(service.url + "/health", timeout=10).read())
    assert health == {"status": "ok", "corpus_version": corpus.version, "num_docs": len(corpus)}


@pytest.mark.parametrize("payload, fragment", [
    ({"queries": "x", "topk": 0}, "topk"), ({"queries": [1, 2]}, "list of strings"), ([], "JSON object"),
])
def test_bad_requests_get_400_with_instructions(service, payload, fragment):
    with pytest.raises(urllib.error.HTTPError) as e:
        post(service.url + "/retrieve", payload)
    assert e.value.code == 400 and fragment in json.loads(e.value.read())["error"]


async def test_client_parses_both_shapes_and_reports_missing_docs(service):
    client = RemoteRetriever(service.url)
    [[top]] = await client.search(["Berlin"], 1)
    assert top.doc_id == "de" and top.score > 0
    docs = await client.get_documents(["jp", "zzz"])
    assert docs[0].title == "Japan (country profile)" and docs[1] is None
    assert (await client.health())["num_docs"] == 5
    await client.aclose()


async def test_64_concurrent_clients_get_correct_results_in_batches(service):
    client = RemoteRetriever(service.url, max_concurrency=64)
    queries = ["capital of France", "capital of Germany", "Tokyo Yen", "Camus", "Lyon population"] * 80
    expected = {"capital of France": "fr", "capital of Germany": "de", "Tokyo Yen": "jp", "Camus": "camus",
                "Lyon population": "lyon"}
    results = await asyncio.gather(*(client.search([q], 2) for q in queries))
    assert all(r[0][0].doc_id == expected[q] for q, r in zip(queries, results))
    stats = service.service.stats
    assert stats.queries >= len(queries) and stats.batches < len(queries)  # concurrent queries were batched
    await client.aclose()


async def test_service_stopped_mid_run_raises_infra_error(service):
    client = RemoteRetriever(service.url, timeout_s=1.0, max_retries=2, backoff_s=0.01)
    assert (await client.search(["Paris"], 1))[0]
    service.stop()
    start = time.perf_counter()
    with pytest.raises(RetrieverUnavailableError) as e:
        await client.search(["Paris"], 1)
    assert isinstance(e.value, InfraError) and "3 attempt" in str(e.value)
    assert time.perf_counter() - start < 5


async def test_a_hung_service_times_out_into_infra_error():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepts connections, never answers
    port = listener.getsockname()[1]
    try:
        client = RemoteRetriever(f"http://127.0.0.1:{port}", timeout_s=0.2, max_retries=1, backoff_s=0.01)
        start = time.perf_counter()
        with pytest.raises(InfraError, match="2 attempt"):
            await client.search(["x"], 1)
        assert time.perf_counter() - start < 2
    finally:
        listener.close()


async def test_non_search_r1_answers_are_infra_errors_not_crashes():
    body = b'{"unexpected": true}'

    def serve(sock):
        conn, _ = sock.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        conn.close()

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    thread = threading.Thread(target=serve, args=(sock,), daemon=True)
    thread.start()
    try:
        client = RemoteRetriever(f"http://127.0.0.1:{sock.getsockname()[1]}", max_retries=0)
        with pytest.raises(RetrieverProtocolError):
            await client.search(["x"], 1)
    finally:
        thread.join(5)
        sock.close()


async def test_a_server_without_the_documents_route_is_detected(service):
    client = RemoteRetriever(service.url)
    with pytest.raises(RetrieverProtocolError) as e:
        await client._call("POST", "/no-such-route", {})
    assert e.value.status == 404
    original = client._call

    async def plain_search_r1(method, path, payload):
        return await original(method, "/no-such-route" if path == "/documents" else path, payload)

    client._call = plain_search_r1
    assert await client.get_documents(["fr"]) is None
    assert (await client.search(["Paris"], 1))[0][0].doc_id == "fr"
