"""Rollout with vLLM's ``AsyncLLM``: every episode's turn is its own request.

The asynchronous rollout (:mod:`baselines.async_rollout`) awaits one completion per
episode turn. With ``AsyncLLM`` (vLLM 0.32: ``vllm.v1.engine.async_llm``) each such
request joins vLLM's running batch at the next scheduler step (token-level continuous
batching), so no request waits for another's call to end, unlike the ``hf`` front
(:class:`~baselines.engines.hf_async.BatchingEngine`), which batches per call. The
engine lives on agentgym's runtime loop, where the episodes run.

Requests are built and their outputs read by :mod:`baselines.engines.vllm_common`
(token-id prompts, ``processed_logprobs``, a derived seed per request); weights go through
a shared-memory file and the worker extension's ``reload_weights`` on CPU or from host
weights, and through vLLM 0.32's weight-transfer API with CUDA IPC handles when the
weights are on a CUDA device (:func:`~baselines.engines.vllm_common.weight_transfer_path`).
The IPC sender is vLLM's synchronous ``IPCTrainerWeightTransferEngine``: it runs on a
worker thread, and its client (:class:`AsyncLLMWeightSyncClient`) submits each
``AsyncLLM`` weight-update call (``init_weight_transfer_engine``, ``start_weight_update``,
``update_weights``, ``finish_weight_update``: coroutines there) to the runtime loop and
waits on that thread, so the loop keeps running the episodes meanwhile. The
shared-memory write runs on a worker thread too. **Weight sync** is a writer lock over
requests: new requests wait, the ones running finish under the old weights, the weights
load, :attr:`version` increments, requests resume. So a turn is never sampled by two
versions and the version a request records is the one that sampled it.

**Synchronous calls**: :meth:`~AsyncVLLMEngine.generate`, :meth:`~AsyncVLLMEngine.score`
and :meth:`~AsyncVLLMEngine.sync_weights` block until done (the :class:`RolloutEngine`
protocol), for loops of your own. The engine never sleeps (``sleep()``/``wake_up()`` are
no-ops): a colocated loop that must free the GPU while it trains builds its own
``vllm.LLM(enable_sleep_mode=True)`` and calls its ``sleep()``/``wake_up()``.

**Lockstep** (``max_staleness=0``): requests are held until the episodes still running
have all asked, then submitted in episode order with the seeds
``request_seed(seed + turn, i)`` that :meth:`~AsyncVLLMEngine.generate` gives a call
seeded ``seed + turn``: the same requests the synchronous loop sends.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from agentgym.runtime import run_sync
from baselines.engines.base import Generation, SamplingConfig
from baselines.engines.compile_cache import PrivateCompileCache
from baselines.engines.async_contract import BusyClock, Lockstep, VersionedGeneration
from baselines.engines.vllm_common import (
    WORKER_EXTENSION,
    LLMWeightSyncClient,
    SharedWeights,
    WeightTransferPath,
    check_loaded,
    import_vllm,
    outputs_to_generations,
    platform_engine_kwargs,
    request_seed,
    sampling_kwargs,
    send_by_cuda_ipc,
    token_prompts,
    vllm_weight_items,
    weight_transfer_path,
)
from baselines.errors import EngineError

__all__ = ["AsyncLLMWeightSyncClient", "AsyncVLLMEngine"]


class AsyncLLMWeightSyncClient(LLMWeightSyncClient):
    """The weight-sync client over ``AsyncLLM``, for a sender on another thread than ``loop``.

    ``AsyncLLM``'s weight-update methods are coroutines taking vLLM's request dataclasses
    (``WeightTransferInitRequest``, ``WeightTransferUpdateRequest``); each call is run on
    ``loop`` (the one the engine lives on) and waited for on the calling thread. Payloads
    are encoded as :class:`~baselines.engines.vllm_common.LLMWeightSyncClient` does.
    """

    def __init__(self, llm: Any, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(llm)
        self.loop = loop

    def _request(self, key: str, value: Any) -> Any:
        from vllm.distributed.weight_transfer.base import (
            WeightTransferInitRequest,
            WeightTransferUpdateRequest,
        )

        return WeightTransferInitRequest(init_info=value) if key == "init_info" else WeightTransferUpdateRequest(update_info=value)

    def _call(self, method: str, *args: Any) -> None:
        asyncio.run_coroutine_threadsafe(getattr(self.llm, method)(*args), self.loop).result()


class AsyncVLLMEngine:
    """An ``AsyncLLM`` for the asynchronous rollout; also a (synchronous) :class:`RolloutEngine`.
    See the module docstring.

    Args:
        model_path: a local HF model directory.
        tensor_parallel_size: GPUs per engine.
        gpu_memory_utilization: fraction of GPU memory (GPU platforms only; on vLLM's
            CPU build the KV cache is sized by ``kv_cache_memory_bytes`` or the
            ``VLLM_CPU_KVCACHE_SPACE`` environment variable in GiB, because a fraction
            would be of host RAM).
        enforce_eager: no CUDA graphs (needed on CPU; faster start-up).
        dtype: the engine's weights and the dtype weights are synced in.
        max_model_len: the longest prompt + completion, or vLLM's default.
        seed: vLLM's engine seed (requests without a seed of their own).
        kv_cache_memory_bytes: an explicit KV-cache size (any platform), or None.
    """

    def __init__(self, model_path: str, *, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.5,
                 enforce_eager: bool = False, dtype: str = "bfloat16", max_model_len: int | None = None, seed: int = 0,
                 kv_cache_memory_bytes: int | None = None) -> None:
        vllm, platform = import_vllm()
        from transformers import AutoConfig

        self._vllm = vllm
        self.platform = platform.device_name
        self.tied = bool(getattr(AutoConfig.from_pretrained(model_path), "tie_word_embeddings", False))
        self.dtype = getattr(torch, dtype)
        kwargs, self.cuda_ipc = platform_engine_kwargs(platform, kv_cache_memory_bytes, gpu_memory_utilization)
        self._engine_args = dict(model=model_path, tensor_parallel_size=tensor_parallel_size, enforce_eager=enforce_eager,
                                 dtype=dtype, max_model_len=max_model_len, seed=seed, logprobs_mode="processed_logprobs",
                                 worker_extension_cls=WORKER_EXTENSION, **kwargs)
        self.compile_cache = PrivateCompileCache()  # before the engine process starts: it inherits the variable
        try:
            self.llm = run_sync(self._build())
        except BaseException:
            self.compile_cache.close()
            raise
        self.shared = SharedWeights()
        self.version = 0
        self.last_sync_s = 0.0
        self.last_sync_path: WeightTransferPath | None = None
        self._ipc_ready = False  # the workers hold the IPC init info
        self._running = 0
        self._busy = BusyClock()
        self._open: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self.lockstep = Lockstep()
        self._held: list[tuple[int, list[int], SamplingConfig, asyncio.Future[VersionedGeneration], int | None]] = []

    async def _build(self) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM.from_engine_args(AsyncEngineArgs(**self._engine_args))

    # ---------------------------------------------------------------- async API
    async def agenerate(self, prompt: Sequence[int], sampling: SamplingConfig, order: int = 0,
                        seed: int | None = None) -> VersionedGeneration:
        """One completion; ``seed`` is the request's own (vLLM seeds each request apart).
        In lockstep a request without one gets the call's derived seed, as the
        synchronous loop's requests do."""
        if self.lockstep.on:
            future: asyncio.Future[VersionedGeneration] = asyncio.get_running_loop().create_future()
            self._held.append((order, list(prompt), sampling, future, seed))
            self._release_held()
            return await future
        return await self._request(list(prompt), sampling, seed)

    def begin_lockstep(self, barrier: int, seed: int | None) -> None:
        self.lockstep.begin(barrier, seed)

    def lower_barrier(self, by: int = 1) -> None:
        self.lockstep.lower(by)
        self._release_held()

    def end_lockstep(self) -> None:
        self.lockstep.end()
        self._release_held(force=True)

    async def async_sync_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """New requests wait; running ones finish; weights load (by CUDA IPC or through
        shared memory: the module docstring); :attr:`version` + 1. The loop
        is never blocked: the copying and the IPC handshake run on a worker thread."""
        open_, idle = self._events()
        t0 = time.perf_counter()
        open_.clear()
        try:
            await idle.wait()
            named = list(vllm_weight_items(state_dict, self.tied))
            self.last_sync_path = weight_transfer_path(self.cuda_ipc, (t for _, t in named))
            if self.last_sync_path == "cuda_ipc":
                client = AsyncLLMWeightSyncClient(self.llm, asyncio.get_running_loop())
                await asyncio.to_thread(send_by_cuda_ipc, client, named, self.dtype, workers_initialised=self._ipc_ready)
                self._ipc_ready = True
            else:
                manifest = await asyncio.to_thread(lambda: self.shared.write([(k, v.to(self.dtype)) for k, v in named]))
                check_loaded(await self.llm.collective_rpc("agentgym_reload_from_shared", args=(str(self.shared.path), manifest)), manifest)
            await self.llm.reset_prefix_cache()
            self.version += 1
        finally:
            open_.set()
        self.last_sync_s = time.perf_counter() - t0

    def busy_seconds(self) -> float:
        """Seconds during which at least one request was in vLLM."""
        return self._busy.seconds()

    # ------------------------------------------- RolloutEngine protocol (sync)
    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig, seed: int | None = None,
                 row_seeds: Sequence[int] | None = None) -> list[Generation]:
        """One completion per prompt. A ``seed`` gives each prompt its own derived seed:
        one seed shared by all requests would make every sample of a group identical.
        ``row_seeds`` are the prompts' own seeds instead."""
        if row_seeds is not None and len(row_seeds) != len(prompts):
            raise ValueError(f"Expected one row seed per prompt ({len(prompts)}), actual: {len(row_seeds)}")
        seeds = list(row_seeds) if row_seeds is not None else [request_seed(seed, i) for i in range(len(prompts))]

        async def all_of() -> list[Generation]:
            done = await asyncio.gather(*(self._request(list(p), sampling, s) for p, s in zip(prompts, seeds, strict=True)))
            return [d.generation for d in done]

        return run_sync(all_of())

    def sync_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """:meth:`async_sync_weights`, waited for."""
        run_sync(self.async_sync_weights(state_dict))

    def score(self, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
        """``log p(ids[t] | ids[:t])`` at temperature 1 for ``t >= 1`` (vLLM's prompt
        log-probs, which are not temperature-scaled), one list per sequence."""
        async def one(seq: list[int]) -> list[float]:
            params = self._vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
            final = None
            async for out in self.llm.generate(token_prompts([seq])[0], params, request_id=uuid.uuid4().hex):
                final = out
            assert final is not None
            return [float(pos[tok].logprob) for pos, tok in zip(final.prompt_logprobs[1:], seq[1:], strict=True)]

        async def all_of() -> list[list[float]]:
            return list(await asyncio.gather(*(one(list(s)) for s in sequences)))

        return run_sync(all_of())

    def sleep(self) -> None:
        """A no-op: the engine never sleeps (episodes generate while the trainer runs)."""

    def wake_up(self) -> None:
        """A no-op: nothing was released."""

    def close(self) -> None:
        """Remove the shared weights file, shut the engine down, remove its compile cache."""
        self.shared.close()
        self.llm.shutdown()
        # AsyncLLM.__del__ calls shutdown again; at interpreter exit vLLM's module globals
        # are gone by then and it prints "Exception ignored ... TypeError". It is shut down.
        self.llm.shutdown = lambda timeout=None: None
        self.compile_cache.close()

    # ---------------------------------------------------------------- internals
    def _events(self) -> tuple[asyncio.Event, asyncio.Event]:
        if self._open is None or self._idle is None:
            self._open, self._idle = asyncio.Event(), asyncio.Event()
            self._open.set()
            self._idle.set()
        return self._open, self._idle

    def _release_held(self, force: bool = False) -> None:
        if not self._held or not (force or self.lockstep.ready(len(self._held))):
            return
        held, self._held = sorted(self._held, key=lambda h: h[0]), []
        seed = self.lockstep.next_seed()
        for i, (_, prompt, sampling, future, own) in enumerate(held):
            task = asyncio.get_running_loop().create_task(
                self._request(prompt, sampling, own if own is not None else request_seed(seed, i)))
            task.add_done_callback(lambda t, f=future: _settle(f, t))

    async def _request(self, prompt: list[int], sampling: SamplingConfig, seed: int | None) -> VersionedGeneration:
        open_, idle = self._events()
        await open_.wait()
        self._running += 1
        idle.clear()
        self._busy.enter()
        version = self.version
        try:
            params = self._vllm.SamplingParams(**sampling_kwargs(sampling, seed),
                                               output_kind=self._vllm.sampling_params.RequestOutputKind.FINAL_ONLY)
            final = None
            async for out in self.llm.generate(token_prompts([prompt])[0], params, request_id=uuid.uuid4().hex):
                final = out
            if final is None:
                raise EngineError("vLLM's AsyncLLM finished a request without an output.")
            return VersionedGeneration(outputs_to_generations([final])[0], version)
        finally:
            self._busy.exit()
            self._running -= 1
            if self._running == 0:
                idle.set()


def _settle(future: asyncio.Future[VersionedGeneration], task: asyncio.Task[VersionedGeneration]) -> None:
    if future.done():
        return
    if task.cancelled():
        future.cancel()
    elif task.exception() is not None:
        future.set_exception(task.exception())  # type: ignore[arg-type]
    else:
        future.set_result(task.result())
