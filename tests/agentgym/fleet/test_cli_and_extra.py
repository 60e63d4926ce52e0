"""``agentgym run --ray``: the same report as the in-process runner, and one-line errors
when Ray is missing or the env cannot run on a fleet."""

from __future__ import annotations

import json
import sys

from typer.testing import CliRunner

from agentgym.cli import app
from agentgym.fleet import RayMissingError, require_ray

runner = CliRunner()


def _summary(args: list[str]) -> dict:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{"):])


def test_run_on_ray_prints_the_in_process_report(ray_installed):
    args = ["run", "agentgym/Search-v1", "--episodes", "60", "--concurrency", "8", "--seed", "3", "--json"]
    local = _summary(args)
    remote = _summary(args + ["--ray", "local", "--workers", "2"])
    assert sorted(remote) == sorted(local)
    assert sorted(remote["telemetry"]) == sorted(local["telemetry"])
    for key in ("episodes", "success_rate", "infra_failed", "lost", "fingerprint", "mean_reward"):
        assert remote[key] == local[key], key
    assert remote["success_rate"] == 1.0 and remote["lost"] == 0 and remote["infra_failed"] == 0
    assert remote["telemetry"]["tool/search/calls"] == local["telemetry"]["tool/search/calls"] > 0

    import ray

    assert not ray.is_initialized()  # the local instance it started is gone


def test_missing_ray_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` does where it is not installed
    try:
        require_ray()
    except RayMissingError as e:
        assert "pip install 'agentgym[ray]'" in str(e)
    else:
        raise AssertionError("require_ray() returned without Ray")
    result = runner.invoke(app, ["run", "agentgym/Search-v1", "--episodes", "1", "--ray", "auto"])
    assert result.exit_code == 2 and "agentgym[ray]" in result.stderr and result.stderr.count("\n") == 1


def test_multi_agent_envs_are_refused_on_ray_before_anything_runs():
    result = runner.invoke(app, ["run", "agentgym/SearchTeam-v1", "--episodes", "1", "--ray", "local"])
    assert result.exit_code == 2 and "single-agent" in result.stderr
