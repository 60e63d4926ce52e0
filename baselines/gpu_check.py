"""Device check: rollouts (vLLM when installed, else hf), three PPO-EWMA steps, weight sync
verified each time.

Run by ``benchmarks/gpu_check.sh`` on a GPU machine (bf16, a few-hundred-MB local model)
or with ``--dry-run`` on CPU (tiny model, float32; what the tests run). After every
training step the rollout engine (a separate model instance, scored through its own
``score``) must give fixed probe sequences the trainer's log-probs: a large mismatch
means the weights did not arrive. A step that took optimiser steps must have moved the
engine's log-probs, and the run fails when no step took an optimiser step at all (it
would have proved nothing about sync). Prints tokens/s for rollout and training, sync
seconds and peak GPU memory, and exits non-zero on a failed check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from baselines.logprobs import sequence_logprobs

# Mean |log pi_trainer - log pi_engine| over sampled tokens after a sync. bf16 kernels of
# two instances differ by ~1e-2 on average; un-synced weights differ by far more.
MEAN_TOL = {"float32": 1e-4, "bfloat16": 5e-2}


def _pick_env() -> tuple[str, dict, str]:
    import gymnasium as gym

    import agentgym  # noqa: F401

    try:
        env = gym.make("agentgym/Search-v1")
        env.reset(seed=0)
        env.close()
        return "agentgym/Search-v1", {}, ""
    except Exception as e:  # noqa: BLE001 - any failure means: not available on this machine
        return "agentgym/Calculator-v0", {"difficulty": 1}, f"Search-v1 unavailable ({type(e).__name__}: {str(e)[:120]}); using Calculator-v0"


# SFT until the sampling policy solves some train tasks, so groups disagree and PPO steps
# happen (CPU: ~40 s on 2 cores for the head_dim-32 tiny model, as in the tests).
_SFT_STOP = ["sft.schedule=constant", "sft.stop_success=0.3", "sft.check_every=20", "sft.check_tasks=16"]
_SFT_CPU = ["sft.episodes=1024", "sft.steps=500", "sft.batch_size=16", "sft.lr=3e-3", "sft.check_from=240", *_SFT_STOP]
_SFT_GPU = ["sft.episodes=1024", "sft.steps=400", "sft.batch_size=32", "sft.lr=1e-3", "sft.check_from=100", *_SFT_STOP]


def _overrides(dry_run: bool, env_id: str, env_kwargs: dict, run_dir: str, engine: str, model: str | None) -> list[str]:
    common = [f"env.id={env_id}", f"env.kwargs={json.dumps(env_kwargs)}", f"log.run_dir={run_dir}", "log.tensorboard=false",
              "eval_every=0", "steps=3", "algo.proximal=ewma", "algo.ewma_age=2", f"rollout.engine={engine}",
              f"model.tiny_dir={run_dir}/model"]
    if model:
        common += [f"model.path={model}", "sft.episodes=0"]
    if dry_run:  # head_dim 32: vLLM's CPU attention needs >= 32
        return common + ["device=cpu", "model.dtype=float32", "algo.lr=1e-4", "rollout.vllm.enforce_eager=true",
                         "model.tiny={hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1}",
                         "rollout.tasks_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=40", "rollout.temperature=0.7",
                         "rollout.max_seq_len=1024", *([] if model else _SFT_CPU),
                         "algo.micro_batch_size=8"]
    return common + ["device=cuda", "model.dtype=bfloat16", "algo.lr=5e-4",
                     "model.tiny={vocab_size: 2048, hidden_size: 1024, intermediate_size: 2816, num_hidden_layers: 12, num_attention_heads: 16, num_key_value_heads: 4}",
                     "rollout.tasks_per_step=32", "rollout.group_size=8", "rollout.max_new_tokens=128", "rollout.max_seq_len=4096",
                     "rollout.max_batch_size=256", *([] if model else _SFT_GPU),
                     "algo.micro_batch_size=32", "algo.num_minibatches=2"]


def _probe(trainer, n: int = 4, length: int = 48) -> list[list[int]]:
    """Fixed random token sequences: their log-probs depend on every weight."""
    gen = torch.Generator().manual_seed(1234)
    vocab = len(trainer.tokenizer)
    return torch.randint(0, vocab, (n, length), generator=gen).tolist()


@torch.no_grad()
def _trainer_scores(trainer, seqs: list[list[int]]) -> torch.Tensor:
    ids = torch.tensor(seqs, device=trainer.info.device)
    with trainer.updater._autocast():
        logp, _ = sequence_logprobs(trainer.model, ids, torch.ones_like(ids))
    return logp[:, 1:].float().cpu()


def _engine_scores(trainer, seqs: list[list[int]]) -> torch.Tensor:
    return torch.tensor(trainer.engine.score(seqs), dtype=torch.float32)


def default_engine() -> str:
    """``vllm`` when it is installed, else ``hf``."""
    import importlib.util

    return "vllm" if importlib.util.find_spec("vllm") is not None else "hf"


def run(dry_run: bool, run_dir: str, engine: str | None = None, model: str | None = None) -> int:
    from baselines.config import load_config
    from baselines.trainer import Trainer

    if not dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device; use --dry-run for the CPU path", file=sys.stderr)
        return 2
    # The dry run trains on Calculator (what the CPU tiny model learns in seconds).
    env_id, env_kwargs, note = ("agentgym/Calculator-v0", {"difficulty": 1}, "") if dry_run else _pick_env()
    if note:
        print(f"gpu_check: {note}")
    engine = engine or default_engine()
    cfg = load_config(None, _overrides(dry_run, env_id, env_kwargs, run_dir, engine, model))
    t0 = time.perf_counter()
    trainer = Trainer(cfg)
    n_params = sum(p.numel() for p in trainer.model.parameters())
    print(f"gpu_check: engine {engine}, model {n_params / 1e6:.1f}M params, compute dtype {cfg.model.dtype} (fp32 master), "
          f"device {trainer.info.device}, setup+SFT {time.perf_counter() - t0:.1f}s")
    probe = _probe(trainer)
    failures = total_steps = 0
    for _ in range(cfg.steps):
        before = _engine_scores(trainer, probe)
        m = trainer.train_step()
        after = _engine_scores(trainer, probe)
        moved = float((after - before).abs().max())
        diff = (_trainer_scores(trainer, probe) - after).abs()
        steps = int(m["train/optimizer_steps"])
        total_steps += steps
        ok = float(diff.mean()) <= MEAN_TOL[cfg.model.dtype] and (moved > 0 or steps == 0)
        failures += int(not ok)
        print(f"gpu_check: step {trainer.step}: optimizer steps {steps}, success {m['reward/success_rate']:.2f}, "
              f"rollout {m['perf/rollout_tokens_per_s']:.0f} tok/s, train {m['perf/train_tokens_per_s']:.0f} tok/s, "
              f"sync {m['perf/sync_s']:.3f}s ({getattr(trainer.engine, 'last_sync_path', None) or 'in-process copy'}), "
              f"engine log-probs moved by {moved:.2e}, post-sync |dlogp| mean {float(diff.mean()):.2e} "
              f"max {float(diff.max()):.2e} [{'ok' if ok else 'MISMATCH'}], "
              f"rollout-vs-trainer (pre-update) mean {m.get('mismatch/logprob_abs_diff_mean', float('nan')):.2e}")
    if total_steps == 0:
        print(f"gpu_check: no optimiser step in {cfg.steps} steps (no reward variance): weight sync was not exercised")
        failures += 1
    if torch.cuda.is_available() and trainer.info.device.type == "cuda":
        print(f"gpu_check: peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    print(f"gpu_check: total {time.perf_counter() - t0:.1f}s; {'PASS' if not failures else f'FAIL ({failures} check(s))'}")
    trainer.close()
    return 0 if not failures else 1


# The Search recipe (docs/training.md, "GPU recipe"): search_cpu.yaml's task and SFT
# (copy warm-up, search_reader demonstrations, counterfactual copies, observation loss,
# stop on validation success), a wider model in bf16 and larger batches; torch's own thread
# count (the CPU config pins one). Unmeasured on a GPU
# until one is lent; the CPU dry run (tiny sizes, a few steps) checks that it runs.
_SEARCH_GPU = ["device=cuda", "threads=null", "model.dtype=bfloat16", "algo.lr=2e-4",
               "model.tiny={vocab_size: 4096, hidden_size: 512, intermediate_size: 1536, num_hidden_layers: 8, num_attention_heads: 8, num_key_value_heads: 4}",
               "rollout.tasks_per_step=16", "rollout.group_size=8", "rollout.max_batch_size=256", "algo.micro_batch_size=32",
               "sft.batch_size=32", "sft.lr=1e-3", "eval_tasks=256"]
_SEARCH_CPU = ["device=cpu", "model.dtype=float32", "eval_tasks=8", "rollout.tasks_per_step=2", "rollout.group_size=4",
               "model.tiny={vocab_size: 1024, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1}",
               "sft.episodes=64", "sft.copy_warmup=4", "sft.steps=4", "sft.check_from=1000", "algo.micro_batch_size=8"]


def run_search(dry_run: bool, run_dir: str, engine: str | None = None, steps: int = 20) -> int:
    """The GPU recipe: SFT then ``steps`` PPO-EWMA steps on Search-v2 (1 hop), printing
    held-out success before and after (greedy and sampled, with standard errors),
    tokens/s per step and peak GPU memory."""
    from baselines.config import load_config
    from baselines.trainer import Trainer

    if not dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device; use --dry-run for the CPU path", file=sys.stderr)
        return 2
    engine = engine or default_engine()
    overrides = [*(_SEARCH_CPU if dry_run else _SEARCH_GPU), f"rollout.engine={engine}", f"steps={steps}", f"eval_every={steps}",
                 "eval_sampled=true", f"log.run_dir={run_dir}/search", "log.tensorboard=false", f"model.tiny_dir={run_dir}/search-model"]
    cfg = load_config("baselines/configs/search_cpu.yaml", overrides)
    t0 = time.perf_counter()
    trainer = Trainer(cfg)
    n_params = sum(p.numel() for p in trainer.model.parameters())
    print(f"gpu_check: search: engine {engine}, model {n_params / 1e6:.1f}M params, {cfg.model.dtype}, setup+SFT "
          f"{time.perf_counter() - t0:.1f}s ({trainer.sft_metrics.get('sft/steps', 0):.0f} SFT steps)")
    trainer.on_metrics = lambda step, m: print(
        f"gpu_check: search step {step}: train success {m.get('reward/success_rate', float('nan')):.2f}, "
        f"rollout {m.get('perf/rollout_tokens_per_s', float('nan')):.0f} tok/s, train {m.get('perf/train_tokens_per_s', float('nan')):.0f} tok/s",
        flush=True) if step else None
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    for name in ("success", "sampled_success"):
        b, a = summary.get(f"eval/{name}_before"), summary.get(f"eval/{name}_after")
        if b is not None and a is not None:
            print(f"gpu_check: search held-out {name.replace('_', ' ')}: {b:.3f} +- {summary[f'eval/{name}_before_se']:.3f} -> "
                  f"{a:.3f} +- {summary[f'eval/{name}_after_se']:.3f} (gain {summary[f'eval/{name}_gain']:+.3f} +- "
                  f"{summary[f'eval/{name}_gain_se']:.3f}; paired +- {summary.get(f'eval/{name}_gain_se_paired', float('nan')):.3f})")
    if torch.cuda.is_available() and not dry_run:
        print(f"gpu_check: search peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    print(f"gpu_check: search total {time.perf_counter() - t0:.1f}s; DONE")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny model, float32")
    parser.add_argument("--run-dir", default="runs/gpu_check")
    parser.add_argument("--engine", choices=["hf", "vllm"], default=None, help="default: vllm when installed, else hf")
    parser.add_argument("--model", default=None, help="a local HF model directory (default: build the tiny model and SFT it)")
    parser.add_argument("--search", action="store_true", help="run the Search recipe (SFT + --search-steps PPO-EWMA steps) instead")
    parser.add_argument("--search-steps", type=int, default=20)
    args = parser.parse_args(argv)
    if args.search:
        return run_search(args.dry_run, args.run_dir, args.engine, args.search_steps)
    return run(args.dry_run, args.run_dir, args.engine, args.model)


if __name__ == "__main__":
    sys.exit(main())
