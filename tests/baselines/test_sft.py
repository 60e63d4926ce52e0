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
