"""Staleness and engine mismatch are corrected as separate factors (issue 27).

A token sampled by policy version ``v`` and trained at version ``V > v`` differs from the
trainer's current policy for two reasons: the weights moved (staleness, ``V - v``) and
the engine computes differently from the trainer (mismatch). TIS/MIS are for the second
only; PPO-EWMA's decoupled weight ``pi_prox / pi_behav`` handles the first once
``pi_behav`` is the trainer's policy *at version v*. These tests build data whose engine
log-probs are exactly the trainer's at the sampling version (no engine mismatch at all):
a correction that folds in staleness masks or re-weights those tokens, one that does not
gives exactly the update without correction.
"""

from __future__ import annotations

import copy

import pytest
import torch

from baselines.config import AlgoConfig
from baselines.ewma import EWMAModel
from baselines.logprobs import sequence_logprobs
from baselines.mismatch import MismatchConfig
from baselines.policy_versions import PolicyVersions, PolicyVersionError
from baselines.trajectory import TokenBatch
from baselines.update import PolicyUpdater


def _model() -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=False)
    return Qwen2ForCausalLM(cfg)


def _drifted(model: torch.nn.Module, scale: float = 0.5) -> torch.nn.Module:
    """The same policy some optimiser steps later: far enough that its ratio to the old
    one leaves MIS's [0.5, 2] band on many tokens."""
    new = copy.deepcopy(model)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in new.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return new


def _stale_batch(old: torch.nn.Module, new: torch.nn.Module) -> TokenBatch:
    """Rows 0-1 sampled by ``old`` (staleness 1), row 2 by ``new``, row 3 half and half
    (an episode across a weight sync); engine log-probs = the sampling version's own."""
    g = torch.Generator().manual_seed(1)
    n, t = 4, 12
    ids = torch.randint(1, 64, (n, t), generator=g)
    attn = torch.ones(n, t, dtype=torch.long)
    mask = (torch.arange(t)[None] >= 4).float().expand(n, t).clone()
    staleness = torch.zeros(n, t, dtype=torch.long)
    staleness[:2, 4:] = 1
    staleness[3, 4:8] = 1
    with torch.no_grad():
        lp_old, _ = sequence_logprobs(old, ids, attn)
        lp_new, _ = sequence_logprobs(new, ids, attn)
    engine = torch.where(staleness == 1, lp_old, lp_new) * mask
    batch = TokenBatch(ids, attn, mask, engine, torch.tensor([1.0, -1.0, 0.5, -0.5]))
    batch.staleness = staleness * mask.long()
    return batch


def _versions(old: torch.nn.Module, new: torch.nn.Module) -> PolicyVersions:
    versions = PolicyVersions(keep=2)
    versions.record(6, old)
    versions.record(7, new)  # the trainer's current weights: version 7
    return versions


def _update(live: torch.nn.Module, batch: TokenBatch, mismatch: MismatchConfig, versions: PolicyVersions | None,
            num_minibatches: int = 1) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    model = copy.deepcopy(live)
    ewma = EWMAModel(model, age=2.0)
    algo = AlgoConfig(proximal="ewma", epochs=1, num_minibatches=num_minibatches, micro_batch_size=2, lr=1e-2,
                      imp_samp_max=1e9, mismatch=mismatch)
    updater = PolicyUpdater(model, torch.optim.AdamW(model.parameters(), lr=1e-2), ewma, algo, versions=versions)
    metrics = updater.update(copy.deepcopy(batch), generator=torch.Generator().manual_seed(0))
    return metrics, {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("mode", ["tis", "mis"])
@pytest.mark.parametrize("num_minibatches", [1, 2])
def test_stale_tokens_without_engine_mismatch_are_neither_masked_nor_reweighted(mode, num_minibatches):
    old = _model()
    new = _drifted(old)
    batch = _stale_batch(old, new)
    _, want = _update(new, batch, MismatchConfig(mode="none"), None, num_minibatches)  # pi_behav = engine = sampling version
    metrics, got = _update(new, batch, MismatchConfig(mode=mode, tis_cap=1.5), _versions(old, new), num_minibatches)
    for name, value in want.items():
        torch.testing.assert_close(got[name], value, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
    assert metrics["mismatch/logprob_abs_diff_max"] < 1e-4  # engine vs trainer at the same weights
    assert metrics[f"mismatch/is_frac_{'clipped' if mode == 'tis' else 'masked'}"] == 0.0
    # The drift is measured, under its own name: current weights vs the sampling ones.
    assert metrics["staleness/logprob_abs_diff_mean"] > 0.1 and metrics["staleness/kl_k3"] > 0.01
    assert metrics["staleness/token_frac"] == pytest.approx(20 / 32)  # rows 0-1: 8 + 8, row 3: 4 of 4 x 8
    assert metrics["staleness/lag_1/logprob_abs_diff_mean"] == metrics["staleness/logprob_abs_diff_mean"]


def test_mis_masks_exactly_the_tokens_the_engine_got_wrong_stale_or_fresh():
    old = _model()
    new = _drifted(old)
    batch = _stale_batch(old, new)
    wrong = torch.zeros_like(batch.loss_mask, dtype=torch.bool)
    wrong[0, 5], wrong[1, 9], wrong[2, 6], wrong[3, 5], wrong[3, 10] = True, True, True, True, True  # 3 stale, 2 fresh
    batch.engine_logprobs = batch.engine_logprobs + wrong.float() * 1.5  # the engine thought them e^1.5 likelier
    metrics, _ = _update(new, batch, MismatchConfig(mode="mis", mis_low=0.5, mis_high=2.0), _versions(old, new))
    assert metrics["mismatch/is_frac_masked"] == pytest.approx(5 / 32)
    assert metrics["mismatch/logprob_abs_diff_max"] == pytest.approx(1.5, abs=1e-4)
    assert metrics["mismatch/staleness_1/logprob_abs_diff_max"] == pytest.approx(1.5, abs=1e-4)


def test_versions_keep_the_newest_and_say_what_is_missing():
    old = _model()
    versions = PolicyVersions(keep=2)
    for v in (1, 2, 3):
        versions.record(v, old)
    assert versions.latest == 3 and versions.held() == [2, 3]
    with pytest.raises(PolicyVersionError, match="version 1"):
        with versions.swapped_in(old, lag=2):
            pass


def test_swapping_a_version_in_restores_the_live_weights():
    old = _model()
    new = _drifted(old)
    versions = _versions(old, new)
    live = copy.deepcopy(new)
    with torch.no_grad():  # a live model that moved on since version 7 was recorded
        next(live.parameters()).add_(1.0)
    before = {k: v.clone() for k, v in live.state_dict().items()}
    with versions.swapped_in(live, lag=1):
        for (k, v), o in zip(live.state_dict().items(), old.state_dict().values()):
            assert torch.equal(v, o), k
    for k, v in live.state_dict().items():
        assert torch.equal(v, before[k]), k
