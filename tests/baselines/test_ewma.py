import pytest
import torch

from baselines.ewma import EWMAModel, ewma_age_for_batch_size, ewma_decay_from_age


def _model(value: float) -> torch.nn.Module:
    m = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        m.weight.fill_(value)
    return m


def test_bias_corrected_average_counts_initial_copy_once():
    policy = _model(1.0)
    ewma = EWMAModel(policy, age=1.0)  # beta = 0.5
    assert ewma.decay == pytest.approx(0.5)
    assert ewma.module.weight.item() == pytest.approx(1.0)  # not pulled towards zero
    history = [1.0]
    for value in [3.0, -2.0, 5.0]:
        with torch.no_grad():
            policy.weight.fill_(value)
        ewma.update(policy)
        history.append(value)
        weights = [0.5 ** (len(history) - 1 - i) for i in range(len(history))]
        expected = sum(w * h for w, h in zip(weights, history)) / sum(weights)
        assert ewma.module.weight.item() == pytest.approx(expected)
    assert not ewma.module.weight.requires_grad


def test_age_zero_tracks_the_policy_and_memory_is_reported():
    policy = _model(1.0)
    ewma = EWMAModel(policy, age=0.0)
    with torch.no_grad():
        policy.weight.fill_(7.0)
    ewma.update(policy)
    assert ewma.module.weight.item() == pytest.approx(7.0)
    assert ewma.memory_bytes() == 4


def test_age_from_decay_and_batch_size_invariance():
    assert ewma_decay_from_age(3.0) == pytest.approx(0.75)
    assert ewma_age_for_batch_size(4.0, reference_batch_size=64, batch_size=32) == pytest.approx(8.0)
    with pytest.raises(ValueError):
        ewma_decay_from_age(-1)


def test_state_dict_round_trip():
    policy = _model(2.0)
    ewma = EWMAModel(policy, age=4.0)
    ewma.update(_model(4.0))
    other = EWMAModel(_model(0.0), age=4.0)
    other.load_state_dict(ewma.state_dict())
    assert other.module.weight.item() == pytest.approx(ewma.module.weight.item())
    assert other.total_weight == ewma.total_weight
