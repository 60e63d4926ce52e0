"""``agentgym serve-env`` / ``serve-mcp``: a user's mistake is one line and exit code 2,
before anything is served; a missing extra says what to install."""

import sys

import pytest
from typer.testing import CliRunner

from agentgym.cli import app

runner = CliRunner()


@pytest.mark.parametrize("args, expect", [
    (["serve-env", "agentgym/Nope-v0"], "Nope-v0"),
    (["serve-env", "agentgym/Calculator-v0", "-k", "difficulty=9"], "difficulty"),
    (["serve-env", "agentgym/SearchTeam-v1"], "SearchTeam-v1"),  # a team env has no single-agent protocol
    (["serve-mcp", "--tools", "python,shell"], "python"),
    (["serve-mcp", "--transport", "carrier-pigeon"], "transport"),
])
def test_a_user_error_is_one_line_and_exit_2(args, expect):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert line.startswith("error:") and "\n" not in line and expect in line


@pytest.mark.parametrize("args, module, extra", [
    (["serve-env", "agentgym/Calculator-v0"], "openenv.core.env_server.http_server", "openenv"),
    (["serve-mcp", "--tools", "python"], "mcp", "mcp"),
])
def test_a_missing_extra_names_what_to_install(monkeypatch, args, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"pip install 'agentgym[{extra}]'" in result.output
