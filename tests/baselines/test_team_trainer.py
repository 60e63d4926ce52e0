"""``agentgym train`` on a team env id: every seat is played by the one policy through
:class:`~baselines.team_rollout.TeamRollout`, the seats' trajectories are trained
(PPO-EWMA optimiser steps happen), and evaluation counts team episodes, not seats.

The rollout engine is scripted (the solver calls ``calculate``, then proposes the right
answer or, by a coin flip, a wrong one; the reviewer accepts), so that groups have reward
variance on a tiny model that was never taught the team's tools; the trainer, its
policy, its updates and the team envs are real."""

import dataclasses
import functools
import json
import math

import numpy as np
import pytest

from agentgym.envs.calculator import CalculatorFamily
from agentgym.errors import InfraError
from agentgym.multi_agent import MultiAgentEnvSpec, ReviewTeamEnv, register
from baselines import trainer as trainer_module
from baselines.config import ConfigError, load_config
from baselines.engines.base import Generation
from baselines.engines.hf_async import BatchingEngine
from baselines.trainer import Trainer

TEAM_ID = "test/CalculatorReview-v0"
CONFIG = "baselines/configs/calculator_cpu.yaml"


@pytest.fixture(scope="module", autouse=True)
def calculator_review_team():
    register(MultiAgentEnvSpec(TEAM_ID, functools.partial(ReviewTeamEnv, CalculatorFamily, difficulty=1),
                               ("calculate", "propose", "accept", "reject"), "Calculator tasks by a solver and a reviewer",
                               ("solver", "reviewer")))


class CoinFlipTeamEngine:
    """Finds the task in the prompt among the trainer's team envs (recorded as they are
    made) and plays it: right with probability 1/2 per proposal."""

    def __init__(self, tokenizer, envs):
        self.tokenizer, self.envs, self.rng = tokenizer, envs, np.random.default_rng(0)
        self.proposals = {"right": 0, "wrong": 0}

    def _text(self, prompt):
        if "You review" in prompt:
            return '<tool_call>{"name": "accept", "arguments": {}}</tool_call>'
        if "<tool_response>" not in prompt:
            return '<tool_call>{"name": "calculate", "arguments": {"expression": "1 + 1"}}</tool_call>'
        (answer,) = {e.task.answer for e in self.envs if e.task is not None and e.task.question in prompt}
        right = bool(self.rng.random() < 0.5)
        self.proposals["right" if right else "wrong"] += 1
        proposal = {"name": "propose", "arguments": {"answer": {"answer": answer + (not right)}}}
        return f"<tool_call>{json.dumps(proposal)}</tool_call>"

    def generate(self, prompts, sampling, seed=None, row_seeds=None):
        out = []
        for p in prompts:
            ids = self.tokenizer.encode(self._text(self.tokenizer.decode(p)), add_special_tokens=False)
            ids.append(self.tokenizer.eos_token_id)
            out.append(Generation(ids, [-0.7] * len(ids), "stop"))
        return out

    def sync_weights(self, state_dict):
        self.synced = getattr(self, "synced", 0) + 1

    def wake_up(self):
        pass

    def sleep(self):
        pass


def _config(tmp_path, model_dir, *extra):
    return load_config(CONFIG, [
        f"env.id={TEAM_ID}", "env.kwargs={}", f"model.path={model_dir}", f"log.run_dir={tmp_path}/run",
        "log.tensorboard=false", "steps=3", "eval_every=3", "eval_tasks=8", "sft.episodes=0",
        "rollout.tasks_per_step=4", "rollout.group_size=4", "rollout.max_staleness=1", "algo.micro_batch_size=8",
        *extra,
    ])


def _script_the_team(monkeypatch, *middleware):
    """The trainer's envs recorded as made (each with ``middleware`` on its tools) and its
    engine the :class:`CoinFlipTeamEngine`, kept in the returned dict as ``engine``."""
    envs, scripted = [], {}
    make_rollout_envs = trainer_module.make_rollout_envs

    def recording(env_id, kwargs, count, **fleet):
        made = make_rollout_envs(env_id, kwargs, count, **fleet)
        for env in made:
            env.tool_middleware.extend(middleware)
        envs.extend(made)
        return made

    def scripted_engine(config, path, tokenizer, info, asynchronous=False):
        scripted["engine"] = CoinFlipTeamEngine(tokenizer, envs)
        return BatchingEngine(scripted["engine"], seed=0)

    monkeypatch.setattr(trainer_module, "make_rollout_envs", recording)
    monkeypatch.setattr(trainer_module, "build_engine", scripted_engine)
    return scripted


def test_a_team_env_trains_every_seat_and_evaluates_per_episode(tmp_path, trained_model_dir, monkeypatch):
    scripted = _script_the_team(monkeypatch)
    trainer = Trainer(_config(tmp_path, trained_model_dir))
    assert type(trainer.loop).__name__ == "TeamRollout"
    summary = trainer.train()
    engine = scripted["engine"]
    before = dict(engine.proposals)
    evaluation = trainer.evaluate()  # 8 team episodes greedy, 8 sampled: one proposal each
    trainer.close()
    right, wrong = (engine.proposals[k] - before[k] for k in ("right", "wrong"))
    assert right + wrong == 16 and evaluation["eval/episodes"] == 8
    assert evaluation["eval/success_rate"] + evaluation["eval/sampled_success_rate"] == pytest.approx(right / 8)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "train/optimizer_steps" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    assert sum(r["train/optimizer_steps"] for r in steps) > 0, "PPO-EWMA updated the policy on the seats' turns"
    for r in steps:
        # 4 tasks x 4 team episodes x 2 seats (both act: propose, then review), none dropped
        assert r["rollout/episodes"] == 32 and r["rollout/dropped_infra_failed"] == 0 and r["rollout/idle_seats"] == 0
        assert 0 < r["reward/mean"] < 1
    assert engine.proposals["right"] > 0 and engine.proposals["wrong"] > 0 and engine.synced >= 3
    for key in ("eval/success_before", "eval/success_after", "eval/sampled_success_after"):
        assert key in summary and 0 <= summary[key] <= 1


@pytest.mark.parametrize(("override", "match"), [("sft.episodes=16", "sft.episodes=0"),
                                                   ("rollout.fleet=ray", "rollout.fleet=none")])
def test_what_a_team_run_cannot_do_is_refused_at_load(tmp_path, override, match):
    with pytest.raises(ConfigError, match=match):
        _config(tmp_path, "unused", override)


def test_the_tiny_models_corpus_of_a_team_env_has_every_seats_text():
    """A run without model.path trains the tiny model's tokenizer on what the team's seats
    see and what the oracle team writes (a team id has no gym.make)."""
    texts = trainer_module.env_corpus(TEAM_ID, {}, episodes=3)
    assert any('"name": "propose"' in t for t in texts) and any('"name": "accept"' in t for t in texts)
    assert any(t.startswith("You solve the task in a team") for t in texts)  # the solver's opening
    assert any("You review" in t for t in texts)  # the reviewer's
    assert sum('<tool_call>{"name": "propose"' in t for t in texts) >= 3  # the oracle's proposals, one per episode


def test_rollout_envs_of_a_team_id_are_team_envs_and_never_on_a_fleet():
    envs = trainer_module.make_rollout_envs(TEAM_ID, {}, 2)
    try:
        assert [type(e).__name__ for e in envs] == ["ReviewTeamEnv", "ReviewTeamEnv"]
    finally:
        for env in envs:
            env.close()
    with pytest.raises(ValueError, match="fleet='none'"):
        trainer_module.make_rollout_envs(TEAM_ID, {}, 2, fleet="ray")


def test_a_team_evaluation_leaves_out_what_infrastructure_failed_and_never_scores_it_zero(tmp_path, trained_model_dir,
                                                                                         monkeypatch):
    """As for single-agent envs: a team episode that infrastructure failed is counted in
    ``eval/infra_failed`` and left out of the rate; NaN when none ran (it once read 0.0,
    with the failed episodes counted as run)."""
    down = {"calculate": False}

    def outage(tool):
        if tool.name != "calculate":
            return tool

        async def fn(**arguments):
            if down["calculate"]:
                raise InfraError("injected: calculator service down")
            return await tool.fn(**arguments)

        return dataclasses.replace(tool, fn=fn, max_retries=0)

    _script_the_team(monkeypatch, outage)
    trainer = Trainer(_config(tmp_path, trained_model_dir, "eval_sampled=false"))
    try:
        healthy = trainer.evaluate()
        assert (healthy["eval/episodes"], healthy["eval/infra_failed"]) == (8, 0)
        down["calculate"] = True
        failed = trainer.evaluate()
        assert (failed["eval/episodes"], failed["eval/infra_failed"]) == (0, 8)
        assert math.isnan(failed["eval/success_rate"])
    finally:
        trainer.close()
