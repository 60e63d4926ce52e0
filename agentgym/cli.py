"""The ``agentgym`` command line. Heavy imports happen inside each verb, so
``agentgym envs`` starts fast and ``agentgym train`` is the only verb that needs torch."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Gymnasium environments for tool-using LLM agents.")


def _parse_kwargs(pairs: list[str]) -> dict[str, object]:
    """``key=value`` pairs; values are read as JSON when they parse, else as strings."""
    out: dict[str, object] = {}
    for pair in pairs:
        if "=" not in pair:
            raise typer.BadParameter(f"expected key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


@app.command()
def envs() -> None:
    """List the registered environments and their tools."""
    from agentgym.commands.run import envs_command

    raise typer.Exit(envs_command())


@app.command()
def run(
    env_id: Annotated[str, typer.Argument(help="e.g. agentgym/Calculator-v0")],
    policy: Annotated[str, typer.Option(help="oracle or random")] = "oracle",
    episodes: int = 100,
    concurrency: int = 16,
    seed: int = 0,
    kwarg: Annotated[Optional[list[str]], typer.Option("--kwarg", "-k", help="env kwarg key=value (repeatable)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Run episodes with a policy and print success, episodes/s and tool telemetry."""
    from agentgym.commands.run import run_command

    raise typer.Exit(run_command(env_id, policy, episodes, concurrency, seed, _parse_kwargs(kwarg or []), json_out))


@app.command()
def play(
    env_id: str,
    seed: Optional[int] = None,
    kwarg: Annotated[Optional[list[str]], typer.Option("--kwarg", "-k")] = None,
) -> None:
    """Act as the agent yourself: type actions, see observations. End input with an empty line."""
    from agentgym.commands.run import play_command

    raise typer.Exit(play_command(env_id, seed, _parse_kwargs(kwarg or [])))


@app.command("build-image")
def build_image(force: Annotated[bool, typer.Option(help="rebuild even if the recipe is unchanged")] = False) -> None:
    """Build the sandbox image locally (mmdebstrap rootfs -> docker import)."""
    from agentgym.commands.sandbox import build_image_command

    raise typer.Exit(build_image_command(force=force))


@app.command()
def reap() -> None:
    """Remove sandbox containers whose owner process is gone."""
    from agentgym.commands.sandbox import reap_command

    raise typer.Exit(reap_command())


@app.command("serve-retriever")
def serve_retriever(host: str = "127.0.0.1", port: int = 8000,
                    corpus: Annotated[Optional[str], typer.Option(help="corpus jsonl (default: bundled)")] = None) -> None:
    """Serve the search index over HTTP (Search-R1 compatible POST /retrieve)."""
    from agentgym.commands.retriever import serve_retriever_command

    raise typer.Exit(serve_retriever_command(host=host, port=port, corpus=corpus))


@app.command()
def stress(
    env_id: str,
    episodes: int = 200,
    concurrency: int = 32,
    faults: Annotated[str, typer.Option(help="fault rates, e.g. kill=0.05,stall=0.02")] = "",
    adversarial: Annotated[float, typer.Option(help="fraction of adversarial turns")] = 0.3,
    seed: int = 0,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run episodes under load, adversarial actions and injected faults; fail on broken guarantees."""
    from agentgym.commands.readiness import stress_command

    raise typer.Exit(stress_command(env_id, episodes, concurrency, faults, adversarial, seed, json_out))


@app.command("audit-reward")
def audit_reward(env_id: str, tasks: int = 20, seed: int = 0) -> None:
    """Run the reward-hacking kit against an env's scorer; fail on any leak."""
    from agentgym.commands.readiness import audit_reward_command

    raise typer.Exit(audit_reward_command(env_id, tasks, seed))


@app.command()
def bench(extra: Annotated[Optional[list[str]], typer.Argument(help="extra pytest args")] = None) -> None:
    """Run the benchmark suite (pytest-benchmark) and save JSON under benchmarks/results."""
    from agentgym.commands.readiness import bench_command

    raise typer.Exit(bench_command(extra or []))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train(ctx: typer.Context, config: Annotated[str, typer.Option(help="YAML config")]) -> None:
    """Train a policy with the PPO-EWMA baseline; extra key=value args override the config."""
    try:
        from baselines.cli import train_command
    except ImportError as e:
        typer.echo(f"The baselines package is not installed ({e}); install agentgym[train].", err=True)
        raise typer.Exit(2) from e
    raise typer.Exit(train_command(config, list(ctx.args)))


@app.command()
def plot(run_dir: str) -> None:
    """Write PNG curves of a training run's metrics."""
    try:
        from baselines.cli import plot_command
    except ImportError as e:
        typer.echo(f"The baselines package is not installed ({e}); install agentgym[train].", err=True)
        raise typer.Exit(2) from e
    raise typer.Exit(plot_command(run_dir))


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
