"""``agentgym eval`` against a real HTTP chat server on a local port (agentgym.evaluation.fake_server):
both tool modes, a server killed mid-run, a resume after its restart, rate limiting,
5xx/malformed answers (infrastructure) and 400s (the agent's)."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from agentgym.cli import app
from agentgym.errors import ConfigError
from agentgym.evaluation import ChatAgent, ChatClient, ChatSettings, EvalPlan, compare_runs, read_run, run_eval, summarize
from agentgym.reliability import RetryPolicy

from agentgym.evaluation.fake_server import ChatServer, Script

FAST_RETRY = RetryPolicy(attempts=3, initial_s=0.01, max_wait_s=0.02)


@pytest.fixture
def server():
    started: list[ChatServer] = []

    def start(script: Script | None = None, port: int = 0) -> ChatServer:
        srv = ChatServer(script, port).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


def _agent(url: str, mode: str = "native", retry: RetryPolicy = FAST_RETRY) -> ChatAgent:
    return ChatAgent(ChatClient(ChatSettings(url, "tiny", tool_mode=mode, timeout_s=5), retry=retry))


def _episode_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if json.loads(line)["kind"] == "episode"]


@pytest.mark.parametrize("mode", ["native", "text"])
def test_eval_cli_writes_records_and_summary_in_both_tool_modes(server, tmp_path, mode):
    srv = server()
    out = tmp_path / "run.jsonl"
    result = CliRunner().invoke(app, ["eval", "agentgym/Calculator-v0", "--base-url", srv.url, "--model", "tiny",
                                      "--tool-mode", mode, "--episodes", "12", "--concurrency", "4",
                                      "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    records = _episode_lines(out)
    assert sorted(r["episode"] for r in records) == list(range(12))
    assert summary["episodes"] == 12 and summary["infra_failed"] == 0 and summary["agent"]["tool_mode"] == mode
    assert summary["model_server"] == {"retries": 0, "rate_limited": 0, "rate_limit_held_s": 0.0}
    assert summary["success"] > 0.3  # the scripted model solves the +/- questions through the tools
    assert summary["tools"]["calculate"]["usage_frac"] == 1.0
    first = records[0]
    assert [m["role"] for m in first["messages"]][:3] == ["system", "user", "assistant"]
    assert {c["status"] for r in records for c in r["tool_calls"]} == {"ok"}
    assert first["tokens"]["prompt"] > 0 and first["tokens"]["completion"] > 0 and first["latency_s"] > 0
    header = json.loads(out.read_text().splitlines()[0])
    assert header["agent"]["model"] == "tiny" and header["sampling"]["temperature"] == 0.0
    assert json.loads((tmp_path / "run.jsonl.summary.json").read_text())["fingerprint"] == header["fingerprint"]
    body = srv.script.bodies[0]
    assert body["tool_choice"] == ("auto" if mode == "native" else "none") and body["tools"]
    if mode == "native":  # tool results go back answering their call ids
        later = next(b for b in srv.script.bodies if len(b["messages"]) > 3)
        assert later["messages"][-1]["role"] == "tool" and later["messages"][-1]["tool_call_id"]


def test_killed_server_makes_episodes_infra_failed_and_resume_finishes_each_once(server, tmp_path):
    srv = server(Script(die_after=9, delay_s=0.01))
    out = tmp_path / "run.jsonl"
    plan = EvalPlan("agentgym/Calculator-v0", tasks=12, concurrency=3)
    first = run_eval(plan, _agent(srv.url), out=out)
    failed = [r for r in first.records if r["infra_failed"]]
    scored = [r for r in first.records if not r["infra_failed"]]
    assert failed and scored and len(first.records) == 12
    assert {r["infra_source"] for r in failed} == {"model"} and all("failed after 3 tries" in r["error"] for r in failed)
    assert all(r["end"] == "answered" for r in scored)  # no episode was ended (scored 0) by the dead server
    summary = summarize(first.header, first.records)
    assert summary["infra_failed"] == len(failed) and summary["scored"] == len(scored)
    assert summary["n"] == len(scored)  # the success rate's denominator leaves infra failures out

    restarted = server(port=srv.port)
    second = run_eval(plan, _agent(restarted.url), out=out, resume=True)
    lines = _episode_lines(out)
    assert sorted(r["episode"] for r in lines) == list(range(12))  # every episode exactly once
    assert not any(r["infra_failed"] for r in lines)
    assert second.played == len(failed)
    assert restarted.script.served == 2 * len(failed)  # two turns each: finished episodes were not replayed
    finished_before = {r["episode"]: r["messages"] for r in scored}
    assert all(r["messages"] == finished_before[r["episode"]] for r in lines if r["episode"] in finished_before)


def test_cli_resume_continues_the_run_file(server, tmp_path):
    srv = server(Script(die_after=4))
    out = tmp_path / "run.jsonl"
    args = ["eval", "agentgym/Calculator-v0", "--base-url", srv.url, "--model", "tiny", "--episodes", "6",
            "--concurrency", "1", "--timeout", "2", "--out", str(out)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "infra-failed 4" in first.output  # episodes 2..5 (episodes 0, 1 took the four answers)
    restarted = server(port=srv.port)
    second = CliRunner().invoke(app, args + ["--resume"])
    assert second.exit_code == 0, second.output
    assert "infra-failed 0" in second.output and restarted.script.served == 8
    again = CliRunner().invoke(app, args)  # without --resume an existing run file is refused
    assert again.exit_code == 2 and "--resume" in again.stderr


def test_rate_limited_server_slows_the_run_and_fails_no_episode(server):
    srv = server(Script(rate_limit_first=8, retry_after="1"))
    agent = _agent(srv.url)
    start = time.monotonic()
    result = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=8, concurrency=8), agent)
    elapsed = time.monotonic() - start
    assert not any(r["infra_failed"] for r in result.records) and len(result.records) == 8
    assert all(r["end"] == "answered" for r in result.records)
    assert elapsed >= 1.0  # everyone waited for the Retry-After
    assert agent.client.gate.limited == 8 and agent.client.retries == 0  # no infra retry was spent on 429s


@pytest.mark.parametrize("fail_with", [500, 503, "malformed"])
def test_server_failures_are_retried_then_infra_failed(server, fail_with):
    srv = server(Script(fail_with=fail_with))
    result = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=2, concurrency=2), _agent(srv.url))
    assert all(r["infra_failed"] and r["infra_source"] == "model" for r in result.records)
    assert srv.script.requests == 2 * FAST_RETRY.attempts  # each episode's first call, retried to its budget
    summary = summarize(result.header, result.records)
    assert summary["scored"] == 0 and summary["infra_failed"] == 2


def test_connection_refused_is_infrastructure(tmp_path):
    srv = ChatServer().start()
    url = srv.url
    srv.stop()  # nothing listens there now
    result = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=2), _agent(url))
    assert all(r["infra_failed"] and "ConnectError" in r["error"] for r in result.records)


def test_a_rejected_request_is_the_agents_outcome(server):
    srv = server(Script(fail_with=400))
    result = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=2), _agent(srv.url))
    assert all(not r["infra_failed"] and r["end"] == "model_rejected" and r["reward"] == 0.0 for r in result.records)
    assert srv.script.requests == 2  # not retried


def test_a_refused_key_stops_the_run(server):
    srv = server(Script(fail_with=401))
    with pytest.raises(ConfigError, match="HTTP 401"):
        run_eval(EvalPlan("agentgym/Calculator-v0", tasks=4), _agent(srv.url))


def test_team_env_every_seat_is_played_by_the_model(server, tmp_path):
    srv = server()
    out = tmp_path / "team.jsonl"
    result = run_eval(EvalPlan("agentgym/SearchTeam-v1", tasks=2, concurrency=2), _agent(srv.url), out=out)
    seats = {seat for r in result.records for seat in r["seats"]}
    assert len(seats) >= 2
    served_seats = {b["messages"][0]["content"] for b in srv.script.bodies}  # one system prompt per role
    assert len(served_seats) >= 2
    assert all(not r["infra_failed"] for r in result.records) and read_run(out).header.env == "agentgym/SearchTeam-v1"


def test_native_calls_answered_in_one_user_turn_get_their_call_ids():
    from agentgym.evaluation.model_agent import request_messages

    history = [{"role": "user", "content": "q"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "a", "type": "function", "function": {"name": "search", "arguments": "{}"}},
                   {"id": "b", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
               {"role": "user", "content": "<information>x</information>"}]
    sent = request_messages(history, "native")
    assert [(m["role"], m.get("tool_call_id")) for m in sent[2:]] == [("tool", "a"), ("tool", "b")]
    assert sent[2]["content"] == "<information>x</information>"


def test_rate_limiting_is_in_the_cli_summary(server, tmp_path):
    srv = server(Script(rate_limit_first=2, retry_after="0.2"))
    result = CliRunner().invoke(app, ["eval", "agentgym/Calculator-v0", "--base-url", srv.url, "--model", "tiny",
                                      "--episodes", "2", "--out", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 0, result.output
    assert "rate limited 2 times" in result.output and "infra-failed 0" in result.output


@pytest.mark.parametrize("reply, status", [
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "calculate", "arguments": "{not json"}}]}, "parse_error"),
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "telepathy", "arguments": "{}"}}]}, None),
    ({"role": "assistant", "content": "I think it is 42."}, None),
])
def test_a_wrong_response_is_the_agents(server, reply, status):
    srv = server(Script(reply=reply))
    result = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=2), _agent(srv.url))
    for r in result.records:
        assert not r["infra_failed"] and r["reward"] == 0.0 and r["end"] == "truncated"  # the turn limit
        assert r["turns"] == 4 and len(srv.script.bodies) == 8  # every turn asked the model, none retried
        if status is not None:
            assert {c["status"] for c in r["tool_calls"]} == {status}


def test_a_model_name_that_is_not_a_directory_is_refused_without_a_download():
    result = CliRunner().invoke(app, ["eval", "agentgym/Calculator-v0", "--model", "Qwen/Qwen3-8B", "--episodes", "1"])
    assert result.exit_code == 2 and "--base-url" in result.stderr


def test_an_eval_whose_every_episode_the_infrastructure_failed_scores_nothing_and_exits_3(server, tmp_path):
    """It once printed "success 0.0%" and exited 0: an outage read as an agent that failed
    everything. Now the rate is null and the exit code is 3 (as ``agentgym train``'s outage
    stop); a comparison with no scored pair has no rates either."""
    srv = server(Script(fail_with=503))
    out = tmp_path / "down.jsonl"
    result = CliRunner().invoke(app, ["eval", "agentgym/Calculator-v0", "--base-url", srv.url, "--model", "tiny",
                                      "--episodes", "2", "--concurrency", "2", "--out", str(out), "--json"])
    assert result.exit_code == 3, result.output
    summary = json.loads(result.stdout)
    assert (summary["scored"], summary["infra_failed"], summary["success"]) == (0, 2, None)
    assert "no episode was scored" in result.stderr
    printed = CliRunner().invoke(app, ["eval", "summary", str(out)])
    assert printed.exit_code == 0 and "none (no episode scored)" in printed.stdout
    report = compare_runs(out, out)
    assert report["overall"]["n"] == 0 and report["overall"]["diff"] is None
    shown = CliRunner().invoke(app, ["eval", "compare", str(out), str(out)])
    assert shown.exit_code == 0 and "n/a" in shown.stdout


def test_every_request_of_a_run_carries_a_seed_of_its_own(server):
    """Each (episode, turn) has its own sampling seed. A seed of ``episode seed + turn``
    gave episode i's second turn the seed of episode i + 1's first, so their draws were
    correlated (the same noise on two prompts)."""
    srv = server()
    agent = ChatAgent(ChatClient(ChatSettings(srv.url, "tiny", temperature=0.7, timeout_s=5), retry=FAST_RETRY))
    result = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=12, concurrency=4), agent)
    assert len(result.records) == 12
    seeds = [body["seed"] for body in srv.script.bodies]
    assert len(seeds) > 12  # several turns per episode
    assert len(set(seeds)) == len(seeds), sorted(seeds)
