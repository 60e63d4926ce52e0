import math

import pytest
import torch

from baselines.mismatch import MismatchConfig, mismatch_metrics, mismatch_weights

ENGINE = torch.zeros(1, 4)
TRAINER = torch.tensor([[math.log(3.0), math.log(0.25), math.log(1.5), 9.0]])  # last token masked
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0]])


def test_token_level_tis_truncates():
    w, stats = mismatch_weights(TRAINER, ENGINE, MASK, MismatchConfig("tis", "token", tis_cap=2.0))
    assert w.tolist()[0] == pytest.approx([2.0, 0.25, 1.5, 0.0])
    assert stats["is_frac_clipped"] == pytest.approx(1 / 3)
    assert stats["is_weight_max"] == pytest.approx(3.0)


def test_token_level_mis_masks_outside_the_band():
    w, stats = mismatch_weights(TRAINER, ENGINE, MASK, MismatchConfig("mis", "token", mis_low=0.5, mis_high=2.0))
    assert w.tolist()[0] == pytest.approx([0.0, 0.0, 1.5, 0.0])
    assert stats["is_frac_masked"] == pytest.approx(2 / 3)


def test_sequence_level_uses_the_product_of_ratios():
    rho = 3.0 * 0.25 * 1.5  # 1.125; the masked token does not count
    w, _ = mismatch_weights(TRAINER, ENGINE, MASK, MismatchConfig("tis", "sequence", tis_cap=2.0))
    assert w.tolist()[0] == pytest.approx([rho, rho, rho, 0.0])
    w, stats = mismatch_weights(TRAINER, ENGINE, MASK, MismatchConfig("mis", "sequence", mis_low=0.5, mis_high=1.1))
    assert w.tolist()[0] == pytest.approx([0.0] * 4)
    assert stats["is_frac_masked"] == pytest.approx(1.0)


def test_none_mode_is_the_mask_and_config_validates():
    w, stats = mismatch_weights(TRAINER, ENGINE, MASK, MismatchConfig())
    assert w.tolist() == MASK.tolist() and stats == {}
    with pytest.raises(ValueError):
        MismatchConfig("tis", tis_cap=-1)
    with pytest.raises(ValueError):
        MismatchConfig("sometimes")  # type: ignore[arg-type]


def test_metrics_mean_max_and_k3():
    m = mismatch_metrics(TRAINER, ENGINE, MASK)
    diffs = [math.log(3.0), math.log(0.25), math.log(1.5)]
    assert m["logprob_abs_diff_max"] == pytest.approx(max(abs(d) for d in diffs))
    assert m["logprob_abs_diff_mean"] == pytest.approx(sum(abs(d) for d in diffs) / 3)
    assert m["kl_k3"] == pytest.approx(sum(math.exp(d) - 1 - d for d in diffs) / 3)
