"""Off-policy guidance: a demonstration joins a group in which every sample failed.

With a 0/1 reward, a group whose samples all failed has the same reward everywhere, so
group normalisation gives it advantage 0 and the update drops it (``baselines.update``):
the tasks the policy cannot yet solve are exactly the ones it learns nothing from. On
DataAnalysis about three quarters of the groups carried no advantage in every run
(docs/training.md). LUFFY (Yan et al. 2025, "Learning to Reason under Off-Policy
Guidance") mixes off-policy demonstrations into GRPO's groups for this reason. Here
the demonstrator (``sft.demonstrator``, the one SFT imitated) plays the group's own
task once, and its episode joins the group as one more member; the group's advantages
are then normalised over the policy's samples and the demonstration together::

    rewards 0 x G and 1 (the demonstration)  ->  A_demo = sqrt(G),  A_sample = -1 / sqrt(G)

(``normalize_std``; with G = 8: +2.83 and -0.35). The policy's own samples stay in the
batch and in every rollout metric; the demonstration is only trained on.

**Its behaviour log-probs.** The demonstration was not sampled by the policy, so it has
no engine log-probs. LUFFY sets the behaviour probability to 1, which makes PPO's
importance weight ``pi_prox / pi_b`` equal to ``pi_prox``: the tokens the policy does not
yet predict, the ones the demonstration is there to teach, get almost no gradient (LUFFY
adds a reshaping of the ratio against this). Here ``pi_b`` is the policy's own log-prob
of the demonstration under the weights that sampled the batch (one no-grad forward), so a
demonstrated token enters the PPO-EWMA loss as a sampled one would: weight ~1, its ratio
clipped like any other.

**Two modes, so that a gain can be attributed.**

- ``rl``: as above. The failures are pushed down and the demonstration up.
- ``imitate``: the control. The demonstration keeps the advantage ``rl`` gives it, and the
  group's own samples get 0: the same demonstrations, at the same weight, trained by the
  same loss, without the contrast with the failures. If ``rl`` and ``imitate`` gain
  alike, the gain is imitation of more demonstrations, not reinforcement.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from baselines.chat_tokens import ChatTokenizer
from baselines.logprobs import first_generated_position, sequence_logprobs
from baselines.trajectory import Trajectory, collate

__all__ = ["GUIDANCE_MODES", "FailedGroupGuide", "GuidedBatch", "guided_advantages", "set_behaviour_logprobs"]

GUIDANCE_MODES = ("none", "rl", "imitate")
DEMONSTRATION = "demonstration"
"""``Trajectory.info`` key marking a demonstration (never a policy sample)."""


@dataclass
class GuidedBatch:
    """The rows to train on: the policy's samples, then one demonstration per guided group."""

    trajectories: list[Trajectory]
    demonstrations: int
    failed_groups: int
    skipped: dict[str, int]
    """Failed groups that got no demonstration, by why: ``demo_failed`` (the demonstrator
    did not solve the task), ``too_long`` (over the rollout's sequence limit),
    ``other_task`` (the env gave another task for the seed: a bug, never trained on)."""


class FailedGroupGuide:
    """Plays ``demonstrator`` on the task of each group that failed every sample.

    Args:
        env: an env made with the rollout's kwargs, so a task seed gives the group's task.
        chat: the chat tokenizer the rollout uses (the demonstration's tokens are a rollout's).
        demonstrator: ``env -> action`` (``baselines.demonstrators``).
        max_seq_len: the rollout's sequence limit; a longer demonstration is not used.
    """

    def __init__(self, env: Any, chat: ChatTokenizer, demonstrator: Callable[[Any], str], max_seq_len: int) -> None:
        self.env = env
        self.chat = chat
        self.demonstrator = demonstrator
        self.max_seq_len = max_seq_len

    def guide(self, trajectories: Sequence[Trajectory], task_seeds: Sequence[int]) -> GuidedBatch:
        """``trajectories`` plus a demonstration for each group (``group_id`` indexes
        ``task_seeds``) whose members all failed. Demonstrations that fail their task are
        left out: they would add no signal, and a failed demonstration is no guidance."""
        from baselines.sft import oracle_trajectories

        groups: dict[int, list[Trajectory]] = defaultdict(list)
        for t in trajectories:
            groups[t.group_id].append(t)
        failed = sorted(g for g, members in groups.items() if not any(t.success for t in members))
        skipped = {"demo_failed": 0, "too_long": 0, "other_task": 0}
        demos: list[Trajectory] = []
        for g in failed:
            (demo,) = oracle_trajectories(self.env, self.chat, [int(task_seeds[g])], policy=self.demonstrator)
            if demo.task_id != groups[g][0].task_id:
                skipped["other_task"] += 1
            elif not demo.success:
                skipped["demo_failed"] += 1
            elif len(demo.token_ids) > self.max_seq_len:
                skipped["too_long"] += 1
            else:
                demo.group_id = g
                demo.info[DEMONSTRATION] = True
                demos.append(demo)
        return GuidedBatch(list(trajectories) + demos, len(demos), len(failed), skipped)

    def close(self) -> None:
        self.env.close()


@torch.no_grad()
def set_behaviour_logprobs(demonstrations: Sequence[Trajectory], model: torch.nn.Module, *, temperature: float,
                           pad_token_id: int, version: int, device: torch.device | str = "cpu") -> None:
    """Give each demonstration the log-probs ``model`` (the weights that sampled the batch)
    assigns its demonstrated tokens, as the engine's would be for a sample, and mark
    those tokens as of policy version ``version`` (fresh data, staleness 0)."""
    for t in demonstrations:
        batch = collate([t], torch.zeros(1), pad_token_id).to(device)
        logp, _ = sequence_logprobs(model, batch.input_ids, batch.attention_mask, temperature=temperature,
                                    first_target=first_generated_position(batch.loss_mask))
        t.engine_logprobs = [lp if m else 0.0 for lp, m in zip(logp[0].tolist(), t.loss_mask)]
        t.token_versions = [version if m else -1 for m in t.loss_mask]


def guided_advantages(trajectories: Sequence[Trajectory], advantages: torch.Tensor,
                      mode: Literal["rl", "imitate"]) -> torch.Tensor:
    """``advantages`` (group-normalised over samples and demonstrations together) as
    ``mode`` trains them: ``rl`` as they are; ``imitate`` with the policy's samples in a
    guided group set to 0, so only the demonstration is trained on, at the same weight."""
    if mode == "rl":
        return advantages
    if mode != "imitate":
        raise ValueError(f"Expected a guidance mode of {GUIDANCE_MODES[1:]}, actual value: {mode!r}")
    guided = {t.group_id for t in trajectories if t.info.get(DEMONSTRATION)}
    keep = torch.tensor([bool(t.info.get(DEMONSTRATION)) or t.group_id not in guided for t in trajectories])
    return torch.where(keep, advantages, torch.zeros_like(advantages))
