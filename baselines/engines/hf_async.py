"""An asynchronous front for a synchronous engine: batch whatever requests are pending.

The asynchronous rollout (:mod:`baselines.async_rollout`) runs every episode as its own
coroutine; each one awaits :meth:`BatchingEngine.agenerate` for its next turn. A single
server coroutine takes *all* requests pending when the engine becomes free and runs them
as one ``generate`` call in a worker thread, so the event loop (and the tool calls on
it) keeps running meanwhile, and episodes at different turns share a batch. That is
request-level continuous batching: a request that arrives during a call waits for the
next call, not for the slowest episode's tools. It fronts :class:`~baselines.engines.hf.HFEngine`
(or any :class:`~baselines.engines.base.RolloutEngine`).

Weights change only between calls: :meth:`sync_weights` waits for the running call, loads
the weights, and increments :attr:`version`. Every :class:`VersionedGeneration` carries the
version that sampled it, which is what the trainer's staleness bound and metrics use.

**Lockstep** (:meth:`begin_lockstep`): a call waits until ``barrier`` requests are pending,
orders them by their ``order`` key and seeds the call ``seed + turn``. The rollout uses
it at ``max_staleness=0`` to issue exactly the calls the synchronous
:class:`~baselines.agent_loop.AgentLoop` issues, so both sample the same tokens.

The synchronous ``generate``/``sync_weights`` (the :class:`RolloutEngine` protocol) may be
called from any thread but the agentgym runtime loop's; they queue behind the running
call, so evaluation and the trainer's weight sync are safe while episodes are in flight.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from agentgym.runtime import get_loop, run_sync
from baselines.engines.async_contract import Lockstep, VersionedGeneration
from baselines.engines.base import Generation, RolloutEngine, SamplingConfig, derived_seed, generate_rows

__all__ = ["BatchingEngine"]


@dataclass
class _Request:
    prompt: list[int]
    sampling: SamplingConfig
    order: int
    future: asyncio.Future[VersionedGeneration]
    seed: int | None = None


class BatchingEngine:
    """Batches pending :meth:`agenerate` requests onto a synchronous ``engine``.

    Args:
        engine: the engine that does the work (its calls run in one worker thread).
        seed: base seed of the calls outside lockstep (call ``n`` is seeded from
            ``(seed, n)``, so a run is reproducible only as far as its batching is).
    """

    def __init__(self, engine: RolloutEngine, seed: int = 0) -> None:
        self.engine = engine
        self.version = 0
        self.seed = seed
        self.busy_s = 0.0
        """Seconds spent inside the engine's ``generate`` (for the idle fraction)."""
        self.calls = 0
        self._pending: list[_Request] = []
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentgym-engine")
        self._lock: asyncio.Lock | None = None
        self._wakeup: asyncio.Event | None = None
        self._server: asyncio.Task[None] | None = None
        self.lockstep = Lockstep()
        self._busy_since: float | None = None
        self._clock = threading.Lock()

    # ---------------------------------------------------------------- async API
    async def agenerate(self, prompt: Sequence[int], sampling: SamplingConfig, order: int = 0,
                        seed: int | None = None) -> VersionedGeneration:
        """One completion of ``prompt``; ``order`` sorts the requests within a call. A
        ``seed`` makes the draw this request's own, whatever shares the call with it (the
        engine's ``row_seeds``); without one it depends on the call's seed and company."""
        self._ensure_server()
        future: asyncio.Future[VersionedGeneration] = asyncio.get_running_loop().create_future()
        self._pending.append(_Request(list(prompt), sampling, order, future, seed))
        self._wake()
        return await future

    def begin_lockstep(self, barrier: int, seed: int | None) -> None:
        """From now on a call waits for ``barrier`` pending requests; its seed is ``seed + turn``."""
        self.lockstep.begin(barrier, seed)
        self._wake()

    def lower_barrier(self, by: int = 1) -> None:
        """An episode of the lockstep batch ended: one request fewer to wait for."""
        self.lockstep.lower(by)
        self._wake()

    def end_lockstep(self) -> None:
        self.lockstep.end()
        self._wake()

    async def async_sync_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load weights between calls and increment :attr:`version`."""
        async with self._get_lock():
            await asyncio.get_running_loop().run_in_executor(self._thread, self.engine.sync_weights, state_dict)
            self.version += 1

    def busy_seconds(self) -> float:
        """:attr:`busy_s` including the running call so far (any thread may ask)."""
        with self._clock:
            running = time.perf_counter() - self._busy_since if self._busy_since is not None else 0.0
            return self.busy_s + running

    # ------------------------------------------- RolloutEngine protocol (sync)
    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig, seed: int | None = None,
                 row_seeds: Sequence[int] | None = None) -> list[Generation]:
        """A synchronous call that waits for the running one (evaluation, SFT checks)."""
        return run_sync(self._exclusive(generate_rows, self.engine, [list(p) for p in prompts], sampling, seed, row_seeds))

    def sync_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        run_sync(self.async_sync_weights(state_dict))

    def sleep(self) -> None:
        """Never sleeps: episodes may be generating while the trainer runs."""

    def wake_up(self) -> None:
        self.engine.wake_up()

    def close(self) -> None:
        """Stop the server coroutine and the worker thread; close the wrapped engine."""
        if self._server is not None:
            get_loop().call_soon_threadsafe(self._server.cancel)
        self._thread.shutdown(wait=True)
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()

    def __getattr__(self, name: str) -> Any:  # score(), last_sync_s, platform, ...
        if name == "engine":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.engine, name)

    # ---------------------------------------------------------------- internals
    def _get_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _ensure_server(self) -> None:
        if self._server is None or self._server.done():
            self._wakeup = asyncio.Event()
            self._server = asyncio.get_running_loop().create_task(self._serve(), name="agentgym-batching-engine")

    async def _exclusive(self, fn: Any, *args: Any) -> Any:
        async with self._get_lock():
            return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    def _ready(self) -> bool:
        return self.lockstep.ready(len(self._pending))

    async def _serve(self) -> None:
        assert self._wakeup is not None
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._ready():
                await self._run_call()

    def _take_call(self) -> tuple[list[_Request], int | None]:
        lockstep = self.lockstep.on
        pending = sorted(self._pending, key=lambda r: r.order) if lockstep else list(self._pending)
        sampling = pending[0].sampling
        batch = [r for r in pending if r.sampling == sampling]
        self._pending = [r for r in self._pending if r not in batch]
        if lockstep:
            seed = self.lockstep.next_seed()
        else:
            seed = derived_seed(self.seed, self.calls)
        self.calls += 1
        return batch, seed

    async def _run_call(self) -> None:
        batch, seed = self._take_call()
        live = [r for r in batch if not r.future.done()]  # a cancelled episode's request is skipped
        if not live:
            return
        async with self._get_lock():
            version = self.version
            self._set_busy(True)
            try:
                gens = await asyncio.get_running_loop().run_in_executor(
                    self._thread, generate_rows, self.engine, [r.prompt for r in live], live[0].sampling, seed,
                    _row_seeds(live, seed if seed is not None else self.seed))
            except Exception as e:  # noqa: BLE001  (the engine failed: every request of the call learns why)
                for r in live:
                    if not r.future.done():
                        r.future.set_exception(e)
                return
            finally:
                self._set_busy(False)
        for r, g in zip(live, gens, strict=True):
            if not r.future.done():
                r.future.set_result(VersionedGeneration(g, version))

    def _set_busy(self, busy: bool) -> None:
        with self._clock:
            now = time.perf_counter()
            if busy:
                self._busy_since = now
            elif self._busy_since is not None:
                self.busy_s += now - self._busy_since
                self._busy_since = None


def _row_seeds(requests: Sequence[_Request], call_seed: int) -> list[int] | None:
    """The call's row seeds when any request brought its own (the others get one derived
    from the call's seed and their place); ``None`` when none did."""
    if all(r.seed is None for r in requests):
        return None
    return [r.seed if r.seed is not None else derived_seed(call_seed, i) for i, r in enumerate(requests)]

