"""``agentgym train ... rollout.engine=vllm``: real PPO-EWMA steps with vLLM rollouts
(vLLM's CPU build in CI; ``make test-vllm``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[2]


def test_agentgym_train_with_the_vllm_engine_takes_optimiser_steps(trained_model_dir, tmp_path):
    run = tmp_path / "run"
    args = [f"model.path={trained_model_dir}", "model.dtype=float32", "device=cpu", f"log.run_dir={run}", "log.tensorboard=false",
            "env.kwargs={difficulty: 1}", "steps=3", "eval_every=0", "rollout.engine=vllm", "rollout.vllm.enforce_eager=true",
            "rollout.tasks_per_step=4", "rollout.group_size=4", "rollout.temperature=0.7", "rollout.max_new_tokens=40",
            "rollout.max_seq_len=1024", "algo.micro_batch_size=8", "algo.lr=1e-4",
            "rollout.max_staleness=0"]  # fresh data only, so that engine == trainer below
    code = "import sys; from baselines.commands import train_command; sys.exit(train_command(None, sys.argv[1:]))"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert sum(r["train/optimizer_steps"] for r in rows) > 0, rows  # PPO-EWMA really stepped
    for r in rows:
        if r["train/optimizer_steps"] > 0:  # mismatch/* are measured in the first optimiser step (baselines.update)
            # the engine sampled from the trainer's weights: fp32 vLLM vs transformers
            assert r["mismatch/logprob_abs_diff_mean"] < 1e-4, r["mismatch/logprob_abs_diff_mean"]
    synced = [r["perf/sync_s"] for r in rows if r["train/optimizer_steps"] > 0]
    print(f"\nvLLM train: optimizer steps {[r['train/optimizer_steps'] for r in rows]}, sync seconds {synced}")
