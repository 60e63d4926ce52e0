import pytest

from agentgym.envs.calculator import CalculatorEnv, evaluate_arithmetic
from agentgym.errors import AgentError, ConfigError
from agentgym.policies import oracle_policy
from agentgym.runner import run_episodes


@pytest.mark.parametrize("difficulty", [1, 2, 3])
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_oracle_scores_100_percent(difficulty, split):
    report = run_episodes("agentgym/Calculator-v0", oracle_policy, 60, 8,
                          env_kwargs={"difficulty": difficulty, "split": split})
    failed = [e.task_id for e in report.episodes if not e.success]
    assert not failed and not report.lost, f"oracle failed on {failed}"


def test_tag_variant_oracle_answers_directly():
    env = CalculatorEnv(parser="tags")
    env.reset(seed=2)
    _, reward, term, _, _ = env.step(env.oracle_action())
    assert term and reward == 1.0


@pytest.mark.parametrize("expr, value", [("1+2*3", 7), ("(1+2)*3", 9), ("-4/2", -2.0), ("2**10", 1024), ("7//2", 3)])
def test_arithmetic(expr, value):
    assert evaluate_arithmetic(expr) == value


@pytest.mark.parametrize("expr, fragment", [("__import__('os')", "not allowed"), ("1/0", "division by zero"),
                                            ("9**9**9", "too large"), ("1 +", "not an arithmetic"),
                                            ("x" * 600, "under"), ("(" * 240 + "1" + ")" * 240, "nested|arithmetic")])
def test_arithmetic_rejects_with_instructions(expr, fragment):
    with pytest.raises(AgentError, match=fragment):
        evaluate_arithmetic(expr)


def test_reset_by_task_id_and_bad_config():
    env = CalculatorEnv(difficulty=2)
    _, info = env.reset(seed=1)
    _, again = env.reset(options={"task_id": info["task_id"]})
    assert again["task_id"] == info["task_id"]
    with pytest.raises(ConfigError):
        CalculatorEnv(difficulty=7)
