"""CLI output that scripts can read, and verbs that plugins add.

* Tables print whole when stdout is not a terminal (``agentgym envs | cat`` keeps ids).
* ``agentgym envs --json``.
* ``train`` and ``plot`` come from baselines through the ``agentgym.commands`` entry points.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from rich.table import Table
from typer.testing import CliRunner

from agentgym import cli
from agentgym.commands.console import PIPE_WIDTH, cli_console
from agentgym.envs import ENVS
from agentgym.multi_agent import MULTI_AGENT_ENVS

runner = CliRunner()
ALL_IDS = [s.env_id for s in ENVS] + [s.env_id for s in MULTI_AGENT_ENVS]


def test_envs_into_a_pipe_prints_every_id_whole():
    out = subprocess.run([sys.executable, "-c", "from agentgym.cli import app; app()", "envs"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    assert "…" not in out.stdout
    lines = out.stdout.splitlines()
    # The ids a fresh process registers (tests in this process may have registered more).
    listed = subprocess.run([sys.executable, "-c", "from agentgym.cli import app; app()", "envs", "--json"],
                            capture_output=True, text=True, timeout=120)
    ids = [row["id"] for row in json.loads(listed.stdout)]
    assert "agentgym/Calculator-v0" in ids
    for env_id in ids:
        assert any(f" {env_id} " in line for line in lines), env_id


def test_envs_json_lists_every_registered_env():
    result = runner.invoke(cli.app, ["envs", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == ALL_IDS
    calculator = rows[0]
    assert calculator["tools"] == ["calculate", "answer"] and calculator["multi_agent"] is False
    assert all(r["multi_agent"] for r in rows if r["id"] in {s.env_id for s in MULTI_AGENT_ENVS})


def test_any_table_printed_off_a_terminal_keeps_long_values(capsys):
    console = cli_console()  # stdout is captured here: not a terminal
    assert console.width == PIPE_WIDTH
    table = Table("key", "value")
    long_value = "x" * 500 + "-end"
    table.add_row("agentgym/SomeVeryLongEnvironmentName-v12", long_value)
    console.print(table)
    out = capsys.readouterr().out
    assert "agentgym/SomeVeryLongEnvironmentName-v12" in out and long_value in out


@pytest.mark.parametrize("verb, option", [("train", "--config"), ("plot", "RUN_DIR")])
def test_baselines_verbs_are_entry_point_plugins(verb, option):
    assert verb in cli._plugins() and cli._plugins()[verb].value.startswith("baselines.")
    result = runner.invoke(cli.app, [verb, "--help"])
    assert result.exit_code == 0, result.output
    assert option.lower() in result.output.lower()


class _EntryPoint:
    def __init__(self, name: str, load) -> None:
        self.name, self.value, self.load = name, f"fake:{name}", load


def _raise_import_error():
    raise ImportError("No module named 'fancy_plugin'")


@pytest.mark.parametrize("load, says", [(_raise_import_error, "No module named 'fancy_plugin'"),
                                        (lambda: print, "typer.Typer with one command")])
def test_a_broken_plugin_is_one_line_and_exit_2(monkeypatch, load, says):
    monkeypatch.setattr(cli, "_plugins", lambda: {"fancy": _EntryPoint("fancy", load)})
    result = runner.invoke(cli.app, ["fancy"])
    assert result.exit_code == 2 and says in result.output
    assert runner.invoke(cli.app, ["envs", "--json"]).exit_code == 0  # the other verbs still work


def test_builtin_verbs_win_over_plugins_of_the_same_name(monkeypatch):
    monkeypatch.setattr(cli, "_plugins", lambda: {"envs": _EntryPoint("envs", _raise_import_error)})
    assert runner.invoke(cli.app, ["envs", "--json"]).exit_code == 0
