"""CPU demo: a tiny local model learns Calculator-v0 (SFT on the oracle, then PPO-EWMA).

    python -m baselines.demo [key=value ...]     (``make demo``)

Builds the tiny Qwen2-style model (cached in ``.cache/agentgym-tiny-model``), imitates
the env's oracle for a few hundred steps (deliberately short, so there is room to
improve), evaluates greedy success on fixed validation tasks, runs PPO-EWMA, evaluates
again, and writes ``runs/calculator_cpu/metrics.jsonl`` and PNG curves
(``plots/success.png``). Overrides use the config's dotted keys, e.g. ``steps=10``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

CONFIG = Path(__file__).with_name("configs") / "calculator_cpu.yaml"


def main(argv: list[str] | None = None) -> int:
    import logging

    from rich.console import Console
    from rich.table import Table

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()

    from baselines.config import load_config
    from baselines.plot import plot_run
    from baselines.trainer import Trainer

    console = Console()
    cfg = load_config(CONFIG, list(sys.argv[1:] if argv is None else argv))
    console.rule("[bold]agentgym baselines demo: PPO-EWMA on Calculator-v0 (CPU)")
    console.print(f"model: tiny Qwen2 ({cfg.model.tiny.num_hidden_layers} layers, hidden {cfg.model.tiny.hidden_size}); "
                  f"env {cfg.env.id} {cfg.env.kwargs}; {cfg.steps} PPO-EWMA steps of "
                  f"{cfg.rollout.tasks_per_step} tasks x {cfg.rollout.group_size} samples")
    t0 = time.perf_counter()
    history: dict[str, list[float]] = {"rollout": [], "train": []}

    def show(step: int, m: dict[str, float]) -> None:
        if "sft/loss_last" in m:
            console.print(f"SFT on {cfg.sft.episodes} oracle episodes: loss {m['sft/loss_first']:.3f} -> "
                          f"{m['sft/loss_last']:.3f} in {m['sft/seconds']:.0f}s")
        if "reward/success_rate" in m:
            history["rollout"].append(m["perf/rollout_tokens_per_s"])
            history["train"].append(m["perf/train_tokens_per_s"])
            console.print(
                f"[cyan]step {step:3d}[/cyan] train success {m['reward/success_rate']:.2f}  reward {m['reward/mean']:.2f}  "
                f"entropy {m['policy/entropy']:.3f}  kl_prox {m.get('loss/approx_kl_prox', 0):.4f}  "
                f"rollout {m['perf/rollout_tokens_per_s']:.0f} tok/s  train {m['perf/train_tokens_per_s']:.0f} tok/s  "
                f"[{time.perf_counter() - t0:.0f}s]"
            )
        if "eval/success_rate" in m:
            console.print(f"[bold green]eval[/bold green] step {step}: greedy success {m['eval/success_rate']:.3f} "
                          f"on {int(m['eval/episodes'])} validation tasks")

    with console.status("building the tiny model and imitating the oracle..."):
        trainer = Trainer(cfg, on_metrics=None)
    trainer.on_metrics = show
    show(0, trainer.sft_metrics) if trainer.sft_metrics else None
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    paths = plot_run(cfg.log.run_dir)
    success_png = _success_plot(cfg.log.run_dir)
    table = Table(title=f"Calculator-v0, greedy success on the same {cfg.eval_tasks} validation tasks before and after RL")
    for col in ("after SFT (start)", "after PPO-EWMA", "rollout tok/s (median)", "train tok/s (median)", "wall time"):
        table.add_column(col, justify="right")
    table.add_row(f"{summary.get('eval/success_before', float('nan')):.3f}", f"{summary.get('eval/success_after', float('nan')):.3f}",
                  f"{statistics.median(history['rollout'] or [0]):.0f}", f"{statistics.median(history['train'] or [0]):.0f}",
                  f"{time.perf_counter() - t0:.0f}s")
    console.print(table)
    console.print(f"metrics: {cfg.log.run_dir}/metrics.jsonl   curves: {success_png}, {paths[-1]}")
    return 0


def _success_plot(run_dir: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from baselines.metrics import read_metrics

    rows = read_metrics(run_dir)
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label in (("reward/success_rate", "train batch (sampled)"), ("eval/success_rate", "eval (greedy, validation)")):
        pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xlabel("PPO-EWMA step (step 0 = after SFT)")
    ax.set_ylabel("success rate")
    ax.set_ylim(0, 1)
    ax.set_title("Calculator-v0: tiny Qwen2-style model, PPO-EWMA on CPU")
    ax.grid(alpha=0.3)
    ax.legend()
    out = Path(run_dir) / "plots" / "success.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


if __name__ == "__main__":
    sys.exit(main())
