"""PPO-EWMA ablation from one shared SFT start: EWMA on vs off, group size 4 / 8 / 16.

Every variant starts from the same SFT model (a run's ``sft_model/``), sees the same
number of episodes per step (``tasks_per_step x group_size`` is held at the base
config's), and runs for the same seeds; only the named knob changes. Held-out success
(sampled at the training temperature, and greedy) is evaluated every ``--eval-every``
steps on the same tasks. One PNG shows each variant's mean over seeds with the min-max
band; ``ablation.json`` and ``ablation.md`` hold the numbers.

    python -m baselines.ablation --config baselines/configs/search_cpu.yaml \\
        --sft-model runs/search_cpu/sft_model --seeds 0 1 2 --steps 20 --out runs/ablation

Variants run one after another in this process; to use two cores, split them over two
processes with ``--only`` and merge with ``--combine OUT_A OUT_B --out OUT``.
"""

from __future__ import annotations

__all__ = ["VARIANTS", "combine", "run"]

import argparse
import json
import statistics
import time
from pathlib import Path

VARIANTS: dict[str, dict[str, str]] = {
    "PPO-EWMA, group 8": {"algo.proximal": "ewma"},
    "PPO (EWMA off), group 8": {"algo.proximal": "behaviour"},
    "PPO-EWMA, group 4": {"algo.proximal": "ewma", "rollout.group_size": "4"},
    "PPO-EWMA, group 16": {"algo.proximal": "ewma", "rollout.group_size": "16"},
}


def _overrides(base, variant: dict[str, str], sft_model: str, seed: int, steps: int, eval_every: int, eval_tasks: int,
               run_dir: Path) -> list[str]:
    """The variant's knobs, with tasks_per_step scaled so episodes per step stay fixed."""
    episodes = base.rollout.tasks_per_step * base.rollout.group_size
    group = int(variant.get("rollout.group_size", base.rollout.group_size))
    if episodes % group:
        raise ValueError(f"Expected group size {group} to divide {episodes} episodes per step")
    knobs = {**variant, "rollout.tasks_per_step": str(episodes // group)}
    return [f"model.path={sft_model}", "sft.episodes=0", f"seed={seed}", f"steps={steps}", f"eval_every={eval_every}",
            f"eval_tasks={eval_tasks}", "eval_sampled=true", f"log.run_dir={run_dir}", "log.tensorboard=false",
            *(f"{k}={v}" for k, v in knobs.items())]


def run(config: str, sft_model: str, seeds: list[int], steps: int, eval_every: int, eval_tasks: int, out: Path,
        only: list[str] | None = None) -> dict:
    from baselines.config import load_config
    from baselines.metrics import read_metrics
    from baselines.trainer import Trainer

    base = load_config(config, [])
    results: dict[str, dict] = {}
    for name, variant in VARIANTS.items():
        if only and name not in only:
            continue
        curves = []
        for seed in seeds:
            run_dir = out / _slug(name) / f"seed{seed}"
            t0 = time.perf_counter()
            trainer = Trainer(load_config(config, _overrides(base, variant, sft_model, seed, steps, eval_every, eval_tasks, run_dir)))
            try:
                trainer.train()
            finally:
                trainer.close()
            logged = read_metrics(run_dir)
            rows = [r for r in logged if "eval/sampled_success_rate" in r]
            curves.append({"seed": seed, "seconds": time.perf_counter() - t0,
                           "steps": [int(r["step"]) for r in rows],
                           "sampled": [r["eval/sampled_success_rate"] for r in rows],
                           "greedy": [r["eval/success_rate"] for r in rows],
                           "optimizer_steps": sum(r.get("train/optimizer_steps", 0) for r in logged)})
            print(f"ablation: {name} seed {seed}: sampled {curves[-1]['sampled']}, {curves[-1]['seconds']:.0f} s", flush=True)
        results[name] = {"knobs": variant, "runs": curves}
    out.mkdir(parents=True, exist_ok=True)
    (out / "ablation.json").write_text(json.dumps(results, indent=1))
    (out / "ablation.md").write_text(_table(results))
    _plot(results, out / "ablation.png")
    return results


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.lower()).strip("_")


def _table(results: dict) -> str:
    lines = ["| variant | sampled success, start | sampled, end (mean over seeds) | min-max over seeds | greedy, end |",
             "|---|---|---|---|---|"]
    for name, r in results.items():
        ends = [c["sampled"][-1] for c in r["runs"]]
        starts = [c["sampled"][0] for c in r["runs"]]
        greedy = [c["greedy"][-1] for c in r["runs"]]
        lines.append(f"| {name} | {statistics.mean(starts):.3f} | {statistics.mean(ends):.3f} | "
                     f"{min(ends):.3f}-{max(ends):.3f} | {statistics.mean(greedy):.3f} |")
    return "\n".join(lines) + "\n"


def _plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, r in results.items():
        steps = r["runs"][0]["steps"]
        per_step = list(zip(*[c["sampled"] for c in r["runs"]]))
        mean = [statistics.mean(v) for v in per_step]
        line, = ax.plot(steps, mean, marker="o", label=f"{name} ({len(r['runs'])} seeds)")
        ax.fill_between(steps, [min(v) for v in per_step], [max(v) for v in per_step], color=line.get_color(), alpha=0.15)
    ax.set_xlabel("RL step (same episodes per step in every variant)")
    ax.set_ylabel("held-out sampled success")
    ax.set_title("PPO-EWMA ablation from one SFT start (band: min-max over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def combine(parts: list[Path], out: Path) -> dict:
    """Merge the ``ablation.json`` of runs split over processes (``--only``) into one
    table and one plot."""
    results: dict = {}
    for part in parts:
        results.update(json.loads((part / "ablation.json").read_text()))
    results = {name: results[name] for name in VARIANTS if name in results}
    out.mkdir(parents=True, exist_ok=True)
    (out / "ablation.json").write_text(json.dumps(results, indent=1))
    (out / "ablation.md").write_text(_table(results))
    _plot(results, out / "ablation.png")
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config")
    p.add_argument("--sft-model", help="a run's sft_model/ directory (the shared start)")
    p.add_argument("--combine", type=Path, nargs="+", default=None, help="merge these --out directories into --out")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--eval-tasks", type=int, default=128)
    p.add_argument("--out", type=Path, default=Path("runs/ablation"))
    p.add_argument("--only", nargs="*", default=None, help="variant names to run (default: all)")
    a = p.parse_args(argv)
    if a.combine:
        combine(a.combine, a.out)
        return
    if not a.config or not a.sft_model:
        p.error("--config and --sft-model are required (or --combine)")
    run(a.config, a.sft_model, a.seeds, a.steps, a.eval_every, a.eval_tasks, a.out, a.only)


if __name__ == "__main__":
    main()
