"""CPU demo: a tiny local model learns Calculator-v0 (SFT on the oracle, then PPO-EWMA).

    python -m baselines.demo [key=value ...]     (``make demo``)

Builds the tiny Qwen2-style model (cached in ``.cache/agentgym-tiny-model``), imitates
the env's oracle until the *sampling* policy solves ``sft.stop_success`` of a few train
tasks (deliberately early, so there is room to improve), evaluates on fixed validation
tasks, runs PPO-EWMA, evaluates again, and writes ``runs/calculator_cpu/metrics.jsonl``
and PNG curves (``plots/success.png``). Overrides use the config's dotted keys, e.g.
``steps=10``.

The run is deterministic on a given machine (:func:`make_deterministic`): the same
command gives the same metrics and weights, run after run. Across machines, CPU kernels
(thread count, instruction set) change float rounding, and sampling amplifies it.

Two success rates are reported on the same validation tasks: the policy RL trains,
sampled at the rollout temperature (what PPO optimises), and its greedy decoding (which
RL only moves indirectly, by sharpening the distribution).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

CONFIG = Path(__file__).with_name("configs") / "calculator_cpu.yaml"
DEMO_THREADS = 2
"""Intra-op threads: fixed, because a float sum split over another thread count rounds
differently, and one flipped sample changes every step after it."""


def make_deterministic(threads: int = DEMO_THREADS) -> None:
    """Make this process's training reproducible: fixed thread counts, deterministic
    kernels, and no tokenizer worker pool. Seeds come from the config (the trainer seeds
    every RNG it uses from ``seed``; each rollout call and SFT draw has its own seed)."""
    import os

    import torch

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # BPE training and encoding in one thread
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)


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

    make_deterministic()
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
            stop = (f"; stopped when sampled success on {cfg.sft.check_tasks} train tasks reached "
                    f"{m['sft/check_sampled_success']:.2f}" if "sft/check_sampled_success" in m else "")
            console.print(f"SFT on {cfg.sft.episodes} oracle episodes: {int(m['sft/steps'])} steps, loss {m['sft/loss_first']:.3f} -> "
                          f"{m['sft/loss_last']:.3f} in {m['sft/seconds']:.0f}s{stop}")
        if "reward/success_rate" in m:
            history["rollout"].append(m["perf/rollout_tokens_per_s"])
            history["train"].append(m["perf/train_tokens_per_s"])
            console.print(
                f"[cyan]step {step:3d}[/cyan] train success {m['reward/success_rate']:.2f}  "
                f"no-signal groups {m.get('train/dropped_zero_adv_frac', 0):.2f}  "
                f"entropy {m.get('policy/entropy', float('nan')):.3f}  kl_prox {m.get('loss/approx_kl_prox', 0):.4f}  "
                f"rollout {m['perf/rollout_tokens_per_s']:.0f} tok/s  train {m['perf/train_tokens_per_s']:.0f} tok/s  "
                f"[{time.perf_counter() - t0:.0f}s]"
            )
        if "eval/success_rate" in m:
            sampled = (f"sampled (T={m['eval/sampled_temperature']:g}) success {m['eval/sampled_success_rate']:.3f}, "
                       if "eval/sampled_success_rate" in m else "")
            console.print(f"[bold green]eval[/bold green] step {step}: {sampled}greedy success {m['eval/success_rate']:.3f} "
                          f"on {int(m['eval/episodes'])} validation tasks")

    with console.status("building the tiny model and imitating the oracle..."):
        trainer = Trainer(cfg, on_metrics=None)
    trainer.on_metrics = show
    if trainer.sft_metrics and not cfg.eval_every:  # else printed with the first eval
        show(0, trainer.sft_metrics)
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    paths = plot_run(cfg.log.run_dir)
    success_png = _success_plot(cfg.log.run_dir)
    n = cfg.eval_tasks
    se = lambda p: (p * (1 - p) / n) ** 0.5  # noqa: E731  (binomial standard error)
    table = Table(title=f"Calculator-v0 success on the same {n} validation tasks, before and after {cfg.steps} PPO-EWMA steps")
    for col in ("policy", "after SFT (start)", "after PPO-EWMA", "change"):
        table.add_column(col, justify="right")
    rows = [(f"sampled, T={cfg.rollout.temperature:g} (what RL trains)", "sampled")] if cfg.eval_sampled else []
    rows.append(("greedy" if cfg.eval_temperature == 0 else f"T={cfg.eval_temperature:g}", ""))
    for label, kind in rows:
        key = f"eval/{kind + '_' if kind else ''}success_"
        a, b = summary.get(key + "before", float("nan")), summary.get(key + "after", float("nan"))
        paired = summary.get(key + "gain_se_paired")  # same tasks before and after: the paired error
        change = f"{b - a:+.3f}" + ("" if paired is None else f" ± {paired:.3f}")
        table.add_row(label, f"{a:.3f} ± {se(a):.3f}", f"{b:.3f} ± {se(b):.3f}", change)
    console.print(table)
    console.print(f"rollout {statistics.median(history['rollout'] or [0]):.0f} tok/s, train "
                  f"{statistics.median(history['train'] or [0]):.0f} tok/s (medians); wall time {time.perf_counter() - t0:.0f}s")
    console.print(f"metrics: {cfg.log.run_dir}/metrics.jsonl   curves: {success_png}, {paths[-1]}")
    return 0


def _success_plot(run_dir: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from baselines.metrics import read_metrics

    rows = read_metrics(run_dir)
    fig, ax = plt.subplots(figsize=(7, 4))
    temp = next((r["eval/sampled_temperature"] for r in rows if r.get("eval/sampled_temperature") is not None), None)
    for key, label, style in (("eval/sampled_success_rate", f"validation, sampled T={temp:g} (what RL trains)" if temp else "", "o-"),
                              ("eval/success_rate", "validation, greedy", "s-"),
                              ("reward/success_rate", "train batches, sampled (noisy)", ".:")):
        pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label, alpha=0.5 if key.startswith("reward") else 1.0)
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
