"""The PPO-EWMA loss against hand-computed values (eps=0.2, imp_samp_max=2)."""

import math

import pytest
import torch

from baselines.loss import ppo_ewma_loss


def _log(xs):
    return torch.tensor([[math.log(x) for x in xs]], dtype=torch.float64)


def test_loss_matches_hand_computation_with_cap_and_both_clip_sides():
    # token 1: on-policy, r=1, A=1                          -> -1
    # token 2: r=0.6/0.4=1.5 > 1.2, A=+1 -> clipped at 1.2   -> -1.2 (no gradient)
    # token 3: r=0.2/0.4=0.5 < 0.8, A=-1 -> clipped at 0.8   -> +0.8 (no gradient)
    # token 4: pi_b=0.1 < pi_theta/2=0.3 -> pi_b'=0.3, weight 0.5/0.3, r=1.2, A=2 -> -(5/3)*2.4 = -4
    logp = _log([0.5, 0.6, 0.2, 0.6]).requires_grad_(True)
    prox = _log([0.5, 0.4, 0.4, 0.5])
    behav = _log([0.5, 0.4, 0.4, 0.1])
    adv = torch.tensor([[1.0, 1.0, -1.0, 2.0]], dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.float64)
    out = ppo_ewma_loss(logp, prox, behav, adv, mask, eps_low=0.2, eps_high=0.2, imp_samp_max=2.0)
    assert out.loss.item() == pytest.approx((-1 - 1.2 + 0.8 - 4) / 4)
    out.loss.backward()
    # d/dlogp of -w r A is -w r A for unclipped tokens (r = exp(logp - prox)); token mean /4
    assert logp.grad.tolist()[0] == pytest.approx([-1 / 4, 0.0, 0.0, -(5 / 3) * 1.2 * 2 / 4])
    assert out.stats["clip_frac_high"] == pytest.approx(0.25)
    assert out.stats["clip_frac_low"] == pytest.approx(0.25)
    assert out.stats["imp_samp_capped_frac"] == pytest.approx(0.25)
    assert out.stats["prox_weight_max"] == pytest.approx(5 / 3)


def test_clip_does_not_apply_on_the_pessimistic_sides():
    # r=0.5 with A>0 and r=1.5 with A<0: min() keeps the unclipped (worse) term.
    logp = _log([0.2, 0.6]).requires_grad_(True)
    prox = behav = _log([0.4, 0.4])
    adv = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    out = ppo_ewma_loss(logp, prox, behav, adv, torch.ones(1, 2, dtype=torch.float64), imp_samp_max=10.0)
    assert out.loss.item() == pytest.approx((-0.5 + 1.5) / 2)
    out.loss.backward()
    assert logp.grad.tolist()[0] == pytest.approx([-0.5 / 2, 1.5 / 2])
    assert out.stats["clip_frac_low"] == 0 and out.stats["clip_frac_high"] == 0


def test_masked_tokens_and_global_token_count():
    logp = _log([0.5, 0.5, 0.5]).requires_grad_(True)
    same = _log([0.5, 0.5, 0.5])
    adv = torch.tensor([1.0], dtype=torch.float64)  # one advantage per sequence
    mask = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    assert ppo_ewma_loss(logp, same, same, adv, mask).loss.item() == pytest.approx(-1.0)
    # dividing by a global count (e.g. 4 tokens over all micro-batches) scales the sum
    assert ppo_ewma_loss(logp, same, same, adv, mask, num_tokens=4).loss.item() == pytest.approx(-0.5)


def test_plain_ppo_is_proximal_equal_behaviour():
    logp = _log([0.3]).requires_grad_(True)
    behav = _log([0.25])
    out = ppo_ewma_loss(logp, behav, behav, torch.tensor([1.0], dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64))
    assert out.loss.item() == pytest.approx(-min(0.3 / 0.25, 1.2))


def test_kl_penalty_to_the_reference_adds_k3_and_its_gradient():
    # A = 0 leaves only the penalty: l = beta * (exp(d) - d - 1), d = log pi_ref - log pi_theta,
    # d l / d log pi_theta = beta * (1 - exp(d)); token mean over 2 tokens.
    logp = _log([0.5, 0.2]).requires_grad_(True)
    same = _log([0.5, 0.2])
    ref = _log([0.25, 0.4])
    adv = torch.zeros(1, 2, dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.float64)
    d = [math.log(0.25 / 0.5), math.log(0.4 / 0.2)]
    k3 = [math.exp(x) - x - 1 for x in d]
    out = ppo_ewma_loss(logp, same, same, adv, mask, logp_ref=ref, kl_coef=0.1)
    assert out.loss.item() == pytest.approx(0.1 * sum(k3) / 2)
    assert out.stats["kl_ref"] == pytest.approx(sum(k3) / 2)
    out.loss.backward()
    assert logp.grad.tolist()[0] == pytest.approx([0.1 * (1 - math.exp(x)) / 2 for x in d])


def test_kl_coef_zero_only_measures_and_a_positive_one_needs_the_reference():
    logp = _log([0.5]).requires_grad_(True)
    same = _log([0.5])
    adv = torch.tensor([1.0], dtype=torch.float64)
    mask = torch.ones(1, 1, dtype=torch.float64)
    plain = ppo_ewma_loss(logp, same, same, adv, mask)
    measured = ppo_ewma_loss(logp, same, same, adv, mask, logp_ref=_log([0.1]))
    assert measured.loss.item() == plain.loss.item() and measured.stats["kl_ref"] > 0
    with pytest.raises(ValueError, match="logp_ref"):
        ppo_ewma_loss(logp, same, same, adv, mask, kl_coef=0.1)
