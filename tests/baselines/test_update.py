"""PolicyUpdater steps only on data that carries a learning signal."""

import pytest
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


def _kl_to_start_after_updates(kl_coef: float) -> tuple[float, dict[str, float]]:
    """Mean KL(pi_theta || pi_start) on the batch after 6 updates with ``kl_coef``."""
    import copy

    from baselines.logprobs import sequence_logprobs

    model = _model()
    start = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    algo = AlgoConfig(proximal="ewma", num_minibatches=2, micro_batch_size=2, lr=1e-2, kl_coef=kl_coef)
    updater = PolicyUpdater(model, opt, EWMAModel(model, age=2.0), algo, reference=start if kl_coef > 0 else None)
    batch = _batch([1.0, -1.0, 1.0, -1.0])
    for i in range(6):
        metrics = updater.update(batch, generator=torch.Generator().manual_seed(i))
    assert metrics["train/optimizer_steps"] == 2
    with torch.no_grad():
        logp, _ = sequence_logprobs(model, batch.input_ids, batch.attention_mask)
        ref, _ = sequence_logprobs(start, batch.input_ids, batch.attention_mask)
    d = (ref - logp)[batch.loss_mask > 0]
    return float((d.exp() - d - 1).mean()), metrics


def test_kl_coef_keeps_the_policy_near_the_reference_which_stays_frozen():
    free, _ = _kl_to_start_after_updates(0.0)
    anchored, metrics = _kl_to_start_after_updates(1.0)
    assert free > 0 and anchored < 0.5 * free, (free, anchored)
    assert metrics["loss/kl_ref"] > 0


def test_kl_coef_without_a_reference_is_refused():
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with pytest.raises(ValueError, match="reference"):
        PolicyUpdater(model, opt, None, AlgoConfig(proximal="behaviour", kl_coef=0.1))


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
    loss, _kept_mean, all_mean = _mis_loss("all")
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


# ----------------------------------------------- no redundant forward passes (issue 16)
def _ragged_batch() -> TokenBatch:
    """Four rows with prompts of 3..6 tokens, right padding, advantages of both signs."""
    g = torch.Generator().manual_seed(3)
    n, t = 4, 14
    ids = torch.randint(1, 64, (n, t), generator=g)
    lengths, prompts = torch.tensor([14, 11, 12, 9]), torch.tensor([5, 3, 6, 4])
    col = torch.arange(t)[None]
    attn = (col < lengths[:, None]).long()
    mask = ((col >= prompts[:, None]) & (col < lengths[:, None])).float()
    engine_lp = -torch.rand(n, t, generator=g) * 3 * mask
    return TokenBatch(ids * attn, attn, mask, engine_lp, torch.tensor([1.0, -1.0, 0.5, -0.5]))


def _reference_gradients(model, ewma_module, batch: TokenBatch, algo: AlgoConfig) -> dict[str, torch.Tensor]:
    """The path before issue 16: a no-grad ``log pi_trainer_old`` pass over every row, and
    logits over every position, in each forward."""
    from baselines.logprobs import sequence_logprobs
    from baselines.loss import ppo_ewma_loss
    from baselines.mismatch import mis_kept_mask, mismatch_weights

    ids, attn, mask = batch.input_ids, batch.attention_mask, batch.loss_mask
    with torch.no_grad():
        old, _ = sequence_logprobs(model, ids, attn)
    behav, weights, loss_mask = batch.engine_logprobs, None, mask
    if algo.mismatch.mode != "none":
        behav, weights = old, mismatch_weights(old, batch.engine_logprobs, mask, algo.mismatch)[0]
        loss_mask = mis_kept_mask(old, batch.engine_logprobs, mask, algo.mismatch)
    model.zero_grad(set_to_none=True)
    logp, _ = sequence_logprobs(model, ids, attn)
    with torch.no_grad():
        prox = sequence_logprobs(ewma_module, ids, attn)[0] if ewma_module is not None else behav
    out = ppo_ewma_loss(logp, prox, behav, batch.advantages, loss_mask, eps_low=algo.eps_low, eps_high=algo.eps_high,
                        imp_samp_max=algo.imp_samp_max, weights=weights)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return grads


class _PassCounter:
    """Counts forward calls of a module and the positions its ``lm_head`` projects."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.forwards, self.projected = 0, 0
        module.register_forward_hook(self._on_forward)
        module.lm_head.register_forward_hook(self._on_head)

    def _on_forward(self, *_):
        self.forwards += 1

    def _on_head(self, _module, args, _out):
        self.projected += args[0].shape[0] * args[0].shape[1]


def _mismatch(mode: str, denominator: str = "kept"):
    from baselines.mismatch import MismatchConfig

    return MismatchConfig(mode=mode, mis_low=0.5, mis_high=2.0, tis_cap=1.5, mis_denominator=denominator)



@pytest.mark.parametrize("proximal, mode, denominator, passes_per_micro", [
    ("ewma", "none", "kept", 1),      # the TRL-comparable default: one policy forward per micro-batch
    ("behaviour", "none", "kept", 1),
    ("ewma", "tis", "kept", 1),       # TIS weights from the step's own forward
    ("behaviour", "mis", "all", 1),
    ("ewma", "mis", "kept", 2),       # MIS's kept-token denominator is needed before the first backward
])
def test_one_step_update_has_the_old_gradients_with_fewer_passes_and_completion_only_logits(proximal, mode, denominator,
                                                                                              passes_per_micro):
    model = _model()
    batch = _ragged_batch()
    with torch.no_grad():  # engine log-probs near the trainer's, so TIS/MIS weights are not all clipped or masked
        from baselines.logprobs import sequence_logprobs

        old, _ = sequence_logprobs(model, batch.input_ids, batch.attention_mask)
        noise = (torch.rand(batch.loss_mask.shape, generator=torch.Generator().manual_seed(4)) * 1.6 - 0.8)
        batch.engine_logprobs = (old + noise) * batch.loss_mask
    ewma = EWMAModel(model, age=2.0) if proximal == "ewma" else None
    if ewma is not None:  # a proximal policy that differs from the current one
        with torch.no_grad():
            for p in ewma.module.parameters():
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(5)) * 0.01)
    algo = AlgoConfig(proximal=proximal, num_minibatches=1, micro_batch_size=2, max_grad_norm=1e9,
                      mismatch=_mismatch(mode, denominator))
    expected = _reference_gradients(model, ewma.module if ewma else None, batch, algo)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    policy_passes, prox_passes = _PassCounter(model), _PassCounter(ewma.module) if ewma else None
    updater = PolicyUpdater(model, torch.optim.SGD(model.parameters(), lr=1.0), ewma, algo)
    metrics = updater.update(batch, generator=torch.Generator().manual_seed(0))

    assert metrics["train/optimizer_steps"] == 1
    for name, p in model.named_parameters():  # SGD at lr 1 without clipping: the step is minus the gradient
        torch.testing.assert_close(before[name] - p.detach(), expected[name], rtol=1e-4, atol=1e-6, msg=name)
    micro = 2  # 4 rows, 2 per micro-batch
    assert policy_passes.forwards == passes_per_micro * micro
    assert updater.needs_old_logprob_pass() == (passes_per_micro == 2)
    if prox_passes is not None:
        assert prox_passes.forwards == micro
    # Logits only from each micro-batch's first generated position (the rows' prompts end at 3..6).
    first = {0: 5, 1: 3, 2: 6, 3: 4}
    order = torch.randperm(4, generator=torch.Generator().manual_seed(0))
    width = {0: 14, 1: 11, 2: 12, 3: 9}

    def positions(micro_rows):
        return sum(len(rows) * (max(width[int(r)] for r in rows) - min(first[int(r)] for r in rows)) for rows in micro_rows)

    old_pass = positions(torch.arange(4).tensor_split(2)) if passes_per_micro == 2 else 0  # rows in batch order
    assert policy_passes.projected == positions(order.tensor_split(2)) + old_pass
    assert set(metrics) >= {"mismatch/logprob_abs_diff_mean", "mismatch/logprob_abs_diff_max", "mismatch/kl_k3"}
    assert metrics["mismatch/logprob_abs_diff_max"] <= 0.8 + 1e-5 and metrics["mismatch/logprob_abs_diff_mean"] > 0.1


def test_in_step_mismatch_metrics_match_a_separate_old_pass():
    """With correction off, ``mismatch/*`` come from the first step's own forward: same
    numbers as the separate pass gave (every row is in that step here)."""
    from baselines.logprobs import sequence_logprobs
    from baselines.mismatch import mismatch_metrics

    model = _model()
    batch = _ragged_batch()
    with torch.no_grad():
        old, _ = sequence_logprobs(model, batch.input_ids, batch.attention_mask)
    expected = mismatch_metrics(old, batch.engine_logprobs, batch.loss_mask)
    updater = PolicyUpdater(model, torch.optim.SGD(model.parameters(), lr=0.1), None,
                            AlgoConfig(proximal="behaviour", num_minibatches=1, micro_batch_size=3))
    metrics = updater.update(batch, generator=torch.Generator().manual_seed(0))
    for key, value in expected.items():
        assert abs(metrics[f"mismatch/{key}"] - value) < 1e-5, key


def test_first_target_computes_only_the_wanted_positions_and_the_same_values():
    from baselines.logprobs import sequence_logprobs

    model = _model()
    batch = _ragged_batch()
    counter = _PassCounter(model)
    with torch.no_grad():
        full, full_ent = sequence_logprobs(model, batch.input_ids, batch.attention_mask, temperature=0.7, with_entropy=True)
        part, part_ent = sequence_logprobs(model, batch.input_ids, batch.attention_mask, temperature=0.7, with_entropy=True,
                                           first_target=3)
    assert counter.projected == 4 * 13 + 4 * 11
    assert part.shape == full.shape and part_ent.shape == full_ent.shape
    torch.testing.assert_close(part[:, 3:], full[:, 3:], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(part_ent[:, 3:], full_ent[:, 3:], rtol=1e-5, atol=1e-6)
    assert torch.count_nonzero(part[:, :3]) == 0


@pytest.mark.parametrize("compute_dtype", [torch.float32, torch.bfloat16])
def test_tied_head_gets_the_full_logits_gradient_on_every_vocabulary_row(compute_dtype):
    """Completion-only logits change no gradient, the tied embedding/lm_head included: with
    nonzero advantages every vocabulary row gets a gradient through the softmax (rows of
    tokens absent from the batch only through it). So a tied row that does not move under
    AdamW has a gradient too small for one fp32 step, not a zero one (see the bf16 test in
    test_trainer_e2e.py). Checked against the full-logits path, fp32 and under bf16 autocast."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                                         tie_word_embeddings=True))
    assert model.lm_head.weight is model.model.embed_tokens.weight
    batch = _ragged_batch()
    algo = AlgoConfig(proximal="ewma", num_minibatches=1, micro_batch_size=2, max_grad_norm=1e9, mismatch=_mismatch("none"))
    ewma = EWMAModel(model, age=2.0)
    autocast = torch.autocast("cpu", dtype=compute_dtype, enabled=compute_dtype != torch.float32)
    with autocast:
        expected = _reference_gradients(model, ewma.module, batch, algo)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    updater = PolicyUpdater(model, torch.optim.SGD(model.parameters(), lr=1.0), ewma, algo, compute_dtype=compute_dtype)
    assert updater.update(batch, generator=torch.Generator().manual_seed(0))["train/optimizer_steps"] == 1

    tol = {"rtol": 1e-4, "atol": 1e-6} if compute_dtype == torch.float32 else {"rtol": 2e-2, "atol": 1e-4}
    for name, p in model.named_parameters():  # SGD at lr 1 without clipping: the step is minus the gradient
        torch.testing.assert_close(before[name] - p.detach(), expected[name], **tol, msg=name)
    tied = expected["model.embed_tokens.weight"]
    absent = torch.ones(64, dtype=torch.bool)
    absent[batch.input_ids.unique()] = False
    assert absent.any() and bool((tied.abs().amax(dim=1) > 0).all())  # every row, absent tokens' too


def test_copy_lr_takes_a_copy_step_on_its_own_adam_after_the_policy_step():
    """PPO-ptx with a copy task: an update with ``copy_lr`` leaves the weights where the
    policy-only update leaves them plus one AdamW step at ``copy_lr`` on the copy rows
    it drew (whose loss it reports), so the policy's own step is unchanged; a run
    without it computes no copy loss."""
    import copy

    from baselines.sft import copy_loss, copy_pool, copy_rows

    vocabulary, copy_lr, seed = list(range(1, 64)), 1e-2, 7
    start = _model()
    after = {}
    for lr in (0.0, copy_lr):
        model = copy.deepcopy(start)
        algo = AlgoConfig(proximal="behaviour", num_minibatches=1, micro_batch_size=2, copy_lr=lr, copy_batch_size=4)
        updater = PolicyUpdater(model, torch.optim.SGD(model.parameters(), lr=0.5), None, algo, copy_vocabulary=vocabulary if lr else None)
        metrics = updater.update(_batch([1.0, -1.0, 1.0, -1.0]), generator=torch.Generator().manual_seed(seed))
        assert metrics["train/optimizer_steps"] == 1
        assert ("loss/copy" in metrics) == (lr > 0)
        after[lr] = (model, metrics)
    policy_only, mixed = after[0.0][0], after[copy_lr][0]
    # the rows the update drew: a seed from the minibatch generator, then copy_rows
    copy_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=torch.Generator().manual_seed(seed)).item())
    ids, span = copy_rows(copy_pool(vocabulary), 4, torch.Generator().manual_seed(copy_seed))
    expected = copy.deepcopy(policy_only).train()
    opt = torch.optim.AdamW(expected.parameters(), lr=copy_lr, weight_decay=0.0)
    loss = copy_loss(expected, ids, span)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(expected.parameters(), 1.0)
    opt.step()
    assert after[copy_lr][1]["loss/copy"] == pytest.approx(float(loss.detach()), rel=1e-5)
    moved = 0
    for (name, want), got, before in zip(expected.named_parameters(), mixed.parameters(), policy_only.parameters()):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6, msg=lambda m: f"{name}: {m}")
        moved += int(not torch.equal(got, before))
    assert moved > 0


def test_copy_lr_without_a_vocabulary_is_refused():
    model = _model()
    with pytest.raises(ValueError, match="copy_vocabulary"):
        PolicyUpdater(model, torch.optim.AdamW(model.parameters(), lr=1e-2), None, AlgoConfig(proximal="behaviour", copy_lr=0.1))
