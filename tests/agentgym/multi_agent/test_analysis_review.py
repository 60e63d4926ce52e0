"""AnalysisReview-v1 on the process sandbox (no Docker), plus one test on the real thing."""

import json

import pytest

from agentgym import multi_agent
from agentgym.envs.analysis_review import ANALYST, REVIEWER
from agentgym.multi_agent.testing import check_team_env

pytestmark = pytest.mark.filterwarnings("ignore::Warning")  # ProcessSandbox isolation warning


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    from agentgym.resources import shared_resources
    from agentgym.runtime import run_sync

    run_sync(shared_resources().aclose(), timeout=60)  # before interpreter exit tears the executors down


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch):
    monkeypatch.setenv("AGENTGYM_SANDBOX", "process")  # unit tests need no Docker


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture
def env():
    e = multi_agent.make("AnalysisReview-v1", tier=1)
    yield e
    e.close()


def test_checker_passes(env):
    check_team_env(env, num_cycles=60)


def test_oracle_team_scores_at_least_99_percent():
    report = multi_agent.run_team_episodes("AnalysisReview-v1", "oracle", 16, concurrency=4, seed=20)
    assert report.lost == [] and report.infra_failed == 0
    assert report.success_rate >= 0.99, [e.info for e in report.episodes if not e.success][:2]
    reviewer = report.episodes[0].info["agents"][REVIEWER]
    assert reviewer["accepted"] == 1 and reviewer["false_accepts"] == 0


def _wrong_answer(env):
    q = env.task.question
    schema = env.seats[ANALYST].tools[1].parameters["properties"]["answer"]
    field = next(iter(schema["properties"]))
    kind = schema["properties"][field].get("type")
    value = {"number": -123456.789, "integer": -987654, "string": "zzz-not-it"}.get(kind, ["zzz"])
    answer = {name: value for name in schema["properties"]} if q.schema.kind == "fields" else {"value": value}
    return answer


def test_reject_sends_the_comment_back_and_the_reviewer_sees_each_proposal(env):
    env.reset(seed=5)
    obs, *_, infos = env.step({ANALYST: call("propose", answer=_wrong_answer(env), code="print(1)")})
    assert env.seats[ANALYST].last_results[0].status == "ok", env.seats[ANALYST].last_results[0].output
    assert infos[REVIEWER]["active"] and not infos[ANALYST]["active"]
    assert "Proposal 1" in obs[REVIEWER] and "print(1)" in obs[REVIEWER]
    obs, *_, infos = env.step({REVIEWER: call("reject", comment="recompute the mean")})
    assert infos[ANALYST]["active"] and "recompute the mean" in obs[ANALYST]
    # the right answer now, accepted: the team wins, and the reviewer's first verdict was right
    while env.agents:
        *_, infos = env.step(env.oracle_actions())
    assert infos[ANALYST]["reward"] == 1.0 and infos[ANALYST]["proposals"] == 2
    assert infos[REVIEWER]["rejected"] == 1 and infos[REVIEWER]["false_rejects"] == 0


def test_accepting_a_wrong_answer_scores_zero_and_counts_a_false_accept(env):
    env.reset(seed=6)
    env.step({ANALYST: call("propose", answer=_wrong_answer(env), code="x = 1")})
    _, rewards, terms, _, infos = env.step({REVIEWER: call("accept")})
    assert all(terms.values()) and set(rewards.values()) == {0.0}
    assert infos[REVIEWER]["false_accepts"] == 1


def test_too_many_rejections_end_without_agreement():
    env = multi_agent.make("AnalysisReview-v1", tier=1, max_proposals=1)
    env.reset(seed=7)
    env.step({ANALYST: call("propose", answer=_wrong_answer(env), code="x = 1")})
    _, _, terms, truncs, infos = env.step({REVIEWER: call("reject", comment="no")})
    assert all(truncs.values()) and not any(terms.values())
    assert infos[ANALYST]["end_reason"] == "no_agreement"
    env.close()


def test_proposal_schema_is_the_question_answer_schema(env):
    env.reset(seed=8)
    env.step({ANALYST: call("propose", answer={"nonsense": 1}, code="x")})
    assert env.seats[ANALYST].last_results[0].status == "invalid_args"


def test_each_role_has_its_own_sandbox_with_the_same_files(env):
    env.reset(seed=9)
    families = env.families
    assert families[ANALYST].sandbox is not None and families[REVIEWER].sandbox is not None
    assert families[ANALYST].sandbox is not families[REVIEWER].sandbox
    name = env.task.question.file_info[0].name
    env.step({ANALYST: call("python", code=f"import os; x = 41; print(os.path.exists({name!r}))")})
    assert "True" in env.seats[ANALYST].last_results[0].output
    env.step({ANALYST: call("propose", answer=_wrong_answer(env), code="x")})
    env.step({REVIEWER: call("python", code=f"import os; print(os.path.exists({name!r}), 'x' in globals())")})
    assert "True False" in env.seats[REVIEWER].last_results[0].output  # same files, separate state
    while env.agents:
        env.step(env.oracle_actions() or {REVIEWER: call("accept")})
    assert families[ANALYST].sandbox is None and families[REVIEWER].sandbox is None  # released at the end


@pytest.mark.docker
def test_oracle_team_on_docker_sandboxes(docker_engine, monkeypatch):
    monkeypatch.setenv("AGENTGYM_SANDBOX", "docker")
    report = multi_agent.run_team_episodes("AnalysisReview-v1", "oracle", 4, concurrency=2, seed=1,
                                           env_kwargs={"backend": "docker"})
    assert report.lost == [], report.lost[0][1]
    failed = [e.info for e in report.episodes if not e.success]
    assert report.infra_failed == 0 and report.success_rate == 1.0, failed
    assert report.fingerprint
