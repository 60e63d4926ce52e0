"""Training configs: unreadable files, out-of-range values and unknown envs are one-line
ConfigErrors at load; the shipped configs load."""

import dataclasses
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentgym.cli import app
from baselines.config import TrainConfig, load_config
from baselines.errors import ConfigError

CONFIGS = sorted(Path("baselines/configs").glob("*.yaml"))


def one_line_error(path, overrides=()):
    with pytest.raises(ConfigError) as e:
        load_config(path, list(overrides))
    message = str(e.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_the_shipped_configs_load(path):
    assert load_config(path).steps >= 1


def test_a_yaml_syntax_error_names_the_file_line_and_column(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("steps: 3\nrollout: {engine: hf\nalgo:\n  lr: 1\n")
    message = one_line_error(path)
    assert message.startswith(f"{path}: YAML syntax error at line ") and "column" in message


def test_a_directory_is_not_a_config(tmp_path):
    assert one_line_error(tmp_path) == f"{tmp_path} is a directory; pass a YAML file such as {tmp_path / 'calculator_cpu.yaml'}"


def test_a_config_that_is_not_utf8_says_so(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"# r\xe9sum\xe9\nsteps: 3\n")
    assert one_line_error(path) == f"{path} is not UTF-8 text (byte 0xe9 at offset 3); save it as UTF-8"


def test_a_bad_override_is_a_config_error():
    assert "override 'algo.lr=['" in one_line_error(None, ["algo.lr=["])


@pytest.mark.parametrize("override, expected", [
    ("steps=-5", "Expected steps >= 1, actual value: -5"),
    ("steps=0", "Expected steps >= 1"),
    ("rollout.max_new_tokens=-1", "Expected rollout.max_new_tokens >= 1"),
    ("algo.lr=-1", "Expected algo.lr > 0, actual value: -1.0"),
    ("algo.lr=0", "Expected algo.lr > 0"),
    ("algo.lr=.nan", "Expected algo.lr > 0, actual value: nan"),
    ("sft.lr=.inf", "Expected sft.lr > 0, actual value: inf"),
    ("rollout.top_p=7", "Expected rollout.top_p in (0, 1], actual value: 7.0"),
    ("rollout.top_p=0", "Expected rollout.top_p in (0, 1]"),
    ("rollout.temperature=-0.1", "Expected rollout.temperature >= 0"),
    ("rollout.tasks_per_step=-2", "Expected rollout.tasks_per_step >= 1"),
    ("rollout.group_size=0", "Expected rollout.group_size >= 1"),
    ("rollout.max_batch_size=0", "Expected rollout.max_batch_size >= 1"),
    ("algo.micro_batch_size=0", "Expected algo.micro_batch_size >= 1"),
    ("sft.batch_size=-1", "Expected sft.batch_size >= 1"),
    ("sft.steps=-5", "Expected sft.steps >= 1"),
    ("sft.stop_success=1.5", "Expected sft.stop_success in (0, 1]"),
    ("rollout.vllm.gpu_memory_utilization=1.5", "Expected rollout.vllm.gpu_memory_utilization in (0, 1]"),
    ("model.tiny.hidden_size=0", "Expected model.tiny.hidden_size >= 1"),
    ("model.tiny.num_attention_heads=3", "divisible by num_attention_heads"),
    ("rollout.max_seq_len=32", "Expected rollout.max_seq_len > rollout.max_new_tokens"),
    ("log.tool_usage_min={search: 2}", "Expected log.tool_usage_min.search in [0, 1]"),
    ("seed=-1", "Expected seed >= 0"),
])
def test_values_out_of_range_are_rejected_at_load(override, expected):
    assert expected in one_line_error(None, [override])


@pytest.mark.parametrize("override", ["rollout.top_p=1", "rollout.temperature=0", "sft.episodes=0", "eval_every=0",
                                      "algo.ewma_age=0", "rollout.vllm.gpu_memory_utilization=1"])
def test_values_on_the_boundary_are_accepted(override):
    load_config(None, [override])


def _numeric_keys(cls, prefix=""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            yield from _numeric_keys(tp, f"{prefix}{f.name}.")
        elif {int, float} & {tp, *typing.get_args(tp)} and tp is not bool:
            yield f"{prefix}{f.name}"


@pytest.mark.parametrize("key", list(_numeric_keys(TrainConfig)))
def test_every_numeric_field_has_a_range(key):
    """A new numeric field without a range check fails here."""
    one_line_error(None, [f"{key}=-1000000000"])
    one_line_error(None, [f"{key}=.nan"])


def test_an_unknown_env_id_is_rejected_with_the_closest_id():
    message = one_line_error(None, ["env.id=agentgym/Calculatr-v0"])
    assert message.startswith("env.id: Unknown environment 'agentgym/Calculatr-v0'; did you mean 'agentgym/Calculator-v0'?")


def test_env_kwargs_are_checked_against_the_env():
    assert "env.kwargs: Unknown kwarg 'difficulty_level'" in one_line_error(None, ["env.kwargs={difficulty_level: 1}"])
    message = one_line_error(None, ["env.id=agentgym/DataAnalysis-v1", "env.kwargs={backend: podman}"])
    assert "backend" in message and "'podman'" in message


def test_agentgym_train_prints_one_line_and_exits_2(tmp_path):
    result = CliRunner().invoke(app, ["train", "--config", str(tmp_path)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"config error: {tmp_path} is a directory; pass a YAML file such as " \
                            f"{tmp_path / 'calculator_cpu.yaml'}\n"


def test_top_p_below_one_is_refused_with_the_reason():
    """The trainer's log-probs use temperature only; nucleus-truncated engine log-probs
    would bias every importance ratio, so top_p < 1 must not start a run."""
    message = one_line_error(None, ["rollout.top_p=0.9"])
    assert "Expected rollout.top_p = 1, actual value: 0.9" in message and "biased" in message
