"""The TRL example runs GRPO for two steps, rolling out through agentgym serve-env over
OpenEnv. Runs in .venv-peers (``make test-peers``): TRL is not in the main venv."""

import importlib.util
import pathlib
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_openenv.py"


def load_example():
    spec = importlib.util.spec_from_file_location("trl_grpo_openenv", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.peers
def test_grpo_runs_two_steps_through_serve_env_and_learns_from_the_envs_reward(tmp_path):
    import gymnasium as gym

    import agentgym  # noqa: F401
    from agentgym.interop.launch import agentgym_server, free_port
    from baselines.tiny_model import TinyModelSpec, build_tiny_model, default_corpus

    example = load_example()

    class HalfOracleRollout(example.OpenEnvRollout):
        """Every other episode plays the oracle's turns (from a local twin of the served
        env, same seed), so rewards differ within a group and the policy gets a gradient."""

        def act(self, model, ids, seed, turn):
            if self.episodes_played % 2:
                return super().act(model, ids, seed, turn)
            twin = gym.make(self.args.env_id)
            twin.reset(seed=seed)
            for _ in range(turn):
                twin.step(twin.unwrapped.oracle_action())
            action = twin.unwrapped.oracle_action()
            twin.close()
            return self.tokenizer.encode(action, add_special_tokens=False) + [self.chat.end_of_turn_id]

    args = example.ExampleArgs(steps=2, prompts_per_step=1, num_generations=4, max_turns=2, max_new_tokens=16)
    model_dir = build_tiny_model(tmp_path / "tiny", default_corpus(), TinyModelSpec(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1))
    port = free_port()
    with agentgym_server(["serve-env", args.env_id, "--port", str(port)], f"http://127.0.0.1:{port}/health"):
        summary = example.train(args, f"http://127.0.0.1:{port}", model_dir, tmp_path / "grpo", HalfOracleRollout)
    assert summary["steps"] == 2 and summary["episodes"] == 8 and summary["infra_failed"] == 0
    rewards = [entry["reward"] for entry in summary["log"] if "reward" in entry]
    assert len(rewards) == 2 and all(0.0 < r < 1.0 for r in rewards)  # the oracle half scored 1 on the env
    assert summary["parameters_changed"] > 0


def test_an_infra_failed_episode_gives_no_reward():
    example = load_example()
    assert example.env_reward([], [], env_reward=[1.0, 0.0, 0.0], infra_failed=[False, False, True]) == [1.0, 0.0, None]
