import json

from typer.testing import CliRunner

from agentgym.cli import app

runner = CliRunner()


def test_envs_lists_every_env_with_tools():
    result = runner.invoke(app, ["envs"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "agentgym/Calculator-v0" in result.output and "calculate, answer" in result.output


def test_run_oracle_reports_success_and_telemetry_as_json():
    result = runner.invoke(app, ["run", "agentgym/Calculator-v0", "--episodes", "40", "--concurrency", "8",
                                 "-k", "difficulty=2", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    assert summary["success_rate"] == 1.0 and summary["episodes"] == 40 and summary["lost"] == 0
    assert summary["telemetry"]["tool/calculate/calls"] == 40


def test_play_reads_actions_from_stdin():
    actions = '<tool_call>{"name": "answer", "arguments": {"answer": 3}}</tool_call>\n\n'
    result = runner.invoke(app, ["play", "agentgym/Calculator-v0", "--seed", "0"], input=actions)
    assert result.exit_code == 0 and "episode over" in result.output


def test_unknown_policy_is_a_clear_error():
    result = runner.invoke(app, ["run", "agentgym/Calculator-v0", "--policy", "telepathy", "--episodes", "1"])
    assert result.exit_code != 0 and "telepathy" in repr(result.exception) + result.output
