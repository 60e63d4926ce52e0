"""sft_train's early-stop hook and constant schedule."""

import torch

from baselines.sft import sft_train
from baselines.trajectory import Trajectory


def _model() -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=32, tie_word_embeddings=False)
    return Qwen2ForCausalLM(cfg)


def _trajs() -> list[Trajectory]:
    out = []
    for i in range(4):
        t = Trajectory([], [], [], 3, i, str(i))
        t.append([1, 2, 3], generated=False)
        t.append([4 + i, 5 + i, 6], generated=True)
        out.append(t)
    return out


def test_should_stop_is_checked_every_n_steps_and_ends_training():
    calls = []

    def should_stop(done: int) -> bool:
        calls.append(done)
        return done >= 9

    losses = sft_train(_model(), _trajs(), steps=50, batch_size=2, lr=1e-2, pad_token_id=0, schedule="constant",
                       should_stop=should_stop, check_every=3)
    assert calls == [3, 6, 9]
    assert len(losses) == 9


def test_without_a_stop_rule_all_steps_run_and_loss_falls():
    losses = sft_train(_model(), _trajs(), steps=40, batch_size=4, lr=1e-2, pad_token_id=0, schedule="constant")
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < losses[0]


def test_observation_weight_trains_the_observed_tokens_and_reports_the_imitation_loss():
    """Language modelling on the prompt tokens: their NLL falls only when weighted, and
    the returned loss stays the generated tokens' NLL (comparable across weights)."""
    from baselines.logprobs import sequence_logprobs
    from baselines.trajectory import collate

    def prompt_nll(model: torch.nn.Module) -> float:
        batch = collate(_trajs(), torch.zeros(4), 0)
        with torch.no_grad():
            logp, _ = sequence_logprobs(model, batch.input_ids, batch.attention_mask)
        seen = batch.attention_mask.float() * (1 - batch.loss_mask.float())
        seen[:, 0] = 0
        return float(-(logp * seen).sum() / seen.sum())

    start = prompt_nll(_model())
    plain, weighted = _model(), _model()
    plain_losses = sft_train(plain, _trajs(), steps=30, batch_size=4, lr=1e-2, pad_token_id=0, schedule="constant")
    weighted_losses = sft_train(weighted, _trajs(), steps=30, batch_size=4, lr=1e-2, pad_token_id=0, schedule="constant",
                                observation_weight=1.0)
    assert prompt_nll(weighted) < 0.2 * start  # the fixed prompt [1, 2, 3] is learned
    assert prompt_nll(plain) > 0.5 * start      # imitation alone leaves it near chance
    assert weighted_losses[0] == plain_losses[0]  # same first batch, same reported (imitation) loss


def _copy_accuracy(model: torch.nn.Module, pool: list[int], span: int = 10, gap: int = 5) -> float:
    """Greedy next-token accuracy on the repeat of fresh random spans (held out: another seed)."""
    gen = torch.Generator().manual_seed(12345)
    ids = torch.tensor(pool)[torch.randint(len(pool), (64, 2 * span + gap), generator=gen)]
    ids[:, span + gap:] = ids[:, :span]
    with torch.no_grad():
        guess = model(input_ids=ids).logits[:, -span:-1].argmax(-1)
    return float((guess == ids[:, -span + 1:]).float().mean())


def test_copy_warmup_teaches_copying_spans_never_seen():
    """After the warm-up the model reproduces a random span it sees once; before, it
    guesses (1/len(pool)). Both span and gap are new draws, so nothing is memorised; the
    warm-up ends when the copy is learned, not after a fixed count."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from baselines.sft import copy_warmup

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128))
    pool = list(range(8, 48))
    before = _copy_accuracy(model, pool)
    losses = copy_warmup(model, pool, steps=3000, batch_size=16, lr=3e-3, max_span=12, until_loss=0.3)
    assert len(losses) < 3000 and sum(losses[-20:]) / 20 < 0.3  # it stopped once the copy was learned
    assert sum(losses[:20]) / 20 > 3.0  # ... which it was not at the start (ln 40 = 3.7)
    assert before < 0.15
    assert _copy_accuracy(model, pool) > 0.9


def test_copy_warmup_copies_only_the_tokens_it_was_shown():
    """A token the warm-up never drew is not copied after it, and tasks hold such tokens:
    DataAnalysis-v2's test questions name held-out tables whose pieces (``ps`` in
    ``tips.csv``) no train question has, and the tiny model wrote ``tiokes.csv``. Drawing
    from the whole tokenizer (``warmup_vocabulary("tokenizer", ...)``) copies them too."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from baselines.sft import copy_warmup, warmup_vocabulary

    shown, never_shown = list(range(8, 48)), list(range(48, 64))
    accuracy = {}
    for source in ("demonstrations", "tokenizer"):
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128))
        demo = Trajectory([], [], [], 0, 0, "0")
        demo.append(shown, generated=True)
        pool = warmup_vocabulary(source, [demo], vocab_size=64, special_ids=range(8))
        copy_warmup(model, pool, steps=3000, batch_size=16, lr=3e-3, max_span=12, until_loss=0.3)
        accuracy[source] = (_copy_accuracy(model, shown), _copy_accuracy(model, never_shown))
    assert accuracy["demonstrations"][0] > 0.85 and accuracy["demonstrations"][1] < 0.2, accuracy  # measured: 0.94, 0.0
    assert min(accuracy["tokenizer"]) > 0.7, accuracy  # measured: 0.91, 0.85


def test_warmup_vocabulary_is_the_demonstrations_or_the_whole_tokenizer_without_special_tokens():
    import pytest

    from baselines.sft import warmup_vocabulary

    assert warmup_vocabulary("demonstrations", _trajs(), vocab_size=32, special_ids=[1]) == [2, 3, 4, 5, 6, 7, 8]
    assert warmup_vocabulary("tokenizer", _trajs(), vocab_size=32, special_ids=[0, 1, 31]) == list(range(2, 31))
    with pytest.raises(ValueError, match="'demonstrations' or 'tokenizer'"):
        warmup_vocabulary("all", _trajs(), vocab_size=32, special_ids=[])


def test_copy_warmup_needs_tokens_to_copy():
    import pytest

    from baselines.sft import copy_warmup

    with pytest.raises(ValueError, match="at least 2 token ids"):
        copy_warmup(_model(), [5, 5], steps=1, batch_size=2, lr=1e-3)


def _linear(value: float) -> torch.nn.Module:
    layer = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        layer.weight.fill_(value)
    return layer


def test_early_stop_on_success_keeps_the_weights_that_reached_it():
    from baselines.sft import EarlyStop

    stop, model = EarlyStop(0.3, patience=2), _linear(1.0)
    assert not stop.observe(100, 0.2, model)
    model.weight.data.fill_(2.0)
    assert stop.observe(200, 0.31, model) and stop.reason == "success"
    assert stop.restore_best(model) is None and float(model.weight[0, 0]) == 2.0


def test_early_stop_on_patience_restores_the_best_checks_weights():
    """Checks 0.1, 0.25 (best), 0.25 (equal is not better), 0.2: with patience 2 it stops
    at the fourth check and the model gets the second check's weights back."""
    from baselines.sft import EarlyStop

    stop, model = EarlyStop(0.3, patience=2), _linear(0.0)
    decisions = []
    for step, (success, weight) in enumerate([(0.1, 1.0), (0.25, 2.0), (0.25, 3.0), (0.2, 4.0)], start=1):
        model.weight.data.fill_(weight)
        decisions.append(stop.observe(step * 100, success, model))
    assert decisions == [False, False, False, True] and stop.reason == "patience"
    assert stop.best == (200, 0.25)
    assert stop.restore_best(model) == 200 and float(model.weight[0, 0]) == 2.0


def test_early_stop_without_patience_never_stops_below_the_threshold():
    from baselines.sft import EarlyStop

    stop, model = EarlyStop(0.9), _linear(0.0)
    assert not any(stop.observe(s, 0.5 - s / 1000, model) for s in range(1, 50))
    assert stop.reason is None and stop.restore_best(model) is None


def test_early_stop_rejects_a_patience_below_one():
    import pytest

    from baselines.sft import EarlyStop

    with pytest.raises(ValueError, match="patience >= 1"):
        EarlyStop(0.3, patience=0)


def test_early_stop_patience_waits_for_a_first_success():
    """Checks of 0 before imitation clicks are not a plateau: patience starts counting at
    the first check above 0."""
    from baselines.sft import EarlyStop

    stop, model = EarlyStop(0.3, patience=2), _linear(0.0)
    assert not any(stop.observe(s, 0.0, model) for s in (100, 200, 300, 400))
    assert not stop.observe(500, 0.1, model)
    assert not stop.observe(600, 0.05, model)
    assert stop.observe(700, 0.1, model) and stop.reason == "patience" and stop.best == (500, 0.1)


def test_unlearned_spans_are_neither_imitated_nor_language_modelled():
    """A recovery demonstration's mistaken call is context only: with every non-prompt
    token marked ``unlearned`` (and the observation loss on) no gradient reaches the
    model; the same rows without the mark train it."""
    def rows(mark: bool) -> list[Trajectory]:
        out = []
        for i in range(4):
            t = Trajectory([], [], [], 1, i, str(i))
            t.append([1], generated=False)
            turn = [4 + i, 5 + i, 6] + [7] * (3 * (i == 3))  # one row longer: a minibatch is trimmed to its own rows
            t.append(turn, generated=False)  # a mistaken turn: loss mask 0, as _tokenise writes it
            if mark:
                t.info["unlearned"] = [(1, 1 + len(turn))]
            out.append(t)
        return out

    changed = {}
    for mark in (True, False):
        model = _model()
        before = {k: v.clone() for k, v in model.state_dict().items()}
        sft_train(model, rows(mark), steps=3, batch_size=2, lr=1e-2, pad_token_id=0, schedule="constant", observation_weight=1.0)
        changed[mark] = max(float((v - before[k]).abs().max()) for k, v in model.state_dict().items())
    assert changed[True] == 0.0 and changed[False] > 1e-4


def _mixed_lengths(n: int = 64) -> torch.Tensor:
    return torch.randint(50, 1000, (n,), generator=torch.Generator().manual_seed(3))


def test_length_groups_of_one_draw_what_plain_uniform_draws_drew():
    """Old runs replay: the same generator calls as before the option existed."""
    from baselines.sft import minibatch_rows

    draws = minibatch_rows(_mixed_lengths(), 16, 1, torch.Generator().manual_seed(7))
    plain = torch.Generator().manual_seed(7)
    for _ in range(5):
        assert torch.equal(next(draws), torch.randint(64, (16,), generator=plain))


def test_length_groups_keep_every_row_equally_likely_and_cut_the_padding():
    from baselines.sft import minibatch_rows

    lengths = _mixed_lengths()
    steps = 4000

    def run(groups: int) -> tuple[torch.Tensor, float]:
        draws = minibatch_rows(lengths, 16, groups, torch.Generator().manual_seed(1))
        counts, padded = torch.zeros(64), 0.0
        for _ in range(steps):
            rows = next(draws)
            assert rows.shape == (16,)
            counts += torch.bincount(rows, minlength=64)
            padded += float(lengths[rows].max() * 16 - lengths[rows].sum())
        return counts, padded / steps

    plain_counts, plain_pad = run(1)
    grouped_counts, grouped_pad = run(8)
    expected = steps * 16 / 64  # 1,000 draws per row; binomial SD ~31
    assert (grouped_counts - expected).abs().max() < 150
    assert (plain_counts - expected).abs().max() < 150
    assert grouped_pad < 0.25 * plain_pad, (grouped_pad, plain_pad)


def test_sft_with_length_groups_trains_and_rejects_zero_groups():
    import pytest

    losses = sft_train(_model(), _trajs(), steps=40, batch_size=2, lr=1e-2, pad_token_id=0, schedule="constant",
                       length_groups=2)
    assert len(losses) == 40 and sum(losses[-5:]) / 5 < losses[0]
    with pytest.raises(ValueError, match="length_groups"):
        sft_train(_model(), _trajs(), steps=1, batch_size=2, lr=1e-2, pad_token_id=0, length_groups=0)


def test_turn_spans_are_the_generated_runs_and_skip_masked_mistakes():
    from baselines.sft import longest_turn, turn_spans

    t = Trajectory([], [], [], 2, 0, "0")
    t.append([1, 2], generated=False)
    t.append([3, 4, 5], generated=True)  # a turn with its end of turn
    t.append([6], generated=False)  # an observation
    t.append([7] * 6, generated=False)  # a recovery demo's mistaken call: context, never generated
    t.append([8], generated=False)
    t.append([9, 9, 9, 9], generated=True)
    assert turn_spans(t) == [(2, 3), (13, 4)]
    assert longest_turn(t) == 4


def test_check_demonstrations_fit_names_the_limits_a_demonstration_needs():
    import pytest

    from baselines.agent_loop import AgentLoopConfig
    from baselines.engines.base import SamplingConfig
    from baselines.errors import ConfigError
    from baselines.sft import check_demonstrations_fit

    trajs = _trajs()  # turns start at token 3
    trajs[2].append([9] * 4, generated=False)
    trajs[2].append([9] * 5, generated=True)  # starts at token 10
    def limits(max_new_tokens: int, max_seq_len: int) -> AgentLoopConfig:
        return AgentLoopConfig(SamplingConfig(max_new_tokens), max_seq_len)

    assert check_demonstrations_fit(trajs, limits(5, 15)) == (5, 10)
    with pytest.raises(ConfigError, match=r"1 of 4 demonstrations .* rollout.max_new_tokens=4 .* at least 5"):
        check_demonstrations_fit(trajs, limits(4, 100))
    # the rollout starts a turn only where max_new_tokens more fit (agent_loop.record_step)
    with pytest.raises(ConfigError, match=r"1 of 4 demonstrations .* rollout.max_seq_len=14 .* at least 15"):
        check_demonstrations_fit(trajs, limits(5, 14))
