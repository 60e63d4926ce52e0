"""Device check: hf-engine rollouts, three PPO-EWMA steps, weight sync verified each time.

Run by ``benchmarks/gpu_check.sh`` on a GPU machine (bf16, a few-hundred-MB local model)
or with ``--dry-run`` on CPU (tiny model, float32; what the tests run). After every
training step the rollout engine (a separate model instance) must score the last batch
like the trainer does: a large log-prob mismatch means the weights did not arrive.
Prints tokens/s for rollout and training and peak GPU memory, and exits non-zero on a
failed check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from baselines.logprobs import sequence_logprobs
from baselines.trajectory import collate

# Mean |log pi_trainer - log pi_engine| over sampled tokens after a sync. bf16 kernels of
# two instances differ by ~1e-2 on average; un-synced weights differ by far more.
MEAN_TOL = {"float32": 1e-4, "bfloat16": 5e-2}


def _pick_env() -> tuple[str, dict, str]:
    import gymnasium as gym

    import agentgym  # noqa: F401

    try:
        env = gym.make("agentgym/Search-v0")
        env.reset(seed=0)
        env.close()
        return "agentgym/Search-v0", {}, ""
    except Exception as e:  # noqa: BLE001 - any failure means: not available on this machine
        return "agentgym/Calculator-v0", {"difficulty": 1}, f"Search-v0 unavailable ({type(e).__name__}: {str(e)[:120]}); using Calculator-v0"


def _overrides(dry_run: bool, env_id: str, env_kwargs: dict, run_dir: str) -> list[str]:
    common = [f"env.id={env_id}", f"env.kwargs={json.dumps(env_kwargs)}", f"log.run_dir={run_dir}", "log.tensorboard=false",
              "eval_every=0", "steps=3", "algo.proximal=ewma", "algo.ewma_age=2", "algo.lr=5e-4", "rollout.engine=hf"]
    if dry_run:
        return common + ["device=cpu", "model.dtype=float32", f"model.tiny_dir={run_dir}/model",
                         "model.tiny={hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1}",
                         "rollout.tasks_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=24", "rollout.max_seq_len=1024",
                         "sft.episodes=16", "sft.steps=10", "sft.batch_size=4", "algo.micro_batch_size=4"]
    return common + ["device=cuda", "model.dtype=bfloat16", f"model.tiny_dir={run_dir}/model",
                     "model.tiny={vocab_size: 2048, hidden_size: 1024, intermediate_size: 2816, num_hidden_layers: 12, num_attention_heads: 16, num_key_value_heads: 4}",
                     "rollout.tasks_per_step=32", "rollout.group_size=8", "rollout.max_new_tokens=128", "rollout.max_seq_len=4096",
                     "rollout.max_batch_size=256", "sft.episodes=256", "sft.steps=100", "sft.batch_size=32", "sft.lr=1e-3",
                     "algo.micro_batch_size=32", "algo.num_minibatches=2"]


@torch.no_grad()
def _sync_mismatch(trainer, trajectories) -> dict[str, float]:
    """Trainer vs engine log-probs of the same tokens under the just-synced weights."""
    batch = collate(trajectories[:16], torch.zeros(min(16, len(trajectories))), trainer.tokenizer.pad_token_id).to(trainer.info.device)
    mask = batch.loss_mask.bool()
    ours, _ = sequence_logprobs(trainer.model, batch.input_ids, batch.attention_mask, temperature=trainer.config.rollout.temperature)
    theirs, _ = sequence_logprobs(trainer.engine.model, batch.input_ids, batch.attention_mask, temperature=trainer.config.rollout.temperature)
    diff = (ours - theirs).abs()[mask]
    return {"mean": float(diff.mean()), "max": float(diff.max())}


@torch.no_grad()
def _perturb(trainer) -> None:
    gen = torch.Generator(device="cpu").manual_seed(trainer.step)
    for p in trainer.model.parameters():
        p.add_(torch.randn(p.shape, generator=gen).to(p.device, p.dtype) * 1e-2)


def run(dry_run: bool, run_dir: str) -> int:
    from baselines.config import load_config
    from baselines.trainer import Trainer

    if not dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device; use --dry-run for the CPU path", file=sys.stderr)
        return 2
    env_id, env_kwargs, note = _pick_env()
    if note:
        print(f"gpu_check: {note}")
    cfg = load_config(None, _overrides(dry_run, env_id, env_kwargs, run_dir))
    t0 = time.perf_counter()
    trainer = Trainer(cfg)
    n_params = sum(p.numel() for p in trainer.model.parameters())
    print(f"gpu_check: model {n_params / 1e6:.1f}M params, dtype {cfg.model.dtype}, device {trainer.info.device}, "
          f"setup+SFT {time.perf_counter() - t0:.1f}s, SFT loss {trainer.sft_metrics.get('sft/loss_first', 0):.3f} -> "
          f"{trainer.sft_metrics.get('sft/loss_last', 0):.3f}")
    failures = 0
    for _ in range(cfg.steps):
        before = {k: v.detach().clone() for k, v in list(trainer.engine.model.state_dict().items())[:4]}
        m = trainer.train_step()
        trajs = trainer.loop.last_batch.trajectories if hasattr(trainer.loop, "last_batch") else []
        moved = max(float((trainer.engine.model.state_dict()[k].float() - v.float()).abs().max()) for k, v in before.items())
        note = ""
        if moved == 0.0:  # no reward variance in this batch, so no update: move the weights ourselves
            _perturb(trainer)
            trainer.sync_engine()
            moved = max(float((trainer.engine.model.state_dict()[k].float() - v.float()).abs().max()) for k, v in before.items())
            note = " (no reward variance: weights perturbed and re-synced)"
        mis = _sync_mismatch(trainer, trajs)
        ok = mis["mean"] <= MEAN_TOL[cfg.model.dtype] and moved > 0
        failures += int(not ok)
        print(f"gpu_check: step {trainer.step}: success {m['reward/success_rate']:.2f}, rollout {m['perf/rollout_tokens_per_s']:.0f} tok/s, "
              f"train {m['perf/train_tokens_per_s']:.0f} tok/s, engine weights moved by {moved:.2e}, "
              f"post-sync |dlogp| mean {mis['mean']:.2e} max {mis['max']:.2e} [{'ok' if ok else 'MISMATCH'}], "
              f"rollout-vs-trainer (pre-update) mean {m['mismatch/logprob_abs_diff_mean']:.2e}{note}")
    if torch.cuda.is_available() and trainer.info.device.type == "cuda":
        print(f"gpu_check: peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    print(f"gpu_check: total {time.perf_counter() - t0:.1f}s; {'PASS' if not failures else f'FAIL ({failures} step(s))'}")
    trainer.close()
    return 0 if not failures else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny model, float32")
    parser.add_argument("--run-dir", default="runs/gpu_check")
    args = parser.parse_args(argv)
    return run(args.dry_run, args.run_dir)


if __name__ == "__main__":
    sys.exit(main())
