"""The trainer on the asynchronous rollout: calculator_cpu.yaml with rollout.max_staleness=2
trains (PPO-EWMA steps happen on stale data), staleness stays within the bound and is in
metrics.jsonl; closing stops every episode; a resumed run admits afresh from its step
(the queue is not saved)."""

import json
import math

from baselines.config import load_config
from baselines.trainer import Trainer

CONFIG = "baselines/configs/calculator_cpu.yaml"


def _config(tmp_path, model_dir, steps, resume=False, extra=()):
    return load_config(CONFIG, [
        "rollout.max_staleness=2", f"model.path={model_dir}", f"log.run_dir={tmp_path}/run", "log.tensorboard=false",
        f"steps={steps}", f"resume={str(resume).lower()}", "eval_every=0", "sft.episodes=0", "rollout.tasks_per_step=4",
        "rollout.group_size=4", "algo.micro_batch_size=8", *extra,
    ])


def test_calculator_cpu_trains_with_max_staleness_2(tmp_path, trained_model_dir):
    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=6))
    trainer.train()
    trainer.close()
    assert trainer.loop.episodes_running == 0 and trainer.loop.groups_in_flight == 0
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    for r in rows:
        for key in ("rollout/staleness_mean", "rollout/staleness_max", "rollout/groups_in_flight", "perf/engine_idle_frac",
                    "perf/env_idle_frac", "rollout/dropped_stale_groups", "reward/mean"):
            assert math.isfinite(r[key]), key
        assert 0 <= r["rollout/staleness_mean"] <= r["rollout/staleness_max"] <= 2
        assert r["rollout/episodes"] + r["rollout/dropped_infra_failed"] == 16
    updated = [i for i, r in enumerate(rows) if r["train/optimizer_steps"] > 0]
    assert updated and updated[0] < len(rows) - 1, [r["train/optimizer_steps"] for r in rows]  # an update, then a step
    after = rows[updated[0] + 1]  # its groups were admitted (and started) before that update: trained one version later
    assert after["rollout/staleness_max"] >= 1 and after["rollout/admitted_lag_mean"] >= 1
    assert any(k.startswith(("mismatch/staleness_1/", "mismatch/staleness_2/")) for k in after)

    resumed = Trainer(_config(tmp_path, trained_model_dir, steps=7, resume=True))
    assert resumed.step == 6
    resumed.train()
    resumed.close()
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 7 and last["rollout/admitted_lag_mean"] == 0.0  # admitted afresh at the resumed step
    assert last["rollout/episodes"] + last["rollout/dropped_infra_failed"] == 16


def test_mis_on_stale_data_masks_no_token_when_the_engine_computes_as_the_trainer(tmp_path, trained_model_dir):
    """The hf engine in fp32 computes exactly what the trainer does: there is no engine
    mismatch to correct, whatever the staleness. MIS must then mask nothing and
    ``mismatch/*`` read ~0 on stale batches, while the policy drift shows in ``staleness/*``
    (folded together, MIS masked stale tokens for ordinary drift; issue 27)."""
    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=5, extra=["algo.mismatch.mode=mis"]))
    trainer.train()
    trainer.close()
    assert trainer.versions is not None and len(trainer.versions.held()) <= 3
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    stale = [r for r in rows if r.get("staleness/token_frac", 0) > 0]
    assert stale, [r["rollout/staleness_max"] for r in rows]  # else nothing below is tested
    for r in stale:
        assert r["mismatch/logprob_abs_diff_max"] < 1e-3, r["mismatch/logprob_abs_diff_max"]
        assert r["mismatch/is_frac_masked"] == 0.0
        assert r["staleness/logprob_abs_diff_mean"] > 0 and math.isfinite(r["staleness/kl_k3"])
        assert r["memory/policy_versions_bytes"] > 0
