"""Shared fixtures: one tiny model directory per test session (tokenizer training ~3 s),
one tiny model imitation-trained until it solves some Calculator tasks (~40 s, shared by
the tests that need real optimiser steps), and the ``vllm`` marker's skip-or-fail rule.

Tests marked ``vllm`` need vLLM (``make vllm-env`` builds ``.venv-vllm`` with the CPU
build). Without it they are skipped, unless ``AGENTGYM_REQUIRE_VLLM=1`` (set by
``make test-vllm`` and CI), which turns a missing vLLM into a failure.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

# head_dim = hidden / heads = 32: vLLM's CPU attention needs >= 32.
TRAINED_TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1}


def vllm_required() -> bool:
    return os.environ.get("AGENTGYM_REQUIRE_VLLM", "") not in ("", "0", "false")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("vllm") is None or importlib.util.find_spec("vllm") is not None:
        return
    message = "vLLM is not installed (make vllm-env, then run with .venv-vllm/bin/pytest -m vllm)"
    if vllm_required():
        pytest.fail(f"AGENTGYM_REQUIRE_VLLM=1 but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from baselines.tiny_model import TinyModelSpec, build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), spec=TinyModelSpec(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1))


@pytest.fixture(scope="session")
def vllm_model_dir(tmp_path_factory):
    """The untrained tiny model at head_dim 32 (what vLLM's CPU attention needs), shared
    by the vLLM engine tests; none of them writes to it."""
    from baselines.tiny_model import TinyModelSpec, build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("vllm-tiny"), spec=TinyModelSpec(**TRAINED_TINY))


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def trained_model_dir(tmp_path_factory):
    """A head_dim-32 tiny model after SFT on Calculator-v0's oracle, stopped once its
    sampled (T=0.7) success on 16 train tasks reaches 0.3: groups of 4 then disagree
    often enough that PPO steps really happen."""
    import json

    from baselines.config import load_config
    from baselines.trainer import Trainer

    root = tmp_path_factory.mktemp("trained")
    cfg = load_config(None, [
        f"model.tiny_dir={root}/init", f"model.tiny={json.dumps(TRAINED_TINY)}", f"log.run_dir={root}/run", "log.tensorboard=false",
        "env.kwargs={difficulty: 1}", "device=cpu", "eval_every=0", "rollout.temperature=0.7", "rollout.max_new_tokens=40",
        "rollout.tasks_per_step=1", "rollout.group_size=1", "sft.episodes=1024", "sft.steps=500", "sft.batch_size=16",
        "sft.lr=3e-3", "sft.schedule=constant", "sft.stop_success=0.3", "sft.check_every=20", "sft.check_from=240", "sft.check_tasks=16",
    ])
    trainer = Trainer(cfg)
    out = root / "model"
    trainer.model.save_pretrained(out)
    trainer.tokenizer.save_pretrained(out)
    trainer.close()
    assert trainer.sft_metrics.get("sft/check_sampled_success", 0) >= 0.3, trainer.sft_metrics
    return out
