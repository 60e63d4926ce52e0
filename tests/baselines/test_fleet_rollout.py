"""The trainer's asynchronous rollout through a Ray fleet (``rollout.fleet: ray``): the
envs made by ``make_rollout_envs(..., fleet="ray")`` give the same trajectories, token for
token, as local envs, and closing them ends the fleet and the Ray instance it started.
Without Ray it is skipped, or fails under ``AGENTGYM_REQUIRE_RAY=1`` (CI)."""

from __future__ import annotations

import copy
import importlib.util
import os

import pytest
import torch

from baselines.agent_loop import AgentLoopConfig, make_rollout_envs
from baselines.async_rollout import AsyncRollout, AsyncRolloutConfig
from baselines.chat_tokens import ChatTokenizer
from baselines.config import RolloutConfig
from baselines.engines.base import SamplingConfig
from baselines.engines.hf import HFEngine
from baselines.engines.hf_async import BatchingEngine
from baselines.errors import ConfigError

CALC = "agentgym/Calculator-v0"


def _need_ray() -> None:
    if importlib.util.find_spec("ray") is not None:
        return
    if os.environ.get("AGENTGYM_REQUIRE_RAY", "") not in ("", "0", "false"):
        pytest.fail("AGENTGYM_REQUIRE_RAY=1 but Ray is not installed (pip install 'agentgym[ray]')", pytrace=False)
    pytest.skip("Ray is not installed (pip install 'agentgym[ray]')")


def test_rollout_fleet_keys_are_checked():
    assert (RolloutConfig().fleet, RolloutConfig().fleet_workers) == ("none", 2)
    with pytest.raises(ConfigError, match="rollout.fleet_workers"):
        RolloutConfig(fleet="ray", fleet_workers=0)


def test_async_rollout_through_a_fleet_matches_local_envs(tiny_model_dir, tokenizer):
    _need_ray()
    import ray
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    chat = ChatTokenizer(tokenizer)
    config = AgentLoopConfig(SamplingConfig(max_new_tokens=12, temperature=1.0), 512, 1.0)
    kwargs = {"difficulty": 1, "max_turns": 3}

    def schedule(step):
        return [200 + 10 * step + i for i in range(3)], 2000 + step

    def rollout(envs):
        engine = BatchingEngine(HFEngine(copy.deepcopy(model), pad_token_id=tokenizer.pad_token_id,
                                         eos_token_ids=[tokenizer.eos_token_id]))
        return AsyncRollout(envs, engine, chat, config, AsyncRolloutConfig(max_staleness=0), 3, 2, schedule), engine

    local_envs = make_rollout_envs(CALC, kwargs, 6)
    fleet_envs = make_rollout_envs(CALC, kwargs, 6, fleet="ray", fleet_workers=2, fleet_address="local")
    assert ray.is_initialized() and type(fleet_envs[0]).__name__ == "FleetEnvHandle"
    (local, local_engine), (remote, remote_engine) = rollout(local_envs), rollout(fleet_envs)
    try:
        for step in range(2):
            want, got = local.collect(step), remote.collect(step)
            assert len(want.trajectories) == len(got.trajectories) == 6
            for a, b in zip(want.trajectories, got.trajectories):
                assert (a.task_id, a.turns, a.reward, a.infra_failed) == (b.task_id, b.turns, b.reward, b.infra_failed)
                assert a.token_ids == b.token_ids and a.loss_mask == b.loss_mask
            assert max(t.turns for t in got.trajectories) > 1  # tool observations came back from the workers
    finally:
        for r, e in ((local, local_engine), (remote, remote_engine)):
            r.close()
            e.close()
        for env in local_envs + fleet_envs:
            env.close()
    assert not ray.is_initialized()  # the last handle closed the fleet and the instance it started


def test_agentgym_train_rolls_out_through_the_fleet(tmp_path, tiny_model_dir):
    """``rollout.fleet: ray`` in a training config: the trainer's envs are fleet handles, a
    training step's episodes all come back from the workers, and closing the trainer ends the
    fleet and the Ray instance it started."""
    _need_ray()
    import json

    import ray

    from baselines.config import load_config
    from baselines.trainer import Trainer

    config = load_config("baselines/configs/calculator_cpu.yaml", [
        f"model.path={tiny_model_dir}", f"log.run_dir={tmp_path}/run", "log.tensorboard=false", "steps=1",
        "eval_every=0", "sft.episodes=0", "rollout.tasks_per_step=2", "rollout.group_size=2",
        "rollout.max_new_tokens=8", "rollout.fleet=ray", "rollout.fleet_workers=2", "rollout.fleet_address=local",
    ])
    trainer = Trainer(config)
    try:
        assert {type(env).__name__ for env in trainer.loop.envs} == {"FleetEnvHandle"}
        trainer.train()
    finally:
        trainer.close()
    row = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["step"] == 1 and row["rollout/episodes"] == 4 and row["rollout/dropped_infra_failed"] == 0
    assert not ray.is_initialized()
