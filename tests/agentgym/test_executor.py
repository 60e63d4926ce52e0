import asyncio
import time

import pytest

from agentgym.errors import AgentError, InfraError
from agentgym.executor import ToolExecutor
from agentgym.reliability import RetryPolicy
from agentgym.parsing import ParsedCall
from agentgym.tools import Tool

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": False}
FAST_RETRY = RetryPolicy(initial_s=0.001, max_wait_s=0.005)


def tool(name, fn, **kw):
    return Tool(name, f"{name} tool", SCHEMA, fn, **kw)


async def test_ok_invalid_args_unknown_and_agent_error():
    async def double(x):
        if x < 0:
            raise AgentError("x must be >= 0")
        return str(2 * x)

    ex = ToolExecutor([tool("double", double)], retry=FAST_RETRY)
    res = await ex.execute([ParsedCall("double", {"x": 3}), ParsedCall("double", {"x": "3"}),
                            ParsedCall("nope", {}), ParsedCall("double", {"x": -1}),
                            ParsedCall(None, status="parse_error", error="bad")])
    assert [r.status for r in res] == ["ok", "invalid_args", "agent_error", "agent_error", "parse_error"]
    assert res[0].output == "6"
    assert "integer" in res[1].output and "Expected parameters" in res[1].output
    assert "no tool named 'nope'" in res[2].output and "double" in res[2].output
    m = ex.telemetry.metrics()
    assert m["tool/double/calls"] == 3 and m["tool/double/invalid_args_rate"] == pytest.approx(1 / 3)


async def test_infra_errors_are_retried_then_succeed():
    attempts = []

    async def flaky(x):
        attempts.append(x)
        if len(attempts) < 3:
            raise InfraError("daemon hiccup")
        return "fine"

    (r,) = await ToolExecutor([tool("flaky", flaky, max_retries=3)], retry=FAST_RETRY).execute([ParsedCall("flaky", {"x": 1})])
    assert (r.status, r.retries, len(attempts)) == ("ok", 2, 3)


async def test_infra_exhausted_and_unexpected_exceptions_are_infra_errors():
    async def down(x):
        raise InfraError("service down")

    async def buggy(x):
        raise KeyError("bug in the tool")

    ex = ToolExecutor([tool("down", down, max_retries=2), tool("buggy", buggy, max_retries=0)], retry=FAST_RETRY)
    r1, r2 = await ex.execute([ParsedCall("down", {"x": 1}), ParsedCall("buggy", {"x": 1})])
    assert (r1.status, r1.retries) == ("infra_error", 2) and "not your fault" in r1.output
    assert r2.status == "infra_error" and "KeyError" in r2.output


async def test_agent_errors_and_timeouts_are_never_retried():
    calls = []

    async def slow(x):
        calls.append(x)
        await asyncio.sleep(10)

    (r,) = await ToolExecutor([tool("slow", slow, timeout_s=0.05)], retry=FAST_RETRY).execute([ParsedCall("slow", {"x": 1})])
    assert r.status == "timeout" and r.retries == 0 and calls == [1]


async def test_calls_overlap_and_keep_order():
    async def nap(x):
        await asyncio.sleep(x / 100)
        return str(x)

    start = time.perf_counter()
    res = await ToolExecutor([tool("nap", nap)]).execute([ParsedCall("nap", {"x": x}) for x in (20, 5, 10, 15)])
    assert [r.output for r in res] == ["20", "5", "10", "15"]
    assert time.perf_counter() - start < 0.45  # sequential would be 0.5 s


async def test_concurrency_limit_holds_across_executors():
    in_flight, peak = 0, 0

    async def guarded(x):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return "ok"

    t = tool("guarded", guarded, max_concurrency=3)
    executors = [ToolExecutor([t]) for _ in range(5)]
    await asyncio.gather(*(ex.execute([ParsedCall("guarded", {"x": i}) for i in range(4)]) for ex in executors))
    assert peak == 3


async def test_long_output_is_cut_head_and_tail_with_marker():
    async def big(x):
        return "HEAD" + "m" * 10_000 + "TAIL"

    (r,) = await ToolExecutor([tool("big", big, max_output_chars=200)]).execute([ParsedCall("big", {"x": 1})])
    assert r.truncated and r.original_chars == 10_008 and len(r.output) <= 200
    assert r.output.startswith("HEAD") and r.output.endswith("TAIL") and "truncated" in r.output


async def test_a_deadline_the_tool_enforces_itself_is_a_timeout():
    from agentgym.errors import ToolTimeout

    async def sandboxed(x):
        raise ToolTimeout("your code ran past 30 s and was interrupted")

    (r,) = await ToolExecutor([tool("py", sandboxed)]).execute([ParsedCall("py", {"x": 1})])
    assert (r.status, r.retries) == ("timeout", 0) and "interrupted" in r.output
