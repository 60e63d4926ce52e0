"""The docs' "Write your own environment" family works as the page says."""

import gymnasium as gym
import pytest

from agentgym import multi_agent
from agentgym.multi_agent.testing import check_team_env
from agentgym.policies import oracle_policy
from agentgym.runner import run_episodes
from agentgym.testing import check_tool_env, load_docs_family

TEAM_ID = "myorg/UnitConversionReview-v0"


@pytest.fixture(autouse=True)
def _forget_the_readme_team():
    """The docs page registers a team env; other tests list the registry and expect ours only."""
    yield
    multi_agent.MULTI_AGENT_ENVS[:] = [s for s in multi_agent.MULTI_AGENT_ENVS if s.env_id != TEAM_ID]


def test_the_readme_family_is_short_registers_and_passes_the_env_checker():
    module = load_docs_family()
    assert "myorg/UnitConversion-v0" in gym.registry
    env = gym.make("myorg/UnitConversion-v0")
    check_tool_env(env)  # Gymnasium's checker, hostile actions, the oracle's success
    obs, info = env.reset(seed=3)
    assert "Convert" in obs and {t["function"]["name"] for t in info["tools"]} == {"convert", "answer"}
    env.close()
    assert issubclass(module.UnitConversionFamily, __import__("agentgym").TaskFamily)


def test_the_readme_family_runs_solves_and_separates_agent_mistakes():
    load_docs_family()
    report = run_episodes("myorg/UnitConversion-v0", oracle_policy, episodes=20, concurrency=4)
    assert report.success_rate == 1.0 and not report.lost
    env = gym.make("myorg/UnitConversion-v0")
    env.reset(seed=0)
    bad = '<tool_call>{"name": "convert", "arguments": {"value": 1, "from_unit": "furlong", "to_unit": "m"}}</tool_call>'
    *_, info = env.step(bad)
    assert info["tool_results"][0]["status"] == "invalid_args" and not info["infra_failed"]
    *_, info = env.step('<tool_call>{"name": "answer", "arguments": {"answer": -1}}</tool_call>')
    assert info["reward"] == 0.0 and info["success"] is False
    train = gym.make("myorg/UnitConversion-v0", split="train").unwrapped
    test = gym.make("myorg/UnitConversion-v0", split="test").unwrapped
    assert train.reset(seed=1)[1]["task_id"] != test.reset(seed=1)[1]["task_id"]


def test_the_readme_family_works_in_a_team_env():
    load_docs_family()
    load_docs_family()  # a second import re-registers the same class without complaint
    assert multi_agent.is_multi_agent_env(TEAM_ID)
    env = multi_agent.make(TEAM_ID, max_proposals=1)
    check_team_env(env)  # PettingZoo's API test, hostile actions, the oracle team
    obs, infos = env.reset(seed=4)
    assert env.possible_agents == ["solver", "reviewer"] and infos["solver"]["active"]
    assert {t["function"]["name"] for t in infos["solver"]["tools"]} == {"convert", "propose"}
    assert {t["function"]["name"] for t in infos["reviewer"]["tools"]} == {"convert", "accept", "reject"}
    propose = '<tool_call>{"name": "propose", "arguments": {"answer": {"answer": -1}}}</tool_call>'
    *_, infos = env.step({"solver": propose})
    assert infos["reviewer"]["active"] and not infos["solver"]["active"]
    _, rewards, terms, _, infos = env.step({"reviewer": '<tool_call>{"name": "accept", "arguments": {}}</tool_call>'})
    assert all(terms.values()) and rewards["solver"] == 0.0  # the family's score of the accepted answer
    assert infos["reviewer"]["false_accepts"] == 1 and infos["solver"]["proposals_correct"] == 0
    report = multi_agent.run_team_episodes(TEAM_ID, "oracle", episodes=6, concurrency=3)
    assert report.success_rate == 1.0 and not report.lost and not report.infra_failed
