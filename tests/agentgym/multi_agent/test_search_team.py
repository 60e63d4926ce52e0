"""SearchTeam-v1: conformance, the oracle team, delegation rules and the no-hang guarantees."""

import json

import gymnasium as gym
import pytest

import agentgym  # noqa: F401 - registers Search-v1 with gymnasium
from agentgym import multi_agent
from agentgym.envs.search_team import PLANNER
from agentgym.multi_agent.testing import check_team_env


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture
def env():
    e = multi_agent.make("SearchTeam-v1", num_searchers=2)
    yield e
    e.close()


def test_checker_passes_for_several_team_sizes():
    for k in (1, 3):
        check_team_env(multi_agent.make("SearchTeam-v1", num_searchers=k))


def test_same_seed_same_question_as_search_v1(env):
    single = gym.make("agentgym/Search-v1")
    for seed in (0, 5, 11):
        _, info = single.reset(seed=seed)
        _, infos = env.reset(seed=seed)
        assert infos[PLANNER]["task_id"] == info["task_id"]
    single.close()


@pytest.mark.parametrize("k,split,n", [(2, "train", 150), (1, "validation", 60), (3, "test", 60)])
def test_oracle_team_scores_at_least_99_percent(k, split, n):
    report = multi_agent.run_team_episodes("SearchTeam-v1", "oracle", n, concurrency=8, seed=100,
                                           env_kwargs={"num_searchers": k, "split": split})
    assert report.lost == [] and report.completed == n
    assert report.success_rate >= 0.99, [e.info for e in report.episodes if not e.success][:3]
    recalls = [e.info["agents"][PLANNER]["retrieval_recall"] for e in report.episodes]
    assert min(recalls) == 1.0


def test_oracle_diagnostics_count_calls_and_used_reports(env):
    env.reset(seed=4)
    final = {}
    while env.agents:
        *_, infos = env.step(env.oracle_actions())
    final = infos
    assert final[PLANNER]["delegations"] >= 1 and final[PLANNER]["reports_received"] == final[PLANNER]["delegations"]
    searcher_infos = [final[s] for s in env.searchers if final[s]["tasks_received"]]
    assert sum(i["reports_used"] for i in searcher_infos) >= 1
    assert all(i["tool_calls"].get("report") == 1 and i["tool_calls"]["open"] >= 1 for i in searcher_infos)


def test_planner_waits_and_gets_its_delegate_results_with_the_report(env):
    env.reset(seed=2)
    obs, _, _, _, infos = env.step({PLANNER: call("delegate", worker="searcher_0", subquestion="Who?")})
    assert obs[PLANNER] == "" and not infos[PLANNER]["active"]
    assert infos["searcher_0"]["active"] and "Task: Who?" in obs["searcher_0"]
    assert not infos["searcher_1"]["active"]
    obs, _, _, _, infos = env.step({"searcher_0": call("report", text="Nobody knows.")})
    assert infos[PLANNER]["active"]
    assert "Delegated to searcher_0" in obs[PLANNER] and "Nobody knows." in obs[PLANNER]


def test_delegating_to_a_busy_searcher_is_an_agent_error(env):
    env.reset(seed=2)
    env.step({PLANNER: call("delegate", worker="searcher_0", subquestion="A")
              + call("delegate", worker="searcher_0", subquestion="B")})
    results = env.seats[PLANNER].last_results
    assert [r.status for r in results] == ["ok", "agent_error"]
    assert "still working" in results[1].output and "searcher_1" in results[1].output
    assert env.assignment("searcher_0") == "A"


def test_unknown_worker_is_invalid_args(env):
    env.reset(seed=2)
    env.step({PLANNER: call("delegate", worker="searcher_9", subquestion="A")})
    assert env.seats[PLANNER].last_results[0].status == "invalid_args"


def test_a_searcher_that_never_reports_loses_its_task():
    env = multi_agent.make("SearchTeam-v1", num_searchers=1, searcher_turns_per_task=2)
    env.reset(seed=3)
    env.step({PLANNER: call("delegate", worker="searcher_0", subquestion="A")})
    for _ in range(2):
        obs, *_ , infos = env.step({"searcher_0": call("search", query="anything")})
    assert env.assignment("searcher_0") is None and infos[PLANNER]["active"]
    assert "did not report within 2 turns" in obs[PLANNER]
    assert not infos["searcher_0"]["active"]
    *_, infos = env.step({PLANNER: call("answer", answer=env.task.question.answer)})
    assert infos["searcher_0"]["reward"] == 1.0 and infos[PLANNER]["tasks_withdrawn"] == 1


def test_a_searcher_out_of_turns_retires_and_the_planner_is_told():
    env = multi_agent.make("SearchTeam-v1", num_searchers=2, searcher_max_turns=1)
    env.reset(seed=3)
    env.step({PLANNER: call("delegate", worker="searcher_1", subquestion="A")})
    obs, *_, infos = env.step({"searcher_1": call("search", query="x")})
    assert env.seats["searcher_1"].retired and "searcher_1" in env.agents
    assert "ran out of turns" in obs[PLANNER]
    env.step({PLANNER: call("delegate", worker="searcher_1", subquestion="B")})
    assert "has left the team" in env.seats[PLANNER].last_results[0].output


def test_random_team_never_hangs():
    report = multi_agent.run_team_episodes("SearchTeam-v1", "random", 10, concurrency=5, seed=0)
    assert report.lost == [] and report.completed == 10
    assert all(e.info["end_reason"] in {"agent_exhausted", "team_turn_limit"} for e in report.episodes)


def test_two_answers_in_one_turn_are_not_scored(env):
    env.reset(seed=1)
    _, _, terms, truncs, _ = env.step({PLANNER: call("answer", answer="a") + call("answer", answer="b")})
    assert not any(terms.values()) and not any(truncs.values())
    assert env.seats[PLANNER].last_results[-1].status == "agent_error"


def test_fingerprint_has_search_fields_and_team_size():
    a = multi_agent.make("SearchTeam-v1", num_searchers=2)
    assert "corpus_version" in a.fingerprint.fields["search"]
    assert str(a.fingerprint) != str(multi_agent.make("SearchTeam-v1", num_searchers=3).fingerprint)


def test_the_tag_style_is_refused_with_a_config_error():
    from agentgym.errors import ConfigError

    with pytest.raises(ConfigError, match="style"):  # the searchers need open, which the tag style lacks
        multi_agent.make("SearchTeam-v1", style="tags")
