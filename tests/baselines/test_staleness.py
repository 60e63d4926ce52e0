"""Staleness tensors and metrics on hand-built trajectories."""

import pytest
import torch

from baselines.staleness import mismatch_by_staleness, staleness_stats, token_staleness
from baselines.trajectory import Trajectory, collate


def _trajectory(turn_versions):
    t = Trajectory([], [], [], 2, 0, "t")
    t.append([1, 2], generated=False)
    for v in turn_versions:
        t.append([3, 4, 5], generated=True, logprobs=[-1.0] * 3, version=v)
        t.append([6], generated=False)
    return t


def test_token_staleness_is_aligned_with_collate_and_zero_off_generated_tokens():
    trajs = [_trajectory([3, 4]), _trajectory([4])]
    s = token_staleness(trajs, current_version=5)
    batch = collate(trajs, torch.zeros(2), pad_token_id=0)
    assert s.shape == batch.loss_mask.shape
    assert s[0].tolist() == [0, 0, 2, 2, 2, 0, 1, 1, 1, 0]
    assert s[1].tolist() == [0, 0, 1, 1, 1, 0, 0, 0, 0, 0]
    assert ((s > 0) <= (batch.loss_mask > 0)).all()


def test_staleness_stats_per_token_and_per_episode():
    stats = staleness_stats([_trajectory([3, 4]), _trajectory([4])], current_version=5)
    assert stats["rollout/staleness_mean"] == pytest.approx((3 * 2 + 3 * 1 + 3 * 1) / 9)
    assert stats["rollout/staleness_max"] == 2.0
    assert stats["rollout/staleness_episode_max_mean"] == pytest.approx(1.5)


def test_mismatch_is_split_by_staleness_level():
    trainer = torch.tensor([[0.0, -1.0, -1.0, -2.0]])
    engine = torch.tensor([[0.0, -1.0, -1.5, -2.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]])
    staleness = torch.tensor([[0, 0, 1, 0]])
    out = mismatch_by_staleness(trainer, engine, mask, staleness)
    assert out["mismatch/staleness_0/logprob_abs_diff_max"] == 0.0
    assert out["mismatch/staleness_1/logprob_abs_diff_max"] == pytest.approx(0.5)
    assert out["mismatch/staleness_0/token_frac"] == pytest.approx(2 / 3)
    assert out["mismatch/staleness_1/token_frac"] == pytest.approx(1 / 3)
    assert not any(k.startswith("mismatch/staleness_2") for k in out)
