"""Per-step metrics to JSONL (always), TensorBoard (optional) and W&B (optional, lazy).

One line of ``metrics.jsonl`` per training step: ``{"step": n, "<name>": value, ...}``.
Names are namespaced like CleanRL's: ``rollout/``, ``reward/``, ``loss/``, ``policy/``,
``mismatch/``, ``tool/<name>/`` (agentgym telemetry names), ``perf/``, ``eval/``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["MetricsLogger", "tool_usage_alerts", "read_metrics"]

logger = logging.getLogger(__name__)


class MetricsLogger:
    """Writes metrics of the main process. Non-finite values are written as ``null``."""

    def __init__(self, run_dir: str | Path, *, tensorboard: bool = True, wandb_project: str | None = None,
                 config: Mapping[str, Any] | None = None, fresh: bool = True) -> None:
        """``fresh``: a new run, which starts ``metrics.jsonl`` empty (an earlier run's
        rows in the same directory would be read as this one's by ``agentgym plot`` and
        the ablation); ``False`` for a resumed run, which keeps them (see
        :meth:`drop_after`)."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "metrics.jsonl"
        self._file = self.path.open("w" if fresh else "a", encoding="utf-8")
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.run_dir / "tb"))
            except ImportError:
                logger.warning("tensorboard is not installed; metrics go to metrics.jsonl only")
        self._wandb = None
        if wandb_project:
            import wandb  # optional dependency, imported only when asked for

            self._wandb = wandb.init(project=wandb_project, dir=str(self.run_dir), config=dict(config or {}))

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        clean = {k: (float(v) if math.isfinite(float(v)) else None) for k, v in metrics.items()}
        self._file.write(json.dumps({"step": step, **clean}) + "\n")
        self._file.flush()
        if self._tb is not None:
            for k, v in clean.items():
                if v is not None:
                    self._tb.add_scalar(k, v, step)
        if self._wandb is not None:
            self._wandb.log(dict(clean), step=step)

    def drop_after(self, step: int) -> int:
        """Remove the rows of steps after ``step`` (a resumed run's checkpoint step: the
        run that wrote them stopped later and those steps are run again); returns how many."""
        self._file.close()
        lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= step]
        self.path.write_text("".join(kept), encoding="utf-8")
        self._file = self.path.open("a", encoding="utf-8")
        return len(lines) - len(kept)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def tool_usage_alerts(metrics: Mapping[str, float], minimum: Mapping[str, float], *, warn: bool = True) -> dict[str, float]:
    """``alert/tool_usage_low/<tool>`` = 1 for each tool used by fewer episodes than asked.

    A tool whose usage collapses (the policy stopped searching, say) is an early sign of
    a degenerate policy; it is logged as a warning (``warn``: the main process only, as
    the figures are every process's) and as a metric.
    """
    alerts = {}
    for tool, floor in minimum.items():
        usage = metrics.get(f"tool/{tool}/usage_frac")
        if usage is not None and usage < floor:
            if warn:
                logger.warning("tool %r used in %.1f%% of episodes, below the configured %.1f%%", tool, 100 * usage,
                               100 * floor)
            alerts[f"alert/tool_usage_low/{tool}"] = 1.0
    return alerts


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """All rows of a run's ``metrics.jsonl``."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        from baselines.errors import BaselinesError

        raise BaselinesError(f"No metrics.jsonl in {run_dir}; pass the run_dir of a training run")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
