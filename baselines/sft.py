"""Supervised warm start: imitate the env's oracle policy, token-in/token-out.

A random-init (or weak) model almost never produces a parseable tool call, so RL has no
signal to start from. Each agentgym env ships an oracle (``env.unwrapped.oracle_action()``)
that solves its task through the tools; its episodes are tokenised exactly like rollouts
(same chat template, same observation deltas) and the model is trained with a token-mean
negative log-likelihood on the assistant tokens only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

from baselines.chat_tokens import ChatTokenizer
from baselines.logprobs import first_generated_position, sequence_logprobs
from baselines.trajectory import Trajectory, collate

__all__ = ["oracle_trajectories", "sft_train"]


def oracle_trajectories(env: Any, chat: ChatTokenizer, seeds: Sequence[int]) -> list[Trajectory]:
    """Play the oracle on ``env`` once per seed and return the tokenised episodes."""
    out = []
    for seed in seeds:
        _, info = env.reset(seed=int(seed))
        ids = chat.prompt_ids(info["messages"], info["tools"])
        traj = Trajectory([], [], [], len(ids), len(out), str(info["task_id"]), messages=list(info["messages"]))
        traj.append(ids, generated=False)
        while True:
            action = env.unwrapped.oracle_action()
            turn = chat.tokenizer.encode(action, add_special_tokens=False) + [chat.end_of_turn_id]
            traj.append(turn, generated=True, logprobs=[0.0] * len(turn))
            traj.messages.append({"role": "assistant", "content": action})
            _, reward, terminated, truncated, info = env.step(action)
            traj.turns += 1
            if terminated or truncated:
                traj.reward, traj.success = float(reward), bool(info.get("success", reward >= 1))
                break
            traj.append(chat.observation_ids(info["messages"], turn_ended=True), generated=False)
            traj.messages.extend(info["messages"])
        out.append(traj)
    return out


def sft_train(
    model: torch.nn.Module,
    trajectories: Sequence[Trajectory],
    *,
    steps: int,
    batch_size: int,
    lr: float,
    pad_token_id: int,
    device: torch.device | str = "cpu",
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
    schedule: Literal["linear", "constant"] = "linear",
    should_stop: Callable[[int], bool] | None = None,
    check_every: int = 0,
) -> list[float]:
    """Minimise the NLL of the generated (mask 1) tokens; returns the loss per step.

    ``schedule``: after a 20-step warm-up, ``linear`` decays the lr to 10% over
    ``steps``; ``constant`` keeps it, so the point where imitation "clicks" does not
    move when ``steps`` changes (the right choice with an early stop).
    ``should_stop(steps_done)`` is called every ``check_every`` steps (0: never) and
    ends training when it returns True; the model is left in train mode.
    """
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    if schedule == "constant":
        factor: Callable[[int], float] = lambda s: min(1.0, (s + 1) / 20)  # noqa: E731
    else:
        factor = lambda s: min(1.0, (s + 1) / 20) * max(0.1, 1 - s / max(steps, 1))  # noqa: E731
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    batch = collate(trajectories, torch.zeros(len(trajectories)), pad_token_id)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(steps):
        rows = torch.randint(len(batch), (batch_size,), generator=gen)
        mb = batch.select(rows).to(device)
        logp, _ = sequence_logprobs(model, mb.input_ids, mb.attention_mask, first_target=first_generated_position(mb.loss_mask))
        loss = -(logp * mb.loss_mask).sum() / mb.loss_mask.sum().clamp_min(1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
        if should_stop is not None and check_every > 0 and (step + 1) % check_every == 0 and step + 1 < steps:
            stop = should_stop(step + 1)
            model.train()
            if stop:
                break
    return losses
