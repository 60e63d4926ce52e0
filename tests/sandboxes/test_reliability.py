"""The one retry loop: budgets are shared down the stack, waits stay inside the deadline."""

import asyncio
import time

import pytest

from sandboxes.reliability import RetryPolicy, call_budget, current_budget, remaining_s, retrying


class Flaky(Exception):
    pass


FAST = RetryPolicy(attempts=3, initial_s=0.001, max_wait_s=0.002)


async def _always_fails(calls: list[str], name: str) -> None:
    calls.append(name)
    raise Flaky(name)


async def _retry(calls: list[str], name: str, policy: RetryPolicy = FAST) -> None:
    with call_budget(policy):
        async for attempt in retrying(Flaky):
            with attempt:
                await _always_fails(calls, name)


def test_a_lone_loop_makes_exactly_the_policys_attempts_and_reraises_the_cause():
    calls: list[str] = []
    with pytest.raises(Flaky):
        asyncio.run(_retry(calls, "x"))
    assert calls == ["x", "x", "x"]


def test_nested_layers_share_one_budget_instead_of_multiplying():
    """An outer loop whose every attempt runs an inner retrying loop: without sharing,
    3 x 3 = 9 tries; with the shared budget the stack makes 3 in all."""
    calls: list[str] = []

    async def outer() -> None:
        with call_budget(FAST):
            async for attempt in retrying(Flaky):
                with attempt:
                    await _retry(calls, "inner")

    with pytest.raises(Flaky):
        asyncio.run(outer())
    assert len(calls) == 3


def test_only_the_named_exceptions_are_retried():
    calls: list[str] = []

    async def go() -> None:
        with call_budget(FAST):
            async for attempt in retrying(KeyError):
                with attempt:
                    await _always_fails(calls, "y")

    with pytest.raises(Flaky):
        asyncio.run(go())
    assert calls == ["y"]


def test_the_deadline_stops_retries_and_caps_every_wait():
    policy = RetryPolicy(attempts=1000, initial_s=0.05, max_wait_s=0.05, deadline_s=0.3)
    calls: list[str] = []
    start = time.monotonic()
    with pytest.raises(Flaky):
        asyncio.run(_retry(calls, "z", policy))
    elapsed = time.monotonic() - start
    assert elapsed < 0.3 + 0.2, elapsed
    assert 2 <= len(calls) < 1000


def test_a_layer_timeout_is_capped_by_the_operation_deadline():
    assert remaining_s(60.0) == 60.0  # no operation: the layer's own default
    with call_budget(RetryPolicy(deadline_s=5.0)):
        assert 4.0 < remaining_s(60.0) <= 5.0
        assert remaining_s(1.0) == 1.0


def test_the_budget_belongs_to_the_operation_and_ends_with_it():
    with call_budget(FAST) as outer:
        with call_budget(RetryPolicy(attempts=10)) as inner:
            assert inner is outer  # the inner layer joined
        assert current_budget() is outer
    assert current_budget() is None


def test_retrying_without_a_budget_is_a_clear_error():
    with pytest.raises(RuntimeError, match="call_budget"):
        retrying(Flaky)


def test_worst_case_adds_attempts_and_maximal_waits_capped_by_the_deadline():
    policy = RetryPolicy(attempts=3, initial_s=0.5, max_wait_s=0.75)
    assert policy.worst_case_s(2.0) == pytest.approx(3 * 2.0 + 0.5 + 0.75)
    assert RetryPolicy(attempts=3, deadline_s=4.0).worst_case_s(2.0) == 4.0


@pytest.mark.parametrize("kwargs", [{"attempts": 0}, {"initial_s": -1}, {"deadline_s": 0}])
def test_bad_policies_are_refused(kwargs):
    with pytest.raises(ValueError, match="Expected"):
        RetryPolicy(**kwargs)


def test_a_fresh_budget_has_its_own_attempts_but_never_outlives_the_enclosing_one():
    with call_budget(RetryPolicy(attempts=2, deadline_s=1.0)) as outer:
        with call_budget(RetryPolicy(attempts=5, deadline_s=60.0), fresh=True) as inner:
            assert inner is not outer and inner.retries_left == 4
            assert inner.remaining_s() <= 1.0
        assert current_budget() is outer


def test_the_docs_example_runs_as_written():
    import pathlib
    import re

    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "reliability.md").read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 1, "the example in docs/reliability.md is gone"
    exec(compile(blocks[0], "docs/reliability.md", "exec"), {})  # noqa: S102 - the docs' own text


def test_polling_waits_for_readiness_within_its_deadline():
    from sandboxes.reliability import polling

    calls = []

    def not_ready_twice():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionRefusedError
        return "up"

    for attempt in polling(ConnectionRefusedError, deadline_s=5.0, interval_s=0.001):
        with attempt:
            assert not_ready_twice() == "up"
    assert len(calls) == 3
    start = time.monotonic()
    with pytest.raises(ConnectionRefusedError):
        for attempt in polling(ConnectionRefusedError, deadline_s=0.2, interval_s=0.01):
            with attempt:
                raise ConnectionRefusedError
    assert time.monotonic() - start < 1.0


def test_call_with_retries_makes_the_same_tries_as_retrying():
    from sandboxes.reliability import call_with_retries

    calls: list[str] = []

    async def fails_until(n: int):
        calls.append("x")
        if len(calls) < n:
            raise Flaky("not yet")
        return "done"

    assert asyncio.run(call_with_retries(lambda: fails_until(3), Flaky, FAST)) == "done" and len(calls) == 3
    calls.clear()
    with pytest.raises(Flaky):
        asyncio.run(call_with_retries(lambda: fails_until(99), Flaky, FAST))
    assert len(calls) == 3

    async def inside_an_operation_of_two_attempts():
        with call_budget(RetryPolicy(attempts=2, initial_s=0.001)) as budget:
            with pytest.raises(Flaky):
                await call_with_retries(lambda: fails_until(99), Flaky, RetryPolicy(attempts=10))
            return budget.retries

    calls.clear()
    assert asyncio.run(inside_an_operation_of_two_attempts()) == 1 and len(calls) == 2
