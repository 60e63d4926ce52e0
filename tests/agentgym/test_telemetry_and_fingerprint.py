import pytest

from agentgym.fingerprint import fingerprint_diff, make_fingerprint
from agentgym.telemetry import Telemetry
from agentgym.truncation import truncate_head_tail


def test_telemetry_rates_percentiles_and_usage():
    t = Telemetry()
    for ms in range(1, 101):
        t.record_call("search", "ok" if ms <= 90 else "infra_error", float(ms), retries=1 if ms > 90 else 0, truncated=ms == 1)
    t.record_episode(["search"], ["search", "open"])
    t.record_episode([], ["search", "open"])
    m = t.metrics()
    assert m["tool/search/calls"] == 100 and m["tool/search/ok_rate"] == pytest.approx(0.9)
    assert m["tool/search/infra_error_rate"] == pytest.approx(0.1) and m["tool/search/agent_error_rate"] == 0
    assert m["tool/search/p50_ms"] == pytest.approx(50.5) and m["tool/search/retries"] == 10
    assert m["tool/search/usage_frac"] == 0.5 and m["tool/open/usage_frac"] == 0.0


def test_telemetry_merges_across_processes_via_dicts():
    a, b = Telemetry(), Telemetry()
    a.record_call("x", "ok", 1.0, 0, False)
    b.record_call("x", "timeout", 3.0, 0, True)
    b.record_episode(["x"])
    merged = Telemetry.merged([a, Telemetry.from_dict(b.to_dict())])
    m = merged.metrics()
    assert m["tool/x/calls"] == 2 and m["tool/x/timeout_rate"] == 0.5 and m["tool/x/truncated"] == 1
    assert merged.episodes == 1
    assert merged.table().row_count == 1


def test_fingerprint_is_order_independent_and_diff_is_dotted():
    a = make_fingerprint({"tools": {"search": {"k": 5}}, "max_turns": 4})
    b = make_fingerprint({"max_turns": 4, "tools": {"search": {"k": 5}}})
    c = make_fingerprint({"max_turns": 4, "tools": {"search": {"k": 10}, "open": {}}})
    assert a.digest == b.digest != c.digest
    assert fingerprint_diff(a, c) == {"tools.search.k": (5, 10), "tools.open": (None, {})}


@pytest.mark.parametrize("n, limit", [(0, 100), (100, 100), (101, 100), (10**6, 64), (5000, 999)])
def test_truncation_never_exceeds_limit_and_reports_removed(n, limit):
    text = "".join(chr(65 + i % 26) for i in range(n))
    r = truncate_head_tail(text, limit)
    assert len(r.text) <= max(limit, len(text) if n <= limit else limit)
    assert r.truncated == (n > limit) and r.original_chars == n
    if r.truncated:
        assert f"of {n} characters" in r.text and r.removed_chars == n - (len(r.text) - len(r.text.split("\n")[1]) - 2)
