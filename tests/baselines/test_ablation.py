"""baselines.ablation: variants from one SFT start, episodes per step held fixed."""

from __future__ import annotations

import json

from baselines.config import load_config
from baselines.ablation import VARIANTS, _overrides, run


def test_group_size_variants_keep_episodes_per_step():
    base = load_config("baselines/configs/search_cpu.yaml", [])
    episodes = base.rollout.tasks_per_step * base.rollout.group_size
    for name, variant in VARIANTS.items():
        cfg = load_config("baselines/configs/search_cpu.yaml", _overrides(base, variant, "m", 1, 2, 1, 8, __import__("pathlib").Path("r")))
        assert cfg.rollout.tasks_per_step * cfg.rollout.group_size == episodes, name
        assert cfg.sft.episodes == 0 and cfg.model.path == "m" and cfg.seed == 1


def test_ablation_runs_variants_from_the_shared_start_and_plots(tmp_path, trained_model_dir):
    config = tmp_path / "c.yaml"
    config.write_text("device: cpu\nenv: {id: agentgym/Calculator-v0, kwargs: {difficulty: 1}}\n"
                      "rollout: {tasks_per_step: 4, group_size: 4, max_new_tokens: 40, temperature: 0.7}\n"
                      "algo: {micro_batch_size: 8, num_minibatches: 1, lr: 1.0e-4}\n")
    only = ["PPO-EWMA, group 8", "PPO (EWMA off), group 8"]
    results = run(str(config), str(trained_model_dir), [0], steps=2, eval_every=1, eval_tasks=8, out=tmp_path / "out", only=only)
    assert list(results) == only
    for name in only:
        (curve,) = results[name]["runs"]
        assert curve["steps"] == [0, 1, 2] and len(curve["sampled"]) == 3
        assert curve["optimizer_steps"] > 0  # the variants trained (else the comparison shows nothing)
    # Same start: both variants' step-0 evaluations are the same model on the same tasks.
    assert results[only[0]]["runs"][0]["greedy"][0] == results[only[1]]["runs"][0]["greedy"][0]
    assert json.loads((tmp_path / "out" / "ablation.json").read_text()).keys() == set(only)
    assert (tmp_path / "out" / "ablation.png").stat().st_size > 10_000
    assert "PPO (EWMA off), group 8" in (tmp_path / "out" / "ablation.md").read_text()
