"""The asynchronous rollout of team envs: one trajectory per seat, batched generation
across seats and teams, each seat's reward and conversation as the team env gives them
when the same actions are played through the multi-agent runner, and infrastructure
failures dropped and counted."""

from __future__ import annotations

import asyncio
import copy
import dataclasses

import torch

from agentgym.envs.calculator import CalculatorFamily
from agentgym.errors import InfraError
from agentgym.multi_agent import ReviewTeamEnv, run_team_episode
from agentgym.runtime import run_sync
from baselines.agent_loop import AgentLoopConfig
from baselines.async_rollout import AsyncRolloutConfig
from baselines.chat_tokens import ChatTokenizer
from baselines.engines.base import Generation, SamplingConfig
from baselines.engines.hf import HFEngine
from baselines.engines.hf_async import BatchingEngine
from baselines.team_rollout import TeamRollout


def _team(**kwargs):
    return ReviewTeamEnv(CalculatorFamily, difficulty=1, **kwargs)


def _questions(seeds):
    env = _team()
    out = {}
    for seed in seeds:
        env.reset(seed=seed)
        out[env.task.question] = (seed, env.task.answer)
    env.close()
    return out


class ScriptedTeamEngine:
    """One policy for both roles: the solver calls ``calculate`` once, then proposes the
    answer (off by one for the tasks in ``wrong``); the reviewer accepts. Records the
    size of every call."""

    def __init__(self, tokenizer, questions, wrong):
        self.tokenizer, self.questions, self.wrong = tokenizer, questions, wrong
        self.call_sizes = []

    def _text(self, prompt):
        if "You review" in prompt:
            return '<tool_call>{"name": "accept", "arguments": {}}</tool_call>'
        if "<tool_response>" not in prompt:
            return '<tool_call>{"name": "calculate", "arguments": {"expression": "1 + 1"}}</tool_call>'
        (seed, answer), = [v for q, v in self.questions.items() if q in prompt]
        answer += int(seed in self.wrong)
        return '<tool_call>{"name": "propose", "arguments": {"answer": {"answer": %d}}}</tool_call>' % answer

    def generate(self, prompts, sampling, seed=None, row_seeds=None):
        self.call_sizes.append(len(prompts))
        out = []
        for p in prompts:
            ids = self.tokenizer.encode(self._text(self.tokenizer.decode(p)), add_special_tokens=False) + [self.tokenizer.eos_token_id]
            out.append(Generation(ids, [-0.1] * len(ids), "stop"))
        return out

    def sync_weights(self, state_dict):
        pass


def _replay(trajectories, seed, **env_kwargs):
    """Play each seat's generated turns through a fresh team env with the multi-agent
    runner; every active seat must have its next turn, and no turn may be left over."""
    env = _team(**env_kwargs)
    queues = {a: [] for a in env.possible_agents}  # a seat that never acted has no trajectory
    queues.update({t.info["agent"]: [m["content"] for m in t.messages if m["role"] == "assistant"] for t in trajectories})
    seen = {a: [] for a in queues}

    def policy(env, observations, infos):
        for a, info in infos.items():
            seen[a].extend(info["messages"])
        actions = {a: queues[a].pop(0) for a in env.agents if infos[a]["active"]}
        for a, text in actions.items():
            seen[a].append({"role": "assistant", "content": text})
        return actions

    try:
        record = run_sync(run_team_episode(env, policy, 0, seed))
    finally:
        env.close()
    assert all(not q for q in queues.values()), queues
    return record, seen


def test_team_episodes_yield_one_trajectory_per_seat_with_the_team_envs_rewards(tokenizer):
    seeds_of = lambda step: [10 + 2 * step, 11 + 2 * step]  # noqa: E731
    questions = _questions([s for step in range(2) for s in seeds_of(step)])
    wrong = {11, 12}
    scripted = ScriptedTeamEngine(tokenizer, questions, wrong)
    engine = BatchingEngine(scripted)
    config = AgentLoopConfig(SamplingConfig(max_new_tokens=64), 2048, 1.0)
    rollout = TeamRollout([_team() for _ in range(8)], engine, ChatTokenizer(tokenizer), config, AsyncRolloutConfig(max_staleness=1),
                          2, 2, lambda step: (seeds_of(step), None))
    try:
        for step in range(2):
            batch = rollout.collect(step)
            assert batch.dropped_infra_failed == 0 and len(batch.trajectories) == 2 * 2 * 2  # tasks x group x seats
            for t in batch.trajectories:
                seed = next(s for q, (s, _) in questions.items() if q in t.messages[1]["content"])
                assert t.group_id == seeds_of(step).index(seed)
                assert t.reward == (0.0 if seed in wrong else 1.0) and t.terminated and t.success == (seed not in wrong)
                assert t.info["end_reason"] == "answered"
                generated = [i for i, m in enumerate(t.loss_mask) if m]
                assert len(generated) == t.num_generated > 0 and t.prompt_len == generated[0]
                assert all(t.engine_logprobs[i] == -0.1 for i in generated)
                assert all(t.engine_logprobs[i] == 0.0 and t.token_versions[i] == -1 for i in range(len(t.token_ids)) if i not in generated)
                assert {t.token_versions[i] for i in generated} <= {0, 1} and t.drift_ok is True
                assert t.turns == {"solver": 2, "reviewer": 1}[t.info["agent"]]
            by_episode = [batch.trajectories[i:i + 2] for i in range(0, len(batch.trajectories), 2)]
            for solver, reviewer in by_episode:
                assert (solver.info["agent"], reviewer.info["agent"]) == ("solver", "reviewer")
                seed = seeds_of(step)[solver.group_id]
                record, seen = _replay([solver, reviewer], seed)
                assert record.reward == solver.reward == reviewer.reward and not record.infra_failed
                for t in (solver, reviewer):
                    final = record.info["agents"][t.info["agent"]]
                    assert (final["reward"], final["end_reason"], final["turn"]) == (t.reward, t.info["end_reason"], t.turns)
                    # the seat's conversation is what the env showed it, up to its last turn
                    last = max(i for i, m in enumerate(seen[t.info["agent"]]) if m["role"] == "assistant")
                    assert t.messages == seen[t.info["agent"]][:last + 1]
            assert batch.stats["rollout/episodes"] == 8.0 and batch.stats["rollout/idle_seats"] == 0.0
            assert batch.stats["rollout/staleness_max"] <= 1.0
            engine.sync_weights({})
        assert max(scripted.call_sizes) > 1  # seats and teams shared engine calls
    finally:
        rollout.close()
        engine.close()
    assert rollout.episodes_running == 0


def test_an_infra_failed_team_episode_is_dropped_and_counted(tokenizer):
    questions = _questions([20, 21])
    poisoned = next(q for q, (s, _) in questions.items() if s == 21)

    def failing_env():
        env = _team()

        def wrap(tool):
            if tool.name != "calculate":
                return tool

            async def fn(**arguments):
                if env.task.question == poisoned:
                    raise InfraError("injected: calculator service down")
                return await tool.fn(**arguments)

            return dataclasses.replace(tool, fn=fn, max_retries=0)

        env.tool_middleware.append(wrap)
        return env

    engine = BatchingEngine(ScriptedTeamEngine(tokenizer, questions, set()))
    config = AgentLoopConfig(SamplingConfig(max_new_tokens=64), 2048, 0.0)
    rollout = TeamRollout([failing_env() for _ in range(4)], engine, ChatTokenizer(tokenizer), config, AsyncRolloutConfig(max_staleness=0),
                          2, 2, lambda step: ([20, 21], None))
    try:
        batch = rollout.collect(0)
    finally:
        rollout.close()
        engine.close()
    assert batch.dropped_infra_failed == 4 and batch.stats["rollout/dropped_infra_failed"] == 4.0  # 2 episodes x 2 seats
    healthy = next(q for q in questions if q != poisoned)
    assert len(batch.trajectories) == 4 and all(healthy in t.messages[1]["content"] for t in batch.trajectories)
    assert all(t.reward == 1.0 and not t.infra_failed for t in batch.trajectories)


def test_the_tiny_model_drives_a_team_through_the_engine(tiny_model_dir, tokenizer):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    engine = BatchingEngine(HFEngine(copy.deepcopy(model), pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id]))
    config = AgentLoopConfig(SamplingConfig(max_new_tokens=12, temperature=1.0), 1024, 1.0)
    rollout = TeamRollout([_team(max_team_turns=3) for _ in range(2)], engine, ChatTokenizer(tokenizer), config,
                          AsyncRolloutConfig(max_staleness=0), 1, 2, lambda step: ([30], None))
    try:
        batch = rollout.collect(0)
    finally:
        rollout.close()
        engine.close()
    # the random policy never proposes, so the reviewer never acts: its seat is left out, counted
    assert [t.info["agent"] for t in batch.trajectories] == ["solver", "solver"] and batch.dropped_infra_failed == 0
    assert batch.stats["rollout/idle_seats"] == 2.0
    for solver in batch.trajectories:
        assert solver.turns >= 1 and solver.truncated and solver.info["end_reason"] in ("team_turn_limit", "stalled")
        generated = [i for i, m in enumerate(solver.loss_mask) if m]
        assert all(solver.engine_logprobs[i] < 0.0 and solver.token_versions[i] == 0 for i in generated)
        assert len(generated) == solver.num_generated > 0
        record, seen = _replay([solver], 30, max_team_turns=3)
        final = record.info["agents"]["solver"]
        assert (final["reward"], final["end_reason"], final["turn"]) == (solver.reward, solver.info["end_reason"], solver.turns)
        last = max(i for i, m in enumerate(seen["solver"]) if m["role"] == "assistant")
        assert solver.messages == seen["solver"][:last + 1]


class HangingTeam(ReviewTeamEnv):
    """A team env whose steps on task seed ``hang_seed`` never return (a stuck service)."""

    hang_seed = 41

    async def areset(self, seed=None, options=None):
        self.seed = seed
        return await super().areset(seed=seed, options=options)

    async def astep(self, actions):
        if self.seed == self.hang_seed:
            await asyncio.Event().wait()
        return await super().astep(actions)


def test_a_hung_team_step_times_out_into_dropped_seats_and_the_batch_arrives(tokenizer):
    questions = _questions([40, 41])
    engine = BatchingEngine(ScriptedTeamEngine(tokenizer, questions, set()))
    config = AgentLoopConfig(SamplingConfig(max_new_tokens=64), 2048, 0.0)
    rollout = TeamRollout([HangingTeam(CalculatorFamily, difficulty=1) for _ in range(2)], engine, ChatTokenizer(tokenizer), config,
                          AsyncRolloutConfig(max_staleness=0, step_timeout_s=1.0), 2, 1, lambda step: ([40, 41], None))
    try:
        batch = rollout.collect(0)
    finally:
        rollout.close()
        engine.close()
    # the hung team is dropped whole: both seats flagged infra-failed and counted (the reviewer never got to act)
    assert batch.stats["rollout/dropped_stuck_episodes"] == 1.0 and batch.dropped_infra_failed == 2
    assert [t.info["agent"] for t in batch.trajectories] == ["solver", "reviewer"] and all(t.reward == 1.0 for t in batch.trajectories)


def test_a_seat_out_of_context_ends_the_team_episode_truncated(tokenizer):
    questions = _questions([50])
    engine = BatchingEngine(ScriptedTeamEngine(tokenizer, questions, set()))
    chat = ChatTokenizer(tokenizer)
    env = _team()
    _, infos = env.reset(seed=50)
    prompt_len = len(chat.prompt_ids(infos["solver"]["messages"], infos["solver"]["tools"]))
    first_turn = engine.engine.generate([chat.prompt_ids(infos["solver"]["messages"], infos["solver"]["tools"])], None)[0].token_ids
    # room for the solver's first turn, not for the tool result (> 1 token) and a second turn
    config = AgentLoopConfig(SamplingConfig(max_new_tokens=64), prompt_len + len(first_turn) + 64 + 1, 0.0)
    rollout = TeamRollout([env], engine, chat, config, AsyncRolloutConfig(max_staleness=0), 1, 1, lambda step: ([50], None))
    try:
        batch = rollout.collect(0)
    finally:
        rollout.close()
        engine.close()
    (solver,) = batch.trajectories  # the reviewer never acted
    assert solver.context_limited and solver.truncated and not solver.terminated and solver.reward == 0.0
    assert solver.turns == 1 and solver.info == {"agent": "solver", "end_reason": "context_limited", "team_episode": "0:0"}
    assert batch.stats["rollout/idle_seats"] == 1.0


def test_episode_seeds_make_a_team_episodes_draws_its_own_whatever_it_is_batched_with(tiny_model_dir, tokenizer):
    """The trainer's sampled team evaluation: with ``episode_seed`` a team episode of task
    31 draws the same tokens alone and beside another task's episodes (the single-agent
    evaluation's per-episode seeds); its two members still draw apart."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    config = AgentLoopConfig(SamplingConfig(max_new_tokens=12, temperature=1.0), 1024, 1.0)

    def solver_tokens(task_seeds, call_seed):
        engine = BatchingEngine(HFEngine(copy.deepcopy(model), pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id]),
                                seed=call_seed)
        rollout = TeamRollout([_team(max_team_turns=3) for _ in range(2 * len(task_seeds))], engine, ChatTokenizer(tokenizer), config,
                              AsyncRolloutConfig(max_staleness=0), len(task_seeds), 2, lambda step: (list(task_seeds), call_seed))
        rollout.episode_seed = lambda task, k: 1_000 * task + k
        try:
            batch = rollout.collect(0)
        finally:
            rollout.close()
            engine.close()
        # (task, member): a team episode's place in the batch is group position x 2 + member
        return {(t.task_id, int(t.info["team_episode"].split(":")[1]) % 2): t.token_ids
                for t in batch.trajectories if t.info["agent"] == "solver"}

    alone = solver_tokens([31], call_seed=1)
    beside = solver_tokens([30, 31], call_seed=2)
    ((task, _),) = {k for k in alone if k[1] == 0}
    assert alone[(task, 0)] == beside[(task, 0)] and alone[(task, 1)] == beside[(task, 1)]
    assert alone[(task, 0)] != alone[(task, 1)]  # the seed does draw
