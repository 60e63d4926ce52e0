"""``agentgym train`` and ``agentgym plot``: the verbs, registered as plugins, and the
functions behind them.

``pyproject.toml`` lists the verbs in the ``agentgym.commands`` entry-point group;
agentgym's CLI loads them from there, so agentgym never imports baselines (imports point
down). There is one entry: ``agentgym train`` on one process, and the same verb under
``torchrun`` (``torchrun --nproc-per-node 8 -m agentgym train --config X.yaml``).

Cheap to import: torch and transformers are imported inside the functions. Unlike the
library, these configure logging and print, because they are the user-facing edge.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

__all__ = ["train", "plot", "train_command", "plot_command"]

train = typer.Typer(add_completion=False)
plot = typer.Typer(add_completion=False)


@train.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def _train(ctx: typer.Context, config: Annotated[str, typer.Option(help="YAML config")]) -> None:
    """Train a policy with the PPO-EWMA baseline; extra key=value args override the config."""
    raise typer.Exit(train_command(config, list(ctx.args)))


@plot.command("plot")
def _plot(run_dir: str) -> None:
    """Write PNG curves of a training run's metrics."""
    raise typer.Exit(plot_command(run_dir))


def _console():
    from rich.console import Console

    return Console()


def train_command(config: str, overrides: list[str]) -> int:
    """``agentgym train --config X.yaml key=value ...``; returns a process exit code."""
    from baselines.config import load_config
    from baselines.errors import BaselinesError

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    console = _console()
    try:
        cfg = load_config(config, overrides)
    except BaselinesError as e:  # one plain line on stderr: no markup, no wrapping, no traceback
        sys.stderr.write(f"config error: {e}\n")
        return 2
    from baselines.trainer import Trainer

    keys = ("reward/success_rate", "eval/success_rate", "reward/mean", "loss/policy", "policy/entropy",
            "loss/approx_kl_prox", "mismatch/logprob_abs_diff_max", "perf/rollout_tokens_per_s", "perf/train_tokens_per_s")

    def show(step: int, metrics: dict[str, float]) -> None:
        shown = "  ".join(f"{k.split('/')[-1]}={metrics[k]:.4g}" for k in keys if metrics.get(k) is not None)
        console.print(f"[bold]step {step}[/bold]  {shown}")

    try:  # a config that only the run can check (SFT's demonstrations against the rollout's limits)
        trainer = Trainer(cfg, on_metrics=show)
    except BaselinesError as e:
        sys.stderr.write(f"config error: {' '.join(str(e).split())}\n")
        return 2
    try:
        summary = trainer.train()
        # The summary before the clean-up: it is the run's result, and closing hundreds of
        # sandboxes on a slow engine takes a while (bounded by PoolConfig.close_timeout_s).
        console.print({k: round(v, 4) for k, v in summary.items()})
        console.print(f"metrics: {cfg.log.run_dir}/metrics.jsonl; curves: agentgym plot {cfg.log.run_dir}; "
                      f"the trained policy: {cfg.log.run_dir}/model (agentgym eval run ... --model {cfg.log.run_dir}/model)")
    finally:
        trainer.close()
    if "alarm/infra_outage_at_step" in summary:
        console.print(f"[red]stopped at step {int(summary['alarm/infra_outage_at_step'])}: the infrastructure failed "
                      "most episodes for rollout.outage_steps steps in a row (causes in the log above); rerun with "
                      "resume=true once it is back[/red]")
        return 3
    return 0


def plot_command(run_dir: str) -> int:
    """``agentgym plot RUN_DIR``: PNG curves into ``RUN_DIR/plots``."""
    from baselines.errors import BaselinesError
    from baselines.plot import plot_run

    console = _console()
    try:
        paths = plot_run(run_dir)
    except BaselinesError as e:
        console.print(f"[red]{e}[/red]")
        return 2
    for p in paths:
        console.print(f"wrote {p}")
    return 0
