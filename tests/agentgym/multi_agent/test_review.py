"""ReviewTeamEnv: the solver-and-reviewer rules over any TaskFamily."""

import asyncio
import dataclasses
import json

import pytest

from agentgym.envs.calculator import CalculatorFamily
from agentgym.errors import ConfigError, InfraError
from agentgym.multi_agent import ReviewTeamEnv
from agentgym.multi_agent.testing import check_team_env
from agentgym.runtime import run_sync
from agentgym.testing import ProbeFamily


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_any_family_makes_a_team_that_passes_the_team_checker():
    env = ReviewTeamEnv(CalculatorFamily, difficulty=2)
    check_team_env(env)
    assert env.env_id == "agentgym/CalculatorReview-v0" and env.metadata["name"] == "CalculatorReview-v0"
    fields = env.fingerprint.fields
    assert fields["difficulty"] == 2 and fields["max_proposals"] == 3
    assert set(fields["roles"]["solver"]["tools"]) == {"calculate", "propose"}
    assert str(ReviewTeamEnv(CalculatorFamily, difficulty=3).fingerprint) != str(env.fingerprint)


def test_a_proposal_goes_through_the_familys_answer_checks():
    env = ReviewTeamEnv(CalculatorFamily)
    env.reset(seed=0)
    *_, infos = env.step({"solver": call("propose", answer={"answer": "many"})})  # Calculator wants a number
    assert infos["solver"]["tool_results"][0]["status"] == "agent_error" and not infos["reviewer"]["active"]
    *_, infos = env.step({"solver": call("propose", answer={"answer": 1, "extra": 2})})
    assert infos["solver"]["tool_results"][0]["status"] == "invalid_args"
    obs, *_, infos = env.step({"solver": call("propose", answer={"answer": env.task.answer})})
    assert infos["reviewer"]["active"] and "Proposal 1:" in obs["reviewer"]


def test_rejections_go_back_to_the_solver_and_end_in_no_agreement():
    env = ReviewTeamEnv(CalculatorFamily, max_proposals=2)
    env.reset(seed=1)
    for number in (1, 2):
        env.step({"solver": call("propose", answer={"answer": env.task.answer + 1})})
        obs, rewards, terms, truncs, infos = env.step({"reviewer": call("reject", comment="off by one")})
    assert "Proposal 2 rejected: off by one" in obs["solver"] and "no agreement" in obs["solver"]
    assert all(truncs.values()) and not any(terms.values()) and rewards["solver"] == 0.0
    assert infos["solver"]["end_reason"] == "no_agreement" and infos["reviewer"]["rejected"] == 2
    assert infos["reviewer"]["false_rejects"] == 0 and infos["solver"]["proposals"] == 2


class OpenCountingFamily(ProbeFamily):
    """Counts episode opens and closes per instance; ``fail_opens_of`` names instances that fail."""

    fail_opens_of: set[int] = set()

    def __init__(self) -> None:
        super().__init__()
        self.opened = self.closed = 0

    async def open_episode(self, task):
        if id(self) in self.fail_opens_of:
            raise InfraError("no sandbox")
        self.opened += 1

    async def close_episode(self):
        self.closed += 1


def test_each_seat_has_its_own_family_and_a_failed_open_holds_nothing():
    env = ReviewTeamEnv(OpenCountingFamily)
    solver, reviewer = env.families["solver"], env.families["reviewer"]
    assert solver is not reviewer
    env.reset(seed=0)
    assert (solver.opened, reviewer.opened) == (1, 1)
    OpenCountingFamily.fail_opens_of = {id(reviewer)}
    try:
        with pytest.raises(InfraError, match="no sandbox"):
            env.reset(seed=1)
    finally:
        OpenCountingFamily.fail_opens_of = set()
    assert solver.opened == 2 and solver.closed >= 2  # the first episode's close, then the failed reset's
    env.close()


def test_team_kwargs_are_checked_against_the_familys_signature():
    with pytest.raises(ConfigError, match="difficulty"):
        ReviewTeamEnv(CalculatorFamily, dificulty=2)
    with pytest.raises(ConfigError, match="family_class"):
        ReviewTeamEnv()


def test_a_team_observation_cut_to_its_limit_is_counted():
    env = ReviewTeamEnv(ProbeFamily, max_observation_chars=1500)
    env.reset(seed=0)
    obs, *_, infos = env.step({"solver": call("dump") + call("dump")})  # two 1000-char outputs
    assert len(obs["solver"]) <= 1500 and infos["solver"]["observation_truncated"]
    env.step({"solver": call("propose", answer={"answer": env.task.secret})})
    *_, infos = env.step({"reviewer": call("accept")})
    assert infos["solver"]["truncations"] == 3  # each dump cut to its own limit, then the observation


def test_close_called_on_the_runtime_loop_finishes_there_instead_of_raising():
    env = ReviewTeamEnv(OpenCountingFamily)
    env.reset(seed=0)
    families = list(env.families.values())

    async def close_from_a_coroutine():
        env.close()  # a sync close inside the loop must neither block it nor refuse to run

    run_sync(close_from_a_coroutine())
    run_sync(asyncio.sleep(0.05))  # the close scheduled on the loop has run
    assert all(f.opened == 1 and f.closed >= 1 for f in families)


class SlowAnswerFamily(ProbeFamily):
    """The answer tool's own check takes a moment (a family that looks something up)."""

    def tools(self, task):
        tools = super().tools(task)
        check = tools["answer"].fn

        async def answer(**arguments):
            await asyncio.sleep(0.01)
            return await check(**arguments)

        return {**tools, "answer": dataclasses.replace(tools["answer"], fn=answer)}


def test_two_proposals_in_one_turn_make_one_even_when_the_answer_check_waits():
    env = ReviewTeamEnv(SlowAnswerFamily)
    env.reset(seed=0)
    both = call("propose", answer={"answer": env.task.secret}) + call("propose", answer={"answer": 1})
    *_, infos = env.step({"solver": both})
    assert sorted(r["status"] for r in infos["solver"]["tool_results"]) == ["agent_error", "ok"]
    *_, infos = env.step({"reviewer": call("accept")})
    assert infos["solver"]["end_reason"] == "answered" and infos["solver"]["proposals"] == 1
