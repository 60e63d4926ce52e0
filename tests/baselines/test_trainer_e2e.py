"""End to end on CPU: a tiny model that solves some tasks, short SFT, PPO-EWMA steps that
really happen, checkpoint, resume; and bf16 compute over fp32 master weights."""

import json
import math

import gymnasium as gym
import pytest
import torch

from agentgym.errors import InfraError
from baselines.config import load_config
from baselines.trainer import Trainer


def _config(tmp_path, model_dir, steps, resume=False, extra=()):
    return load_config(None, [
        f"model.path={model_dir}", f"log.run_dir={tmp_path}/run", "log.tensorboard=false",
        "env.kwargs={difficulty: 1}", f"steps={steps}", "device=cpu", "eval_every=0", f"resume={str(resume).lower()}",
        "rollout.tasks_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=40", "rollout.temperature=0.7",
        "rollout.drift_check_frac=1.0", "sft.episodes=8", "sft.steps=4", "sft.batch_size=4", "sft.lr=1e-5",
        "algo.micro_batch_size=4", "algo.num_minibatches=2", "algo.lr=1e-4",
        "rollout.max_staleness=0",  # fresh data only: engine == trainer below (async training: test_async_trainer.py)
        *extra,
    ])


def test_train_checkpoint_and_resume(tmp_path, trained_model_dir, caplog):
    with caplog.at_level("INFO", logger="baselines.trainer"):
        trainer = Trainer(_config(tmp_path, trained_model_dir, steps=2))
    assert trainer.sft_metrics["sft/oracle_success"] == 1.0 and trainer.sft_metrics["sft/steps"] == 4
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("SFT step")]
    assert [m.split(":")[0] for m in progress] == ["SFT step 1/4", "SFT step 2/4", "SFT step 3/4", "SFT step 4/4"]  # SFT reports progress
    # The SFT start is saved as a model directory: RL runs (an ablation) can share it.
    from transformers import AutoModelForCausalLM
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "sft_model")
    assert all(torch.equal(a, b) for a, b in zip(saved.state_dict().values(), trainer.model.state_dict().values()))
    trainer.train()
    trainer.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    updates = sum(r["train/optimizer_steps"] for r in rows)
    assert updates > 0, [r["train/dropped_zero_adv_frac"] for r in rows]  # else nothing below is tested
    for r in rows:
        keys = ["reward/mean", "perf/train_tokens_per_s", "perf/rollout_tokens_per_s",
                "rollout/dropped_infra_failed", "tool/calculate/usage_frac", "memory/ewma_bytes", "train/dropped_zero_adv_frac"]
        if r["train/optimizer_steps"] > 0:  # mismatch/* are measured on the first step's rows (no extra pass)
            keys += ["loss/policy", "policy/entropy", "loss/approx_kl_prox", "loss/grad_norm", "mismatch/logprob_abs_diff_max"]
            assert r["loss/grad_norm"] > 0
            assert r["mismatch/logprob_abs_diff_max"] < 1e-3  # hf engine in fp32 == trainer
        for key in keys:
            assert r[key] is not None and math.isfinite(r[key]), key
        assert r["train/optimizer_steps"] + r["train/skipped_steps"] == 2  # 2 minibatches
    assert trainer.ewma.num_updates == updates
    # The trained policy is saved as a model directory too, for agentgym eval run --model RUN/model.
    final = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "model")
    assert all(torch.equal(a, b) for a, b in zip(final.state_dict().values(), trainer.model.state_dict().values()))
    assert any(not torch.equal(a, b) for a, b in zip(final.state_dict().values(), saved.state_dict().values()))
    assert (tmp_path / "run" / "model" / "tokenizer.json").exists()
    ewma_state = {k: v.clone() for k, v in trainer.ewma.module.state_dict().items()}

    resumed = Trainer(_config(tmp_path, trained_model_dir, steps=3, resume=True))
    assert resumed.step == 2 and resumed.ewma.num_updates == updates and not resumed.sft_metrics
    for k, v in resumed.ewma.module.state_dict().items():
        assert torch.equal(v, ewma_state[k]), k
    assert any(not torch.equal(v, resumed.ewma.module.state_dict()[k]) for k, v in _initial(trained_model_dir).items()
               if k in resumed.ewma.module.state_dict())  # the EWMA moved away from the start
    resumed.train()
    resumed.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 3


def _initial(model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).state_dict()


def test_bf16_compute_keeps_fp32_master_weights_that_take_small_steps(tmp_path, trained_model_dir):
    """model.dtype=bfloat16 at lr 1e-6: bf16 parameters would round most updates away."""
    from baselines.trajectory import TokenBatch

    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=1, extra=["model.dtype=bfloat16", "sft.episodes=0", "algo.lr=1e-6",
                                                                          "algo.num_minibatches=1"]))
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    assert all(p.dtype == torch.float32 for p in trainer.ewma.module.parameters())
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 100, (4, 24), generator=g)
    mask = (torch.arange(24)[None] >= 8).float().expand(4, 24).clone()
    batch = TokenBatch(ids, torch.ones_like(ids), mask, -torch.rand(4, 24, generator=g) * mask, torch.tensor([1.0, -1.0, 0.5, -0.5]))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    ewma_before = [p.detach().clone() for p in trainer.ewma.module.parameters()]
    for _ in range(3):
        assert trainer.updater.update(batch)["train/optimizer_steps"] == 1
    # Transformer blocks only. The tied embedding's elements for tokens absent from this
    # batch get gradient only through the softmax, scaled by those tokens' probabilities,
    # which depend on how peaked the SFT'd fixture is: with the fixture built at b872cb6
    # their per-row max |g| had a median of 5e-10 (5e-9 with one built before it); 15% of
    # the embedding's elements had |g| ~ 2e-11, where AdamW's step lr*|g|/(|g|+eps) ~ 2e-9
    # (eps=1e-8) is under half an fp32 ulp of a weight ~0.1, so they round to no change
    # (every row still moved). Completion-only logits change no gradient (the update is
    # bit-identical to the full-logits path on one model; test_update.py checks the tied
    # head's gradient against it). Every block weight gets a gradient well above eps.
    blocks = [n for n, _ in trainer.model.named_parameters() if ".layers." in n]
    params = dict(trainer.model.named_parameters())
    moved = sum(int((params[n].detach() != before[n]).sum()) for n in blocks)
    total = sum(params[n].numel() for n in blocks)
    assert moved / total > 0.9, moved / total  # bf16 parameters: well under 10% move at this lr
    assert all(s.dtype == torch.float32 for st in trainer.optimizer.state.values() for s in st.values() if s.dim() > 0)
    ewma_moved = sum(int((p != b).sum()) for (n, p), b in zip(trainer.ewma.module.named_parameters(), ewma_before) if n in blocks)
    assert ewma_moved / total > 0.9, ewma_moved / total
    trainer.close()


def test_sft_refuses_demonstrations_longer_than_a_rollout_turn(tmp_path, trained_model_dir):
    """A demonstrated turn the rollout would cut is a config error, raised before any SFT
    step (DataAnalysis's names_first programs were cut at 160 tokens: one training template unsolvable)."""
    from baselines.errors import ConfigError

    with pytest.raises(ConfigError, match=r"rollout.max_new_tokens=4 .* at least \d+"):
        Trainer(_config(tmp_path, trained_model_dir, steps=1, extra=["rollout.max_new_tokens=4"]))
    assert not (tmp_path / "run" / "sft_model").exists()
    trainer = Trainer(_config(tmp_path / "fits", trained_model_dir, steps=1, extra=["sft.steps=1", "eval_sampled=false"]))
    longest = trainer.sft_metrics["sft/longest_turn_tokens"]
    trainer.close()
    assert 4 < longest <= 40 and trainer.sft_metrics["sft/latest_turn_start"] > 0


def test_agentgym_train_reports_a_late_config_error_in_one_line(tmp_path, trained_model_dir):
    """The demonstration check runs inside the Trainer, after the YAML loaded: the CLI
    still prints one line naming the limit to set, exit code 2, and no traceback."""
    from typer.testing import CliRunner

    from agentgym.cli import app

    args = [f"model.path={trained_model_dir}", f"log.run_dir={tmp_path}/run", "log.tensorboard=false", "device=cpu",
            "steps=1", "eval_every=0", "env.kwargs={difficulty: 1}", "sft.episodes=8", "sft.steps=1", "rollout.max_new_tokens=4"]
    result = CliRunner().invoke(app, ["train", "--config", "baselines/configs/calculator_cpu.yaml", *args])
    assert result.exit_code == 2, result.output
    last = result.stderr.rstrip("\n").split("\n")[-1]  # (above it: transformers' loading bars)
    assert last.startswith("config error: ") and "Set rollout.max_new_tokens to at least" in last
    assert "rollout.max_new_tokens=4" in last and "Traceback" not in result.output


@pytest.mark.parametrize("source", ["demonstrations", "tokenizer"])
def test_sft_copy_warmup_runs_before_imitation(tmp_path, trained_model_dir, caplog, source):
    with caplog.at_level("INFO", logger="baselines.trainer"):
        trainer = Trainer(_config(tmp_path, trained_model_dir, steps=1, extra=["sft.copy_warmup=3", f"sft.copy_vocabulary={source}"]))
    trainer.close()
    every = len(trainer.tokenizer) - len(set(trainer.tokenizer.all_special_ids))
    drawn = trainer.sft_metrics["sft/copy_warmup_tokens"]
    assert drawn == every if source == "tokenizer" else 2 <= drawn < every, (drawn, every)
    messages = [r.getMessage() for r in caplog.records]
    warm = next(k for k, m in enumerate(messages) if m.startswith("SFT copy warm-up: 3 steps"))
    assert warm < next(k for k, m in enumerate(messages) if m.startswith("SFT step 1/4"))
    assert math.isfinite(trainer.sft_metrics["sft/copy_warmup_loss_last"]) and trainer.sft_metrics["sft/copy_warmup_seconds"] > 0


def test_evaluation_holds_no_more_envs_than_a_rollout_batch(tmp_path, trained_model_dir):
    """Each eval env holds its sandbox (a DataAnalysis container with pandas loaded): two
    DataAnalysis runs evaluating 256 tasks on one env each held ~700 containers and ran
    this 24 GiB machine out of memory. Evaluation runs in chunks of a rollout batch, and
    a chunked evaluation scores the same tasks as one pass would."""
    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=1, extra=["sft.episodes=0", "eval_sampled=false"]))
    try:
        from baselines.trainer import EVAL_CHUNK_EPISODES

        batch = max(EVAL_CHUNK_EPISODES, trainer.config.rollout.tasks_per_step * trainer.config.rollout.group_size)
        seeds = list(range(2 * batch + 5))
        chunked = trainer._success("validation", seeds, 0.0)
        assert 0 < len(trainer._eval_envs["validation"]) <= batch
        trainer.config.rollout.tasks_per_step = len(seeds)  # one pass over every task
        assert trainer._success("validation", seeds, 0.0) == chunked
        assert len(trainer._eval_envs["validation"]) == len(seeds)
    finally:
        trainer.close()


def test_a_sampled_evaluation_draws_each_tasks_episodes_whatever_it_is_batched_with(tmp_path, trained_model_dir,
                                                                                   monkeypatch):
    """Each sampled episode has its own seed (the run's, its task's, its sample's), so a
    task's episodes are the same in chunks of 4 tasks or in one pass: what a paired
    before/after comparison on the same tasks needs. One seed per chunk and turn made a
    task's draws depend on the chunk it fell in and on which episodes were still running."""
    import baselines.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "EVAL_CHUNK_EPISODES", 8)
    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=1, extra=[
        "sft.episodes=0", "rollout.tasks_per_step=2", "rollout.group_size=2"]))
    try:
        seeds = list(range(24))
        chunked = trainer._success_per_task("validation", seeds, 1.0, samples=2)  # chunks of 4 tasks
        trainer.config.rollout.tasks_per_step = 24  # one pass over every task
        whole = trainer._success_per_task("validation", seeds, 1.0, samples=2)
        assert chunked.per_task == whole.per_task and chunked.episodes == whole.episodes == 48
        assert 2 < chunked.wins < 46  # episodes that succeed and fail: the comparison can fail
    finally:
        trainer.close()


def test_sft_stop_patience_keeps_the_best_checks_weights(tmp_path, trained_model_dir):
    """SFT checked after every step with patience 2 stops two checks after its best and
    keeps the best check's weights: the same weights as a run of exactly that many SFT
    steps (same seed, same minibatches), not those of the step it stopped at."""
    common = ["sft.lr=1e-3", "sft.schedule=constant", "sft.check_tasks=8", "eval_sampled=false", "sft.stop_success=null"]
    patient = Trainer(_config(tmp_path / "patient", trained_model_dir, steps=1, extra=[
        *common, "sft.steps=12", "sft.check_every=1", "sft.check_from=1", "sft.stop_patience=2"]))
    patient.close()
    metrics = patient.sft_metrics
    best = int(metrics["sft/best_check_step"])
    assert metrics["sft/best_check_success"] > 0 and metrics["sft/restored_step"] == best, metrics
    assert metrics["sft/steps"] == best + 2, metrics
    same = Trainer(_config(tmp_path / "same", trained_model_dir, steps=1, extra=[*common, f"sft.steps={best}"]))
    same.close()
    for (name, a), b in zip(patient.model.named_parameters(), same.model.parameters()):
        assert torch.equal(a, b), name
    last = Trainer(_config(tmp_path / "last", trained_model_dir, steps=1, extra=[*common, f"sft.steps={best + 2}"]))
    last.close()
    assert any(not torch.equal(a, b) for a, b in zip(patient.model.parameters(), last.model.parameters()))


def test_kl_reference_is_the_sft_start_also_after_resume(tmp_path, trained_model_dir):
    """``algo.kl_coef`` anchors RL to the weights it starts from: the SFT start, which a
    resumed run (SFT not rerun, the policy built from ``model.path``) reloads from disk."""
    from transformers import AutoModelForCausalLM

    extra = ["algo.kl_coef=0.05", "sft.lr=1e-3"]
    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=2, extra=extra))
    sft_start = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "sft_model").state_dict()
    initial = _initial(trained_model_dir)
    ref = trainer.reference.state_dict()
    assert all(torch.equal(ref[k], v) for k, v in sft_start.items())
    assert any(not torch.equal(ref[k], v) for k, v in initial.items() if k in ref)  # SFT moved it
    trainer.train()
    trainer.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    stepped = [r for r in rows if r["train/optimizer_steps"] > 0]
    assert stepped, [r["train/dropped_zero_adv_frac"] for r in rows]  # else nothing below is tested
    assert all(math.isfinite(r["loss/kl_ref"]) and r["loss/kl_ref"] >= 0 for r in stepped)
    assert all(torch.equal(trainer.reference.state_dict()[k], v) for k, v in sft_start.items())  # frozen
    assert any(not torch.equal(trainer.model.state_dict()[k], v) for k, v in sft_start.items())  # the policy moved

    resumed = Trainer(_config(tmp_path, trained_model_dir, steps=3, resume=True, extra=extra))
    ref = resumed.reference.state_dict()
    assert all(torch.equal(ref[k], v) for k, v in sft_start.items())
    resumed.close()


def test_env_name_pieces_spell_the_rollouts_train_names_with_the_tokenizers_pieces(tmp_path, trained_model_dir,
                                                                                   monkeypatch):
    """``env.name_pieces: tokenizer`` hands the policy tokenizer's letter tokens to every env
    the run makes, so DataAnalysis-v2's ``invent_spelled`` spells RL's made-up train names
    with them (a held-out name's pieces then occur in training names, not only in SFT's);
    without it, a config that asks for spelled names is refused at load."""
    import re

    from baselines.errors import ConfigError

    monkeypatch.setenv("AGENTGYM_SANDBOX", "process")
    da = ["env.id=agentgym/DataAnalysis-v2",
          "env.kwargs={tier: 1, backend: process, max_turns: 2, invent_names: 1.0, invent_spelled: 1.0}",
          "env.eval_split=test", "sft.episodes=0", "eval_sampled=false", "rollout.tasks_per_step=2",
          "rollout.group_size=2", "rollout.max_new_tokens=8", "algo.micro_batch_size=2", "algo.num_minibatches=1"]
    with pytest.raises(ConfigError, match="env.name_pieces"):
        _config(tmp_path, trained_model_dir, steps=1, extra=da)
    with pytest.raises(ConfigError, match="takes none"):  # Calculator has no names to spell
        _config(tmp_path, trained_model_dir, steps=1, extra=["env.name_pieces=tokenizer"])
    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=1, extra=[*da, "env.name_pieces=tokenizer"]))
    try:
        tokens = trainer.tokenizer.convert_ids_to_tokens(list(range(len(trainer.tokenizer))))
        pieces = sorted({t for t in tokens if re.fullmatch(r"[a-z]+", t)})
        assert len(pieces) > 5
        assert trainer.train_step()["rollout/generated_tokens"] > 0  # the rollout envs played their tasks
        spelled = re.compile("(?:" + "|".join(sorted(map(re.escape, pieces), key=len, reverse=True)) + ")+")
        stems = [f.rsplit(".", 1)[0] for env in trainer.loop.envs
                 for f in env.unwrapped.task.question.files]
        assert stems and all(env.unwrapped.fingerprint.fields["name_pieces"].startswith(f"{len(pieces)}:")
                             for env in trainer.loop.envs)
        words = [w for s in stems for w in re.findall(r"[a-z]{3,}", s.lower())]
        assert words and all(spelled.fullmatch(w) for w in words), words
    finally:
        trainer.close()


def test_the_copy_task_steps_beside_ppo_and_its_optimiser_is_checkpointed(tmp_path, trained_model_dir):
    """algo.copy_lr: each optimiser step reports a copy loss, and a resumed run gets the
    copy task's AdamW moments back (not fresh ones, which would take larger first steps)."""
    extra = ("algo.copy_lr=1e-3", "algo.copy_batch_size=2")
    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=2, extra=extra))
    trainer.train()
    trainer.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    stepped = [r for r in rows if r["train/optimizer_steps"] > 0]
    assert stepped, [r["train/dropped_zero_adv_frac"] for r in rows]  # else nothing below is tested
    assert all(r["loss/copy"] > 0 for r in stepped)
    saved = {k: v.clone() for k, v in trainer.updater.copy_optimizer.state_dict()["state"][0].items()}
    assert saved["step"] > 0
    resumed = Trainer(_config(tmp_path, trained_model_dir, steps=3, resume=True, extra=extra))
    restored = resumed.updater.copy_optimizer.state_dict()["state"][0]
    for key, value in saved.items():
        assert torch.equal(restored[key], value), key
    resumed.close()
    (tmp_path / "run" / "checkpoint" / "copy_optimizer.pt").unlink()  # as a run without the copy task saves it
    from baselines.checkpoint import CheckpointError
    with pytest.raises(CheckpointError, match="without algo.copy_lr"):
        Trainer(_config(tmp_path, trained_model_dir, steps=3, resume=True, extra=extra))


def test_task_replay_puts_informative_tasks_back_and_survives_a_resume(tmp_path, trained_model_dir):
    """rollout.replay_frac: a step's first tasks are earlier steps' tasks whose samples
    disagreed, and the replay buffer is part of the checkpoint."""
    from baselines.task_replay import informative_groups

    extra = ("rollout.replay_frac=0.5", "rollout.replay_uses=2")
    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=4, extra=extra))
    informative: set[int] = set()
    replays = 0
    for _ in range(4):
        metrics = trainer.train_step()
        batch = trainer.loop.last_batch
        head = batch.task_seeds[: int(metrics["rollout/replayed_tasks"])]
        assert set(head) <= informative  # a replay is a task that gave a signal before
        replays += len(head)
        flags = informative_groups([t.reward for t in batch.trajectories], [t.group_id for t in batch.trajectories], 4)
        informative |= {s for s, f in zip(batch.task_seeds, flags) if f}
        assert metrics["rollout/informative_tasks_frac"] == sum(bool(f) for f in flags) / 4
    assert replays > 0, informative  # else nothing above is tested
    trainer.save()
    state = trainer.replay.state_dict()
    trainer.close()
    resumed = Trainer(_config(tmp_path, trained_model_dir, steps=5, resume=True, extra=extra))
    assert resumed.step == 4 and resumed.replay.state_dict() == state
    resumed.close()


def test_the_summary_pairs_the_before_and_after_evaluations_task_by_task(tmp_path, trained_model_dir):
    """Before and after are the same held-out tasks, so the summary carries the paired
    error of the gain (``*_gain_se_paired``) beside the unpaired one, computed from each
    task's success in the first and last evaluations."""
    from baselines.trainer import _paired_difference_sums, _paired_gain_se

    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=2, extra=["sft.episodes=0", "eval_every=2", "eval_tasks=8"]))
    seen: list[dict[str, list[float]]] = []
    evaluate = trainer.evaluate

    def evaluate_and_record(*args, **kwargs):
        out = evaluate(*args, **kwargs)
        seen.append({name: list(v) for name, v in trainer.eval_per_task.items()})
        return out

    trainer.evaluate = evaluate_and_record
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    assert len(seen) == 2  # step 0 and step 2
    for name in ("success", "sampled_success"):
        before, after = seen[0][name], seen[-1][name]
        assert len(before) == len(after) == 8
        assert sum(after) / 8 == pytest.approx(summary[f"eval/{name}_after"])
        assert sum(a - b for a, b in zip(after, before)) / 8 == pytest.approx(summary[f"eval/{name}_gain"])
        assert summary[f"eval/{name}_gain_se_paired"] == pytest.approx(_paired_gain_se(*_paired_difference_sums(before, after)))


class _EngineDown(gym.Wrapper):
    """An eval env whose sandbox engine stalled: every reset fails as infrastructure
    (the ``InfraError`` an env raises when it cannot start its sandbox pool)."""

    def reset(self, **kwargs):
        raise InfraError("could not start a sandbox pool: the engine did not answer in time")


def test_an_evaluation_leaves_out_what_infrastructure_failed_and_never_scores_it_zero(tmp_path, trained_model_dir, caplog):
    """An engine that stalled for a whole evaluation once showed as a held-out success of
    0.0: a policy that forgot everything, in the run's curve and its before/after summary.
    Episodes infrastructure failed are counted (``eval/infra_failed``) and left out of the
    rate; when none ran, the rate is NaN, not 0."""
    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=1, extra=["sft.episodes=0", "eval_sampled=false"]))
    try:
        seeds = list(range(8))
        healthy = trainer._success_per_task("validation", seeds, 0.0)
        envs = trainer._eval_envs["validation"]
        assert len(envs) == 8 and (healthy.episodes, healthy.infra_failed) == (8, 0)
        envs[:4] = [_EngineDown(e) for e in envs[:4]]

        half = trainer._success_per_task("validation", seeds, 0.0)
        assert (half.episodes, half.infra_failed) == (4, 4)
        assert all(math.isnan(x) for x in half.per_task[:4]) and half.per_task[4:] == healthy.per_task[4:]
        assert half.rate == pytest.approx(sum(healthy.per_task[4:]) / 4)
        with caplog.at_level("WARNING", logger="baselines.trainer"):
            metrics = trainer.evaluate(8)
        assert metrics["eval/success_rate"] == pytest.approx(half.rate)
        assert (metrics["eval/episodes"], metrics["eval/infra_failed"]) == (4, 4)
        assert "infrastructure failed 4 of 8 episodes" in caplog.text

        envs[4:] = [_EngineDown(e) for e in envs[4:]]
        down = trainer.evaluate(8)
        assert math.isnan(down["eval/success_rate"]) and (down["eval/episodes"], down["eval/infra_failed"]) == (0, 8)
    finally:
        trainer.close()


def test_agentgym_train_prints_the_summary_before_the_clean_up(tmp_path, trained_model_dir, monkeypatch):
    """A run whose clean-up fails (or takes long: an engine that stalls on removing its
    sandboxes) has still printed its result: the summary is the run's, the clean-up is not."""
    from typer.testing import CliRunner

    from agentgym.cli import app

    close = Trainer.close

    def close_then_fail(self):
        close(self)
        raise RuntimeError("the engine stalled while the sandboxes were removed")

    monkeypatch.setattr(Trainer, "close", close_then_fail)
    args = [f"model.path={trained_model_dir}", f"log.run_dir={tmp_path}/run", "log.tensorboard=false", "device=cpu",
            "steps=1", "eval_every=1", "eval_tasks=4", "env.kwargs={difficulty: 1}", "sft.episodes=0",
            "rollout.tasks_per_step=2", "rollout.group_size=2"]
    result = CliRunner().invoke(app, ["train", "--config", "baselines/configs/calculator_cpu.yaml", *args])
    assert isinstance(result.exception, RuntimeError) and "engine stalled" in str(result.exception)
    printed = " ".join(result.stdout.split())  # (rich wraps long lines)
    assert "'eval/success_after':" in printed and "the trained policy:" in printed


def test_a_resumed_run_measures_its_gain_from_the_start_not_from_where_it_resumed(tmp_path, trained_model_dir):
    """The outage stop says "resume=true"; the resumed run's summary once measured
    ``eval/*_before`` at the resumed step, so its gain covered only the last stretch. The
    start's evaluation is kept in the run directory and reused."""
    extra = ["sft.episodes=0", "eval_every=2", "eval_tasks=8", "checkpoint_every=1"]
    first = Trainer(_config(tmp_path, trained_model_dir, steps=2, extra=extra))
    try:
        ran_through = first.train()
    finally:
        first.close()
    assert (tmp_path / "run" / "eval_start" / "rank-000.json").exists() and ran_through["eval/before_step"] == 0

    resumed = Trainer(_config(tmp_path, trained_model_dir, steps=3, resume=True, extra=extra))
    evaluations = []
    evaluate = resumed.evaluate
    resumed.evaluate = lambda *a, **k: evaluations.append(resumed.step) or evaluate(*a, **k)
    try:
        summary = resumed.train()
    finally:
        resumed.close()
    assert evaluations == [3]  # not the resumed step: the start is the kept one
    assert summary["eval/before_step"] == 0
    for name in ("success", "sampled_success"):
        assert summary[f"eval/{name}_before"] == ran_through[f"eval/{name}_before"]
        assert summary[f"eval/{name}_gain"] == pytest.approx(summary[f"eval/{name}_after"] - ran_through[f"eval/{name}_before"])
        assert f"eval/{name}_gain_se_paired" in summary

    # Resumed with nothing left to run: the policy is still evaluated for "after".
    again = Trainer(_config(tmp_path, trained_model_dir, steps=3, resume=True, extra=extra))
    try:
        end = again.train()
    finally:
        again.close()
    assert end["eval/success_before"] == ran_through["eval/success_before"] and "eval/success_after" in end

    # Another evaluation (more tasks) does not reuse the kept start: it says which step it measured.
    other = Trainer(_config(tmp_path, trained_model_dir, steps=3, resume=True,
                            extra=[*extra[:-2], "eval_tasks=4", "checkpoint_every=1"]))
    try:
        assert other.train()["eval/before_step"] == 3
    finally:
        other.close()


class _PauseAt:
    """A reward watch that pauses at ``step`` (the watch's own decision is tested in
    test_reward_watch.py; here, what the loop does with it)."""

    def __init__(self, step):
        self.step, self.paused = step, False

    def observe(self, step, trajectories, metrics):
        self.paused = step == self.step
        return {"alarm/fired": float(self.paused)}

    def close(self):
        pass


def test_a_paused_run_reports_the_paused_policys_success_as_its_after(tmp_path, trained_model_dir):
    """A reward-watch pause between evaluation steps once left the summary's "after" at
    the last evaluation before it (here: the start's, so the gain read 0)."""
    trainer = Trainer(_config(tmp_path, trained_model_dir, steps=4,
                              extra=["sft.episodes=0", "eval_every=4", "eval_tasks=8", "eval_sampled=false"]))
    trainer.watch = _PauseAt(2)
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert summary["alarm/paused_at_step"] == 2 and rows[-1]["step"] == 2
    assert [r["step"] for r in rows if "eval/success_rate" in r] == [0, 2]
    assert summary["eval/success_after"] == rows[-1]["eval/success_rate"]
