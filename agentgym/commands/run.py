"""``agentgym envs | run | play``: listing envs, running a policy, playing by hand."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.table import Table

from agentgym.commands.console import cli_console

__all__ = ["envs_command", "run_command", "play_command", "close_shared_resources", "fleet_record"]


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
                workers: int = 2, out: str | None = None, resume: bool = False) -> int:
    """``agentgym run``: a scripted policy through the evaluation runner (the records and
    summary of ``agentgym eval``), or on a Ray fleet with ``--ray``."""
    import agentgym  # noqa: F401 - registers the envs
    from agentgym.evaluation import EvalPlan, PolicyAgent, TeamPolicyAgent
    from agentgym.multi_agent import get_team_policy, is_multi_agent_env
    from agentgym.policies import get_policy
    from agentgym.runner import check_counts

    # Fail fast, before the progress bar: each of these is one line from the CLI.
    check_counts(episodes, concurrency)
    team = is_multi_agent_env(env_id)
    agent = TeamPolicyAgent(policy_name, get_team_policy(policy_name)) if team else \
        PolicyAgent(policy_name, get_policy(policy_name))
    if ray_address is not None:
        _check_fleet_run(env_id, workers)
    fields = _probe_env(env_id, env_kwargs)
    label = f"{env_id} ({policy_name})"
    if ray_address is not None:
        result, summary = _fleet_run(env_id, agent, episodes, concurrency, seed, env_kwargs, fields, ray_address,
                                     workers, out, label)
    else:
        from agentgym.commands.eval import execute_run

        result, summary = execute_run(EvalPlan(env_id, episodes, 1, concurrency, seed, env_kwargs), agent,
                                      out=out, resume=resume, label=label)
    close_shared_resources()
    _print_run(summary, result, json_out, concurrency, workers if ray_address is not None else None)
    from agentgym.commands.eval import exit_code

    return exit_code(summary, result)


def _print_run(summary: dict[str, Any], result: Any, json_out: bool, concurrency: int, workers: int | None) -> None:
    through = summary.get("throughput", {})
    legacy = {"success_rate": summary["success"], "elapsed_s": through.get("elapsed_s", 0.0),
              "episodes_per_s": through.get("episodes_per_s", 0.0)}
    if json_out:
        print(json.dumps({**summary, **legacy, "telemetry": result.telemetry.metrics()}, indent=2))
        return
    from agentgym.commands.eval import print_summary

    console = cli_console()
    console.print(result.telemetry.table(title=f"Tool telemetry — {summary['env']}"))
    print_summary(summary, console)
    console.print(f"[bold]{legacy['episodes_per_s']:.1f}[/] episodes/s (concurrency {concurrency}"
                  f"{f' over {workers} Ray workers' if workers is not None else ''})")
    if "sandbox_backend" in summary:
        weak = summary["isolation"] == "none"
        console.print(f"{'[red bold]' if weak else '[dim]'}sandbox: {summary['sandbox_backend']} backend, "
                      f"isolation {summary['isolation']}{' (UNCONFINED: trusted code only)' if weak else ''}[/]")
    for index, tb in result.lost[:3]:
        console.print(f"[red]lost episode {index}[/]:\n{tb}")


def _fleet_run(env_id: str, agent: Any, episodes: int, concurrency: int, seed: int, env_kwargs: dict[str, Any],
               fields: dict[str, Any], address: str, workers: int, out: str | None,
               label: str) -> tuple[Any, dict[str, Any]]:
    """``--ray``: whole episodes on Ray env workers. Their records carry the episode's
    outcome and ``info`` (the workers keep no transcript), in the same format and summary."""
    from agentgym.commands.eval import Progress
    from agentgym.evaluation.records import RecordWriter, RunHeader
    from agentgym.evaluation.run import EvalResult
    from agentgym.evaluation.summary import summarize
    from agentgym.fingerprint import make_fingerprint
    from agentgym.fleet import run_fleet_episodes

    header = RunHeader(env_id, dict(env_kwargs), str(make_fingerprint(fields)), fields, agent.describe(), {},
                       seed, episodes)
    writer = RecordWriter.create(out, header) if out is not None else None
    records: list[dict[str, Any]] = []
    with Progress(label, episodes) as progress:
        def on_episode(rec: Any) -> None:
            record = {**fleet_record(rec, seed), "agent": header.agent, "sampling": {}}
            records.append(record)
            if writer is not None:
                writer.write(record)
            progress(record)

        report = run_fleet_episodes(env_id, agent.name, episodes, address=address, workers=workers,
                                    concurrency=concurrency, seed=seed, env_kwargs=env_kwargs, on_episode=on_episode)
    if writer is not None:
        writer.close()
    records.sort(key=lambda r: r["episode"])
    result = EvalResult(header, records, len(records), report.lost, report.elapsed_s, report.telemetry, report.sandbox)
    summary = {**summarize(header, records, elapsed_s=report.elapsed_s, played=len(records),
                           lost=len(report.lost)), **(report.sandbox or {})}
    return result, summary


def fleet_record(rec: Any, seed: int) -> dict[str, Any]:
    """A fleet worker's ``EpisodeRecord`` in the run-file format."""
    info = {k: v for k, v in rec.info.items() if k not in ("messages", "tool_results", "fingerprint")}
    return {"episode": rec.index, "task_index": rec.index, "sample": 0, "seed": seed + rec.index,
            "task_id": rec.task_id, "reward": rec.reward, "success": rec.success, "infra_failed": rec.infra_failed,
            **({"infra_source": "env"} if rec.infra_failed else {}), "turns": rec.turns, "messages": [],
            "tool_calls": [], "tokens": {"prompt": 0, "completion": 0},
            "latency_s": float(rec.info.get("episode_s", 0.0)), "agent_s": 0.0, "info": info}


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


def _probe_env(env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Build one env and close it, so a constructor's ``ConfigError`` (a value out of
    range, a data file that does not load) comes before the progress bar; returns its
    fingerprint's fields. Envs cache their data per process, so the run's own envs do
    not pay for it again."""
    from agentgym.multi_agent import is_multi_agent_env, make
    from agentgym.wrappers import env_attr

    if is_multi_agent_env(env_id):
        env = make(env_id, **env_kwargs)
    else:
        import gymnasium as gym

        env = gym.make(env_id, **env_kwargs)
    fields = dict(env_attr(env, "fingerprint").fields)
    env.close()
    return fields


def close_shared_resources() -> None:
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
        close_shared_resources()
