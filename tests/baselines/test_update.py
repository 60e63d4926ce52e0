"""PolicyUpdater steps only on data that carries a learning signal."""

import torch

from baselines.config import AlgoConfig
from baselines.ewma import EWMAModel
from baselines.trajectory import TokenBatch
from baselines.update import PolicyUpdater


def _model() -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=False)
    return Qwen2ForCausalLM(cfg)


def _batch(adv: list[float]) -> TokenBatch:
    g = torch.Generator().manual_seed(1)
    n, t = len(adv), 10
    ids = torch.randint(1, 64, (n, t), generator=g)
    attn = torch.ones(n, t, dtype=torch.long)
    mask = (torch.arange(t)[None] >= 4).float().expand(n, t).clone()
    engine_lp = -torch.rand(n, t, generator=g) * 3 * mask
    return TokenBatch(ids, attn, mask, engine_lp, torch.tensor(adv))


def _updater(model):
    ewma = EWMAModel(model, age=2.0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    algo = AlgoConfig(proximal="ewma", num_minibatches=2, micro_batch_size=2, lr=1e-2)
    return PolicyUpdater(model, opt, ewma, algo), ewma


def test_all_equal_rewards_leave_policy_and_ewma_untouched_even_with_adam_momentum():
    model = _model()
    updater, ewma = _updater(model)
    updater.update(_batch([1.0, -1.0, 1.0, -1.0]), generator=torch.Generator().manual_seed(0))  # builds Adam momentum
    assert ewma.num_updates == 2
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ewma_before = {k: v.clone() for k, v in ewma.module.state_dict().items()}
    metrics = updater.update(_batch([0.0, 0.0, 0.0, 0.0]), generator=torch.Generator().manual_seed(0))
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    for k, v in ewma.module.state_dict().items():
        assert torch.equal(v, ewma_before[k]), k
    assert ewma.num_updates == 2
    assert metrics["train/optimizer_steps"] == 0 and metrics["train/skipped_steps"] == 2
    assert metrics["train/dropped_zero_adv_frac"] == 1.0


def test_zero_variance_groups_are_dropped_before_minibatching():
    model = _model()
    updater, ewma = _updater(model)
    # Rows 0-1: a group with signal; rows 2-5: two all-equal groups (advantage 0).
    metrics = updater.update(_batch([1.0, -1.0, 0.0, 0.0, 0.0, 0.0]), generator=torch.Generator().manual_seed(0))
    assert abs(metrics["train/dropped_zero_adv_frac"] - 4 / 6) < 1e-9
    # Both minibatches are drawn from the two signal rows only, so both take a step.
    assert metrics["train/optimizer_steps"] == 2 and ewma.num_updates == 2
    assert metrics["loss/grad_norm"] > 0


def test_repeated_updates_on_a_signal_batch_lower_the_loss_and_move_the_weights():
    model = _model()
    updater, _ = _updater(model)
    batch = _batch([1.0, -1.0, 1.0, -1.0])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    losses = [updater.update(batch, generator=torch.Generator().manual_seed(i))["loss/policy"] for i in range(6)]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0], losses
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())


def _mis_loss(denominator: str) -> tuple[float, float, float]:
    """Plain PPO with MIS, one optimiser step: at theta = theta_old every token's loss is
    ``-A * w`` (ratios 1), so the reported loss reveals the token-mean denominator."""
    from baselines.mismatch import MismatchConfig

    model = _model()
    batch = _batch([1.0, -0.5, 2.0, -1.0])
    algo = AlgoConfig(proximal="behaviour", num_minibatches=1, micro_batch_size=2, lr=1e-6,
                      mismatch=MismatchConfig(mode="mis", mis_low=0.5, mis_high=2.0, mis_denominator=denominator))
    updater = PolicyUpdater(model, torch.optim.AdamW(model.parameters(), lr=1e-6), None, algo)
    old = updater._logprobs_no_grad(model, batch)
    noise = torch.rand(batch.loss_mask.shape, generator=torch.Generator().manual_seed(2)) * 2 - 1  # |log rho| < 1
    batch.engine_logprobs = (old + noise) * batch.loss_mask
    metrics = updater.update(batch, generator=torch.Generator().manual_seed(0))
    rho = (old - batch.engine_logprobs).exp()
    keep = ((rho >= 0.5) & (rho <= 2.0)).float() * batch.loss_mask
    summed = float((-batch.advantages[:, None] * rho * keep).sum())
    return metrics["loss/policy"], summed / float(keep.sum()), summed / float(batch.loss_mask.sum())


def test_mis_rejected_tokens_leave_the_token_mean_denominator_by_default():
    loss, kept_mean, all_mean = _mis_loss("kept")
    assert abs(kept_mean - all_mean) > 1e-3  # the batch really has rejected tokens
    assert abs(loss - kept_mean) < 1e-4 * max(1.0, abs(kept_mean))


def test_mis_denominator_all_counts_every_generated_token():
    loss, kept_mean, all_mean = _mis_loss("all")
    assert abs(loss - all_mean) < 1e-4 * max(1.0, abs(all_mean))


def test_a_batch_without_rows_is_skipped_and_counted():
    """Every episode infra-failed: collate([]) gives 0 rows and the update changes nothing."""
    from baselines.trajectory import collate

    model = _model()
    updater, ewma = _updater(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    metrics = updater.update(collate([], torch.zeros(0), pad_token_id=0))
    assert metrics["train/empty_batch"] == 1.0 and metrics["train/optimizer_steps"] == 0
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items()) and ewma.num_updates == 0
