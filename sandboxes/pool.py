"""A warm pool of sandboxes with retries, recycling and replay.

The pool keeps ``size`` sandboxes started and ready (numpy and pandas imported), so
``acquire`` hands one out in well under a millisecond. What it hands out is a
:class:`PooledSandbox`, a lease that remembers the episode's uploads and successful
cells: if the sandbox under it dies (container killed, supervisor hung), the lease takes
a fresh one, replays the episode onto it and retries the call, so the agent sees nothing
but the answer. Where replay is impossible the result says ``state_lost``.

On ``release`` the sandbox is reset in the background (new interpreter, empty workdir and
/tmp, no leftover processes) and only then returned; it is closed instead after
``max_episodes`` episodes or after any anomaly (oom, crash, lost state, transport error).
Errors that survive the retries raise :class:`~sandboxes.errors.SandboxInfraError`.

A pool belongs to the event loop it started on. After :meth:`SandboxPool.close` nothing
is started or reset any more (acquirers still waiting get ``SandboxClosedError``); a pool
whose loop ended without closing it (an ``asyncio.run`` that returned) starts nothing
either, and :meth:`SandboxPool.abandon` kills what it left.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import typing
import warnings
from dataclasses import dataclass
from typing import Any, AsyncIterator, Protocol, runtime_checkable

from sandboxes.engine import default_engine_url, engine_reachable
from sandboxes.errors import (
    EngineUnreachableError,
    SandboxClosedError,
    SandboxConfigError,
    SandboxError,
    SandboxInfraError,
    SandboxMemoryKilledError,
)
from sandboxes.protocol import BackendName, ExecResult, Sandbox, SandboxConfig
from sandboxes.reliability import RetryPolicy, call_budget, remaining_s, retrying

__all__ = ["PoolConfig", "SandboxBackend", "SandboxPool", "PooledSandbox", "make_pool", "choose_backend",
           "requested_backend", "BackendName", "default_config"]

log = logging.getLogger(__name__)

NOT_RUN = ("this code was not run: the sandbox under your episode was replaced, and re-running your "
           "earlier cells came out differently, so they were stopped there; run it again (it will run "
           "on a fresh sandbox with your uploaded files)")
"""The error of a call whose replay came out differently (``PooledSandbox.run``)."""


@runtime_checkable
class SandboxBackend(Protocol):
    """How a pool makes sandboxes: :class:`~sandboxes.DockerBackend`,
    :class:`~sandboxes.ProcessBackend`, or a fake in unit tests."""

    name: str

    async def create(self) -> Any:
        """Start one sandbox and return it when its interpreter is ready."""

    async def remove_orphans(self) -> int:
        """Remove sandboxes left by dead processes; return how many."""

    def describe(self) -> dict[str, Any]:
        """Facts for fingerprints (image id, library versions, config)."""

    async def close(self) -> None:
        """Release the backend's own resources (clients)."""


@dataclass(frozen=True)
class PoolConfig:
    """How many sandboxes to keep warm and how hard to try when things fail."""

    size: int = 4
    """Sandboxes kept started and idle, ready for ``acquire``."""
    max_live: int | None = None
    """Cap on sandboxes alive at once (idle + leased + starting); None for no cap."""
    max_parallel_creations: int = 4
    """Sandboxes started or reset at the same time; starting many at once on a small
    machine only makes each one slower (and can starve them into timeouts)."""
    max_episodes: int = 50
    """A sandbox is closed and replaced after serving this many episodes."""
    acquire_timeout_s: float = 600.0
    retry: RetryPolicy = RetryPolicy(attempts=3, initial_s=0.2, max_wait_s=5.0)
    """Tries of one pool operation (acquire, a call whose sandbox died, an upload) when
    nothing above the pool opened a budget; under a caller's budget (a tool call, an
    episode start) the pool spends from that one instead (:mod:`sandboxes.reliability`)."""
    replay: bool = True
    """Replay an episode's uploads and successful cells onto a replacement sandbox."""
    reap_on_start: bool = True
    """Remove orphaned sandboxes of dead processes when the pool starts."""
    close_timeout_s: float = 30.0
    """How long :meth:`SandboxPool.close` waits for its sandboxes to close. An engine
    that stalls on removals (Docker 20.10 under many at once) would otherwise hold the
    close, and the run's summary behind it, one client timeout per container. What is
    left is reported (``PoolStats.close_left``); the process removes it at exit, and its
    owner label lets ``agentgym reap`` (or the next pool's start) remove whatever that
    could not, once the process has gone."""

    def __post_init__(self) -> None:
        if not self.close_timeout_s > 0:
            raise SandboxConfigError(f"Expected close_timeout_s > 0, actual value: {self.close_timeout_s}")
        if self.size < 0 or self.max_parallel_creations < 1 or self.max_episodes < 1:
            raise SandboxConfigError(
                "Expected size >= 0, max_parallel_creations >= 1 and max_episodes >= 1, "
                f"actual values: {self.size}, {self.max_parallel_creations}, {self.max_episodes}"
            )
        if not isinstance(self.retry, RetryPolicy):
            raise SandboxConfigError(f"Expected PoolConfig.retry to be a RetryPolicy, actual value: {self.retry!r}")
        if self.max_live is not None and self.max_live < 1:
            raise SandboxConfigError(f"Expected max_live >= 1 or None, actual value: {self.max_live}")


@dataclass
class PoolStats:
    created: int = 0
    creation_failures: int = 0
    recycled: int = 0
    replaced: int = 0
    replays_failed: int = 0
    close_left: int = 0
    """Sandboxes that had not closed when :meth:`SandboxPool.close` stopped waiting."""


class SandboxPool:
    """Warm pool of sandboxes; use as ``async with SandboxPool(backend) as pool``.

    Args:
        backend: what makes sandboxes (see :func:`make_pool` to pick one automatically).
        config: pool sizes, recycling and retry settings.
    """

    def __init__(self, backend: SandboxBackend, config: PoolConfig | None = None) -> None:
        self.backend = backend
        self.config = config or PoolConfig()
        self.stats = PoolStats()
        self._ready: asyncio.Queue[Any] = asyncio.Queue()
        self._leases: set[PooledSandbox] = set()
        self._owned: set[Any] = set()
        """Every sandbox this pool started and has not closed, wherever it is now."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._creating = 0
        self._resetting = 0
        self._waiters = 0
        self._started = False
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the pool started on: its queue, locks and tasks live there."""
        self._start_lock = asyncio.Lock()
        self._startups = asyncio.Semaphore(self.config.max_parallel_creations)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> "SandboxPool":
        """Remove orphans of dead processes, then start filling the pool.

        Raises:
            SandboxClosedError: the pool was closed (or abandoned); make a new one.
            SandboxConfigError: the pool started on another event loop (a pool cannot
                outlive its ``asyncio.run``; make one per loop).
        """
        self._check_loop()
        async with self._start_lock:
            if self._closed:
                raise SandboxClosedError("this pool is closed; create a new one")
            if not self._started:
                self._loop = asyncio.get_running_loop()
                if self.config.reap_on_start:
                    try:
                        removed = await self.backend.remove_orphans()
                    except SandboxError:
                        raise
                    except Exception as e:  # a backend's own failure is infrastructure, like create's
                        raise SandboxInfraError(f"could not remove orphaned sandboxes: {e}") from e
                    if removed:
                        log.info("removed %d orphaned sandboxes of dead processes", removed)
                self._started = True
                self._kick()
        return self

    async def wait_ready(self, n: int | None = None, timeout: float = 600.0) -> None:
        """Wait until ``n`` (default: ``size``) sandboxes are idle and ready."""
        await self.start()
        n = self.config.size if n is None else n
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while self._ready.qsize() < n:
            if loop.time() > end:
                raise SandboxInfraError(f"only {self._ready.qsize()} of {n} sandboxes ready after {timeout:g}s")
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        """Close every sandbox (idle and leased) and the backend. Idempotent.

        From then on nothing is started or reset: background work is cancelled, and
        acquirers still waiting get :class:`~sandboxes.errors.SandboxClosedError`. Called
        on a loop other than the pool's own, it kills the sandboxes instead (see
        :meth:`abandon`): the pool's tasks cannot be awaited from there.
        """
        if self._closed:
            return
        if self._loop is not None and self._loop is not _running_loop():
            self.abandon()
            return
        self._closed = True
        for _ in range(self._waiters):
            self._ready.put_nowait(SandboxClosedError("the pool was closed while waiting for a sandbox"))
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._creating = self._resetting = 0  # a task cancelled before it ran never counted down
        for lease in self._leases:
            lease._detach()
        self._leases.clear()
        while not self._ready.empty():
            self._ready.get_nowait()
        owned, self._owned = list(self._owned), set()
        closing = [asyncio.ensure_future(self._close_one(sb)) for sb in owned]
        if closing:
            _, late = await asyncio.wait(closing, timeout=self.config.close_timeout_s)
            if late:
                for task in late:
                    task.cancel()
                await asyncio.wait(late, timeout=5.0)  # bounded too: a close may shield its own work
                self.stats.close_left += len(late)
                log.warning(
                    "%d of %d sandboxes did not close within %gs (the engine is slow or stalled); this "
                    "process removes them at exit, and what it cannot, `agentgym reap` does after it",
                    len(late), len(owned), self.config.close_timeout_s)
        await self.backend.close()

    def abandon(self) -> int:
        """Give the pool up without its event loop: kill every sandbox it started (the
        container removed, the process group killed), start nothing more. Returns how
        many were killed.

        For a pool whose loop has ended (an ``asyncio.run`` returned with the pool still
        open): its tasks died with the loop, so :meth:`close` cannot await them. Files and
        cgroups a killed process sandbox leaves are removed by the reaper.
        """
        self._closed = True
        for lease in self._leases:
            lease._detach()
        self._leases.clear()
        owned, self._owned = list(self._owned), set()
        for sandbox in owned:
            try:
                sandbox.kill()
            except Exception as e:  # noqa: BLE001 - best effort; the reaper is the backstop
                log.debug("killing sandbox %s of an abandoned pool failed: %s", getattr(sandbox, "id", "?"), e)
        return len(owned)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` or :meth:`abandon` was called."""
        return self._closed

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the pool started on (None before :meth:`start`)."""
        return self._loop

    def _check_loop(self) -> None:
        if self._loop is None or self._loop is _running_loop():
            return
        if self._loop.is_closed():
            raise SandboxClosedError(
                "this pool's event loop has ended (an asyncio.run returned with the pool open); "
                "make a new pool on the running loop"
            )
        raise SandboxConfigError(
            "Expected the pool to be used on the event loop it started on, actual: another loop; "
            "make one pool per loop (agentgym.resources.shared_resources does)"
        )

    async def __aenter__(self) -> "SandboxPool":
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ acquire / release
    async def acquire(self) -> "PooledSandbox":
        """A sandbox in a fresh state, leased until :meth:`release`.

        A sandbox that fails to start is tried again within the caller's budget (or
        ``config.retry`` when the caller opened none).

        Raises:
            SandboxInfraError: no sandbox could be started within the retries.
        """
        with call_budget(self.config.retry):
            async for attempt in retrying(SandboxInfraError):
                with attempt:
                    sandbox = await self._take()
        lease = PooledSandbox(self, sandbox)
        self._leases.add(lease)
        return lease

    async def release(self, sandbox: Sandbox) -> None:
        """Give a leased sandbox back; it is reset (or recycled) in the background."""
        if not isinstance(sandbox, PooledSandbox) or sandbox._pool is not self:
            raise SandboxConfigError(
                f"Expected a sandbox leased from this pool, actual value: {sandbox!r}"
            )
        self._leases.discard(sandbox)
        inner = sandbox._detach()
        if inner is not None:
            self._give_back(inner)

    @contextlib.asynccontextmanager
    async def sandbox(self) -> AsyncIterator["PooledSandbox"]:
        """``async with pool.sandbox() as sb:`` acquires and always releases."""
        lease = await self.acquire()
        try:
            yield lease
        finally:
            if lease in self._leases:
                await self.release(lease)

    def describe(self) -> dict[str, Any]:
        """The backend's fingerprint facts plus the pool settings."""
        return {**self.backend.describe(), "pool": dataclasses.asdict(self.config)}

    def counts(self) -> dict[str, int]:
        return {
            "idle": self._ready.qsize(),
            "leased": len(self._leases),
            "creating": self._creating,
            "resetting": self._resetting,
            "waiting": self._waiters,
        }

    # ------------------------------------------------------------------ internals
    async def _take(self) -> Any:
        """A ready sandbox, waited for up to ``acquire_timeout_s``, capped by the time left
        to the current call."""
        await self.start()
        if self._closed:
            raise SandboxClosedError("this pool is closed; create a new one")
        self._waiters += 1
        self._kick()
        try:
            while True:
                wait_s = remaining_s(self.config.acquire_timeout_s)
                try:
                    item = await asyncio.wait_for(self._ready.get(), wait_s)
                except asyncio.TimeoutError as e:
                    raise SandboxInfraError(
                        f"no sandbox became ready within {wait_s:g}s "
                        f"({self.counts()}); raise PoolConfig.acquire_timeout_s or max_live"
                    ) from e
                if isinstance(item, SandboxClosedError):
                    raise item
                if isinstance(item, BaseException):
                    raise SandboxInfraError(f"could not start a sandbox: {item}") from item
                if item.healthy:
                    return item
                self._spawn(self._close_one(item))
        finally:
            self._waiters -= 1
            self._kick()

    def _give_back(self, sandbox: Any) -> None:
        sandbox.episodes += 1
        reusable = getattr(sandbox, "reusable", True)  # False: its reset could not be checked
        if not sandbox.healthy or not reusable or sandbox.episodes >= self.config.max_episodes or self._closed:
            self.stats.recycled += 1
            self._spawn(self._close_one(sandbox))
            return
        self._resetting += 1
        self._spawn(self._reset_and_return(sandbox))

    async def _reset_and_return(self, sandbox: Any) -> None:
        try:
            async with self._startups:  # a reset starts a fresh interpreter: same cost as a start
                await sandbox.reset()
        except Exception as e:
            log.warning("reset of sandbox %s failed (%s); replacing it", sandbox.id, e)
            await self._close_one(sandbox)
        else:
            self._ready.put_nowait(sandbox)
        finally:
            self._resetting -= 1
            self._kick()

    def _wanted(self) -> int:
        supply = self._ready.qsize() + self._creating + self._resetting
        want = self.config.size + self._waiters - supply
        if self.config.max_live is not None:
            want = min(want, self.config.max_live - len(self._owned) - self._creating)
        return want

    def _kick(self) -> None:
        """Start creations until the pool (plus waiting acquirers) is covered.

        Never while the pool closes, nor from a task being cancelled: the loop is being
        torn down then (``asyncio.run`` returning with the pool open), and a sandbox
        started now would outlive it."""
        if self._closed or not self._started or _being_cancelled():
            return
        while self._creating < self.config.max_parallel_creations and self._wanted() > 0:
            self._creating += 1
            self._spawn(self._create_one())

    async def _create_one(self) -> None:
        failed = False
        try:
            async with self._startups:
                sandbox = await self.backend.create()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # One try: the acquirer that gets this error retries within its own budget,
            # so a start is never retried both here and above.
            failed = True
            self.stats.creation_failures += 1
            log.warning("could not start a sandbox: %s", e)
            if self._waiters:
                self._ready.put_nowait(e)  # one waiter gets the error instead of hanging
        else:
            self.stats.created += 1
            self._owned.add(sandbox)
            if self._closed:
                await self._close_one(sandbox)
            else:
                self._ready.put_nowait(sandbox)
        finally:
            self._creating -= 1
        if not failed or self._waiters:
            self._kick()

    async def _close_one(self, sandbox: Any) -> None:
        try:
            await sandbox.close()
        except Exception as e:  # closing is best effort; the reaper is the backstop
            log.warning("closing sandbox %s failed: %s", getattr(sandbox, "id", "?"), e)
        finally:
            self._owned.discard(sandbox)
            forget = getattr(self.backend, "forget", None)
            if forget is not None:
                forget(sandbox)
            self._kick()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _being_cancelled() -> bool:
    """Whether the running task has been asked to stop (its ``finally`` blocks run now)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return False
    return task is not None and task.cancelling() > 0


class PooledSandbox(Sandbox):
    """A sandbox leased from a :class:`SandboxPool`, surviving the death of the one under it.

    The lease records the episode's uploads and the cells that ran ``ok``. If a call
    fails because the sandbox died, the lease takes a fresh sandbox, replays that record
    and runs the call again. A call that kills its sandbox twice is the code's fault: it
    returns status ``crash`` (on a replacement with the episode replayed). Replay assumes
    cells are deterministic; when a replayed cell does not come out ``ok``, the call's
    code is not run (its result, an ``error`` with ``state_lost`` and the reason, says
    so) and the next call goes on from a fresh sandbox with the uploads restored. That
    is the agent's outcome, never an infrastructure error: only failing to get a
    healthy sandbox at all raises.
    """

    def __init__(self, pool: SandboxPool, sandbox: Any) -> None:
        self._pool = pool
        self._inner: Any = sandbox
        self._uploads: dict[str, bytes] = {}
        self._cells: list[tuple[str, float | None]] = []
        self._pending_lost: str | None = None
        self._needs_replacement = False
        """The sandbox under the lease failed; the next operation replaces it first."""

    @property
    def id(self) -> str:
        return self._sandbox().id

    @property
    def workdir(self) -> str:
        return self._sandbox().workdir

    @property
    def inner(self) -> Any:
        """The sandbox currently under this lease (changes when it is replaced)."""
        return self._sandbox()

    @property
    def healthy(self) -> bool:
        return self._inner is not None

    def describe(self) -> dict[str, Any]:
        return self._sandbox().describe()

    def kill(self) -> None:
        """Kill the sandbox under the lease now; the lease's next call replaces it and
        replays the episode, as after a real crash.

        Raises:
            SandboxClosedError: the lease was released (nothing of this episode to kill).
        """
        self._sandbox().kill()

    def _sandbox(self) -> Any:
        if self._inner is None:
            raise SandboxClosedError("this sandbox was released to its pool; acquire another")
        return self._inner

    def _detach(self) -> Any:
        inner, self._inner = self._inner, None
        return inner

    async def run(self, code: str, timeout: float | None = None) -> ExecResult:
        """Run ``code``; a sandbox that dies under it is replaced, the episode replayed
        and the code run again, within the caller's budget (``config.retry`` if none).

        A sandbox that dies twice *while running this code* is the code's doing: the
        result is ``crash`` (the agent's outcome), not an infrastructure failure. Only
        failing to get a healthy replacement raises :class:`SandboxInfraError`.
        """
        crashes: list[SandboxInfraError] = []
        result: ExecResult | None = None
        with call_budget(self._pool.config.retry):
            async for attempt in retrying(SandboxInfraError):
                with attempt:
                    if self._needs_replacement:
                        # Kept on the lease until a result tells it: a caller that gives
                        # up on this call leaves it for the next one.
                        self._pending_lost = await self._replace() or self._pending_lost
                    if self._needs_replacement:  # the replay came out differently (see _replay)
                        result = ExecResult(status="error", error=NOT_RUN)
                    else:
                        result = await self._run_once(code, timeout, crashes)
        assert result is not None
        lost_reason, self._pending_lost = self._pending_lost, None
        if lost_reason is not None and not result.state_lost:
            result = dataclasses.replace(result, state_lost=True, state_lost_reason=lost_reason)
        if result.state_lost:
            self._cells.clear()
        if result.status == "ok":
            self._cells.append((code, timeout))
        return result

    async def _run_once(self, code: str, timeout: float | None, crashes: list[SandboxInfraError]) -> ExecResult:
        sandbox = self._sandbox()
        try:
            result = await sandbox.run(code, timeout)
        except SandboxInfraError as e:
            crashes.append(e)
            self._needs_replacement = True
            log.warning("sandbox %s failed during run (%s); replacing it", sandbox.id, e)
            if len(crashes) < 2:
                raise
            # The lease's next operation replaces the sandbox; this code is to blame.
            return ExecResult(status="crash", error=f"the sandbox died twice while running this code: {e}")
        # A sandbox the agent's memory ended gave its last result (``oom``, state lost):
        # the next call gets a new one, with nothing to replay.
        self._needs_replacement = bool(getattr(sandbox, "ended", False))
        return result

    async def upload(self, path: str, data: bytes) -> None:
        await self._with_replacement(lambda sb: sb.upload(path, data))
        self._uploads[path] = bytes(data)

    async def download(self, path: str) -> bytes:
        return await self._with_replacement(lambda sb: sb.download(path))

    async def reset(self) -> None:
        self._uploads.clear()
        self._cells.clear()
        self._pending_lost = None
        await self._with_replacement(lambda sb: sb.reset())

    async def close(self) -> None:
        """Give the sandbox back to the pool (what ``async with`` does on exit)."""
        if self in self._pool._leases:
            await self._pool.release(self)

    async def _with_replacement(self, call: Any) -> Any:
        with call_budget(self._pool.config.retry):
            async for attempt in retrying(SandboxInfraError):
                with attempt:
                    if self._needs_replacement:
                        lost = await self._replace()
                        if lost is not None:  # told to the agent with its next cell's result
                            self._cells.clear()
                            self._pending_lost = lost
                        if self._needs_replacement:  # the replay came out differently: start clean
                            await self._replace()
                    sandbox = self._sandbox()
                    try:
                        return await call(sandbox)
                    except SandboxMemoryKilledError as e:
                        # The agent's processes filled the memory (after its last cell): a
                        # new sandbox with nothing replayed, which would launch them again.
                        log.warning("sandbox %s was ended by its memory limit (%s); replacing it", sandbox.id, e)
                        self._cells.clear()
                        self._pending_lost = e.reason
                        self._needs_replacement = True
                        raise
                    except SandboxInfraError as e:
                        log.warning("sandbox %s failed (%s); replacing it", sandbox.id, e)
                        self._needs_replacement = True
                        raise

    async def retire(self, reason: str) -> None:
        """Give the sandbox back to be discarded, never reused (a start-up that failed on
        it, a reset that left something behind)."""
        inner = self._inner
        if inner is not None and hasattr(inner, "mark_anomaly"):
            inner.mark_anomaly(reason)
        await self.close()

    async def _replace(self) -> str | None:
        """Swap in a fresh sandbox and replay the episode onto it.

        Returns None when the episode's state was rebuilt, or why it was not, in words
        for the agent: a replay that comes out differently is the agent's outcome (its
        cells are not deterministic). One try: :class:`SandboxInfraError` when no
        healthy sandbox could be had or the replay's uploads failed, and the caller's
        retry loop (one budget for the whole call) decides whether to try again.
        """
        old = self._detach()
        if old is not None:
            self._pool.stats.replaced += 1
            self._pool._spawn(self._pool._close_one(old))
        self._inner = await self._pool._take()
        self._needs_replacement = True  # until the replay below has finished
        lost, replayed_into = await self._replay()
        # A replay that came out differently leaves its sandbox to be replaced by the next call
        self._needs_replacement = replayed_into
        if lost is not None:
            self._pool.stats.replays_failed += 1
        return lost

    async def _upload_all(self) -> None:
        for path, data in self._uploads.items():
            await self._inner.upload(path, data)

    async def _replay(self) -> tuple[str | None, bool]:
        """The uploads and the cells onto the fresh sandbox: None when the episode's state
        was rebuilt, else why not; and whether a replay that came out differently left
        the sandbox holding what it ran (the next call replaces it)."""
        sandbox = self._inner
        await self._upload_all()
        if self._cells and not self._pool.config.replay:
            return ("the sandbox was replaced and replay is switched off, so variables, imports and files you made "
                    "are gone"), False
        for code, timeout in self._cells:
            try:
                result = await sandbox.run(code, timeout)
            except SandboxInfraError as e:
                # The sandbox broke while running the agent's own cell again: whatever did
                # it, a cell that ran ok the first time and not now is not deterministic, and
                # trying more sandboxes cannot change that. Only getting a fresh sandbox
                # (below) can still fail as infrastructure.
                result = ExecResult(status="crash", error=f"the sandbox failed during replay: {e}")
            if result.status != "ok" or result.state_lost:
                log.warning("replay of a cell ended with %s; state is lost", result.status)
                # Nothing of the replay may remain, so the next call gets a fresh sandbox
                # (this one is retired, never reset), and this call's code is not run. A
                # fresh one is not waited for here: the replay may have spent the call's
                # time on the agent's own cells, and a wait past the call's deadline would
                # make a starved pool the agent's timeout, one within it a slow start the
                # infrastructure's. The next call takes one with a budget of its own.
                self._cells.clear()
                if hasattr(sandbox, "mark_anomaly"):
                    sandbox.mark_anomaly(f"a replay came out differently ({result.status})")
                return (f"the sandbox was replaced and re-running your earlier cells gave {result.status} "
                        "(they are not deterministic), so variables, imports and files you made are gone"), True
        return None, False


def requested_backend(backend: str | None = None) -> str:
    """The backend asked for: ``backend``, else ``AGENTGYM_SANDBOX``, else ``auto``; the one
    place that reads the variable and checks the name (nothing is probed here).

    Raises:
        SandboxConfigError: an unknown backend name.
    """
    choice = backend or os.environ.get("AGENTGYM_SANDBOX") or "auto"
    if choice not in typing.get_args(BackendName):
        raise SandboxConfigError(
            f"Expected backend 'auto', 'docker', 'process' or 'unsafe-process' (argument or "
            f"AGENTGYM_SANDBOX), actual value: {choice!r}"
        )
    return choice


def choose_backend(backend: BackendName | None = None, engine_urls: list[str] | None = None) -> str:
    """``docker``, ``process`` or ``unsafe-process``: the explicit choice, else
    ``AGENTGYM_SANDBOX``, else docker when an engine answers and process (confined by
    bubblewrap, with a warning that Docker is missing) when none does.

    Raises:
        EngineUnreachableError: docker was required but no engine answers.
        SandboxConfigError: an unknown backend name.
    """
    choice = requested_backend(backend)
    if choice in ("process", "unsafe-process"):
        return choice
    urls = engine_urls or [default_engine_url()]
    unreachable = [url for url in dict.fromkeys(urls) if not engine_reachable(url)]
    if choice == "docker" and unreachable:
        from sandboxes.engine import connect

        connect(unreachable[0], timeout=3.0)  # raises EngineUnreachableError with the fix
        raise EngineUnreachableError(f"no Docker engine at {unreachable[0]}")
    if unreachable:
        from sandboxes.process import SandboxIsolationWarning

        warnings.warn(
            f"No Docker engine answers at {', '.join(unreachable)}; using the process sandbox "
            "(bubblewrap namespaces instead of a container). Start Docker, or set "
            "AGENTGYM_SANDBOX=process to silence this warning (AGENTGYM_SANDBOX=docker to make "
            "it an error).",
            SandboxIsolationWarning,
            stacklevel=3,
        )
        return "process"
    return "docker"


def default_config() -> SandboxConfig:
    """The settings a pool gets when none are given: the defaults, with the OCI runtime
    from ``AGENTGYM_SANDBOX_RUNTIME`` (e.g. ``runsc``) when it is set."""
    return SandboxConfig(runtime=os.environ.get("AGENTGYM_SANDBOX_RUNTIME") or None)


def make_pool(
    backend: BackendName | None = None,
    *,
    config: SandboxConfig | None = None,
    pool: PoolConfig | None = None,
    engine_urls: list[str] | None = None,
    image: str | None = None,
) -> SandboxPool:
    """A :class:`SandboxPool` on the best available backend (see :func:`choose_backend`).

    The pool is not started; use ``async with make_pool() as pool`` or ``await pool.start()``.
    ``AGENTGYM_SANDBOX_RUNTIME`` (e.g. ``runsc`` for gVisor) sets the containers' OCI
    runtime when no ``config`` is given.
    """
    config = config or default_config()
    chosen = choose_backend(backend, engine_urls)
    if chosen == "docker":
        from sandboxes.docker import DockerBackend

        made: SandboxBackend = DockerBackend(config, engine_urls=engine_urls, image=image)
    else:
        from sandboxes.process import ProcessBackend

        unsafe = chosen == "unsafe-process"
        made = ProcessBackend(config, isolation="unsafe" if unsafe else "auto")
    return SandboxPool(made, pool)
