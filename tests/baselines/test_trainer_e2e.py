"""End to end on CPU: tiny model, SFT on the oracle, two PPO-EWMA steps, checkpoint, resume."""

import json
import math

from baselines.config import load_config
from baselines.trainer import Trainer

TINY = "model.tiny={hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1}"


def _config(tmp_path, steps, resume=False):
    return load_config(None, [
        f"model.tiny_dir={tmp_path}/model", TINY, f"log.run_dir={tmp_path}/run", "log.tensorboard=false",
        "env.kwargs={difficulty: 1}", f"steps={steps}", "device=cpu", "eval_every=0", f"resume={str(resume).lower()}",
        "rollout.tasks_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=16", "rollout.drift_check_frac=1.0",
        "sft.episodes=8", "sft.steps=12", "sft.batch_size=4", "sft.lr=1e-2", "algo.micro_batch_size=2", "algo.num_minibatches=2",
    ])


def test_train_checkpoint_and_resume(tmp_path):
    trainer = Trainer(_config(tmp_path, steps=2))
    assert trainer.sft_metrics["sft/loss_last"] < trainer.sft_metrics["sft/loss_first"]  # imitation loss goes down
    assert trainer.sft_metrics["sft/oracle_success"] == 1.0
    trainer.train()
    trainer.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        keys = ["mismatch/logprob_abs_diff_max", "reward/mean", "perf/train_tokens_per_s", "perf/rollout_tokens_per_s",
                "rollout/dropped_infra_failed", "tool/calculate/usage_frac", "memory/ewma_bytes", "train/dropped_zero_adv_frac"]
        if r["train/optimizer_steps"] > 0:  # steps on all-equal-reward batches are skipped
            keys += ["loss/policy", "policy/entropy"]
        for key in keys:
            assert r[key] is not None and math.isfinite(r[key]), key
        assert r["mismatch/logprob_abs_diff_max"] < 1e-3  # hf engine in fp32 == trainer
        assert r["train/optimizer_steps"] + r["train/skipped_steps"] == 2  # 2 minibatches
    updates = sum(r["train/optimizer_steps"] for r in rows)
    assert trainer.ewma.num_updates == updates

    resumed = Trainer(_config(tmp_path, steps=3, resume=True))
    assert resumed.step == 2 and resumed.ewma.num_updates == updates and not resumed.sft_metrics
    resumed.train()
    resumed.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 3
