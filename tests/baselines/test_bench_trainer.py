"""benchmarks/peers/bench_trainer.py's summary: a step that trained on nothing (every
group's rewards equal, so no row carried signal and no optimiser step ran) has no
training throughput; it must not enter the median as 0 tokens/s."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "peers" / "bench_trainer.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_trainer", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _step(trained_tokens: float, optimizer_steps: float, train_s: float = 1.0) -> dict:
    return {"wall_s": 2.0, "rollout_s": 1.0, "generated_tokens": 100.0, "train_s": train_s, "trained_tokens": trained_tokens,
            "trained_rows_frac": 1.0 if optimizer_steps else 0.0, "optimizer_steps": optimizer_steps, "reward_mean": 0.5}


def test_steps_without_trainable_rows_stay_out_of_the_training_throughput_median():
    bench = _bench()
    warmup = _step(1.0, 1.0)
    steps = [warmup, _step(0.0, 0.0, train_s=0.01), _step(0.0, 0.0, train_s=0.01), _step(400.0, 1.0), _step(600.0, 1.0)]
    summary = bench.summarise({"steps": steps, "peak_rss_mb": 1.0})
    assert summary["training_tokens_per_s"] == 500.0  # median of the two steps that trained, not of (0, 0, 400, 600)
    assert summary["trained_steps"] == 2


def test_a_run_that_never_trained_has_no_training_throughput():
    bench = _bench()
    summary = bench.summarise({"steps": [_step(1.0, 1.0), _step(0.0, 0.0), _step(0.0, 0.0)], "peak_rss_mb": 1.0})
    assert math.isnan(summary["training_tokens_per_s"]) and summary["trained_steps"] == 0
