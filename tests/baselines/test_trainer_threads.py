"""``threads`` fixes torch's intra-op thread count, so a CPU run does not depend on the
machine's core count (a float sum split over another thread count rounds differently,
and one flipped sample changes every later step). The shipped CPU configs set it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from baselines.config import ConfigError, load_config
from baselines.trainer import Trainer

CONFIGS = Path(__file__).resolve().parents[2] / "baselines" / "configs"


def _config(tmp_path, tiny_model_dir, *extra: str):
    return load_config(None, [f"model.path={tiny_model_dir}", f"log.run_dir={tmp_path}/run", "log.tensorboard=false",
                              "device=cpu", "eval_every=0", "sft.episodes=0", "rollout.tasks_per_step=1",
                              "rollout.group_size=1", *extra])


def test_threads_sets_torch_intra_op_threads(tmp_path, tiny_model_dir):
    before = torch.get_num_threads()
    wanted = 2 if before == 1 else 1
    try:
        trainer = Trainer(_config(tmp_path, tiny_model_dir, f"threads={wanted}"))
        trainer.close()
        assert torch.get_num_threads() == wanted
    finally:
        torch.set_num_threads(before)


def test_threads_unset_leaves_torch_default(tmp_path, tiny_model_dir):
    before = torch.get_num_threads()
    trainer = Trainer(_config(tmp_path, tiny_model_dir))
    trainer.close()
    assert torch.get_num_threads() == before


def test_threads_must_be_positive(tmp_path, tiny_model_dir):
    with pytest.raises(ConfigError, match="threads"):
        _config(tmp_path, tiny_model_dir, "threads=0")


@pytest.mark.parametrize("name", ["search_cpu.yaml", "data_analysis_cpu.yaml"])
def test_cpu_configs_fix_threads(name):
    """A fixed count (not torch's per-core default); at most this machine kind's 2 cores."""
    threads = yaml.safe_load((CONFIGS / name).read_text())["threads"]
    assert isinstance(threads, int) and 1 <= threads <= 2


def test_gpu_recipe_does_not_inherit_the_cpu_thread_pin():
    from baselines.config import load_config as load
    from baselines.gpu_check import _SEARCH_GPU

    assert load(str(CONFIGS / "search_cpu.yaml"), _SEARCH_GPU).threads is None
