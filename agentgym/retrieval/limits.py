"""What one request may ask of the retriever service, and what the service may hold at once.

The service's memory is bounded by construction, not by hoping clients behave:

* **Per request**: at most ``max_queries`` queries, ``max_topk`` documents per query and
  ``max_docs`` documents per response (queries x topk), and a body of at most
  ``max_body_bytes``, refused from its ``Content-Length`` before a byte of it is read.
  Beyond these the answer is 413: the request can never be served as sent.
* **At once**: every byte the service holds for a request (its body, its search hits,
  its encoded response until the client has read it) is reserved from one
  ``ByteBudget`` of ``max_bytes_in_flight``; a request that does not fit now is answered
  429 (the client backs off and retries), so slow readers cost a bounded amount.
* **Per connection**: ``max_connections`` open at once (429 beyond); the whole request
  must arrive within ``read_timeout_s`` and the whole response must be read within
  ``write_timeout_s``, so slowloris clients and clients that never read are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from agentgym.errors import ConfigError

__all__ = [
    "BadRequest",
    "BudgetExceeded",
    "ByteBudget",
    "DocumentsRequest",
    "RequestTooLarge",
    "Reservation",
    "RetrieveRequest",
    "ServiceBusy",
    "ServiceError",
    "ServiceLimits",
    "parse_documents",
    "parse_retrieve",
]

DEFAULT_TOPK = 3  # Search-R1's default when a request names none
HIT_BYTES = 160
"""Memory one search hit costs until its document is encoded (object, score, list slot)."""


@dataclass(frozen=True)
class ServiceLimits:
    """The service's limits; every field must be positive."""

    max_topk: int = 100
    max_queries: int = 1024
    max_docs: int = 16_384
    """Documents per response (queries x topk): bounds one response's size."""
    max_body_bytes: int = 1 << 20
    max_bytes_in_flight: int = 128 << 20
    """Request bodies, hits and encoded responses held at once, over all connections."""
    max_connections: int = 512
    read_timeout_s: float = 10.0
    """Deadline to receive one request (headers, then again for the body), idle
    keep-alive waits included."""
    write_timeout_s: float = 30.0
    """Deadline for the client to read one whole response."""

    def __post_init__(self) -> None:
        bad = {f.name: getattr(self, f.name) for f in fields(self) if not getattr(self, f.name) > 0}
        if bad:
            raise ConfigError(f"Expected every retriever service limit > 0, actual values: {bad}")


class ServiceError(Exception):
    """A request the service answers with ``status`` and this message (say what to send).

    ``unread_body`` counts the body bytes not read when the error was raised: the
    service discards them (for a bounded time) and closes the connection.
    """

    status: ClassVar[int] = 400

    def __init__(self, message: str, *, unread_body: int = 0) -> None:
        super().__init__(message)
        self.unread_body = unread_body


class BadRequest(ServiceError, ValueError):
    """Malformed or out-of-range input: HTTP 400."""

    status = 400


class RequestTooLarge(ServiceError, ValueError):
    """More than one request may ever ask for: HTTP 413; split it."""

    status = 413


class ServiceBusy(ServiceError):
    """The service holds its limit of bytes or connections now: HTTP 429; retry later."""

    status = 429


class BudgetExceeded(Exception):
    """A reservation would pass the budget; ``never_fits`` when it would even alone."""

    def __init__(self, wanted: int, capacity: int, never_fits: bool) -> None:
        super().__init__(f"{wanted} bytes wanted, budget {capacity}")
        self.wanted, self.capacity, self.never_fits = wanted, capacity, never_fits


class ByteBudget:
    """Bytes the service may hold at once. Used only from the service's event loop, so
    reservations need no lock."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self.peak = 0

    def reservation(self) -> Reservation:
        return Reservation(self)


class Reservation:
    """One request's share of a ``ByteBudget``; grows as the request is served, released once."""

    def __init__(self, budget: ByteBudget) -> None:
        self._budget = budget
        self.held = 0

    def grow(self, n: int) -> None:
        """Hold ``n`` more bytes (fewer when negative), or raise ``BudgetExceeded`` and
        hold nothing more."""
        budget = self._budget
        if budget.used + n > budget.capacity:
            raise BudgetExceeded(self.held + n, budget.capacity, never_fits=self.held + n > budget.capacity)
        budget.used += n
        self.held += n
        budget.peak = max(budget.peak, budget.used)

    def release(self) -> None:
        self._budget.used -= self.held
        self.held = 0


@dataclass(frozen=True)
class RetrieveRequest:
    queries: list[str]
    topk: int
    return_scores: bool

    @property
    def docs(self) -> int:
        return len(self.queries) * self.topk


@dataclass(frozen=True)
class DocumentsRequest:
    ids: list[str]


def _string_list(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f'"{name}" must be a list of strings')
    return value


def _topk(payload: dict[str, Any], limits: ServiceLimits) -> int:
    topk = payload.get("topk")
    topk = DEFAULT_TOPK if topk is None else topk
    if not isinstance(topk, int) or isinstance(topk, bool) or topk < 1:
        raise BadRequest(f'"topk" must be an integer in [1, {limits.max_topk}], got {topk!r}')
    if topk > limits.max_topk:
        raise RequestTooLarge(f'"topk" must be at most {limits.max_topk}, got {topk}')
    return topk


def parse_retrieve(payload: Any, limits: ServiceLimits) -> RetrieveRequest:
    """Validate a ``POST /retrieve`` body against the per-request limits."""
    if not isinstance(payload, dict):
        raise BadRequest('expected a JSON object {"queries": [...], "topk": k, "return_scores": bool}')
    # "query" (one string) is accepted too: some search-agent clients send that form.
    queries = payload.get("queries", payload.get("query"))
    queries = _string_list([queries] if isinstance(queries, str) else queries, "queries")
    if len(queries) > limits.max_queries:
        raise RequestTooLarge(f"at most {limits.max_queries} queries per request, got {len(queries)}; "
                              "split them over several requests")
    topk = _topk(payload, limits)
    if len(queries) * topk > limits.max_docs:
        raise RequestTooLarge(f"at most {limits.max_docs} documents per response (queries x topk), got "
                              f"{len(queries)} x {topk}; split the queries over several requests")
    return_scores = payload.get("return_scores", False)
    if not isinstance(return_scores, bool) and return_scores is not None:
        raise BadRequest(f'"return_scores" must be true or false, got {return_scores!r}')
    return RetrieveRequest(queries, topk, bool(return_scores))


def parse_documents(payload: Any, limits: ServiceLimits) -> DocumentsRequest:
    """Validate a ``POST /documents`` body: ``{"ids": [...]}``, at most ``max_docs`` ids."""
    if not isinstance(payload, dict):
        raise BadRequest('expected {"ids": [string, ...]}')
    ids = _string_list(payload.get("ids"), "ids")
    if len(ids) > limits.max_docs:
        raise RequestTooLarge(f"at most {limits.max_docs} ids per request, got {len(ids)}; split them")
    return DocumentsRequest(ids)
