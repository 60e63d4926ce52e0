"""The README's "Write your own environment" family works as the README says."""

import gymnasium as gym

from agentgym.policies import oracle_policy
from agentgym.testing import load_readme_family
from agentgym.runner import run_episodes
from agentgym.testing import check_tool_env


def test_the_readme_family_is_short_registers_and_passes_the_env_checker():
    module = load_readme_family()
    assert "myorg/UnitConversion-v0" in gym.registry
    env = gym.make("myorg/UnitConversion-v0")
    check_tool_env(env)  # Gymnasium's checker, hostile actions, the oracle's success
    obs, info = env.reset(seed=3)
    assert "Convert" in obs and {t["function"]["name"] for t in info["tools"]} == {"convert", "answer"}
    env.close()
    assert issubclass(module.UnitConversionFamily, __import__("agentgym").TaskFamily)


def test_the_readme_family_runs_solves_and_separates_agent_mistakes():
    load_readme_family()
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
