"""check_env_kwargs reads an env's own signature and its family's, so envs need not repeat it."""

import gymnasium as gym
import pytest

import agentgym  # noqa: F401 - registers the envs
from agentgym.env import ToolEnv
from agentgym.envs import check_env_kwargs
from agentgym.envs.validation import env_kwargs_of
from agentgym.errors import ConfigError
from agentgym.testing import ProbeFamily


@pytest.mark.parametrize(("env_id", "kwargs", "message"), [
    ("agentgym/Search-v1", {"tpok": 3}, "did you mean 'topk'"),
    ("agentgym/Search-v1", {"topk": "3"}, "topk of agentgym/Search-v1 to be int"),
    ("agentgym/DataAnalysis-v1", {"backend": "dockr"}, "one of ['auto', 'docker'"),
    ("agentgym/SearchTeam-v1", {"snippet_chars": "long"}, "snippet_chars"),
    ("agentgym/SearchTeam-v1", {"tpok": 3}, "did you mean 'topk'"),
    ("agentgym/AnalysisReview-v1", {"tier": "hard"}, "tier"),
    ("agentgym/Calculator-v0", {"split": "dev"}, "split"),
])
def test_family_kwargs_are_checked_before_anything_is_built(env_id, kwargs, message):
    with pytest.raises(ConfigError) as caught:
        check_env_kwargs(env_id, kwargs)
    assert message in str(caught.value)


@pytest.mark.parametrize(("env_id", "kwargs"), [
    ("agentgym/Search-v1", {"topk": 5, "max_turns": 3, "parser": "hermes"}),
    ("agentgym/SearchTeam-v1", {"topk": 5, "num_searchers": 3}),
    ("agentgym/AnalysisReview-v1", {"tier": 2, "backend": "process", "max_proposals": 1}),
    ("agentgym/Calculator-v0", {"difficulty": 3}),
])
def test_the_envs_own_and_their_familys_kwargs_pass(env_id, kwargs):
    check_env_kwargs(env_id, kwargs)


def test_env_kwargs_of_lists_the_family_settings():
    assert {"retriever_url", "topk", "max_turns", "parser"} <= set(env_kwargs_of("agentgym/Search-v1"))
    assert {"tier", "python_timeout_s", "max_turns"} <= set(env_kwargs_of("agentgym/DataAnalysis-v1"))


def test_a_misspelt_family_kwarg_at_make_is_a_config_error_naming_the_right_one():
    with pytest.raises(ConfigError, match="did you mean 'difficulty'"):
        gym.make("agentgym/Calculator-v0", dificulty=2)
    assert gym.make("agentgym/Calculator-v0", difficulty=3).unwrapped.difficulty == 3


def test_a_toolenv_given_a_family_refuses_family_kwargs():
    with pytest.raises(ConfigError, match="latency_s"):
        ToolEnv(ProbeFamily(), latency_s=1.0)
    with pytest.raises(ConfigError, match="family_class"):
        ToolEnv(latency_s=1.0)


def test_a_team_env_given_its_family_at_registration_takes_the_familys_kwargs():
    from agentgym import multi_agent
    from agentgym.envs.calculator import CalculatorFamily
    from agentgym.multi_agent import ReviewTeamEnv

    multi_agent.register(multi_agent.MultiAgentEnvSpec("myorg/CalculatorPair-v0", ReviewTeamEnv,
                                                       kwargs={"family_class": CalculatorFamily}))
    try:
        check_env_kwargs("myorg/CalculatorPair-v0", {"difficulty": 2, "max_proposals": 1})  # make takes both
        assert multi_agent.make("myorg/CalculatorPair-v0", difficulty=2).fingerprint.fields["difficulty"] == 2
        with pytest.raises(ConfigError, match="did you mean 'difficulty'"):
            check_env_kwargs("myorg/CalculatorPair-v0", {"dificulty": 2})
    finally:
        multi_agent.MULTI_AGENT_ENVS[:] = [s for s in multi_agent.MULTI_AGENT_ENVS
                                           if s.env_id != "myorg/CalculatorPair-v0"]
