"""``agentgym envs | run | play``: listing envs, running a policy, playing by hand."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentgym.commands.console import cli_console

__all__ = ["envs_command", "run_command", "play_command"]


def envs_command(json_out: bool = False) -> int:
    """Print the registered envs as a table (whole ids when piped) or as JSON."""
    rows = _env_rows()
    if json_out:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(title="agentgym environments")
    for col in ("id", "tools", "what", "needs"):
        table.add_column(col)
    for row in rows:
        needs = "multi-agent (PettingZoo)" if row["multi_agent"] else row["needs"] or "-"
        table.add_row(row["id"], ", ".join(row["tools"]), row["summary"], needs)
    cli_console().print(table)
    return 0


def _env_rows() -> list[dict[str, Any]]:
    """One dict per registered env (single-agent first), the same for the table and JSON."""
    from agentgym.envs import ENVS

    rows = [{"id": s.env_id, "tools": list(s.tools), "summary": s.summary, "needs": s.needs,
             "multi_agent": False} for s in ENVS]
    try:
        from agentgym.multi_agent import MULTI_AGENT_ENVS  # added by the multi-agent package
    except ImportError:
        return rows
    return rows + [{"id": s.env_id, "tools": list(s.tools), "summary": s.summary, "needs": "",
                    "multi_agent": True} for s in MULTI_AGENT_ENVS]


def run_command(env_id: str, policy_name: str, episodes: int, concurrency: int, seed: int,
                env_kwargs: dict[str, Any], json_out: bool, *, ray_address: str | None = None,
                workers: int = 2) -> int:
    import agentgym  # noqa: F401 - registers the envs
    from agentgym.multi_agent import get_team_policy, is_multi_agent_env, run_team_episodes
    from agentgym.policies import get_policy
    from agentgym.runner import check_counts, run_episodes

    # Fail fast, before the progress bar: each of these is one line from the CLI.
    check_counts(episodes, concurrency)
    if is_multi_agent_env(env_id):
        get_team_policy(policy_name)
    else:
        get_policy(policy_name)
    if ray_address is not None:
        _check_fleet_run(env_id, workers)
    _probe_env(env_id, env_kwargs)
    console = cli_console(stderr=json_out)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("success {task.fields[success]:.1%}"), TimeElapsedColumn(),
                  console=console, transient=json_out) as progress:
        bar = progress.add_task(f"{env_id} ({policy_name})", total=episodes, success=0.0)
        done = {"n": 0, "ok": 0}

        def on_episode(rec: Any) -> None:
            done["n"] += 1
            done["ok"] += int(rec.success)
            progress.update(bar, advance=1, success=done["ok"] / done["n"])

        if ray_address is not None:
            from agentgym.fleet import run_fleet_episodes

            report = run_fleet_episodes(env_id, policy_name, episodes, address=ray_address, workers=workers,
                                        concurrency=concurrency, seed=seed, env_kwargs=env_kwargs,
                                        on_episode=on_episode)
        elif is_multi_agent_env(env_id):
            report = run_team_episodes(env_id, policy_name, episodes, concurrency, seed=seed,
                                       env_kwargs=env_kwargs, on_episode=on_episode)
        else:
            report = run_episodes(env_id, get_policy(policy_name), episodes, concurrency, seed=seed,
                                  env_kwargs=env_kwargs, on_episode=on_episode)
    _close_shared_resources()
    summary = report.summary()
    if json_out:
        print(json.dumps({**summary, "telemetry": report.telemetry.metrics()}, indent=2))
    else:
        console.print(report.telemetry.table(title=f"Tool telemetry — {env_id}"))
        console.print(
            f"[bold]{summary['episodes']}[/] episodes, success [bold]{summary['success_rate']:.1%}[/], "
            f"infra-failed {summary['infra_failed']}, lost {summary['lost']}, "
            f"[bold]{summary['episodes_per_s']:.1f}[/] episodes/s (concurrency {concurrency}"
            f"{f' over {workers} Ray workers' if ray_address is not None else ''}), "
            f"fingerprint {summary['fingerprint']}"
        )
        if "sandbox_backend" in summary:
            weak = summary["isolation"] == "none"
            console.print(f"{'[red bold]' if weak else '[dim]'}sandbox: {summary['sandbox_backend']} backend, "
                          f"isolation {summary['isolation']}{' (UNCONFINED: trusted code only)' if weak else ''}[/]")
        for index, tb in report.lost[:3]:
            console.print(f"[red]lost episode {index}[/]:\n{tb}")
    return 0 if not report.lost else 1


def _check_fleet_run(env_id: str, workers: int) -> None:
    """``--ray`` runs single-agent envs on Ray, which must be installed: one line if not."""
    from agentgym.errors import ConfigError
    from agentgym.fleet import require_ray
    from agentgym.multi_agent import is_multi_agent_env

    if is_multi_agent_env(env_id):
        raise ConfigError(f"Expected a single-agent env with --ray, actual value: {env_id!r} (multi-agent)")
    if workers < 1:
        raise ConfigError(f"Expected --workers >= 1, actual value: {workers}")
    require_ray()


def _probe_env(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """Build one env and close it, so a constructor's ``ConfigError`` (a value out of
    range, a data file that does not load) comes before the progress bar. Envs cache
    their data per process, so the run's own envs do not pay for it again."""
    from agentgym.multi_agent import is_multi_agent_env, make

    if is_multi_agent_env(env_id):
        make(env_id, **env_kwargs).close()
    else:
        import gymnasium as gym

        gym.make(env_id, **env_kwargs).close()


def _close_shared_resources() -> None:
    """Close what envs share (sandbox pools, retriever clients), so nothing outlives the run."""
    from agentgym.resources import shared_resources
    from agentgym.runtime import run_sync

    run_sync(shared_resources().aclose())


def play_command(env_id: str, seed: int | None, env_kwargs: dict[str, Any]) -> int:
    import gymnasium as gym

    import agentgym  # noqa: F401

    console = cli_console()
    env = gym.make(env_id, **env_kwargs)
    obs, info = env.reset(seed=seed)
    console.print(f"[dim]task {info['task_id']} · fingerprint {info['fingerprint']}[/]")
    console.print(obs, markup=False)
    hint = env.unwrapped.parser.format_hint([t["function"]["name"] for t in info["tools"]])
    console.print(f"[dim]Type your action; finish it with an empty line. Ctrl-D quits.\n{hint.splitlines()[-2]}[/]")
    try:
        while True:
            lines: list[str] = []
            while True:
                line = sys.stdin.readline()
                if line == "":
                    raise EOFError
                if line.strip() == "" and lines:
                    break
                lines.append(line.rstrip("\n"))
            obs, reward, terminated, truncated, info = env.step("\n".join(lines))
            console.print(obs, markup=False)
            if terminated or truncated:
                console.print(f"[bold]episode over[/]: reward {reward}, success {info.get('success')}, "
                              f"infra_failed {info.get('infra_failed')}")
                return 0
    except (EOFError, KeyboardInterrupt):
        console.print("\n[dim]bye[/]")
        return 0
    finally:
        env.close()
        _close_shared_resources()
