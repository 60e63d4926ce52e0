"""The one reliability policy: retries, backoff and deadlines for every layer.

agentgym promises that a tool call fails as infrastructure only after a bounded,
documented effort. That promise breaks as soon as two layers each retry on their own:
three executor attempts times two crash replacements times three sandbox starts is
eighteen tries and minutes of waiting before an episode is declared ``infra_failed``.
So every retry in the project is one :func:`retrying` loop drawing on one
:class:`Budget`:

- The outermost caller of an operation (the tool executor for a tool call, the env for
  an episode start, :meth:`sandboxes.SandboxPool.acquire` for a library user) opens a
  budget with :func:`call_budget`. Every layer below it that wants another try — a
  crashed sandbox replaced, a start attempted again — *joins* that budget instead of
  opening its own, so the attempts of all layers together never exceed
  ``RetryPolicy.attempts`` and nothing outlives ``RetryPolicy.deadline_s``.
- Waits are random exponential with full jitter (each wait uniform in
  ``[0, min(max_wait_s, initial_s * 2**n)]``; see AWS, "Exponential Backoff And Jitter",
  2015), and never run past the deadline: a retry that could not start before it is not
  made.

Why here, in ``sandboxes``: imports point down (``agentgym -> sandboxes``), the sandbox
pool is the deepest layer that retries, and it may import nothing above it.
:mod:`agentgym.reliability` re-exports this module under the name users read about.

The worst case from "the engine died" to "the call failed as infrastructure" is
therefore ``deadline_s`` when every attempt hangs, and the sum of at most ``attempts``
fast failures plus ``attempts - 1`` waits (each ``<= max_wait_s``) when the engine
refuses connections; ``docs/reliability.md`` gives the numbers for the shipped tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar
from dataclasses import dataclass
import tenacity

T = TypeVar("T")

__all__ = ["RetryPolicy", "Budget", "call_budget", "current_budget", "retrying", "call_with_retries", "remaining_s",
           "polling", "apolling"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard one operation may try before it fails as infrastructure.

    Attributes:
        attempts: tries of the operation in total, by every layer together (>= 1).
        initial_s: the first backoff's cap; it doubles per retry (full jitter).
        max_wait_s: the cap on any one backoff.
        deadline_s: wall-clock limit of the whole operation, every attempt and wait
            included; ``None`` for none (then each layer's own timeouts bound it).
    """

    attempts: int = 3
    initial_s: float = 0.05
    max_wait_s: float = 2.0
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"Expected RetryPolicy.attempts >= 1, actual value: {self.attempts}")
        if self.initial_s < 0 or self.max_wait_s < 0:
            raise ValueError(f"Expected non-negative backoff, actual values: {self.initial_s}, {self.max_wait_s}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise ValueError(f"Expected RetryPolicy.deadline_s > 0 or None, actual value: {self.deadline_s}")

    def worst_case_s(self, attempt_s: float) -> float:
        """The longest the operation can take when each attempt takes ``attempt_s``:
        every attempt plus every (maximal) wait, capped by the deadline."""
        waits = sum(min(self.max_wait_s, self.initial_s * 2 ** n) for n in range(self.attempts - 1))
        total = self.attempts * attempt_s + waits
        return total if self.deadline_s is None else min(total, self.deadline_s)


class Budget:
    """The retries and the deadline left to one operation, shared down the stack.

    The operation's first try is the operation itself; every later try, by whichever
    layer makes it, spends one of ``attempts - 1`` retries.
    """

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.retries_left = policy.attempts - 1
        self.retries = 0
        self.deadline = math.inf if policy.deadline_s is None else time.monotonic() + policy.deadline_s

    def remaining_s(self) -> float:
        """Seconds until the deadline (``inf`` without one, never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    @property
    def spent(self) -> bool:
        """No retry may be made: none left, or the deadline has passed."""
        return self.retries_left <= 0 or self.remaining_s() <= 0

    def spend_retry(self) -> None:
        self.retries_left -= 1
        self.retries += 1

    def wait_s(self, retry_number: int) -> float:
        """The backoff before retry ``retry_number`` (1 for the first retry): full jitter,
        capped by ``max_wait_s`` and by the time left."""
        cap = min(self.policy.max_wait_s, self.policy.initial_s * 2 ** (retry_number - 1))
        return min(random.uniform(0, cap), self.remaining_s())


_current: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("agentgym_budget", default=None)


def current_budget() -> Budget | None:
    """The budget of the operation this code runs under, if a caller opened one."""
    return _current.get()


def remaining_s(default: float) -> float:
    """``default`` capped by the time left to the current operation (layers use this for
    their own timeouts, so none of them outlives the operation's deadline)."""
    budget = _current.get()
    return default if budget is None else min(default, budget.remaining_s())


@contextlib.contextmanager
def call_budget(policy: RetryPolicy, *, fresh: bool = False) -> Iterator[Budget]:
    """Open ``policy``'s budget for the code inside, or join the one a caller opened.

    Joining is the point: an inner layer asks with its own default policy, and when it
    runs inside an outer operation it gets the outer operation's budget instead, so the
    attempts of both layers are counted once.

    ``fresh=True`` is for an operation that is a new unit of work even when nested (a
    tool call made by a tool, as a team env's delegate does): it gets its own attempts,
    and a deadline no later than the enclosing one's.
    """
    outer = _current.get()
    if outer is not None and not fresh:
        yield outer
        return
    budget = Budget(policy)
    if outer is not None:
        budget.deadline = min(budget.deadline, outer.deadline)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


class _StopWhenSpent(tenacity.stop.stop_base):
    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self.budget.spent


class _WaitWithinBudget(tenacity.wait.wait_base):
    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        # The budget's count, not this loop's: a layer that joined an outer operation
        # backs off from where the operation is, not from the start.
        return self.budget.wait_s(self.budget.retries + 1)


def retrying(retry_on: type[BaseException] | tuple[type[BaseException], ...], *,
             budget: Budget | None = None) -> tenacity.AsyncRetrying:
    """The project's one retry loop, under ``budget`` (default: the current one).

    Use inside :func:`call_budget`::

        with call_budget(policy):
            async for attempt in retrying(SandboxInfraError):
                with attempt:
                    return await start_sandbox()

    The loop's first try is part of the operation already under way; each retry spends
    one of the budget's retries, whichever layer makes it, so an inner loop that
    joined an outer budget cannot multiply its attempts. Only ``retry_on`` exceptions
    are retried; when the budget is spent the last exception is re-raised as it was.
    """
    budget = budget or _current.get()
    if budget is None:
        raise RuntimeError("retrying() needs a budget: open one with call_budget(policy)")

    def spend(retry_state: tenacity.RetryCallState) -> None:
        if retry_state.attempt_number > 1:
            budget.spend_retry()

    return tenacity.AsyncRetrying(
        stop=_StopWhenSpent(budget),
        wait=_WaitWithinBudget(budget),
        retry=tenacity.retry_if_exception_type(retry_on),
        before=spend,
        reraise=True,
    )


async def call_with_retries(fn: Callable[[], Awaitable[T]],
                            retry_on: type[BaseException] | tuple[type[BaseException], ...],
                            policy: RetryPolicy) -> T:
    """``await fn()`` under ``call_budget(policy)``, retried on ``retry_on`` like
    :func:`retrying`, for hot paths: the first try runs bare, without tenacity's
    per-call machinery (about 13 µs and a few event-loop turns a call, which a client
    making thousands of requests a second feels); only a failed first try enters the
    retry loop, on the same budget.
    """
    with call_budget(policy) as budget:
        try:
            return await fn()
        except retry_on:
            if budget.spent:
                raise
        wait = budget.wait_s(1)
        budget.spend_retry()
        await asyncio.sleep(wait)
        async for attempt in retrying(retry_on, budget=budget):
            with attempt:
                return await fn()
    raise AssertionError("unreachable: retrying re-raises when it gives up")


def polling(retry_on: type[BaseException] | tuple[type[BaseException], ...], *, deadline_s: float,
            interval_s: float = 0.2) -> tenacity.Retrying:
    """The loop for waiting on something that is starting (a server, a restarted actor):
    try every ``interval_s`` while it raises ``retry_on``, for at most ``deadline_s``,
    then re-raise the last exception. Blocking; :func:`apolling` for coroutines.

    Not a retry of a failed operation (no attempt budget, a fixed interval): readiness
    is expected to take a while, and asking often is cheap.
    """
    return tenacity.Retrying(**_polling_args(retry_on, deadline_s, interval_s))


def apolling(retry_on: type[BaseException] | tuple[type[BaseException], ...], *, deadline_s: float,
             interval_s: float = 0.2) -> tenacity.AsyncRetrying:
    """:func:`polling` for coroutines."""
    return tenacity.AsyncRetrying(**_polling_args(retry_on, deadline_s, interval_s))


def _polling_args(retry_on: type[BaseException] | tuple[type[BaseException], ...], deadline_s: float,
                  interval_s: float) -> dict:
    return {
        "stop": tenacity.stop_after_delay(deadline_s),
        "wait": tenacity.wait_fixed(interval_s),
        "retry": tenacity.retry_if_exception_type(retry_on),
        "reraise": True,
    }
