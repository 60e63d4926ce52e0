#!/usr/bin/env python
"""agentgym's trainer side by side with TRL's GRPOTrainer, on CPU, in one run.

    .venv/bin/python benchmarks/peers/bench_trainer.py [--steps 4] [--json FILE]   (``make bench-peers``)

The same workload for both, as a user would set each up: the same tiny Qwen2-style model
(built and briefly imitation-trained here, cached in ``.cache/``), the same single-turn
Calculator-v0 prompts (``max_turns=1``: the completion must call ``answer``; its reward is
the env's), 16 prompts x 8 samples, 64 new tokens, fp32, one optimiser step per rollout.
TRL runs with ``beta=0`` (no reference model) and ``gradient_checkpointing=False``;
agentgym runs PPO-EWMA, so its step includes the proximal (EWMA) forward TRL does not
have. Each side runs in its own process (TRL only in ``.venv-peers``, ``make peers-env``;
its code never enters agentgym's) and reports, per step: wall time, generation time and
tokens, training time and tokens, and its peak RSS. The first step is a warm-up; figures
are medians of the rest (training tokens/s: of the steps that trained at all).

Measured definitions (the same on both sides): rollout seconds = generating and scoring the
completions (agentgym: the step's wall time minus its update and weight sync; TRL: its
``_generate_and_score_completions``); rollout tokens/s = generated tokens / rollout
seconds; training tokens/s = prompt + completion tokens of the rows trained on / (step wall
time - rollout seconds). agentgym runs synchronously here (``rollout.max_staleness=0``) and
leaves groups whose rewards are all equal out of the update (they carry no signal; TRL
trains on them with a zero advantage); the table says what fraction it trained on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / ".cache" / "agentgym-bench-trainer-model"
PROMPTS, GROUP, NEW_TOKENS = 16, 8, 64
ENV_KWARGS = {"difficulty": 1, "max_turns": 1}


# ------------------------------------------------------------------ shared workload
def bench_model() -> Path:
    """The demo's tiny model after a short imitation of answering in one turn (cached):
    a random model never scores, and groups without reward variance teach nothing."""
    marker = MODEL_DIR / "bench.json"
    if marker.exists():
        return MODEL_DIR
    import gymnasium as gym
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import agentgym  # noqa: F401  (registers the env ids)
    from baselines.chat_tokens import ChatTokenizer
    from baselines.sft import sft_train
    from baselines.tiny_model import TinyModelSpec, build_tiny_model
    from baselines.trainer import env_corpus
    from baselines.trajectory import Trajectory

    init = build_tiny_model(MODEL_DIR.with_name(MODEL_DIR.name + "-init"), env_corpus("agentgym/Calculator-v0", {"difficulty": 1}),
                            TinyModelSpec(hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2))
    tokenizer = AutoTokenizer.from_pretrained(init)
    chat = ChatTokenizer(tokenizer)
    env = gym.make("agentgym/Calculator-v0", **ENV_KWARGS)
    trajs = []
    for seed in range(100_000, 102_048):
        _, info = env.reset(seed=seed)
        ids = chat.prompt_ids(info["messages"], info["tools"])
        answer = env.unwrapped.task.answer
        action = f'<tool_call>{json.dumps({"name": "answer", "arguments": {"answer": answer}})}</tool_call>'
        t = Trajectory([], [], [], len(ids), len(trajs), str(info["task_id"]))
        t.append(ids, generated=False)
        t.append(tokenizer.encode(action, add_special_tokens=False) + [chat.end_of_turn_id], generated=True)
        trajs.append(t)
    env.close()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(init, dtype=torch.float32)
    sft_train(model, trajs, steps=300, batch_size=32, lr=3e-3, pad_token_id=tokenizer.pad_token_id, schedule="constant")
    model.save_pretrained(MODEL_DIR)
    tokenizer.save_pretrained(MODEL_DIR)
    marker.write_text(json.dumps({"sft_steps": 300, "episodes": len(trajs)}))
    return MODEL_DIR


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ------------------------------------------------------------------ agentgym side
def run_agentgym(steps: int, run_dir: str) -> dict:
    from baselines.config import load_config
    from baselines.trainer import Trainer

    cfg = load_config(None, [
        f"model.path={bench_model()}", f"log.run_dir={run_dir}", "log.tensorboard=false", "device=cpu", "eval_every=0",
        f"steps={steps}", "env.id=agentgym/Calculator-v0", f"env.kwargs={json.dumps(ENV_KWARGS)}",
        f"rollout.tasks_per_step={PROMPTS}", f"rollout.group_size={GROUP}", f"rollout.max_new_tokens={NEW_TOKENS}",
        "rollout.temperature=1.0", f"rollout.max_batch_size={PROMPTS * GROUP}", "rollout.drift_check_frac=0.0",
        "rollout.max_staleness=0",  # synchronous: one rollout, then one optimiser step, as TRL does
        "algo.proximal=ewma", "algo.epochs=1", "algo.num_minibatches=1", f"algo.micro_batch_size={PROMPTS * GROUP}",
        "algo.lr=1e-5", "model.dtype=float32",
    ])
    trainer = Trainer(cfg)
    records, task_ids = [], []
    try:
        for _ in range(steps):
            t0 = time.perf_counter()
            m = trainer.train_step()
            wall = time.perf_counter() - t0
            trajs = trainer.loop.last_batch.trajectories
            task_ids += sorted({t.task_id for t in trajs})
            train_s = m["perf/train_s"] + m["perf/sync_s"]  # the update and the weight push; the rest is rollout
            kept = 1.0 - m.get("train/dropped_zero_adv_frac", 1.0)
            trained_tokens = m["perf/train_tokens_per_s"] * m["perf/train_s"]
            records.append({"wall_s": wall, "rollout_s": wall - train_s, "generated_tokens": sum(t.num_generated for t in trajs),
                            "train_s": train_s, "trained_tokens": trained_tokens, "trained_rows_frac": kept,
                            "optimizer_steps": m["train/optimizer_steps"], "reward_mean": m["reward/mean"]})
    finally:
        trainer.close()
    return {"side": "agentgym", "steps": records, "peak_rss_mb": peak_rss_mb(), "task_ids": task_ids}


# ----------------------------------------------------------------------- TRL side
def run_trl(steps: int, run_dir: str, task_ids: list[str]) -> dict:
    import gymnasium as gym
    import torch
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    import agentgym  # noqa: F401  (registers the env ids)
    from baselines.chat_tokens import ChatTokenizer

    tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
    tokenizer.padding_side = "left"
    chat = ChatTokenizer(tokenizer)
    env = gym.make("agentgym/Calculator-v0", **ENV_KWARGS)
    rows = []
    for task_id in task_ids:  # the prompts agentgym played, as text (TRL tokenises them itself)
        _, info = env.reset(options={"task_id": task_id})
        rows.append({"prompt": tokenizer.decode(chat.prompt_ids(info["messages"], info["tools"])), "task_id": task_id})

    def calculator_reward(prompts, completions, task_id, **_):
        out = []
        for completion, tid in zip(completions, task_id, strict=True):
            env.reset(options={"task_id": tid})
            _, reward, *_ = env.step(completion)
            out.append(float(reward))
        return out

    args = trl.GRPOConfig(
        output_dir=run_dir, per_device_train_batch_size=PROMPTS * GROUP, gradient_accumulation_steps=1, num_generations=GROUP,
        max_completion_length=NEW_TOKENS, beta=0.0, gradient_checkpointing=False, use_cpu=True, bf16=False, fp16=False,
        learning_rate=1e-5, max_steps=steps, num_iterations=1, temperature=1.0, logging_steps=1, report_to="none",
        save_strategy="no", seed=0, dataloader_num_workers=0,
    )
    timings: dict[str, list[float]] = {"gen_tokens": [], "score_s": [], "trained_tokens": [], "step_end": []}

    class TimedGRPO(trl.GRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            t0 = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            timings["score_s"].append(time.perf_counter() - t0)
            timings["gen_tokens"].append(float(out["completion_mask"].sum()))
            timings["trained_tokens"].append(float(out["prompt_mask"].sum() + out["completion_mask"].sum()))
            return out

    class StepClock(TrainerCallback):
        def on_step_begin(self, *_, **__):
            timings.setdefault("step_begin", []).append(time.perf_counter())

        def on_step_end(self, *_, **__):
            timings["step_end"].append(time.perf_counter())

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32)
    trainer = TimedGRPO(model=model, reward_funcs=calculator_reward, args=args, train_dataset=Dataset.from_list(rows),
                        processing_class=tokenizer, callbacks=[StepClock()])
    trainer.train()
    env.close()
    records = []
    for i in range(steps):
        wall = timings["step_end"][i] - timings["step_begin"][i]
        rollout_s = timings["score_s"][i]  # generation and rewards (the env's score of each completion)
        records.append({"wall_s": wall, "rollout_s": rollout_s, "generated_tokens": timings["gen_tokens"][i],
                        "train_s": wall - rollout_s, "trained_tokens": timings["trained_tokens"][i],
                        "trained_rows_frac": 1.0, "optimizer_steps": 1.0})
    return {"side": "trl", "version": trl.__version__, "steps": records, "peak_rss_mb": peak_rss_mb()}


# ------------------------------------------------------------------------- report
def summarise(result: dict) -> dict[str, float]:
    """Medians over the steps after the warm-up. Training tokens/s is a median over the
    steps that trained (an optimiser step on some rows): a step whose groups all had equal
    rewards trains on nothing, and its 0 tokens/s would measure the rewards, not the
    trainer. NaN when no step trained; ``trained_steps`` says how many did."""
    steps = result["steps"][1:] or result["steps"]  # the first step is a warm-up
    med = lambda key: statistics.median(s[key] for s in steps)
    trained = [s for s in steps if s["optimizer_steps"] > 0 and s["trained_tokens"] > 0]
    return {
        "wall_per_step_s": med("wall_s"),
        "rollout_tokens_per_s": statistics.median(s["generated_tokens"] / s["rollout_s"] for s in steps),
        "training_tokens_per_s": statistics.median(s["trained_tokens"] / s["train_s"] for s in trained) if trained else math.nan,
        "trained_steps": float(len(trained)),
        "trained_rows_frac": med("trained_rows_frac"),
        "peak_rss_mb": result["peak_rss_mb"],
    }


def table(ours: dict[str, float], theirs: dict[str, float], trl_version: str) -> str:
    rows = [("wall time per step", "wall_per_step_s", "{:.2f} s", "lower"),
            ("training tokens/s", "training_tokens_per_s", "{:,.0f}", "higher"),
            ("rollout tokens/s", "rollout_tokens_per_s", "{:,.0f}", "higher"),
            ("peak RSS", "peak_rss_mb", "{:,.0f} MB", "lower"),
            ("rows trained on", "trained_rows_frac", "{:.2f}", ""),
            ("steps that trained (after the warm-up)", "trained_steps", "{:.0f}", "")]
    out = [f"| {PROMPTS} prompts x {GROUP} samples, {NEW_TOKENS} new tokens, fp32, CPU | agentgym (PPO-EWMA) | TRL {trl_version} GRPO (beta=0) | agentgym / TRL |",
           "|---|---|---|---|"]
    for label, key, fmt, _ in rows:
        a, b = ours[key], theirs[key]
        ratio = f"{a / b:.2f}" if b and math.isfinite(a) and math.isfinite(b) else "n/a"
        out.append(f"| {label} | {fmt.format(a)} | {fmt.format(b)} | {ratio} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="optimiser steps per side (the first is a warm-up)")
    parser.add_argument("--peers-venv", default=str(ROOT / ".venv-peers"))
    parser.add_argument("--json", help="write both sides' records here")
    parser.add_argument("--side", choices=["agentgym", "trl"], help=argparse.SUPPRESS)
    parser.add_argument("--task-ids", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side:  # a child process: one side, JSON on the last stdout line
        with tempfile.TemporaryDirectory() as run_dir:
            if args.side == "agentgym":
                result = run_agentgym(args.steps, run_dir)
            else:
                result = run_trl(args.steps, run_dir, json.loads(Path(args.task_ids).read_text()))
        print(json.dumps(result))
        return 0
    peers_python = Path(args.peers_venv) / "bin" / "python"
    if not peers_python.exists():
        print(f"bench_trainer: no TRL venv at {args.peers_venv} (make peers-env); skipped.")
        return 0
    sys.path.insert(0, str(ROOT))
    bench_model()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error"}
    ours = _child([sys.executable, __file__, "--side", "agentgym", "--steps", str(args.steps)], env)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(ours["task_ids"], f)
    theirs = _child([str(peers_python), __file__, "--side", "trl", "--steps", str(args.steps), "--task-ids", f.name], env)
    os.unlink(f.name)
    if args.json:  # the raw records first, whatever the summary makes of them
        Path(args.json).write_text(json.dumps({"agentgym": ours, "trl": theirs}, indent=1))
    summary = {"agentgym": summarise(ours), "trl": summarise(theirs)}
    print(table(summary["agentgym"], summary["trl"], theirs["version"]))
    print(f"(medians of steps 2..{args.steps} of one run; rerun: .venv/bin/python benchmarks/peers/bench_trainer.py --steps {args.steps})")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "agentgym": ours, "trl": theirs}, indent=1))
    return 0


def _child(cmd: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench_trainer: {' '.join(cmd[:4])} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
