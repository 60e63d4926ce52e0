"""Token accounting of the agent loop on real Calculator-v0 episodes.

The engine here replays fixed token ids (the oracle's actions); what is under test is the
loop's bookkeeping: exact generated ids kept, observation deltas tokenised against a fixed
base, masks and log-probs in the right places, drift check, infra-failed episodes dropped.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from agentgym import AgentError, InfraError, Tool, ToolEnv
from baselines.agent_loop import AgentLoop, AgentLoopConfig
from baselines.chat_tokens import ChatTokenizer
from baselines.engines.base import Generation, SamplingConfig


class ReplayEngine:
    """Returns, for each prompt, the next scripted completion of the env it belongs to."""

    def __init__(self, script):
        self.script = script  # callable(prompt_ids) -> (ids, finish_reason)
        self.prompts = []

    def generate(self, prompts, sampling, seed=None, row_seeds=None):
        out = []
        for p in prompts:
            self.prompts.append(list(p))
            ids, reason = self.script(p)
            out.append(Generation(ids, [-0.5 - 0.01 * i for i in range(len(ids))], reason))
        return out

    def sync_weights(self, state_dict):
        pass

    def sleep(self):
        pass

    def wake_up(self):
        pass


def test_multi_turn_ids_and_masks_match_the_chat_template(tokenizer):
    chat = ChatTokenizer(tokenizer)
    env = gym.make("agentgym/Calculator-v0", difficulty=1)
    eot = tokenizer.eos_token_id

    def script(prompt):
        action = env.unwrapped.oracle_action()
        return tokenizer.encode(action, add_special_tokens=False) + [eot], "stop"

    loop = AgentLoop([env], ReplayEngine(script), chat, AgentLoopConfig(SamplingConfig(max_new_tokens=64), 4096, 1.0))
    batch = loop.collect([5], group_size=1)
    (t,) = batch.trajectories
    assert t.reward == 1.0 and t.success and t.turns == 2 and t.drift_ok

    # Expected: the whole conversation rendered once with the template, minus the trailer
    # after the final end-of-turn token.
    full = tokenizer.encode(tokenizer.apply_chat_template(t.messages, tools=t.tools, tokenize=False), add_special_tokens=False)
    assert t.token_ids == full[: len(t.token_ids)]
    assert full[len(t.token_ids):] == chat.turn_trailer

    # Mask 1 exactly on the two assistant turns (action ids + end-of-turn), with their log-probs.
    spans = _spans(t.loss_mask)
    assert len(spans) == 2
    for (a, b), msg in zip(spans, [m for m in t.messages if m["role"] == "assistant"]):
        assert tokenizer.decode(t.token_ids[a : b - 1]) == msg["content"]
        assert t.token_ids[b - 1] == eot
        assert t.engine_logprobs[a:b] == pytest.approx([-0.5 - 0.01 * i for i in range(b - a)])
    assert all(lp == 0.0 for lp, m in zip(t.engine_logprobs, t.loss_mask) if m == 0)
    # The tool output "<tool_response>...": its tokens are mask 0 and sit between the spans.
    between = tokenizer.decode(t.token_ids[spans[0][1] : spans[1][0]])
    assert "<tool_response>" in between and between.endswith("<|im_start|>assistant\n")
    assert batch.stats["tokens/drift_frac"] == 0.0


def test_turn_cut_at_max_tokens_gets_end_of_turn_with_mask_zero(tokenizer):
    chat = ChatTokenizer(tokenizer)
    env = gym.make("agentgym/Calculator-v0", difficulty=1, max_turns=2)
    junk = tokenizer.encode("hello there", add_special_tokens=False)
    loop = AgentLoop([env], ReplayEngine(lambda p: (junk, "length")), chat, AgentLoopConfig(SamplingConfig(max_new_tokens=len(junk)), 4096, 1.0))
    (t,) = loop.collect([1], group_size=1).trajectories
    assert t.turns == 2 and t.truncated and t.reward == 0.0
    first_end = t.prompt_len + len(junk)
    assert t.token_ids[first_end] == tokenizer.eos_token_id and t.loss_mask[first_end] == 0
    assert sum(t.loss_mask) == 2 * len(junk)


def test_group_members_share_a_task_and_infra_failed_episodes_are_dropped(tokenizer):
    class FlakyEnv(ToolEnv):
        env_name = "Flaky"

        def _new_task(self, rng, options):
            return type("T", (), {"task_id": f"flaky-{int(rng.integers(1000))}"})()

        def _tools(self, task):
            async def probe(x: str) -> str:
                if x == "down":
                    raise InfraError("service unavailable")
                raise AgentError("try again")

            async def answer(answer: str) -> str:
                return "ok"

            obj = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
            ans = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
            return [Tool("probe", "probe", obj, probe, max_retries=0), Tool("answer", "answer", ans, answer)]

        def _prompt(self, task):
            return "probe it"

        def _score(self, task, args):
            return 1.0, {}

    envs = [FlakyEnv(max_turns=1) for _ in range(4)]
    calls = iter(["down", "up", "up", "down"])

    def script(prompt):
        text = '<tool_call>{"name": "probe", "arguments": {"x": "%s"}}</tool_call>' % next(calls)
        return tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id], "stop"

    loop = AgentLoop(envs, ReplayEngine(script), ChatTokenizer(tokenizer), AgentLoopConfig(SamplingConfig(64), 4096, 0.0))
    batch = loop.collect([11, 12], group_size=2)
    assert batch.dropped_infra_failed == 2
    assert batch.stats["rollout/dropped_infra_failed"] == 2.0
    assert [t.group_id for t in batch.trajectories] == [0, 1]
    assert batch.stats["tool/probe/infra_error_rate"] == pytest.approx(0.5)
    # same seed within a group -> same task
    ids = [e.task.task_id for e in envs]
    assert ids[0] == ids[1] and ids[2] == ids[3]


def _spans(mask):
    spans, start = [], None
    for i, m in enumerate(mask + [0]):
        if m and start is None:
            start = i
        if not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def test_episode_seeds_make_a_tasks_sampled_episodes_independent_of_the_batch(tiny_model_dir, tokenizer):
    """With ``episode_seeds`` each episode samples from its own seed at every turn, so a
    task's episodes come out the same alone or batched with other tasks (what a paired
    before/after evaluation needs); one call seed per turn made them depend on the batch."""
    from baselines.engines.base import derived_seed
    from baselines.engines.hf import HFEngine

    engine = HFEngine(tiny_model_dir, pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id])
    envs = [gym.make("agentgym/Calculator-v0", difficulty=1) for _ in range(4)]
    loop = AgentLoop(envs, engine, ChatTokenizer(tokenizer), AgentLoopConfig(SamplingConfig(max_new_tokens=24, temperature=1.0), 2048, 0.0))
    seeds = {task: [derived_seed(0, task, k) for k in range(2)] for task in (3, 5)}
    both = loop.collect([3, 5], 2, episode_seeds=seeds[3] + seeds[5]).trajectories
    alone = loop.collect([5], 2, episode_seeds=seeds[5]).trajectories
    assert [t.token_ids for t in both[2:]] == [t.token_ids for t in alone]
    assert both[2].token_ids != both[3].token_ids  # the two samples of a task are two draws
    batch_seeded = loop.collect([3, 5], 2, sampling_seed=0).trajectories
    assert [t.token_ids for t in batch_seeded] != [t.token_ids for t in both]
    for env in envs:
        env.close()
