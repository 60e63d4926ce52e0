"""PNG curves from a run directory's ``metrics.jsonl`` (``agentgym plot RUN_DIR``)."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

from baselines.metrics import read_metrics

__all__ = ["plot_run", "DEFAULT_PANELS"]

DEFAULT_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("success", ("reward/success_rate", "eval/success_rate", "eval/sampled_success_rate")),
    ("reward", ("reward/mean", "reward/std")),
    ("entropy", ("policy/entropy",)),
    ("tool_usage", ("tool/*/usage_frac",)),  # which tools the policy calls, per step
    ("kl_and_clip", ("loss/approx_kl_prox", "loss/clip_frac_low", "loss/clip_frac_high")),
    ("mismatch", ("mismatch/logprob_abs_diff_mean", "mismatch/kl_k3")),
    ("lengths", ("rollout/response_tokens_mean", "rollout/turns_mean")),
    ("throughput", ("perf/rollout_tokens_per_s", "perf/train_tokens_per_s")),
)


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Write one PNG per panel that has data, plus ``curves.png`` with all of them.
    A panel's keys may be patterns (``tool/*/usage_frac``: one curve per tool)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    present = sorted({k for r in rows for k, v in r.items() if v is not None})
    panels = [(name, [k for pattern in keys for k in present if fnmatchcase(k, pattern)]) for name, keys in DEFAULT_PANELS]
    panels = [(n, ks) for n, ks in panels if ks]
    written = []
    fig_all, axes = plt.subplots(len(panels), 1, figsize=(7, 2.6 * max(len(panels), 1)), squeeze=False)
    for ax_all, (name, keys) in zip(axes[:, 0], panels):
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for target in (ax, ax_all):
            for k in keys:
                pts = [(r["step"], r[k]) for r in rows if r.get(k) is not None]
                target.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if len(pts) < 30 else None, label=k)
            target.set_title(name)
            target.set_xlabel("step")
            target.legend(fontsize=7)
            target.grid(alpha=0.3)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    fig_all.tight_layout()
    fig_all.savefig(out / "curves.png", dpi=90)
    plt.close(fig_all)
    written.append(out / "curves.png")
    return written
