"""The ``agentgym train`` and ``agentgym plot`` verbs, registered as plugins.

``pyproject.toml`` lists them in the ``agentgym.commands`` entry-point group; agentgym's
CLI loads them from there, so agentgym never imports baselines (imports point down).
Cheap to import: the work happens in :mod:`baselines.cli`, which imports torch lazily.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["train", "plot"]

train = typer.Typer(add_completion=False)
plot = typer.Typer(add_completion=False)


@train.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def _train(ctx: typer.Context, config: Annotated[str, typer.Option(help="YAML config")]) -> None:
    """Train a policy with the PPO-EWMA baseline; extra key=value args override the config."""
    from baselines.cli import train_command

    raise typer.Exit(train_command(config, list(ctx.args)))


@plot.command("plot")
def _plot(run_dir: str) -> None:
    """Write PNG curves of a training run's metrics."""
    from baselines.cli import plot_command

    raise typer.Exit(plot_command(run_dir))
