"""One PPO-EWMA policy update on a batch of token sequences.

Separate from rollout so that it can be tested (and compared across process counts) on
a fixed batch. Order of operations, per training step:

1. ``log pi_trainer_old``: the trainer's log-probs under the weights that generated the
   batch (no gradient). Compared with the engine's to report the mismatch; used as the
   behaviour policy when a TIS/MIS correction is on (:mod:`baselines.mismatch`). With
   asynchronous data a token may come from an older version (see *Staleness and
   engine mismatch* below); its ``pi_trainer_old`` is then the trainer's log-prob under
   that version's weights (:mod:`baselines.policy_versions`).
   No forward pass is spent on it when its value is already known: until the first
   optimiser step of an update, the policy's own forward *is* ``pi_trainer_old``, so the
   mismatch metrics are read off that step's rows, and with one epoch of one minibatch
   (every row trained at rollout weights) a TIS/MIS correction is computed there too. A
   separate no-grad pass runs only when a correction needs ``pi_trainer_old`` for rows
   trained after the first step, or for MIS's global kept-token count (the token-mean
   denominator, needed before the first backward).
2. For each epoch, for each minibatch (one optimiser step each): ``log pi_prox`` from the
   EWMA model as it is *now* (plain PPO: the behaviour log-probs), the loss of
   :mod:`baselines.loss` accumulated over micro-batches, gradient clipping, the optimiser
   step, with ``algo.copy_lr`` one step of the copy task on its own optimiser
   (:meth:`PolicyUpdater._copy_step`), then the EWMA update (so the proximal policy
   follows the weights as both steps left them).

Every forward projects hidden states onto the vocabulary only from the first generated
position of its micro-batch on (``first_target`` of :func:`sequence_logprobs`): prompt
positions carry no loss.

Staleness and engine mismatch, two factors. A token sampled by policy version ``v``
(engine log-prob ``pi_engine_v``) and trained at version ``V >= v`` enters the loss
through the ratio of the proximal policy to what sampled it, which splits in two::

    pi_prox / pi_engine_v  =  pi_prox / pi_trainer_v   *   pi_trainer_v / pi_engine_v
                              `- staleness (drift) -´      `-- engine mismatch rho --´

The first factor is PPO-EWMA's decoupled weight ``pi_prox / pi_b`` with
``pi_b = pi_trainer_v`` (capped by ``imp_samp_max``, :mod:`baselines.loss`): it is what
makes data from older weights usable, for any ``V - v``. The second is ``rho``, which
TIS truncates and MIS masks (:mod:`baselines.mismatch`): it should be ~1 whatever the
staleness, because both terms are the *same* weights ``theta_v``. Taking
``pi_trainer_V`` (the current weights) for both, as a single ratio to the engine, would
put the drift into ``rho``: MIS would then mask tokens for ordinary policy drift and
TIS would truncate it, and ``mismatch/*`` would measure drift. So under TIS/MIS with
stale tokens, ``pi_trainer_v`` is computed per token by swapping version ``v`` in for a
no-grad pass, and the two factors get metrics of their own: ``mismatch/*`` (and
``mismatch/staleness_<s>/*``) for ``rho``, ``staleness/*`` for
``pi_trainer_V / pi_trainer_v`` (:func:`baselines.staleness.staleness_metrics`).

Zero-signal data is never stepped on. Rows whose advantage is zero everywhere (the
samples of a group whose rewards were all equal, which group normalisation maps to
exactly 0) are dropped before minibatching (the "dynamic sampling" filter of DAPO, Yu et
al. 2025), and a minibatch left with no non-zero-advantage token takes no optimiser
step and no EWMA update: Adam would otherwise keep moving the weights on its momentum
alone (measured: KL to the proximal policy 0.016-0.23 at gradient norm 0), a drift that
no reward asked for.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from baselines.config import AlgoConfig
from baselines.distributed import DistInfo, all_gather_counts, all_reduce_max, all_reduce_sum, unwrap_model
from baselines.ewma import EWMAModel
from baselines.logprobs import first_generated_position, sequence_logprobs
from baselines.loss import ppo_ewma_loss
from baselines.mismatch import mis_kept_mask, mismatch_metrics, mismatch_weights
from baselines.policy_versions import PolicyVersionError, PolicyVersions
from baselines.sft import copy_loss, copy_pool, copy_rows
from baselines.staleness import mismatch_by_staleness, staleness_metrics
from baselines.trajectory import TokenBatch

__all__ = ["PolicyUpdater", "global_minibatch_rows"]


class PolicyUpdater:
    """Applies PPO-EWMA (or plain PPO) updates to ``model``.

    Args:
        model: the module to train (possibly DDP-wrapped or FSDP2-sharded).
        optimizer: its optimiser.
        ewma: the proximal model, or None for plain PPO.
        algo: loss, minibatching and mismatch settings.
        info: process-group information (single process by default).
        temperature: the sampling temperature; log-probs are of ``logits / temperature``.
        versions: the trainer's weights at recent policy versions; needed under TIS/MIS
            when a batch has stale tokens (module docstring), else unused.
        reference: a frozen copy of the weights RL started from, for ``algo.kl_coef``'s
            KL penalty (:mod:`baselines.loss`); needed when that is > 0.
        copy_vocabulary: the token ids ``algo.copy_lr``'s copy rows are drawn from
            (:meth:`_copy_step`); needed when that is > 0.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, ewma: EWMAModel | None, algo: AlgoConfig,
                 info: DistInfo = DistInfo(), temperature: float = 1.0, compute_dtype: torch.dtype = torch.float32,
                 versions: PolicyVersions | None = None, reference: nn.Module | None = None,
                 copy_vocabulary: Sequence[int] | None = None) -> None:
        if algo.kl_coef > 0 and reference is None:
            raise ValueError("algo.kl_coef > 0 needs a reference model: pass PolicyUpdater(reference=...)")
        if algo.copy_lr > 0 and not copy_vocabulary:
            raise ValueError("algo.copy_lr > 0 needs the token ids to copy: pass PolicyUpdater(copy_vocabulary=...)")
        self._copy_pool = copy_pool(copy_vocabulary) if algo.copy_lr > 0 else None
        self._copy_gen: torch.Generator | None = None
        # its own AdamW: the copy task's gradients never enter the policy optimiser's moments
        self.copy_optimizer = (torch.optim.AdamW(model.parameters(), lr=algo.copy_lr, weight_decay=0.0)
                               if algo.copy_lr > 0 else None)
        self.model = model
        self.reference = reference
        self.versions = versions
        self.optimizer = optimizer
        self.ewma = ewma
        self.algo = algo
        self.info = info
        self.temperature = temperature
        self.compute_dtype = compute_dtype
        self._at_rollout_weights = False  # no optimiser step yet in this update: logp == log pi_trainer_old
        self._old_in_step = False  # behaviour log-probs / mismatch weights come from the step's own forward
        self._old_diffs: list[torch.Tensor] = []
        self._old_staleness: list[torch.Tensor] = []  # per diff token, with asynchronous rollout data
        self._weight_stats: list[tuple[int, dict[str, float]]] = []

    def _autocast(self) -> contextlib.AbstractContextManager:
        """bf16 compute over fp32 master weights (FSDP2 casts by its MixedPrecisionPolicy)."""
        if self.compute_dtype == torch.float32 or self.info.strategy == "fsdp2":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.info.device.type, dtype=self.compute_dtype)

    def _forward(self, model: nn.Module, mb: TokenBatch, with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        with self._autocast():
            return sequence_logprobs(model, mb.input_ids, mb.attention_mask, temperature=self.temperature, with_entropy=with_entropy,
                                     first_target=first_generated_position(mb.loss_mask))

    @torch.no_grad()
    def token_logprobs(self, model: nn.Module, batch: TokenBatch) -> torch.Tensor:
        """``log pi`` of ``batch``'s tokens under ``model``, computed as the update computes
        its own (the sampling temperature, the compute dtype): what a demonstration's
        behaviour log-probs must be (:mod:`baselines.guidance`)."""
        return self._forward(model, batch)[0]

    def needs_old_logprob_pass(self, batch: TokenBatch | None = None) -> bool:
        """Whether ``log pi_trainer_old`` needs its own no-grad pass over the batch (module
        docstring): only for a TIS/MIS correction when some rows are trained after the
        first optimiser step, under MIS with the kept-token denominator, or when
        ``batch`` has stale tokens (whose ``pi_trainer_old`` is not the current weights').
        With ``batch`` this is a collective: call it on every process."""
        mismatch = self.algo.mismatch
        if mismatch.mode == "none":
            return False
        one_step = self.algo.epochs == 1 and self.algo.num_minibatches == 1
        if not one_step or (mismatch.mode == "mis" and mismatch.mis_denominator == "kept"):
            return True
        return batch is not None and self._max_lag(batch) > 0

    def _max_lag(self, batch: TokenBatch) -> int:
        """The largest staleness of a generated token on any process (collective)."""
        if batch.staleness is None:
            return 0
        local = batch.staleness[batch.loss_mask > 0]
        return int(all_reduce_max(float(local.max()) if local.numel() else 0.0, self.info))

    def update(self, batch: TokenBatch, generator: torch.Generator | None = None) -> dict[str, float]:
        """Run ``epochs x num_minibatches`` optimiser steps on ``batch``; return metrics.

        ``batch`` is this process's share; ``generator`` draws the minibatch partition of
        the global batch (:func:`global_minibatch_rows`) and must be seeded the same on
        every process (None: a seed is drawn and agreed on)."""
        t0 = time.perf_counter()
        self.model.train()  # transformers checkpoints activations only in training mode
        batch = batch.to(self.info.device)
        n_all = all_reduce_sum(float(len(batch)), self.info)
        if n_all == 0:  # every episode of every process was dropped (infra-failed): nothing to learn from
            return {"train/optimizer_steps": 0.0, "train/skipped_steps": float(self.algo.epochs * self.algo.num_minibatches),
                    "train/empty_batch": 1.0, "perf/train_s": time.perf_counter() - t0, "perf/train_tokens_per_s": 0.0}
        metrics: dict[str, float] = {}
        self._old_diffs, self._weight_stats, self._old_staleness = [], [], []
        self._at_rollout_weights = True
        self._old_in_step = not self.needs_old_logprob_pass(batch)
        if not self._old_in_step:
            metrics.update(self._correct_mismatch(batch))
        metrics["train/empty_batch"] = 0.0
        keep = self._signal_rows(batch)
        batch = batch.select(keep)
        metrics["train/dropped_zero_adv_frac"] = 1.0 - all_reduce_sum(float(len(keep)), self.info) / max(n_all, 1.0)

        sums: dict[str, float] = defaultdict(float)
        steps = taken = 0
        generator = _same_on_every_rank(generator, self.info)
        if self._copy_pool is not None:  # drawn only then: runs without the copy task replay their partitions
            seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())
            self._copy_gen = torch.Generator().manual_seed(seed)
        for _ in range(self.algo.epochs):
            for rows in global_minibatch_rows(len(batch), self.algo.num_minibatches, generator, self.info):
                stats = self._optimizer_step(batch.select(rows.to(batch.input_ids.device)))
                if stats:
                    for k, v in stats.items():
                        sums[k] += v
                    taken += 1
                steps += 1
        metrics.update({k: v / taken for k, v in sums.items()})
        if self._old_in_step:
            metrics.update(self._in_step_mismatch_metrics())
        tokens = all_reduce_sum(float(batch.attention_mask.sum()), self.info) * self.algo.epochs
        metrics["perf/train_s"] = time.perf_counter() - t0
        metrics["perf/train_tokens_per_s"] = tokens / metrics["perf/train_s"]
        metrics["train/optimizer_steps"] = float(taken)
        metrics["train/skipped_steps"] = float(steps - taken)
        return metrics

    def _correct_mismatch(self, batch: TokenBatch) -> dict[str, float]:
        """TIS/MIS from a separate no-grad pass: set ``batch``'s behaviour log-probs
        (``pi_trainer_v``), mismatch weights and loss mask; return ``mismatch/*`` and
        ``staleness/*`` (module docstring: the two factors)."""
        mask, engine = batch.loss_mask, batch.engine_logprobs
        now = self._logprobs_no_grad(self.model, batch)  # pi_trainer_V, the current weights
        old = self._at_sampling_versions(batch, now)  # pi_trainer_v, the weights that sampled each token
        metrics = {f"mismatch/{k}": v for k, v in mismatch_metrics(old, engine, mask).items()}
        if batch.staleness is not None:
            metrics.update(mismatch_by_staleness(old, engine, mask, batch.staleness))
            metrics.update(staleness_metrics(now, old, mask, batch.staleness))
        weights, w_stats = mismatch_weights(old, engine, mask, self.algo.mismatch)  # rho = pi_trainer_v / pi_engine_v
        metrics.update({f"mismatch/{k}": v for k, v in w_stats.items()})
        batch.behav_logprobs, batch.is_weights = old, weights
        batch.loss_mask = mis_kept_mask(old, engine, mask, self.algo.mismatch)
        return metrics

    def _at_sampling_versions(self, batch: TokenBatch, now: torch.Tensor) -> torch.Tensor:
        """``log pi_trainer_v`` per token: ``now`` for fresh tokens, and for each lag
        ``s > 0`` present (on any process) a pass with version ``V - s`` swapped in, over
        the rows holding tokens of that lag (collective: every process runs each pass)."""
        top = self._max_lag(batch)
        if top == 0:
            return now
        if self.versions is None:
            raise PolicyVersionError(
                f"A TIS/MIS correction on tokens up to {top} versions stale needs the trainer's weights at those "
                "versions: pass PolicyUpdater(versions=PolicyVersions(...)) and record it at every weight sync."
            )
        out = now.clone()
        lags = batch.staleness * (batch.loss_mask > 0)
        for lag in range(1, top + 1):
            sel = lags == lag
            rows = sel.any(dim=1).nonzero().flatten()
            if all_reduce_sum(float(len(rows)), self.info) == 0:
                continue
            with self.versions.swapped_in(unwrap_model(self.model), lag):
                logp = self._logprobs_no_grad(self.model, batch.select(rows))
            width = logp.shape[1]
            out[rows, :width] = torch.where(sel[rows, :width], logp, out[rows, :width])
        return out

    @staticmethod
    def _signal_rows(batch: TokenBatch) -> torch.Tensor:
        """Indices of rows with a non-zero advantage on at least one generated token, and
        of the rows ``batch.counted`` keeps anyway."""
        adv = batch.advantages
        if adv.dim() == 1:
            adv = adv[:, None].expand_as(batch.loss_mask)
        signal = ((adv != 0) & (batch.loss_mask > 0)).any(dim=1)
        if batch.counted is not None:
            signal |= batch.counted.to(signal.device)
        return signal.nonzero().flatten()

    @torch.no_grad()
    def _logprobs_no_grad(self, model: nn.Module, batch: TokenBatch) -> torch.Tensor:
        out = torch.zeros_like(batch.engine_logprobs)
        for rows in self._micro_rows(batch):
            logp, _ = self._forward(model, _rows_or_placeholder(batch, rows))  # empty: still a forward (collectives)
            if len(rows):
                out[rows, : logp.shape[1]] = logp.to(out.dtype)
        return out

    def _micro_rows(self, batch: TokenBatch) -> Iterator[torch.Tensor]:
        """Row indices of micro-batches; every process yields the same number of them
        (collectives in DDP/FSDP2 forwards must match), padding with empty ones."""
        n = len(batch)
        size = self.algo.micro_batch_size
        mine = (n + size - 1) // size
        total = int(all_reduce_max(mine, self.info))
        idx = torch.arange(n, device=batch.input_ids.device)
        for j in range(total):
            yield idx[j * size : (j + 1) * size] if j < mine else idx[:0]

    def _optimizer_step(self, mb: TokenBatch) -> dict[str, float]:
        """One optimiser step and EWMA update; returns ``{}`` (and changes nothing) when
        no process's minibatch has a token with a non-zero advantage."""
        global_tokens = all_reduce_sum(float(mb.loss_mask.sum()), self.info)
        adv = mb.advantages if mb.advantages.dim() == 2 else mb.advantages[:, None].expand_as(mb.loss_mask)
        if all_reduce_sum(float(((adv != 0) & (mb.loss_mask > 0)).sum()), self.info) == 0:
            return {}
        self.optimizer.zero_grad(set_to_none=True)
        micro = list(self._micro_rows(mb))
        sums: dict[str, float] = defaultdict(float)
        total_loss = 0.0
        n_tok = 0
        for j, rows in enumerate(micro):
            with self._grad_sync(last=j == len(micro) - 1):
                out, entropy, count = self._micro_loss(mb, rows, global_tokens)
                (out * self.info.world_size).backward()
            total_loss += float(out.detach())
            for k, v in entropy.items():
                sums[k] += v * count
            n_tok += count
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.algo.max_grad_norm)
        self.optimizer.step()
        self._at_rollout_weights = False
        copy = self._copy_step() if self._copy_pool is not None else None
        if self.ewma is not None:
            self.ewma.update(unwrap_model(self.model))
        denom = max(all_reduce_sum(n_tok, self.info), 1.0)
        stats = {k: all_reduce_sum(v, self.info) / denom for k, v in sums.items()}
        stats["loss/policy"] = all_reduce_sum(total_loss, self.info)
        stats["loss/grad_norm"] = float(grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm)
        if copy is not None:
            stats["loss/copy"] = all_reduce_sum(copy, self.info) / self.info.world_size
        return stats

    def _copy_step(self) -> float:
        r"""One step of the copy task after the policy's: the NLL of one batch of random
        ``span, gap, span`` rows (:func:`baselines.sft.copy_rows`), on its own AdamW at
        ``copy_lr``; returns the loss.

        RL's episodes hold only the training split's tokens, while held-out questions
        hold tokens no training question does; a small model copies those with an
        induction head that only a task over every token keeps (Olsson et al., 2022).
        Imitation alone wore it down (measured on DataAnalysis: the copy NLL of random
        spans over the whole vocabulary 0.5 after the warm-up, 2.0 after SFT). Training a
        fixed task beside PPO follows InstructGPT's PPO-ptx (Ouyang et al., 2022), with the
        copy task in place of pretraining text, but PPO-ptx adds its loss to PPO's and this
        does not: the copy gradient is ten times the policy's norm (7 against 0.6 at the
        DataAnalysis SFT start), so in one Adam it took most of every step and shrank the
        policy's (measured: with a 0.1 weight, held-out success at step 30 as without it). A separate optimiser keeps
        the policy's steps what ``lr`` makes them and sets the copy task's by ``copy_lr``:

        .. math:: \theta \leftarrow \theta - \text{Adam}_{\text{lr}}(\nabla \mathcal{L}^{\text{PPO-EWMA}}),\qquad
                  \theta \leftarrow \theta - \text{Adam}_{\text{copy\_lr}}(\nabla \mathcal{L}^{\text{copy}})

        Every process draws the same rows, so the synchronised gradient is each one's.
        Measured on DataAnalysis (run T2, docs/training.md): random-span copy accuracy
        rose from 70% to 92% and held-out success did not move, so it is off by default.
        """
        assert self.copy_optimizer is not None and self._copy_pool is not None
        ids, span = copy_rows(self._copy_pool, self.algo.copy_batch_size, self._copy_gen)
        self.copy_optimizer.zero_grad(set_to_none=True)
        with self._grad_sync(last=True), self._autocast():
            loss = copy_loss(self.model, ids.to(self.info.device), span)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.algo.max_grad_norm)
        self.copy_optimizer.step()
        self.copy_optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    def _micro_loss(self, mb: TokenBatch, rows: torch.Tensor, global_tokens: float) -> tuple[torch.Tensor, dict[str, float], int]:
        part = _rows_or_placeholder(mb, rows)  # an empty share still runs forward and backward (collectives)
        mask = part.loss_mask
        logp, entropy = self._forward(self.model, part, with_entropy=True)
        behav = part.behav_logprobs if part.behav_logprobs is not None else part.engine_logprobs
        weights = part.is_weights
        if self._old_in_step and self._at_rollout_weights:
            behav, weights = self._old_from_step(logp.detach(), part, behav)
        prox = self._frozen_logprobs(self.ewma.module, part) if self.ewma is not None else behav
        ref = self._frozen_logprobs(self.reference, part) if self.reference is not None else None
        out = ppo_ewma_loss(
            logp, prox, behav, part.advantages, mask,
            eps_low=self.algo.eps_low, eps_high=self.algo.eps_high, imp_samp_max=self.algo.imp_samp_max,
            weights=weights, num_tokens=global_tokens, logp_ref=ref, kl_coef=self.algo.kl_coef,
        )
        count = int(mask.sum())
        stats = {f"loss/{k}": v for k, v in out.stats.items()}
        stats["policy/entropy"] = float((entropy * mask).sum() / max(count, 1))
        return out.loss, stats, count

    def _old_from_step(self, old: torch.Tensor, part: TokenBatch, behav: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Use this forward (taken at rollout weights) as ``log pi_trainer_old``: record the
        mismatch, and under TIS/MIS return it as the behaviour policy with its weights."""
        mask = part.loss_mask
        self._old_diffs.append((old - part.engine_logprobs)[mask > 0].float())
        if part.staleness is not None:
            self._old_staleness.append(part.staleness[mask > 0])
        if self.algo.mismatch.mode == "none":
            return behav, part.is_weights
        weights, stats = mismatch_weights(old, part.engine_logprobs, mask, self.algo.mismatch)
        self._weight_stats.append((int(mask.sum()), stats))
        return old, weights

    def _in_step_mismatch_metrics(self) -> dict[str, float]:
        """``mismatch/*`` over the tokens trained at rollout weights (this process's); none
        when no step was taken (nothing was measured, and 0 would read as "no mismatch")."""
        if not self._old_diffs:
            return {}
        diffs = torch.cat(self._old_diffs)
        out = {f"mismatch/{k}": v for k, v in mismatch_metrics(diffs, torch.zeros_like(diffs), torch.ones_like(diffs)).items()}
        if self._old_staleness:
            out.update(mismatch_by_staleness(diffs, torch.zeros_like(diffs), torch.ones_like(diffs), torch.cat(self._old_staleness)))
        total = sum(n for n, _ in self._weight_stats)
        for key in self._weight_stats[0][1] if self._weight_stats else ():
            values = [(n, st[key]) for n, st in self._weight_stats]
            out[f"mismatch/{key}"] = max(v for _, v in values) if key.endswith("_max") else sum(n * v for n, v in values) / max(total, 1)
        return out

    @torch.no_grad()
    def _frozen_logprobs(self, module: nn.Module, part: TokenBatch) -> torch.Tensor:
        """Log-probs under a frozen copy (the EWMA or the reference), moved to the batch's
        device for the forward when it is kept elsewhere (``algo.ewma_device``)."""
        device = part.input_ids.device
        home = next(module.parameters()).device
        if home != device:
            module.to(device)
        try:
            logp, _ = self._forward(module, part)
        finally:
            if home != device:
                module.to(home)
        return logp

    def _grad_sync(self, last: bool) -> contextlib.AbstractContextManager:
        """Accumulate locally and synchronise gradients only on the last micro-batch."""
        if self.info.strategy == "ddp" and not last:
            return self.model.no_sync()
        if self.info.strategy == "fsdp2" and hasattr(self.model, "set_requires_gradient_sync"):
            self.model.set_requires_gradient_sync(last)
        return contextlib.nullcontext()


def global_minibatch_rows(n_local: int, num_minibatches: int, generator: torch.Generator | None,
                          info: DistInfo = DistInfo()) -> list[torch.Tensor]:
    """This process's local row indices of each minibatch of the *global* batch.

    The global batch is the processes' shares concatenated in rank order (rank ``r``'s rows
    are global rows ``offset_r .. offset_r + n_r - 1``). One permutation of all
    ``N = sum_r n_r`` rows is drawn (``generator`` seeded alike everywhere, so every
    process draws the same) and split into ``num_minibatches`` parts; each process takes
    its own rows of each part. Minibatch ``j`` then holds exactly the rows one process
    would put in it, so N processes take the optimiser steps of one. (Each process
    permuting its own rows instead gives a different partition whenever
    ``num_minibatches > 1``.) A process may have no rows in a minibatch: it still joins
    the step's collectives (:func:`_rows_or_placeholder`).
    """
    counts = all_gather_counts(n_local, info)
    offset = sum(counts[: info.rank])
    order = torch.randperm(sum(counts), generator=generator)
    return [part[(part >= offset) & (part < offset + n_local)] - offset for part in order.tensor_split(num_minibatches)]


def _same_on_every_rank(generator: torch.Generator | None, info: DistInfo) -> torch.Generator | None:
    """``generator``, or without one in a process group, one seeded alike on every rank
    (the global RNGs are seeded per rank)."""
    if generator is not None or not info.enabled:
        return generator
    seed = int(all_reduce_max(float(torch.randint(0, 2**31 - 1, (1,)).item()), info))
    return torch.Generator().manual_seed(seed)


def _rows_or_placeholder(batch: TokenBatch, rows: torch.Tensor) -> TokenBatch:
    """``batch.select(rows)``, or, for no rows, one two-token row whose loss mask and
    advantage are 0: a process whose share is empty (all its rows filtered out, or all
    its episodes infra-failed) must still take part in DDP/FSDP2 collectives."""
    if len(rows):
        return batch.select(rows)
    dev = batch.input_ids.device

    def zeros(t: torch.Tensor | None, dtype: torch.dtype = torch.float32) -> torch.Tensor | None:
        return None if t is None else torch.zeros((1, 2), dtype=dtype, device=dev)

    adv = torch.zeros((1,) if batch.advantages.dim() == 1 else (1, 2), device=dev)
    return TokenBatch(torch.zeros((1, 2), dtype=torch.long, device=dev), torch.ones((1, 2), dtype=torch.long, device=dev),
                      zeros(batch.loss_mask), zeros(batch.engine_logprobs), adv, zeros(batch.behav_logprobs), zeros(batch.is_weights))
