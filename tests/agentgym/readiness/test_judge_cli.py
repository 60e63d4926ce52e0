"""``agentgym audit-reward`` on a judged env, against the gullible judge and a real HTTP
judge (the scripted chat server standing in for ``vllm serve``)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentgym.cli import app
from agentgym.envs.analysis_report import report_rubric
from agentgym.evaluation.fake_server import ChatServer, Script

ENV_ID = "agentgym/AnalysisReport-v0"


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch):
    monkeypatch.setenv("AGENTGYM_SANDBOX", "process")


def test_a_served_judge_that_cannot_keep_to_the_verdict_schema_fails_the_audit():
    """A fixed verdict for the report rubric cannot answer the calibration items' rubrics."""
    verdict = {"criteria": {i: {"met": True, "evidence": ""} for i in report_rubric(None).ids}}
    server = ChatServer(Script(reply={"role": "assistant", "content": json.dumps(verdict)})).start()
    try:
        result = CliRunner().invoke(app, ["audit-reward", ENV_ID, "--tasks", "1", "--judge-url", server.url,
                                          "--judge-model", "lazy"])
    finally:
        server.stop()
    assert result.exit_code == 1, result.output
    assert "gullible (scripted)" in result.output and "calibration passed" in result.output  # the first judge
    assert "calibration unavailable" in result.output and "VerdictParseError" in result.output
    assert "FAIL" in result.output
    body = server.script.bodies[0]
    assert body["model"] == "lazy" and body["response_format"]["type"] == "json_schema"


def test_a_dead_judge_server_fails_the_audit_as_unavailable():
    server = ChatServer(Script(fail_with=503)).start()
    try:
        result = CliRunner().invoke(app, ["audit-reward", ENV_ID, "--tasks", "1", "--judge-url", server.url,
                                          "--judge-model", "gone"])
    finally:
        server.stop()
    assert result.exit_code == 1 and "calibration unavailable" in result.output and "HTTP 503" in result.output


def test_a_judge_refused_at_calibration_fails_the_env_audit_without_playing():
    from agentgym.judges import Judge
    from agentgym.judges.testing import LazyJudge
    from agentgym.readiness import audit_judged_env

    audit = audit_judged_env(ENV_ID, tasks=1, env_kwargs={"judge": Judge(LazyJudge())})
    assert audit.pipeline.calibration == "refused" and not audit.passed and audit.episodes == 0
    assert "JudgeRefused" in audit.pipeline.truth_failures[0]
