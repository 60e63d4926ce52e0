"""Training configs: unreadable files, out-of-range values, unknown keys, mistyped values
and unknown envs are one-line ConfigErrors at load that name the dotted key; the shipped
configs load and round-trip through plain data."""

import dataclasses
import json
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from agentgym.cli import app
from baselines.config import AlgoConfig, TrainConfig, VLLMConfig, config_from_dict, config_to_dict, load_config
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
    ("sft.stop_patience=0", "Expected sft.stop_patience >= 1, actual value: 0"),
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


def _leaves(cls, prefix=""):
    """(dotted key, type) of every leaf field, through the models and the mismatch dataclass."""
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        fields = {name: info.annotation for name, info in cls.model_fields.items()}
    else:
        fields = typing.get_type_hints(cls)
    for name, tp in fields.items():
        if (isinstance(tp, type) and issubclass(tp, BaseModel)) or dataclasses.is_dataclass(tp):
            yield from _leaves(tp, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", tp


def _scalar(tp):
    """``int`` from ``StrictInt | None`` and the like (None and Annotated stripped)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Annotated or (typing.get_origin(tp) is not dict and len(args) == 1):
        return _scalar(args[0])
    return tp


NUMERIC_KEYS = [key for key, tp in _leaves(TrainConfig) if _scalar(tp) in (int, float)]


def test_the_numeric_keys_are_all_found():
    """The walk above sees every section, so the range tests below cover every field
    (69 numeric keys, plus log.tool_usage_min's values, checked above)."""
    assert len(NUMERIC_KEYS) == 69 and {"steps", "threads", "rollout.vllm.max_model_len", "algo.mismatch.tis_cap",
                                        "model.tiny.vocab_size", "sft.stop_success", "sft.counterfactual", "sft.invent",
                                        "sft.observation_weight", "sft.copy_warmup", "sft.stop_patience", "algo.kl_coef", "sft.recovery", "sft.length_groups", "sft.invent_spelled",
                                        "algo.copy_lr", "algo.copy_batch_size", "rollout.outage_frac", "rollout.outage_steps"} <= set(NUMERIC_KEYS)


def _names_the_key(message, key):
    section, _, leaf = key.rpartition(".")
    if key.startswith("algo.mismatch."):  # MismatchConfig (a dataclass) words its own check
        return message.startswith(f"{section}: ") and leaf in message or key in message
    return message.startswith(f"Expected {key} ")


@pytest.mark.parametrize("key", NUMERIC_KEYS)
def test_every_numeric_field_has_a_range_and_the_error_names_its_dotted_key(key):
    """A new numeric field without a range check fails here."""
    for value in ("-1000000000", ".nan", "-.inf"):
        message = one_line_error(None, [f"{key}={value}"])
        assert _names_the_key(message, key), message


@pytest.mark.parametrize("key", [key for key in NUMERIC_KEYS if not key.startswith("algo.mismatch.")])
def test_every_numeric_range_is_declared_on_its_field(key):
    """Ranges live on the fields (Field(ge=..., gt=..., le=...)), not in hand-written checks."""
    node = TrainConfig
    *sections, leaf = key.split(".")
    for name in sections:
        node = node.model_fields[name].annotation
    bounds = {name for c in node.model_fields[leaf].metadata for name in ("ge", "gt", "le", "lt") if hasattr(c, name)}
    assert bounds & {"ge", "gt"}, key


@pytest.mark.parametrize("override, expected", [
    ("stepz=3", "Unknown config key stepz; expected one of ['seed', 'steps', "),
    ("algo.lrr=1e-4", "Did you mean algo.lr?"),
    ("rollout.vllm.tensor_paralel_size=2", "Did you mean rollout.vllm.tensor_parallel_size?"),
    ("algo.mismatch.mdoe=tis", "Did you mean algo.mismatch.mode?"),
    ("model.tiny.hiden_size=64", "Unknown config key model.tiny.hiden_size;"),
])
def test_an_unknown_key_suggests_the_closest(override, expected):
    message = one_line_error(None, [override])
    assert expected in message and message.startswith("Unknown config key ")


def test_an_unknown_key_far_from_every_key_gets_no_suggestion():
    assert "Did you mean" not in one_line_error(None, ["rollout.zzzzzzzz=1"])


def test_overrides_are_typed_as_yaml_scalars():
    config = load_config(None, ["algo.lr=1e-4", "steps=3", "log.tensorboard=false", "model.path=null",
                                "env.kwargs={difficulty: 2}", "rollout.temperature=1", "log.wandb_project=7x",
                                "log.tool_usage_min={calculate: 1}", "algo.mismatch.tis_cap=3"])
    assert config.algo.lr == 1e-4 and type(config.algo.lr) is float  # YAML 1.1 reads 1e-4 as a string
    assert config.steps == 3 and type(config.steps) is int
    assert config.log.tensorboard is False and config.model.path is None
    assert config.env.kwargs == {"difficulty": 2}
    assert type(config.rollout.temperature) is float and config.log.tool_usage_min == {"calculate": 1.0}
    assert config.log.wandb_project == "7x" and config.algo.mismatch.tis_cap == 3.0


@pytest.mark.parametrize("override, expected", [
    ("steps=2.5", "Expected steps to be an integer, actual value: 2.5"),
    ("steps=true", "Expected steps to be an integer, actual value: True"),
    ("steps='3'", "Expected steps to be an integer, actual value: '3'"),
    ("log.tensorboard=1", "Expected log.tensorboard to be true or false, actual value: 1"),
    ("model.path=7", "Expected model.path to be a string, actual value: 7"),
    ("algo.lr=true", "Expected algo.lr to be a number, actual value: True"),
    ("algo.lr=fast", "Expected algo.lr to be a number, actual value: 'fast'"),
    ("rollout.engine=sglang", "Expected rollout.engine to be one of ['hf', 'vllm'], actual value: 'sglang'"),
    ("rollout=3", "Expected a mapping at rollout, actual value: 3"),
    ("algo.mismatch=tis", "Expected a mapping at algo.mismatch, actual value: 'tis'"),
    ("env.kwargs=[1]", "Expected a mapping at env.kwargs, actual value: [1]"),
    ("algo.mismatch.mode=sometimes", "Expected algo.mismatch.mode to be one of ['none', 'tis', 'mis']"),
    ("algo.mismatch.mis_low=1.5", "algo.mismatch: Expected tis_cap > 0 and mis_low < 1 < mis_high"),
])
def test_a_value_of_the_wrong_type_is_refused_with_its_dotted_key(override, expected):
    assert expected in one_line_error(None, [override])


def test_an_override_cannot_descend_into_a_value():
    assert one_line_error(None, ["steps=3", "steps.x=1"]) == "Cannot set steps.x: steps is not a mapping"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_a_config_round_trips_through_plain_data(path):
    """Checkpoints store config_to_dict(config); config_from_dict must rebuild the same config."""
    config = load_config(path)
    data = config_to_dict(config)
    assert json.loads(json.dumps(data)) == data  # plain data, as a checkpoint writes it
    assert config_from_dict(data) == config and config_to_dict(config_from_dict(data)) == data
    assert data["algo"]["mismatch"]["mode"] == config.algo.mismatch.mode


def test_a_section_built_in_code_raises_a_config_error_with_its_dotted_key():
    with pytest.raises(ConfigError, match=r"^Expected rollout\.vllm\.max_model_len >= 1, actual value: 0$"):
        VLLMConfig(max_model_len=0)
    with pytest.raises(ConfigError, match=r"^Unknown config key algo\.lrr; .* Did you mean algo\.lr\?$"):
        AlgoConfig(lrr=1.0)
    assert AlgoConfig(lr=3).lr == 3.0


def test_the_defaults_are_valid():
    assert config_from_dict({}) == TrainConfig() == load_config(None)


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


def test_the_tokenizer_corpus_leaves_out_rl_only_name_shapes():
    """``invent_related`` (train stems made from their own columns), ``invent_values``
    (made-up levels) and ``invent_column_levels`` (levels named after their column) are left out of the text the tiny tokenizer trains on, as ``invent_spelled`` is when its pieces come from that
    tokenizer: a run with it then has the tokenizer, and with ``sft.env_kwargs`` the SFT
    start, of the run without it. Every other kwarg reaches the corpus."""
    from baselines.trainer import corpus_env_kwargs

    base = ["env.id=agentgym/DataAnalysis-v2", "env.kwargs={tier: 1, invent_names: 1.0}"]
    related = load_config(None, [*base, "env.kwargs.invent_related=0.5", "sft.env_kwargs.invent_related=0.0"])
    assert related.env.kwargs["invent_related"] == 0.5
    assert corpus_env_kwargs(related) == corpus_env_kwargs(load_config(None, base)) == {"tier": 1, "invent_names": 1.0}
    spelled = load_config(None, [*base, "env.kwargs.invent_spelled=0.5", "env.name_pieces=tokenizer"])
    assert corpus_env_kwargs(spelled) == {"tier": 1, "invent_names": 1.0}
    values = load_config(None, [*base, "env.kwargs.invent_values=1.0"])
    assert values.env.kwargs["invent_values"] == 1.0 and corpus_env_kwargs(values) == {"tier": 1, "invent_names": 1.0}
    levels = load_config(None, [*base, "env.kwargs.invent_values=1.0", "env.kwargs.invent_column_levels=1.0"])
    assert levels.env.kwargs["invent_column_levels"] == 1.0
    assert corpus_env_kwargs(levels) == {"tier": 1, "invent_names": 1.0}


def test_real_tokenizer_names_leave_every_made_up_name_out_of_the_corpus():
    """``model.tokenizer_names: real`` builds the tokenizer's corpus without any
    ``invent_*`` option, so made-up training names split into short pieces as held-out real
    names do; the default keeps ``invent_names`` in it (the configs' measured runs)."""
    from baselines.trainer import corpus_env_kwargs

    base = ["env.id=agentgym/DataAnalysis-v2", "env.kwargs={tier: 1, invent_names: 1.0, invent_related: 0.5}"]
    assert corpus_env_kwargs(load_config(None, base)) == {"tier": 1, "invent_names": 1.0}
    real = load_config(None, [*base, "model.tokenizer_names=real"])
    assert corpus_env_kwargs(real) == {"tier": 1}
    assert real.env.kwargs["invent_names"] == 1.0  # the env itself still invents them
    assert "model.tokenizer_names" in one_line_error(None, ["model.tokenizer_names=made_up"])
