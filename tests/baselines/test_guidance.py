"""Off-policy guidance (baselines.guidance): which groups get a demonstration, what it is,
its behaviour log-probs, the two modes' advantages, and a trainer that learns from
groups that failed every sample (without guidance it takes no step at all)."""

import json

import gymnasium as gym
import pytest
import torch

import agentgym  # noqa: F401  (registers the env ids)
from agentgym.errors import InfraError
from baselines.advantages import group_normalized_advantages
from baselines.agent_loop import AgentLoopConfig
from baselines.chat_tokens import ChatTokenizer
from baselines.config import AlgoConfig, load_config
from baselines.demonstrators import demonstrator
from baselines.engines.base import SamplingConfig
from baselines.errors import ConfigError
from baselines.guidance import DEMONSTRATION, FailedGroupGuide, guided_advantages, set_behaviour_logprobs
from baselines.logprobs import sequence_logprobs
from baselines.sft import oracle_trajectories
from baselines.trainer import Trainer
from baselines.trajectory import Trajectory, collate
from baselines.update import PolicyUpdater


def _wrong(env):
    """A policy that answers a number no Calculator task has."""
    return '<tool_call>{"name": "answer", "arguments": {"answer": -987654}}</tool_call>'


@pytest.fixture
def calculator():
    env = gym.make("agentgym/Calculator-v0", difficulty=1)
    yield env
    env.close()


def _limits(max_new_tokens=64, max_seq_len=4096):
    return AgentLoopConfig(SamplingConfig(max_new_tokens=max_new_tokens, temperature=1.0), max_seq_len, 0.0)


def _samples(env, chat, seed, group, policy, n=2):
    trajs = oracle_trajectories(env, chat, [seed] * n, policy=policy)
    for t in trajs:
        t.group_id = group
    return trajs


def test_only_a_group_that_failed_every_sample_gets_its_tasks_demonstration(calculator, tokenizer):
    chat = ChatTokenizer(tokenizer)
    failed = _samples(calculator, chat, 11, 0, _wrong)
    mixed = _samples(calculator, chat, 12, 1, _wrong, n=1) + _samples(calculator, chat, 12, 1, None, n=1)
    solved = _samples(calculator, chat, 13, 2, None)
    assert not any(t.success for t in failed) and all(t.success for t in solved)
    guide = FailedGroupGuide(calculator, chat, demonstrator("oracle"), _limits())
    out = guide.guide(failed + mixed + solved, task_seeds=[11, 12, 13])
    assert out.failed_groups == 1 and out.demonstrations == 1
    assert out.trajectories[:6] == failed + mixed + solved  # the policy's samples first, untouched
    (demo,) = out.trajectories[6:]
    assert demo.group_id == 0 and demo.task_id == failed[0].task_id and demo.success and demo.info[DEMONSTRATION]
    assert demo.num_generated > 0


class _BrokenEnv:
    """An env whose sandbox cannot start."""

    def reset(self, seed=None, options=None):
        raise InfraError("the sandbox did not start")

    def close(self):
        pass


def test_a_demonstration_a_rollout_could_not_produce_is_not_used(calculator, tokenizer):
    chat = ChatTokenizer(tokenizer)
    failed = _samples(calculator, chat, 11, 0, _wrong)
    (demo,) = oracle_trajectories(calculator, chat, [11])
    first_turn = next(n for start, n in __import__("baselines.sft", fromlist=["turn_spans"]).turn_spans(demo))
    cases = {
        "other_task": (FailedGroupGuide(calculator, chat, demonstrator("oracle"), _limits()), [99]),
        "too_long": (FailedGroupGuide(calculator, chat, demonstrator("oracle"), _limits(max_seq_len=len(demo.token_ids) - 1)), [11]),
        "demo_failed": (FailedGroupGuide(calculator, chat, _wrong, _limits()), [11]),
        "infra_failed": (FailedGroupGuide(_BrokenEnv(), chat, demonstrator("oracle"), _limits()), [11]),
    }
    # a turn longer than a rollout's turn, or one starting where a rollout has no room left
    cases["cut_turn"] = (FailedGroupGuide(calculator, chat, demonstrator("oracle"), _limits(max_new_tokens=first_turn - 1)), [11])
    cases["late_turn"] = (FailedGroupGuide(calculator, chat, demonstrator("oracle"),
                                           _limits(max_new_tokens=64, max_seq_len=len(demo.token_ids) + 40)), [11])
    for why, (guide, seeds) in cases.items():
        out = guide.guide(failed, task_seeds=seeds)
        expected = {"cut_turn": "too_long", "late_turn": "too_long"}.get(why, why)
        assert out.demonstrations == 0 and out.skipped[expected] == 1, (why, out.skipped)
    assert FailedGroupGuide(calculator, chat, demonstrator("oracle"), _limits()).guide(failed, [11]).demonstrations == 1


def test_behaviour_logprobs_are_the_policys_own_on_the_demonstrated_tokens(calculator, tokenizer, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    chat = ChatTokenizer(tokenizer)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    (demo,) = oracle_trajectories(calculator, chat, [5])
    assert set(demo.engine_logprobs) == {0.0}  # what SFT's tokenisation leaves: "probability 1"
    updater = PolicyUpdater(model, torch.optim.AdamW(model.parameters()), None, AlgoConfig(), temperature=0.7)
    set_behaviour_logprobs([demo], lambda rows: updater.token_logprobs(model, rows), pad_token_id=tokenizer.pad_token_id, version=3)
    batch = collate([demo], torch.zeros(1), tokenizer.pad_token_id)
    with torch.no_grad():
        expected, _ = sequence_logprobs(model, batch.input_ids, batch.attention_mask, temperature=0.7)
    mask = torch.tensor(demo.loss_mask, dtype=torch.bool)
    got = torch.tensor(demo.engine_logprobs)
    assert torch.allclose(got[mask], expected[0][mask], atol=1e-5)
    assert (got[mask] < 0).all() and (got[~mask] == 0).all()
    assert [v for v, m in zip(demo.token_versions, demo.loss_mask) if m] == [3] * int(mask.sum())
    assert all(v == -1 for v, m in zip(demo.token_versions, demo.loss_mask) if not m)


def _traj(group, reward, demo=False):
    t = Trajectory([1], [1], [0.0], 0, group, f"task-{group}", reward=reward, success=reward >= 1)
    if demo:
        t.info[DEMONSTRATION] = True
    return t


def test_rl_contrasts_the_demonstration_with_the_failures_and_imitate_keeps_only_the_demonstration():
    rows = [_traj(0, 0.0) for _ in range(8)] + [_traj(1, 1.0), _traj(1, 0.0)] + [_traj(0, 1.0, demo=True)]
    adv = group_normalized_advantages(torch.tensor([t.reward for t in rows]), [t.group_id for t in rows])
    rl, counted = guided_advantages(rows, adv, "rl")
    assert rl[10] == pytest.approx(8 ** 0.5, rel=1e-4) and rl[:8] == pytest.approx([-(8 ** -0.5)] * 8, rel=1e-4)
    imitate, counted_too = guided_advantages(rows, adv, "imitate")
    assert imitate[10] == rl[10]  # the same weight on the demonstration
    assert (imitate[:8] == 0).all()  # its group's failures are not pushed down
    assert torch.equal(imitate[8:10], rl[8:10])  # an unguided group trains as ever
    # ... and the guided group's rows stay in the update in both modes (the same token count)
    assert counted.tolist() == counted_too.tolist() == [True] * 8 + [False, False] + [True]
    empty, none_counted = guided_advantages([], torch.zeros(0), "imitate")  # a process whose episodes all infra-failed
    assert empty.shape == none_counted.shape == (0,)
    with pytest.raises(ValueError, match="guidance mode"):
        guided_advantages(rows, adv, "none")


def _config(tmp_path, model_dir, guidance):
    return load_config(None, [
        f"model.path={model_dir}", f"log.run_dir={tmp_path}/{guidance}", "log.tensorboard=false",
        "env.kwargs={difficulty: 1}", "steps=2", "device=cpu", "eval_every=0", "sft.episodes=0",
        "rollout.tasks_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=48", "rollout.temperature=1.0",
        "algo.micro_batch_size=4", "algo.lr=1e-3", f"algo.guidance={guidance}",
    ])


@pytest.mark.parametrize("guidance", ["rl", "imitate"])
def test_a_policy_that_solves_nothing_learns_only_with_guidance(tmp_path, tiny_model_dir, guidance):
    """The untrained tiny model fails every Calculator task: every group has advantage 0,
    so the unguided trainer never steps. With guidance each failed group gets the
    oracle's episode and the policy moves towards it."""
    runs = {}
    for mode in ("none", guidance):
        trainer = Trainer(_config(tmp_path, tiny_model_dir, mode))
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        trainer.train()
        trainer.close()
        rows = [json.loads(line) for line in (tmp_path / mode / "metrics.jsonl").read_text().splitlines()]
        assert [r["reward/success_rate"] for r in rows] == [0.0, 0.0]  # the policy's own samples, never the demonstrations
        moved = any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
        runs[mode] = (rows, moved)
    rows, moved = runs["none"]
    assert sum(r["train/optimizer_steps"] for r in rows) == 0 and not moved
    assert not any(k.startswith("guidance/") for k in rows[0])
    rows, moved = runs[guidance]
    assert all(r["guidance/demonstrations"] == 2 and r["guidance/failed_group_frac"] == 1.0 for r in rows)
    assert all(r["guidance/demonstration_tokens"] > 0 and r["perf/guidance_s"] > 0 for r in rows)
    assert sum(r["train/optimizer_steps"] for r in rows) > 0 and moved
    # rl pushes each failed sample down; imitate trains the demonstrations alone, over the same rows
    assert [r["guidance/pushed_down_samples"] for r in rows] == ([4.0, 4.0] if guidance == "rl" else [0.0, 0.0])
    assert [r["train/dropped_zero_adv_frac"] for r in rows] == [0.0, 0.0]
    assert [r["reward/zero_adv_frac"] for r in rows] == [1.0, 1.0]  # the samples' own advantages, as unguided


def test_guidance_is_refused_where_a_demonstration_cannot_be_scored():
    with pytest.raises(ConfigError, match="algo.guidance"):
        load_config(None, ["algo.guidance=rl", "dist.strategy=fsdp2"])
    with pytest.raises(ConfigError, match="algo.guidance"):
        load_config(None, ["algo.guidance=rl", "env.id=agentgym/SearchTeam-v1", "sft.episodes=0"])
    with pytest.raises(ConfigError):
        load_config(None, ["algo.guidance=sometimes"])
