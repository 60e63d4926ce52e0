import json

import pytest
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


def _bad_file(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("args, fragment", [
    (["run", "agentgym/Calculatr-v0", "--episodes", "1"], "did you mean 'agentgym/Calculator-v0'?"),
    (["run", "agentgym/Calculator-v0", "--episodes", "-1"], "Expected episodes >= 1 and concurrency >= 1"),
    (["run", "agentgym/Calculator-v0", "--concurrency", "0"], "actual values: 100, 0"),
    (["run", "agentgym/Calculator-v0", "--policy", "smart"], "Expected a policy in ['no_code', 'no_tool', 'one_search', 'oracle', 'random', 'regex_agent'], actual value: 'smart'"),
    (["run", "agentgym/SearchTeam-v1", "--policy", "smart"], "team policy"),
    (["run", "agentgym/DataAnalysis-v1", "--episodes", "1", "-k", "backend=podman"],
     "Expected kwarg backend of agentgym/DataAnalysis-v1 to be one of ['auto', 'docker', 'process', 'unsafe-process']"),
    (["run", "agentgym/Calculator-v0", "-k", "difficuly=2"], "Unknown kwarg 'difficuly' for agentgym/Calculator-v0; did you mean 'difficulty'?"),
    (["run", "agentgym/Calculator-v0", "-k", "difficulty=two"], "Expected kwarg difficulty of agentgym/Calculator-v0 to be int"),
    (["run", "agentgym/Calculator-v0", "-k", "difficulty=99"], "Expected difficulty 1, 2 or 3, actual value: 99"),
    (["run", "agentgym/Calculator-v0", "-k", "difficulty"], "Expected --kwarg key=value"),
    (["play", "agentgym/SearchTeam-v1"], "is a multi-agent env"),
    (["stress", "agentgym/Calculatr-v0"], "did you mean 'agentgym/Calculator-v0'?"),
    (["stress", "agentgym/Calculator-v0", "--episodes", "0"], "Expected episodes >= 1"),
    (["audit-reward", "agentgym/Calcultor-v0"], "did you mean 'agentgym/Calculator-v0'?"),
    (["serve-retriever", "--read-timeout", "0"], "Expected every retriever service limit > 0"),
])
def test_user_errors_are_one_line_on_stderr_with_exit_code_2(args, fragment):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert fragment in result.stderr
    assert "infra-failed" not in result.output  # a config mistake is never an infrastructure failure


def test_bad_data_files_are_one_line_naming_file_and_line(tmp_path):
    corpus = _bad_file(tmp_path, "corpus.jsonl", '{"id": "a", "contents": "x"}\n{"id": 5, "contents": "y"}\n')
    result = runner.invoke(app, ["serve-retriever", "--corpus", corpus, "--port", "0"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().endswith(f'{corpus}:2: expected "id" to be a non-empty string, actual value: 5 (int)')
    good = _bad_file(tmp_path, "good.jsonl", '{"id": "a", "contents": "x"}\n')
    qa = _bad_file(tmp_path, "qa.jsonl", '{"question": null, "golden_answers": ["x"]}\n')
    result = runner.invoke(app, ["run", "agentgym/Search-v1", "--episodes", "1", "-k", f"corpus_path={good}",
                                 "-k", f"qa_path={qa}"])
    assert result.exit_code == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert f'{qa}:1: expected "question" to be a non-empty string, actual value: null' in result.stderr
