"""Off-policy guidance: a demonstration joins a group in which every sample failed.

With a 0/1 reward, a group whose samples all failed has the same reward everywhere, so
group normalisation gives it advantage 0 and the update drops it (``baselines.update``):
the tasks the policy cannot yet solve are exactly the ones it learns nothing from. On
DataAnalysis about three quarters of the groups carried no advantage in every run
(docs/training.md). LUFFY (Yan et al. 2025, "Learning to Reason under Off-Policy
Guidance") mixes off-policy demonstrations into GRPO's groups for this reason. Here
the demonstrator (``sft.demonstrator``, the one SFT imitated) plays the group's own
task once, on an env of its own, and its episode joins the group as one more member; the group's advantages
are then normalised over the policy's samples and the demonstration together::

    rewards 0 x G and 1 (the demonstration)  ->  A_demo = sqrt(G),  A_sample = -1 / sqrt(G)

(``normalize_std``; with G = 8: +2.83 and -0.35). The policy's own samples stay in the
batch and in every rollout metric; the demonstration is only trained on.

**Its behaviour log-probs.** The demonstration was not sampled by the policy, so it has
no engine log-probs. LUFFY sets the behaviour probability to 1, which makes PPO's
importance weight ``pi_prox / pi_b`` equal to ``pi_prox``: the tokens the policy does not
yet predict, the ones the demonstration is there to teach, get almost no gradient (LUFFY
adds a reshaping of the ratio against this). Here ``pi_b`` is the policy's own log-prob
of the demonstration under the current weights, the engine's version (one no-grad
forward; with ``rollout.max_staleness`` 0 these sampled the batch), so a demonstrated
token enters the PPO-EWMA loss as a fresh sample would: weight ~1, its ratio clipped like
any other. (Its tokens also enter ``mismatch/*``, at a difference of 0: they have no
engine log-prob to differ.)

**Two modes, so that a gain can be attributed.**

- ``rl``: as above. The failures are pushed down and the demonstration up.
- ``imitate``: the control. The demonstration keeps the advantage ``rl`` gives it, and the
  group's own samples get 0 but stay in the update (``TokenBatch.counted``), so the
  token-mean denominator, the minibatches and the compute are ``rl``'s: the same
  demonstrations, at the same weight, trained by the same loss, without the contrast
  with the failures. If ``rl`` and ``imitate`` gain alike, the gain is imitation of more
  demonstrations, not reinforcement.

A demonstration is used only where a rollout could have produced it: every turn within
``max_new_tokens`` and started where the rollout leaves room for a turn (the rule SFT's
:func:`~baselines.sft.check_demonstrations_fit` applies to its data). One whose env
fails on infrastructure is skipped and counted, as a rollout episode would be dropped.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from agentgym.errors import InfraError
from baselines.agent_loop import AgentLoopConfig
from baselines.chat_tokens import ChatTokenizer
from baselines.trajectory import TokenBatch, Trajectory, collate

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
    did not solve the task), ``too_long`` (a turn a rollout would have cut or not
    started), ``infra_failed`` (the demonstrator's env failed on infrastructure at reset; a tool's
    infrastructure failure later ends the episode unsolved, ``demo_failed``),
    ``other_task`` (the env gave another task for the seed: a bug, never trained on)."""
    seconds: float = 0.0
    """Wall time the demonstrations took to play."""


class FailedGroupGuide:
    """Plays ``demonstrator`` on the task of each group that failed every sample.

    Args:
        env: an env made with the rollout's kwargs, so a task seed gives the group's task.
        chat: the chat tokenizer the rollout uses (the demonstration's tokens are a rollout's).
        demonstrator: ``env -> action`` (``baselines.demonstrators``).
        limits: the rollout's turn and sequence limits; a demonstration a rollout under
            them could not produce is not used.
    """

    def __init__(self, env: Any, chat: ChatTokenizer, demonstrator: Callable[[Any], str], limits: AgentLoopConfig) -> None:
        self.env = env
        self.chat = chat
        self.demonstrator = demonstrator
        self.limits = limits

    def fits(self, demo: Trajectory) -> bool:
        """Whether a rollout under ``limits`` could have produced ``demo``."""
        from baselines.sft import turn_spans

        return len(demo.token_ids) <= self.limits.max_seq_len and all(
            n <= self.limits.sampling.max_new_tokens and self.limits.room_for_turn(start) for start, n in turn_spans(demo))

    def guide(self, trajectories: Sequence[Trajectory], task_seeds: Sequence[int]) -> GuidedBatch:
        """``trajectories`` plus a demonstration for each group (``group_id`` indexes
        ``task_seeds``) whose members all failed. Demonstrations that fail their task are
        left out: they would add no signal, and a failed demonstration is no guidance."""
        from baselines.sft import oracle_trajectories

        groups: dict[int, list[Trajectory]] = defaultdict(list)
        for t in trajectories:
            groups[t.group_id].append(t)
        failed = sorted(g for g, members in groups.items() if not any(t.success for t in members))
        t0 = time.perf_counter()
        skipped = {"demo_failed": 0, "too_long": 0, "infra_failed": 0, "other_task": 0}
        demos: list[Trajectory] = []
        for g in failed:
            try:
                (demo,) = oracle_trajectories(self.env, self.chat, [int(task_seeds[g])], policy=self.demonstrator)
            except InfraError:
                skipped["infra_failed"] += 1
                continue
            if demo.task_id != groups[g][0].task_id:
                skipped["other_task"] += 1
            elif not demo.success:
                skipped["demo_failed"] += 1
            elif not self.fits(demo):
                skipped["too_long"] += 1
            else:
                demo.group_id = g
                demo.info[DEMONSTRATION] = True
                demos.append(demo)
        return GuidedBatch(list(trajectories) + demos, len(demos), len(failed), skipped, time.perf_counter() - t0)

    def close(self) -> None:
        self.env.close()


def set_behaviour_logprobs(demonstrations: Sequence[Trajectory], score: Callable[[TokenBatch], torch.Tensor], *,
                           pad_token_id: int, version: int, device: torch.device | str = "cpu") -> None:
    """Give each demonstration the log-probs ``score`` (the update's own computation under
    the current weights, :meth:`~baselines.update.PolicyUpdater.token_logprobs`) assigns its
    demonstrated tokens, as the engine's would be for a sample, and mark those tokens as
    of policy version ``version`` (fresh data, staleness 0)."""
    for t in demonstrations:
        logp = score(collate([t], torch.zeros(1), pad_token_id).to(device))
        t.engine_logprobs = [lp if m else 0.0 for lp, m in zip(logp[0].tolist(), t.loss_mask)]
        t.token_versions = [version if m else -1 for m in t.loss_mask]


def guided_advantages(trajectories: Sequence[Trajectory], advantages: torch.Tensor,
                      mode: Literal["rl", "imitate"]) -> tuple[torch.Tensor, torch.Tensor]:
    """``advantages`` (group-normalised over samples and demonstrations together) as
    ``mode`` trains them, and the rows of the guided groups (bool), which the update keeps
    whatever their advantage (``TokenBatch.counted``): ``rl`` as they are; ``imitate``
    with the policy's samples in a guided group set to 0, so only the demonstration is
    trained on, at the same weight and over the same token count."""
    if mode not in GUIDANCE_MODES[1:]:
        raise ValueError(f"Expected a guidance mode of {GUIDANCE_MODES[1:]}, actual value: {mode!r}")
    guided = {t.group_id for t in trajectories if t.info.get(DEMONSTRATION)}
    in_guided = torch.tensor([t.group_id in guided for t in trajectories], dtype=torch.bool)
    if mode == "rl":
        return advantages, in_guided
    demo = torch.tensor([bool(t.info.get(DEMONSTRATION)) for t in trajectories], dtype=torch.bool)
    return torch.where(demo | ~in_guided, advantages, torch.zeros_like(advantages)), in_guided
