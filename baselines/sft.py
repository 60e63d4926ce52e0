"""Supervised warm start: imitate the env's oracle policy, token-in/token-out.

A random-init (or weak) model almost never produces a parseable tool call, so RL has no
signal to start from. Each agentgym env ships an oracle (``env.unwrapped.oracle_action()``)
that solves its task through the tools; its episodes are tokenised exactly like rollouts
(same chat template, same observation deltas) and the model is trained with a token-mean
negative log-likelihood on the assistant tokens only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import torch

from baselines.chat_tokens import ChatTokenizer
from baselines.logprobs import first_generated_position, sequence_logprobs
from baselines.trajectory import Trajectory, collate

if TYPE_CHECKING:
    from baselines.agent_loop import AgentLoopConfig

__all__ = ["EarlyStop", "check_demonstrations_fit", "copy_loss", "copy_pool", "copy_rows", "copy_warmup", "longest_turn", "minibatch_rows", "oracle_trajectories",
           "sft_train", "turn_spans", "warmup_vocabulary"]


class EarlyStop:
    """When SFT stops, and which weights it keeps: the stop rule of :func:`sft_train`.

    Each check reports a sampled success rate (held out when ``sft.check_split`` is
    set). Training stops when one reaches ``stop_success``; with ``patience``, it also
    stops after that many checks in a row without a new best, and the best check's
    weights are restored (:meth:`restore_best`).
    Patience counts only once some check succeeded: before imitation "clicks" every
    check reads 0 for hundreds of steps (docs/training.md), and that is not a plateau.

    Why patience: the success of 32 sampled episodes moves by +-0.07 between checks (one
    standard error near 0.2), and the imitation loss stops being informative long before
    that. A DataAnalysis run on a slower machine kind oscillated 0.12-0.22 from step 900
    to 1,300 without reaching 0.3, and would have trained to the step limit (another 45
    minutes) for no gain. The best-check weights are a CPU copy of the state dict: for
    the tiny model a few MB; under FSDP2 SFT is refused anyway.
    """

    def __init__(self, stop_success: float | None, patience: int | None = None) -> None:
        if patience is not None and patience < 1:
            raise ValueError(f"Expected patience >= 1 or None, actual value: {patience}")
        self.stop_success = stop_success
        self.patience = patience
        self.checks: list[tuple[int, float]] = []
        self.best: tuple[int, float] | None = None
        self._best_state: dict[str, torch.Tensor] | None = None
        self.reason: str | None = None
        """Why training stopped: ``"success"``, ``"patience"``, or None (it did not)."""

    def observe(self, step: int, success: float, model: torch.nn.Module) -> bool:
        """Record a check at ``step``; True when training should stop now."""
        self.checks.append((step, success))
        if self.best is None or success > self.best[1]:
            self.best = (step, success)
            if self.patience is not None:
                self._best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        if self.stop_success is not None and success >= self.stop_success:
            self.reason = "success"
            return True
        since_best = sum(1 for s, _ in self.checks if s > self.best[0])
        if self.patience is not None and self.best[1] > 0 and since_best >= self.patience:
            self.reason = "patience"
            return True
        return False

    def restore_best(self, model: torch.nn.Module) -> int | None:
        """After a stop for patience, load the best check's weights into ``model``;
        returns the step restored (None otherwise: a stop on ``stop_success`` keeps the
        weights that reached it, and a run that trained every step keeps its last,
        unchecked, weights)."""
        if self.reason != "patience" or self._best_state is None or self.best is None:
            return None
        model.load_state_dict(self._best_state)
        return self.best[0]


def oracle_trajectories(env: Any, chat: ChatTokenizer, seeds: Sequence[int],
                        policy: Callable[[Any], str] | None = None, counterfactual: float = 0.0,
                        seed: int = 0, invent: float = 0.0, pieces: Sequence[str] = (), spelled: float = 0.0) -> list[Trajectory]:
    """Play the oracle (or ``policy``, a ``baselines.demonstrators`` callable ``env ->
    action``) on ``env`` once per seed and return the tokenised episodes.

    ``counterfactual`` > 0 adds that fraction of extra episodes in which the entity and
    the answer are swapped for another episode's of the same kind, everywhere they occur
    (question, actions, tool results): see :func:`baselines.demonstrators.counterfactual`;
    ``invent`` is the fraction of those whose names (Search's entity; DataAnalysis's quoted
    columns, values and file stems) are made up instead; ``spelled`` of those made-up
    names are spelled with random ``pieces`` (the tokenizer's lowercase tokens).
    """
    from baselines.demonstrators import counterfactual as swap, episode_slots

    played, slots, mistakes = [], [], []
    for s in seeds:
        *episode, failed = _play(env, policy, int(s))
        played.append(tuple(episode))
        mistakes.append(failed)
        # (the task is still the episode's.) An episode with a failed call
        # (:func:`baselines.demonstrators.recovering`) is not copied: its error text
        # names what a copy would rename, so the copy's mistake would not be its own.
        slots.append(episode_slots(env, episode[0]) if counterfactual > 0 and not failed else None)
    out = [_tokenise(chat, *p[:2], group_id=i, task_id=p[2], reward=p[3], success=p[4], unlearned=mistakes[i])
           for i, p in enumerate(played)]
    extra = int(round(counterfactual * len(played)))
    if extra:
        for messages, tools, task_id, reward, success in swap(played, slots, extra, seed, invent=invent, pieces=pieces, spelled=spelled):
            out.append(_tokenise(chat, messages, tools, group_id=len(out), task_id=task_id, reward=reward, success=success))
    return out


def turn_spans(trajectory: Trajectory) -> list[tuple[int, int]]:
    """``(start, length)`` of each generated run in ``trajectory``: an assistant turn with
    its end of turn (a masked mistake is not generated, so it is not a turn here)."""
    spans: list[tuple[int, int]] = []
    for i, generated in enumerate(trajectory.loss_mask):
        if generated and (i == 0 or not trajectory.loss_mask[i - 1]):
            spans.append((i, 0))
        if generated:
            spans[-1] = (spans[-1][0], spans[-1][1] + 1)
    return spans


def longest_turn(trajectory: Trajectory) -> int:
    """Tokens in ``trajectory``'s longest generated turn."""
    return max((n for _, n in turn_spans(trajectory)), default=0)


def check_demonstrations_fit(trajectories: Sequence[Trajectory], limits: AgentLoopConfig) -> tuple[int, int]:
    """``(longest turn, latest turn start)`` over the demonstrations; a
    :class:`~baselines.errors.ConfigError` when a rollout under ``limits`` could not
    reproduce one.

    A rollout cuts a turn at ``max_new_tokens`` and starts a turn only where
    :meth:`~baselines.agent_loop.AgentLoopConfig.room_for_turn` says it fits. A
    demonstration beyond either limit is taught by SFT and cut by every rollout: its
    task is failed before RL starts, and RL never sees that success. (Measured:
    DataAnalysis's ``names_first`` turns reach 189 tokens; at 160 every ``argext`` first
    call on training questions was cut, 32 of 32 sampled.)
    """
    from baselines.errors import ConfigError

    max_new_tokens, max_seq_len = limits.sampling.max_new_tokens, limits.max_seq_len
    spans = [turn_spans(t) for t in trajectories]
    longest = max((n for s in spans for _, n in s), default=0)
    latest = max((start for s in spans for start, _ in s), default=0)
    if longest > max_new_tokens:
        over = sum(any(n > max_new_tokens for _, n in s) for s in spans)
        raise ConfigError(f"{over} of {len(spans)} demonstrations have an assistant turn longer than "
                          f"rollout.max_new_tokens={max_new_tokens} (the longest is {longest} tokens with its end of "
                          f"turn): generation would cut every such turn. Set rollout.max_new_tokens to at least {longest}.")
    if not limits.room_for_turn(latest):
        over = sum(not all(limits.room_for_turn(start) for start, _ in s) for s in spans)
        raise ConfigError(f"{over} of {len(spans)} demonstrations start a turn after token {max_seq_len - max_new_tokens}, "
                          f"the last start rollout.max_seq_len={max_seq_len} leaves room for a {max_new_tokens}-token turn "
                          f"(the latest starts at {latest}): a rollout would end such an episode there. "
                          f"Set rollout.max_seq_len to at least {latest + max_new_tokens}.")
    return longest, latest


def _play(env: Any, policy: Callable[[Any], str] | None,
          seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str, float, bool, list[int]]:
    """One episode as (messages, tools, task id, reward, success, failed turns): the
    indices in ``messages`` of the assistant turns with a failed call (empty: none).
    Assistant turns are messages with ``role: assistant``."""
    _, info = env.reset(seed=seed)
    messages, tools, task_id = list(info["messages"]), list(info["tools"]), str(info["task_id"])
    failed: list[int] = []
    while True:
        action = policy(env) if policy is not None else env.unwrapped.oracle_action()
        messages.append({"role": "assistant", "content": action})
        _, reward, terminated, truncated, info = env.step(action)
        if any(r.status != "ok" for r in env.unwrapped.last_results):
            failed.append(len(messages) - 1)
        if terminated or truncated:
            return messages, tools, task_id, float(reward), bool(info.get("success", reward >= 1)), failed
        messages.extend(info["messages"])


def _tokenise(chat: ChatTokenizer, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, group_id: int,
              task_id: str, reward: float, success: bool, unlearned: Sequence[int] = ()) -> Trajectory:
    """Tokens exactly as a rollout produces them: the prompt, then per assistant turn its
    ids and the end of turn (generated), then the env's messages (observation deltas).

    ``unlearned``: indices of assistant turns that are context, not to imitate (a
    :func:`~baselines.demonstrators.recovering` mistake). Their tokens get loss mask 0
    and their spans go to ``info["unlearned"]``, which :func:`sft_train` also keeps out
    of the observation loss: the model learns the fix, never the mistake."""
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    ids = chat.prompt_ids(messages[:first], tools)
    traj = Trajectory([], [], [], len(ids), group_id, task_id, messages=list(messages[:first]))
    traj.append(ids, generated=False)
    i = first
    while i < len(messages):
        turn = chat.tokenizer.encode(messages[i]["content"], add_special_tokens=False) + [chat.end_of_turn_id]
        if i in unlearned:
            traj.info.setdefault("unlearned", []).append((len(traj.token_ids), len(traj.token_ids) + len(turn)))
        traj.append(turn, generated=i not in unlearned, logprobs=[0.0] * len(turn))
        traj.messages.append(messages[i])
        traj.turns += 1
        j = i + 1
        while j < len(messages) and messages[j]["role"] != "assistant":
            j += 1
        if j > i + 1 or j < len(messages):
            traj.append(chat.observation_ids(messages[i + 1 : j], turn_ended=True), generated=False)
            traj.messages.extend(messages[i + 1 : j])
        i = j
    traj.reward, traj.success = reward, success
    return traj


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
    observation_weight: float = 0.0,
    length_groups: int = 1,
) -> list[float]:
    """Minimise the NLL of the generated (mask 1) tokens; returns the loss per step.

    ``schedule``: after a 20-step warm-up, ``linear`` decays the lr to 10% over
    ``steps``; ``constant`` keeps it, so the point where imitation "clicks" does not
    move when ``steps`` changes (the right choice with an early stop).
    ``should_stop(steps_done)`` is called every ``check_every`` steps (0: never) and
    ends training when it returns True; the model is left in train mode.

    ``observation_weight`` > 0 adds that weight times the mean NLL of every other token
    (prompt, tool results): language modelling on the episode's own text. The
    observations repeat what the agent must learn to copy (a result echoes its query, a
    snippet repeats its title), so the model meets many more copying examples per episode
    for the cost of the prompt's logits; measured, it copies a little sooner
    (docs/training.md). The returned loss is the generated tokens' NLL alone, comparable
    across weights.

    ``length_groups`` > 1 draws the rows of that many steps at once and gives each step
    rows of similar length (:func:`minibatch_rows`): a minibatch is as wide as its longest
    row, so mixed lengths (recovery episodes are longer) are mostly padding otherwise.
    """
    if length_groups < 1:
        raise ValueError(f"Expected length_groups >= 1, actual value: {length_groups}")
    model.train()
    opt, sched = _optimizer(model, lr, None if schedule == "constant" else lambda s: max(0.1, 1 - s / max(steps, 1)))
    batch = collate(trajectories, torch.zeros(len(trajectories)), pad_token_id)
    unlearned = torch.zeros_like(batch.loss_mask)  # spans neither imitated nor language-modelled
    for row, t in enumerate(trajectories):
        for start, end in t.info.get("unlearned", ()):
            unlearned[row, start:end] = 1.0
    gen = torch.Generator().manual_seed(seed)
    draws = minibatch_rows(batch.attention_mask.sum(1), batch_size, length_groups, gen)
    losses = []
    for step in range(steps):
        rows = next(draws)
        mb = batch.select(rows).to(device)
        first = 1 if observation_weight > 0 else first_generated_position(mb.loss_mask)
        logp, _ = sequence_logprobs(model, mb.input_ids, mb.attention_mask, first_target=first)
        loss = -(logp * mb.loss_mask).sum() / mb.loss_mask.sum().clamp_min(1.0)
        objective = loss
        if observation_weight > 0:
            skip = unlearned[rows][:, :mb.loss_mask.shape[1]].to(mb.loss_mask.device)  # (select trims the width)
            seen = mb.attention_mask.float() * (1 - mb.loss_mask) * (1 - skip)
            seen[:, 0] = 0.0  # the first token has no prediction
            objective = loss - observation_weight * (logp * seen).sum() / seen.sum().clamp_min(1.0)
        _update(model, opt, sched, objective)
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
        if should_stop is not None and check_every > 0 and (step + 1) % check_every == 0 and step + 1 < steps:
            stop = should_stop(step + 1)
            model.train()
            if stop:
                break
    return losses


def minibatch_rows(lengths: torch.Tensor, batch_size: int, groups: int, gen: torch.Generator) -> Iterator[torch.Tensor]:
    """Row indices for each SFT step, drawn uniformly with replacement.

    With ``groups`` > 1 the rows of ``groups`` steps are drawn together, sorted by
    ``lengths`` and cut into ``groups`` minibatches, served in random order. Every row is
    as likely to be drawn as with ``groups=1`` and every step still has ``batch_size``
    rows; only which rows share a step changes, so a step pads its rows to a similar
    length instead of to the longest of a random mix. ``groups=1`` draws exactly what
    earlier versions drew (same generator calls), so old runs replay.
    """
    while True:
        rows = torch.randint(len(lengths), (batch_size * groups,), generator=gen)
        if groups == 1:
            yield rows
            continue
        rows = rows[torch.argsort(lengths[rows], stable=True)]
        for i in torch.randperm(groups, generator=gen).tolist():
            yield rows[i * batch_size:(i + 1) * batch_size]


def warmup_vocabulary(source: str, trajectories: Sequence[Trajectory], *, vocab_size: int, special_ids: Iterable[int]) -> list[int]:
    """The token ids :func:`copy_warmup` draws from, special tokens left out: those the
    demonstrations hold (``"demonstrations"``) or all ``vocab_size`` of the tokenizer's
    (``"tokenizer"``). The copy is learned only for the tokens it was shown: a question
    on a held-out table can hold a token that no training question does."""
    special = set(special_ids)
    if source == "demonstrations":
        return sorted({i for t in trajectories for i in t.token_ids if i not in special})
    if source == "tokenizer":
        return [i for i in range(vocab_size) if i not in special]
    raise ValueError(f"Expected a copy vocabulary of 'demonstrations' or 'tokenizer', actual value: {source!r}")


def copy_warmup(model: torch.nn.Module, vocabulary: Iterable[int], *, steps: int, batch_size: int, lr: float,
                device: torch.device | str = "cpu", seed: int = 0, max_span: int = 40, until_loss: float | None = 0.5) -> list[float]:
    r"""Teach the model to copy before it imitates: up to ``steps`` of language modelling
    on ``span, gap, span`` rows of random tokens from ``vocabulary``; the loss is the NLL
    of the repeated span after its first token. Stops once the mean loss of the last 20
    steps is below ``until_loss`` (None: never): the copy is learned in a sudden drop
    whose step varies with the model and the vocabulary (measured: 700 to 1,300).
    Returns the loss per step.

    Every task here is copying (a question's name into a query, a result's year or country
    into an answer), and a 2-layer model copies with an induction head: attend to the
    token after the earlier occurrence of the current one. In SFT that head appears
    abruptly and late (measured: 1,300 to 2,100+ steps, varying between runs), and until
    it does the model cannot leave the training set. Random spans admit no other
    solution (nothing to memorise; the span length and the gap change every step, so no
    fixed offset works), the setting in which induction heads form quickly (Olsson et al.,
    2022, "In-context learning and induction heads").

    .. math:: \mathcal{L} = -\frac{1}{L-1}\sum_{i=2}^{L} \log \pi(x_i \mid x_{1..L},\, g,\, x_{<i})
    """
    model.train()
    opt, sched = _optimizer(model, lr)
    pool = copy_pool(vocabulary)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        ids, span = copy_rows(pool, batch_size, gen, max_span)
        loss = copy_loss(model, ids.to(device), span)
        _update(model, opt, sched, loss)
        losses.append(float(loss.detach()))
        if until_loss is not None and len(losses) >= 20 and sum(losses[-20:]) / 20 < until_loss:
            break
    return losses


def copy_pool(vocabulary: Iterable[int]) -> torch.Tensor:
    """The distinct token ids of ``vocabulary``, sorted: what :func:`copy_rows` draws from."""
    pool = torch.tensor(sorted(set(int(v) for v in vocabulary)), dtype=torch.long)
    if len(pool) < 2:
        raise ValueError(f"Expected a vocabulary of at least 2 token ids to copy, actual: {len(pool)}")
    return pool


def copy_rows(pool: torch.Tensor, batch_size: int, gen: torch.Generator, max_span: int = 40) -> tuple[torch.Tensor, int]:
    """``batch_size`` rows of ``span, gap, span`` random tokens from ``pool`` and the span's
    length (8 to ``max_span``; the gap 0 to ``max_span``, both drawn per call)."""
    span, gap = int(torch.randint(8, max_span + 1, (1,), generator=gen)), int(torch.randint(0, max_span + 1, (1,), generator=gen))
    x = pool[torch.randint(len(pool), (batch_size, span), generator=gen)]
    g = pool[torch.randint(len(pool), (batch_size, gap), generator=gen)]
    return torch.cat([x, g, x], dim=1), span


def copy_loss(model: torch.nn.Module, ids: torch.Tensor, span: int) -> torch.Tensor:
    """Mean NLL of the repeated span after its first token (:func:`copy_warmup`'s loss)."""
    logits = model(input_ids=ids, use_cache=False).logits[:, -span:-1].float()  # position t predicts token t+1
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, -span + 1:].reshape(-1))


def _optimizer(model: torch.nn.Module, lr: float, decay: Callable[[int], float] | None = None):
    """AdamW without weight decay, its lr warmed up linearly over 20 steps (then times
    ``decay(step)``, when given): SFT's and the copy warm-up's optimiser."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    if decay is None:
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * decay(s))


def _update(model: torch.nn.Module, opt: torch.optim.Optimizer, sched: Any, objective: torch.Tensor) -> None:
    """One optimiser step on ``objective``, gradients clipped to norm 1."""
    opt.zero_grad(set_to_none=True)
    objective.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
