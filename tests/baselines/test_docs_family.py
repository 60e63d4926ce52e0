"""The docs' example family trains with the baseline trainer: SFT on its oracle's
trajectories takes optimiser steps, and a PPO-EWMA rollout step runs on it."""

import json
import math

import pytest

from agentgym import multi_agent
from agentgym.testing import load_docs_family
from baselines.config import load_config
from baselines.trainer import Trainer


@pytest.fixture(autouse=True)
def _forget_the_readme_team():
    """The docs page also registers a team env; leave the multi-agent registry as it was."""
    yield
    multi_agent.MULTI_AGENT_ENVS[:] = [s for s in multi_agent.MULTI_AGENT_ENVS
                                       if s.env_id != "myorg/UnitConversionReview-v0"]


def test_agentgym_train_trains_on_the_readme_family(tmp_path, tiny_model_dir):
    load_docs_family()  # registers myorg/UnitConversion-v0 in this process
    config = load_config(None, [
        f"model.path={tiny_model_dir}", f"log.run_dir={tmp_path}/run", "log.tensorboard=false",
        "env.id=myorg/UnitConversion-v0", "env.kwargs={}", "steps=1", "device=cpu", "eval_every=0",
        "rollout.tasks_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=64",
        "sft.episodes=4", "sft.steps=2", "sft.batch_size=2", "algo.micro_batch_size=2", "algo.num_minibatches=1",
    ])
    trainer = Trainer(config)
    assert trainer.sft_metrics["sft/oracle_success"] == 1.0 and trainer.sft_metrics["sft/steps"] == 2
    trainer.train()
    trainer.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1]
    assert math.isfinite(rows[0]["reward/mean"]) and "tool/convert/usage_frac" in rows[0]
