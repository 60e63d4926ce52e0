"""The CPU demo is reproducible on a given machine: fresh processes with different hash
seeds (so no set/dict ordering can hide) give the same tiny model, and the same metrics
and weights after SFT and PPO-EWMA steps."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch


def _is_timing(key: str) -> bool:
    """Wall-clock figures (seconds, rates, latencies, idle fractions); everything else a
    run logs must be equal."""
    return key.startswith("perf/") or key.endswith(("_s", "_ms", "seconds")) or "idle_frac" in key


def _fresh_process(args: list[str], hash_seed: str, timeout: float = 600) -> None:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _tensors(obj, prefix=""):
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _tensors(v, f"{prefix}/{k}")


def _assert_same_tensors(a: dict, b: dict) -> None:
    left, right = dict(_tensors(a)), dict(_tensors(b))
    assert left.keys() == right.keys() and len(left) > 10
    for key, value in left.items():
        assert torch.equal(value, right[key]), key


@pytest.mark.slow
def test_the_tiny_model_and_its_tokenizer_are_built_the_same_every_time(tmp_path):
    """``make demo`` builds its model on the spot: tokenizer training on the env's text
    and the random init must not depend on the process."""
    script = ("import sys; from baselines.demo import make_deterministic; make_deterministic(); "
              "from baselines.trainer import env_corpus; from baselines.tiny_model import TinyModelSpec, build_tiny_model; "
              "build_tiny_model(sys.argv[1], env_corpus('agentgym/Calculator-v0', {'difficulty': 1}, episodes=100), "
              "TinyModelSpec(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))")
    for name, seed in (("a", "1"), ("b", "2")):
        _fresh_process(["-c", script, str(tmp_path / name)], seed)
    (a,), (b,) = ((tmp_path / name).iterdir() for name in "ab")  # each holds one build, named by its digest
    assert a.name == b.name and (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    from safetensors.torch import load_file

    _assert_same_tensors(load_file(a / "model.safetensors"), load_file(b / "model.safetensors"))


def _run_demo(root: Path, name: str, hash_seed: str, model_dir: Path) -> tuple[list[dict], dict]:
    overrides = [
        f"model.path={model_dir}", f"log.run_dir={root}/{name}", "log.tensorboard=false", "steps=2", "eval_every=2",
        "eval_tasks=8", "rollout.tasks_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=40",
        "sft.episodes=32", "sft.steps=4", "sft.batch_size=8", "sft.lr=1e-5", "sft.stop_success=null", "algo.micro_batch_size=8",
    ]
    _fresh_process(["-m", "baselines.demo", *overrides], hash_seed)
    rows = [json.loads(line) for line in (root / name / "metrics.jsonl").read_text().splitlines()]
    parts = {part: torch.load(root / name / "checkpoint" / f"{part}.pt", map_location="cpu", weights_only=False)
             for part in ("policy", "ewma")}
    return rows, parts


@pytest.mark.slow
def test_two_demo_runs_give_identical_metrics_and_weights(tmp_path, trained_model_dir):
    first, first_state = _run_demo(tmp_path, "a", "1", trained_model_dir)
    second, second_state = _run_demo(tmp_path, "b", "2", trained_model_dir)
    assert [r["step"] for r in first] == [r["step"] for r in second] == [0, 1, 2]
    for a, b in zip(first, second, strict=True):
        keys = {k for k in {**a, **b} if not _is_timing(k)}
        for key in sorted(keys):
            assert a.get(key) == b.get(key), (a["step"], key, a.get(key), b.get(key))
    assert sum(r.get("train/optimizer_steps", 0) for r in first) > 0, first  # else the weights would be compared at the start
    _assert_same_tensors(first_state, second_state)
