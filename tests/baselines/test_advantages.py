import pytest
import torch

from baselines.advantages import group_normalized_advantages


def test_groups_with_equal_rewards_get_zero_advantage():
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    adv = group_normalized_advantages(rewards, [0, 0, 0, 1, 1, 1])
    assert adv.tolist() == [0.0] * 6


def test_mixed_group_is_standardised_and_std_division_optional():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 2.0, 4.0])
    adv = group_normalized_advantages(rewards, [0, 0, 0, 0, 1, 1], eps=0.0)
    # group 0: mean 0.25, population std sqrt(3)/4
    s = 3 ** 0.5 / 4
    assert adv[:4].tolist() == pytest.approx([0.75 / s, -0.25 / s, -0.25 / s, -0.25 / s])
    assert adv[4:].tolist() == pytest.approx([-1.0, 1.0])
    raw = group_normalized_advantages(rewards, [0, 0, 0, 0, 1, 1], normalize_std=False)
    assert raw.tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25, -1.0, 1.0])


def test_unequal_and_singleton_groups_after_drops():
    adv = group_normalized_advantages(torch.tensor([1.0, 0.0, 5.0]), [7, 7, 3])
    assert adv[2].item() == 0.0
    assert adv[0].item() > 0 > adv[1].item()
    with pytest.raises(ValueError):
        group_normalized_advantages(torch.tensor([1.0]), [0, 1])
