"""GRPO with TRL, rolling out through ``agentgym serve-env`` over OpenEnv.

TRL's documented way to train on an OpenEnv environment is a ``rollout_func``: the
trainer hands it the step's prompts and it returns the token ids of the completions
(plus any extra fields, which reach the reward functions). Here each prompt names a task
seed, and TRL repeats it ``num_generations`` times: one episode each, so a GRPO group is
that many episodes of one task, played on the env server through :func:`agentgym.interop.openenv_env` (OpenEnv's client under
agentgym's status contract), generating every turn with the trainer's own model.

What agentgym adds on the way:

- token-in/token-out: each observation is tokenised against a fixed base
  (``baselines.chat_tokens.ChatTokenizer``) and appended; its tokens get ``env_mask`` 0;
- rewards are the env's (its scorer, at the episode's end), sent as the ``env_reward``
  extra field;
- an episode that failed because of the infrastructure (``info["infra_failed"]``) is never
  a learning signal: its reward is ``None`` and its whole completion is masked out. (TRL
  still counts it in the group's baseline; drop such groups if that matters to you.)

Runs on CPU with the tiny local model (``baselines.tiny_model``)::

    .venv-peers/bin/python examples/trl_grpo_openenv.py --steps 2

Needs TRL and ``agentgym[openenv]``: ``make peers-env`` builds ``.venv-peers`` with both.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEED_PREFIX = "task seed "


@dataclass
class ExampleArgs:
    """Knobs of the example (defaults: two quick CPU steps)."""

    env_id: str = "agentgym/Calculator-v0"
    steps: int = 2
    prompts_per_step: int = 2
    num_generations: int = 2
    max_turns: int = 2
    max_new_tokens: int = 24
    learning_rate: float = 1e-3
    output_dir: str | None = None
    seed: int = 0


@dataclass
class Episode:
    """One rollout: the ids TRL trains on and what the env said of it."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    reward: float
    infra_failed: bool


class OpenEnvRollout:
    """TRL's ``rollout_func``: ``num_generations`` episodes per prompt on the served env."""

    def __init__(self, base_url: str, tokenizer: Any, args: ExampleArgs) -> None:
        from baselines.chat_tokens import ChatTokenizer

        self.base_url = base_url
        self.chat = ChatTokenizer(tokenizer)
        self.tokenizer = tokenizer
        self.args = args
        self.episodes_played = 0
        self.infra_failed = 0

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        # TRL 1.16 passes each prompt once per generation (its sampler repeats them), so a
        # group is the num_generations episodes of one task seed.
        model = trainer.accelerator.unwrap_model(trainer.model)
        episodes = [self.play(int(str(p).removeprefix(SEED_PREFIX)), model) for p in prompts]
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": None,  # no importance-sampling correction: generation is the trainer's own model
            "env_mask": [e.env_mask for e in episodes],
            "env_reward": [e.reward for e in episodes],
            "infra_failed": [e.infra_failed for e in episodes],
        }

    def play(self, seed: int, model: Any) -> Episode:
        """One episode of task ``seed``: generate, step, append the observation, repeat."""
        from agentgym.errors import InfraError
        from agentgym.interop import openenv_env

        env = openenv_env(self.base_url)
        self.episodes_played += 1
        try:
            try:
                _, info = env.reset(seed=seed)
            except InfraError:
                self.infra_failed += 1
                return Episode([self.tokenizer.eos_token_id], [self.chat.end_of_turn_id], [0], 0.0, True)
            prompt_ids = self.chat.prompt_ids(info["messages"], info["tools"])
            completion: list[int] = []
            mask: list[int] = []
            reward, done, info = 0.0, False, {}
            for turn in range(self.args.max_turns):
                generated = self.act(model, prompt_ids + completion, seed, turn)
                completion += generated
                mask += [1] * len(generated)
                _, reward, terminated, truncated, info = env.step(self.chat.decode_action(generated))
                done = terminated or truncated
                if done:
                    break
                observed = self.chat.observation_ids(info["messages"], generated[-1:] == [self.chat.end_of_turn_id])
                completion += observed
                mask += [0] * len(observed)
            failed = bool(info.get("infra_failed"))
            self.infra_failed += failed
            return Episode(prompt_ids, completion, [0] * len(mask) if failed else mask, float(reward), failed)
        finally:
            env.close()

    def act(self, model: Any, ids: list[int], seed: int, turn: int) -> list[int]:
        """The ids of the next turn: sampled from the trainer's model (the seam a test
        uses to mix in known-good turns, so rewards differ within a group)."""
        import torch

        was_training = model.training
        model.eval()
        with torch.no_grad():
            out = model.generate(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 do_sample=True, temperature=1.0, max_new_tokens=self.args.max_new_tokens,
                                 eos_token_id=self.chat.end_of_turn_id, pad_token_id=self.tokenizer.pad_token_id)
        model.train(was_training)
        generated = out[0, len(ids):].tolist()
        if self.chat.end_of_turn_id in generated:
            generated = generated[: generated.index(self.chat.end_of_turn_id) + 1]
        return generated or [self.chat.end_of_turn_id]


def env_reward(prompts: list[Any], completions: list[Any], env_reward: list[float], infra_failed: list[bool],
               **_: Any) -> list[float | None]:
    """The env's reward; ``None`` (no reward from this function) for an infra-failed episode."""
    return [None if failed else reward for reward, failed in zip(env_reward, infra_failed)]


def train(args: ExampleArgs, base_url: str, model_dir: Path, output_dir: Path,
          rollout_class: type[OpenEnvRollout] = OpenEnvRollout) -> dict[str, Any]:
    """Run GRPO for ``args.steps`` steps against the env served at ``base_url``."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rollout = rollout_class(base_url, tokenizer, args)
    n_prompts = args.steps * args.prompts_per_step
    dataset = Dataset.from_dict({"prompt": [f"{SEED_PREFIX}{args.seed + i}" for i in range(n_prompts)]})
    config = GRPOConfig(
        output_dir=str(output_dir), max_steps=args.steps, learning_rate=args.learning_rate,
        per_device_train_batch_size=args.prompts_per_step * args.num_generations,
        num_generations=args.num_generations, max_completion_length=args.max_turns * 512,
        use_cpu=True, bf16=False, report_to="none", save_strategy="no", logging_steps=1, seed=args.seed,
        shuffle_dataset=False,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=env_reward, args=config, train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=rollout)
    trainer.train()
    changed = sum(not torch.equal(before[n], p.detach()) for n, p in trainer.model.named_parameters())
    return {"steps": trainer.state.global_step, "episodes": rollout.episodes_played,
            "infra_failed": rollout.infra_failed, "parameters_changed": changed,
            "log": [entry for entry in trainer.state.log_history if "loss" in entry or "reward" in entry]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from agentgym.interop.launch import agentgym_server, free_port
    from baselines.tiny_model import build_tiny_model, default_corpus

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in vars(ExampleArgs()).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default) if default is not None else str,
                            default=default)
    args = ExampleArgs(**vars(parser.parse_args(argv)))
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.output_dir or scratch)
        model_dir = build_tiny_model(work / "tiny-model", default_corpus())
        port = free_port()
        with agentgym_server(["serve-env", args.env_id, "--port", str(port)], f"http://127.0.0.1:{port}/health"):
            summary = train(args, f"http://127.0.0.1:{port}", model_dir, work / "grpo")
    print(json.dumps(summary, default=str))
    return summary


if __name__ == "__main__":
    main()
