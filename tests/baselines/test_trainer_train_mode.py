"""The RL policy trains in training mode, so gradient checkpointing is really on.

transformers checkpoints only when ``module.training``; ``from_pretrained`` returns a
model in eval mode and only SFT called ``.train()``. A run with ``sft.episodes=0`` (as
``search_qwen_vllm.yaml``) therefore kept every activation. Asserted by the flag during
the update's forwards and by the bytes autograd saves in them.
"""

from __future__ import annotations

import torch

from baselines.config import load_config
from baselines.trainer import Trainer
from baselines.trajectory import TokenBatch


def _batch(vocab: int) -> TokenBatch:
    g = torch.Generator().manual_seed(3)
    n, t = 4, 48
    ids = torch.randint(3, vocab, (n, t), generator=g)
    attn = torch.ones(n, t, dtype=torch.long)
    mask = (torch.arange(t)[None] >= 8).float().expand(n, t).clone()
    return TokenBatch(ids, attn, mask, -torch.rand(n, t, generator=g) * mask, torch.tensor([1.0, -1.0, 0.5, -0.5]))


class _ForwardProbe:
    """Records, for each grad-enabled forward of the top module, its training flag, its
    checkpointing flag and the bytes autograd saved while it ran (recompute excluded)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.calls: list[tuple[bool, bool, int]] = []
        self._bytes = 0
        self._inside = False
        self._handles = [model.register_forward_pre_hook(self._enter), model.register_forward_hook(self._exit)]

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        if self._inside:
            self._bytes += t.numel() * t.element_size()
        return t

    def _enter(self, module, args) -> None:
        self._inside, self._bytes = torch.is_grad_enabled(), 0

    def _exit(self, module, args, out) -> None:
        if self._inside:
            self.calls.append((module.training, bool(module.is_activation_checkpointing), self._bytes))
        self._inside = False

    def run(self, fn):
        with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
            return fn()

    def close(self) -> None:
        for h in self._handles:
            h.remove()


def test_rl_update_without_sft_runs_in_training_mode_with_checkpointing(tmp_path, tiny_model_dir):
    cfg = load_config(None, [
        f"model.path={tiny_model_dir}", f"log.run_dir={tmp_path}/run", "log.tensorboard=false", "device=cpu", "eval_every=0",
        "sft.episodes=0", "model.gradient_checkpointing=true", "rollout.tasks_per_step=1", "rollout.group_size=1",
        "rollout.max_staleness=0", "algo.epochs=1", "algo.num_minibatches=1", "algo.micro_batch_size=4",
    ])
    trainer = Trainer(cfg)
    try:
        probe = _ForwardProbe(trainer.model)
        vocab = trainer.model.config.vocab_size
        metrics = probe.run(lambda: trainer.updater.update(_batch(vocab), generator=torch.Generator().manual_seed(0)))
        assert metrics["train/optimizer_steps"] == 1
        assert probe.calls and all(training and ckpt for training, ckpt, _ in probe.calls), probe.calls
        with_ckpt = probe.calls[0][2]
        trainer.model.activation_checkpointing_disable()
        probe.calls.clear()
        probe.run(lambda: trainer.updater.update(_batch(vocab), generator=torch.Generator().manual_seed(0)))
        without = probe.calls[0][2]
        assert with_ckpt < 0.5 * without, (with_ckpt, without)  # the layers' activations are not kept
        probe.close()
    finally:
        trainer.close()
