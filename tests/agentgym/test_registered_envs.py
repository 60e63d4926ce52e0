"""One parametrised test over every registered env: Gymnasium's checker plus agentgym's contract."""

import gymnasium as gym
import pytest

import agentgym
from agentgym.testing import ProbeEnv, check_tool_env


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch):
    monkeypatch.setenv("AGENTGYM_SANDBOX", "process")  # unit tests need no Docker


@pytest.mark.parametrize("env_id", [spec.env_id for spec in agentgym.ENVS])
def test_check_env_passes(env_id):
    env = gym.make(env_id)
    try:
        check_tool_env(env)
    finally:
        env.close()


def test_checker_passes_on_the_probe_env():
    check_tool_env(ProbeEnv())
