"""The retriever service's limits: 413 over the per-request caps, 429 at the in-flight
budget or connection limit, 400 for any malformed body, and read/write timeouts."""

import http.client
import json
import socket
import time
import urllib.error
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.errors import ConfigError
from agentgym.retrieval import BM25Index, RemoteRetriever, RetrieverUnavailableError, ServiceLimits, start_service_in_thread
from tasks.search import Corpus, Document

BIG_DOCS = 80
BIG_DOC_CHARS = 200_000  # 80 x 200 kB: one reply of every document is ~16 MB, more than the
# loopback socket buffers hold, so a client that does not read keeps the reply in the service.


def post(url, payload, timeout=10):
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def error_of(url, payload):
    with pytest.raises(urllib.error.HTTPError) as e:
        post(url, payload)
    return e.value.code, json.loads(e.value.read())["error"], e.value.headers


def request_bytes(path, body: bytes, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def read_until_closed(sock, within):
    """What the service sends before it closes ``sock``; None if it is still open after ``within`` s."""
    sock.settimeout(within)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        return None
    return received


def closed_by_peer(sock, within):
    return read_until_closed(sock, within) is not None


@pytest.fixture(scope="module")
def big_index():
    docs = [Document(f"d{i}", f"Doc {i}", "common " + "x" * BIG_DOC_CHARS) for i in range(BIG_DOCS)]
    return BM25Index.build(Corpus(docs))


@pytest.fixture
def limited(index):
    running = start_service_in_thread(index, port=0, limits=ServiceLimits(
        max_queries=8, max_topk=5, max_docs=20, max_body_bytes=64 * 1024, read_timeout_s=0.5, max_connections=8))
    yield running
    running.stop()


def test_limits_must_be_positive():
    with pytest.raises(ConfigError, match="read_timeout_s"):
        ServiceLimits(read_timeout_s=0)


@pytest.mark.parametrize("path, payload, fragment", [
    ("/retrieve", {"queries": ["x"], "topk": 6}, "topk"),
    ("/retrieve", {"queries": ["x"] * 9, "topk": 1}, "at most 8 queries"),
    ("/retrieve", {"queries": ["x"] * 5, "topk": 5}, "at most 20 documents per response"),
    ("/documents", {"ids": ["fr"] * 21}, "at most 20 ids"),
])
def test_requests_over_the_per_request_caps_get_413(limited, path, payload, fragment):
    status, error, _ = error_of(limited.url + path, payload)
    assert status == 413 and fragment in error
    assert limited.service.stats.too_large == 1
    assert post(limited.url + "/retrieve", {"queries": ["x"] * 4, "topk": 5}) is not None  # at the caps: served


@pytest.mark.parametrize("body, fragment", [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"queries": ' * 50_000, "nested too deeply"),
    (b'{"queries": ["x"], "topk": ' + b"9" * 5000 + b"}", "not JSON"),
    (b'{"queries": ["\xff"]}', "not JSON"),
    (b'{"queries": ["x"], "return_scores": "yes"}', "return_scores"),
    (b'{"queries": ["x"], "topk": true}', "topk"),
])
def test_malformed_bodies_get_400_not_500(service, body, fragment):
    status, error, _ = error_of(service.url + "/retrieve", body)
    assert status == 400 and fragment in error
    assert service.service.stats.errors == 1


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5)
    | st.dictionaries(st.sampled_from(["queries", "query", "topk", "return_scores", "ids", "x"]), inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def shared_service(index):
    running = start_service_in_thread(index, port=0)
    yield running
    running.stop()


@settings(max_examples=150, deadline=None)
@given(body=st.one_of(st.binary(max_size=200), JSON.map(lambda v: json.dumps(v).encode())),
       path=st.sampled_from(["/retrieve", "/documents"]))
def test_any_body_is_answered_200_400_or_413_never_500(shared_service, body, path):
    try:
        post(shared_service.url + path, body)
    except urllib.error.HTTPError as e:
        assert e.code in (400, 413), (e.code, e.read())


def test_a_bad_content_length_gets_400_and_a_closed_connection(service):
    with socket.create_connection((service.service.host, service.service.port), timeout=5) as sock:
        sock.sendall(b"POST /retrieve HTTP/1.1\r\nContent-Length: -5\r\n\r\n")
        answer = read_until_closed(sock, 2)
        assert answer.startswith(b"HTTP/1.1 400") and b"Content-Length" in answer


def test_an_over_large_body_is_refused_from_its_content_length(service):
    conn = http.client.HTTPConnection(service.service.host, service.service.port, timeout=5)
    conn.putrequest("POST", "/retrieve")
    conn.putheader("Content-Length", str(200_000_000))
    conn.endheaders()  # announces 200 MB, sends none of it
    start = time.perf_counter()
    response = conn.getresponse()
    assert response.status == 413 and "1048576" in json.loads(response.read())["error"]
    assert time.perf_counter() - start < 2 and response.getheader("Connection") == "close"
    conn.close()


def test_a_client_that_sends_the_whole_over_large_body_reads_413_not_a_reset(service):
    status, error, _ = error_of(service.url + "/retrieve", b" " * (4 << 20))
    assert status == 413 and "split the request" in error


def test_expect_continue_is_answered_before_the_body(service):
    body = json.dumps({"queries": ["Tokyo"], "topk": 1}).encode()
    with socket.create_connection((service.service.host, service.service.port), timeout=5) as sock:
        sock.sendall(request_bytes("/retrieve", b"", "Expect: 100-continue\r\n").replace(
            b"Content-Length: 0", b"Content-Length: %d" % len(body)))
        assert sock.recv(64) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_slowloris_connections_are_dropped_after_the_read_timeout(limited):
    host, port = limited.service.host, limited.service.port
    headers_never_end = socket.create_connection((host, port))
    headers_never_end.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\n")
    body_never_ends = socket.create_connection((host, port))
    body_never_ends.sendall(b"POST /retrieve HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"queries\"")
    silent = socket.create_connection((host, port))
    start = time.perf_counter()
    try:
        for sock in (headers_never_end, body_never_ends, silent):
            assert closed_by_peer(sock, within=3)
        assert time.perf_counter() - start < 3
        assert limited.service.stats.timeouts == 3
        assert post(limited.url + "/retrieve", {"queries": ["Tokyo"], "topk": 1})["result"][0][0]["id"] == "jp"
    finally:
        for sock in (headers_never_end, body_never_ends, silent):
            sock.close()


def test_connections_over_the_limit_get_429(index):
    running = start_service_in_thread(index, port=0, limits=ServiceLimits(max_connections=2))
    held = [socket.create_connection((running.service.host, running.service.port)) for _ in range(2)]
    try:
        wait_until(lambda: len(running.service._writers) == 2)  # noqa: SLF001 - both accepted
        status, error, headers = error_of(running.url + "/retrieve", {"queries": ["x"]})
        assert status == 429 and "retry" in error and headers["Retry-After"] == "1"
    finally:
        for sock in held:
            sock.close()
        running.stop()


def _unread_request(url_host, url_port, payload):
    """Send a request on a socket with a tiny receive window and do not read the reply."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((url_host, url_port))
    sock.sendall(request_bytes("/retrieve", json.dumps(payload).encode()))
    return sock


def _read_reply(sock):
    sock.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(1 << 20)
    return int(head.split(b" ")[1]), json.loads(body)


async def test_bytes_in_flight_are_bounded_and_a_full_service_answers_429(big_index):
    limits = ServiceLimits(max_topk=BIG_DOCS, max_docs=BIG_DOCS, max_bytes_in_flight=24 << 20)
    running = start_service_in_thread(big_index, port=0, limits=limits)
    everything = {"queries": ["common"], "topk": BIG_DOCS}
    host, port = running.service.host, running.service.port
    try:
        slow_reader = _unread_request(host, port, everything)
        wait_until(lambda: running.service.budget.used > 15_000_000)  # the 16 MB reply waits for its reader
        status, error, headers = error_of(running.url + "/retrieve", everything)
        assert status == 429 and "retry" in error and headers["Retry-After"] == "1"
        client = RemoteRetriever(running.url, max_retries=0)
        with pytest.raises(RetrieverUnavailableError, match="429"):  # busy is transient, retried by clients
            await client.search(["common"], BIG_DOCS)
        assert running.service.budget.peak <= limits.max_bytes_in_flight
        status, reply = _read_reply(slow_reader)
        assert status == 200 and len(reply["result"][0]) == BIG_DOCS
        wait_until(lambda: running.service.budget.used == 0)
        assert len((await client.search(["common"], BIG_DOCS))[0]) == BIG_DOCS
        await client.aclose()
        slow_reader.close()
    finally:
        running.stop()


def test_a_request_that_could_never_fit_the_budget_is_413_not_429(big_index):
    running = start_service_in_thread(big_index, port=0, limits=ServiceLimits(
        max_topk=BIG_DOCS, max_docs=BIG_DOCS, max_bytes_in_flight=4 << 20))
    try:
        status, error, _ = error_of(running.url + "/retrieve", {"queries": ["common"], "topk": BIG_DOCS})
        assert status == 413 and "max_bytes_in_flight" in error
        # the reservation is released once the reply is written, which the client can see first
        wait_until(lambda: running.service.budget.used == 0, timeout=3)
    finally:
        running.stop()


def test_a_client_that_never_reads_is_dropped_after_the_write_timeout(big_index):
    running = start_service_in_thread(big_index, port=0, limits=ServiceLimits(
        max_topk=BIG_DOCS, max_docs=BIG_DOCS, write_timeout_s=0.5))
    try:
        sock = _unread_request(running.service.host, running.service.port, {"queries": ["common"], "topk": BIG_DOCS})
        wait_until(lambda: running.service.budget.used > 0)
        wait_until(lambda: running.service.budget.used == 0, timeout=3)  # dropped, reply freed
        assert running.service.stats.timeouts == 1
        sock.close()
    finally:
        running.stop()


async def test_the_client_reconnects_when_the_service_closed_an_idle_connection(index):
    running = start_service_in_thread(index, port=0, limits=ServiceLimits(read_timeout_s=0.3))
    client = RemoteRetriever(running.url, max_retries=0)  # no retry budget: the reconnect must be free
    try:
        assert (await client.search(["Tokyo"], 1))[0][0].doc_id == "jp"
        time.sleep(0.8)  # blocks this loop: the service's close of the idle connection goes unnoticed
        assert running.service.stats.timeouts == 1
        assert (await client.search(["Berlin"], 1))[0][0].doc_id == "de"
    finally:
        await client.aclose()
        running.stop()
