"""Infrastructure fault injection through public seams.

A :class:`FaultPlan` says how often each fault happens (``kill=0.05,stall=0.02``); a
:class:`FaultInjector` makes it happen to live envs without touching their code:

* it wraps every tool the env builds through its public ``tool_middleware`` (a ``ToolEnv``'s
  or a ``TeamEnv``'s, found through any wrappers ``gym.make`` put around it; the env's
  class is untouched, the ``answer`` tool and the fingerprint are unchanged) and, at each
  tool call, draws the per-call faults;
* it kills an episode's sandbox (the env's TaskFamily holds it, or one of a team's
  families) with ``Sandbox.kill()``
  (the container removed, or the process group SIGKILLed; on a pool lease, whatever is
  under it now), and makes creation fail by putting a :class:`sandboxes.FaultyBackend` in
  front of the backend of the shared pools (:mod:`agentgym.resources`), taken away again
  in :meth:`FaultInjector.aclose`;
* it stalls (``SIGSTOP``/``SIGCONT``) or restarts a real retriever process
  (:class:`~agentgym.readiness.services.RetrieverProcess`).

Fault kinds (rates are per tool call, except ``create``, per sandbox creation):

========= =====================================================================
infra     the tool attempt raises ``InfraError`` before it runs
delay     the tool attempt is delayed by ``delay_s`` (a latency spike)
kill      the episode's sandbox is killed during the call (sandbox envs)
create    starting a sandbox fails (sandbox envs; the pool's retries face it)
stall     the retriever service stops answering for ``stall_s`` (search envs)
stop      the retriever service is killed and restarted (search envs)
========= =====================================================================
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from agentgym.errors import ConfigError, InfraError
from agentgym.readiness.services import RetrieverProcess
from agentgym.resources import shared_resources
from agentgym.wrappers import env_attr
from agentgym.tools import Tool
from sandboxes import FaultyBackend, Sandbox, SandboxPool
from sandboxes.errors import SandboxClosedError

__all__ = ["FaultKind", "FAULT_KINDS", "FaultPlan", "FaultInjector", "find_sandbox", "find_sandboxes", "find_pools",
           "kill_sandbox", "InjectedFault"]

log = logging.getLogger(__name__)

FaultKind = Literal["infra", "delay", "kill", "create", "stall", "stop"]
FAULT_KINDS: tuple[str, ...] = FaultKind.__args__  # type: ignore[attr-defined]
SANDBOX_FAULTS = frozenset({"kill", "create"})
SERVICE_FAULTS = frozenset({"stall", "stop"})


class InjectedFault(InfraError):
    """The infrastructure failure an ``infra`` fault raises inside a tool."""


@dataclass(frozen=True)
class FaultPlan:
    """Fault rates and their parameters.

    Attributes:
        rates: probability of each fault kind per tool call (``create``: per creation).
        delay_s: length of a ``delay`` fault.
        stall_s: a ``stall`` stops the service for a time drawn uniformly in this range.
        kill_window_s: a ``kill`` lands at a time drawn uniformly in ``[0, kill_window_s]``
            after the call starts, so some land mid-call and some just after.
        restart_down_s: how long a ``stop`` keeps the service down.
    """

    rates: dict[str, float] = field(default_factory=dict)
    delay_s: float = 0.2
    stall_s: tuple[float, float] = (0.5, 2.5)
    kill_window_s: float = 0.3
    restart_down_s: float = 0.5

    def __post_init__(self) -> None:
        for kind, rate in self.rates.items():
            if kind not in FAULT_KINDS:
                raise ConfigError(f"Expected fault kinds among {list(FAULT_KINDS)}, actual value: {kind!r}")
            if not 0.0 <= rate <= 1.0:
                raise ConfigError(f"Expected a fault rate in [0, 1] for {kind!r}, actual value: {rate}")

    @classmethod
    def parse(cls, spec: str) -> "FaultPlan":
        """``"kill=0.05,stall=0.02"`` -> a plan (empty text: no faults).

        >>> FaultPlan.parse("kill=0.05, infra=0.1").rates
        {'kill': 0.05, 'infra': 0.1}
        """
        rates: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            kind, sep, value = part.partition("=")
            try:
                rates[kind.strip()] = float(value) if sep else float("nan")
            except ValueError:
                rates[kind.strip()] = float("nan")
            if rates[kind.strip()] != rates[kind.strip()]:
                raise ConfigError(f"Expected faults as kind=rate pairs like 'kill=0.05,stall=0.02', actual value: {part!r}")
        return cls(rates)

    def rate(self, kind: str) -> float:
        return float(self.rates.get(kind, 0.0))

    @property
    def needs_service(self) -> bool:
        return any(self.rate(k) > 0 for k in SERVICE_FAULTS)

    @property
    def any(self) -> bool:
        return any(r > 0 for r in self.rates.values())


def find_sandboxes(env: Any) -> list[Sandbox]:
    """The sandboxes ``env``'s episode holds now (pool leases; none between episodes):
    asked of the env's :class:`~agentgym.family.TaskFamily` (a ``ToolEnv``'s ``family``)
    or families (a ``TeamEnv``'s ``families``), each through its public ``sandbox``."""
    families: list[Any] = []
    for name in ("family", "families"):
        try:
            held = env_attr(env, name)
        except AttributeError:
            continue
        families.extend(held.values() if isinstance(held, dict) else [held])
    sandboxes = [getattr(f, "sandbox", None) for f in families]
    return list({id(s): s for s in sandboxes if isinstance(s, Sandbox)}.values())


def find_sandbox(env: Any) -> Sandbox | None:
    """The (first) sandbox ``env``'s episode holds now, or None between episodes."""
    held = find_sandboxes(env)
    return held[0] if held else None


def find_pools(env: Any = None) -> list[SandboxPool]:
    """The sandbox pools any env's episodes may lease from (``env`` is not needed): the
    pools of the process's owner of shared resources (:func:`agentgym.resources.shared_resources`)."""
    return [p for p in shared_resources().pools() if isinstance(p, SandboxPool)]


def kill_sandbox(sandbox: object) -> bool:
    """Kill ``sandbox`` from outside with ``Sandbox.kill()``; True if something was hit.

    False for anything that is not a sandbox, a lease released meanwhile, and a sandbox
    that cannot be killed from outside. Blocking: call it through ``asyncio.to_thread``.
    """
    if not isinstance(sandbox, Sandbox):
        return False
    try:
        sandbox.kill()
    except (SandboxClosedError, NotImplementedError):
        return False
    return True


class FaultInjector:
    """Injects the faults of ``plan`` into the envs it is installed on.

    Args:
        plan: fault rates.
        seed: seeds the fault draws.
        service: the retriever process that ``stall``/``stop`` act on.
    """

    def __init__(self, plan: FaultPlan, seed: int = 0, service: RetrieverProcess | None = None) -> None:
        self.plan = plan
        self.service = service
        self.rng = random.Random(seed)
        self.missed: Counter[str] = Counter()
        self.per_env: Counter[int] = Counter()
        self._injected: Counter[str] = Counter()
        self._faulty: list[tuple[SandboxPool, FaultyBackend]] = []
        self._installed: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def injected(self) -> Counter[str]:
        """Faults injected so far, by kind (``create``: as counted by the faulty backends)."""
        counts = Counter(self._injected)
        counts["create"] += sum(faulty.injected for _, faulty in self._faulty)
        return +counts

    # ------------------------------------------------------------ installing
    def install(self, env: Any) -> None:
        """Wrap the tools ``env`` (a ``ToolEnv`` or ``TeamEnv``, wrapped or not) builds from
        now on (idempotent, also for the env under a wrapper it was installed on)."""
        key = _env_key(env)
        if key in self._installed:
            return
        env_attr(env, "tool_middleware").append(lambda t: dataclasses.replace(t, fn=self._wrap(env, key, t)))
        self._installed[key] = env_attr(env, "telemetry")  # lives as long as the env

    def faults_for(self, env: Any) -> int:
        """How many faults were injected into ``env``'s calls so far."""
        return self.per_env[_env_key(env)]

    async def aclose(self) -> None:
        """Give pools their own backends back and wait for pending kills."""
        for pool, faulty in self._faulty:
            self._injected["create"] += faulty.injected
            if pool.backend is faulty:
                pool.backend = faulty.inner
        self._faulty.clear()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # ------------------------------------------------------------ per call
    def _draw(self, kind: str) -> bool:
        rate = self.plan.rate(kind)
        return rate > 0 and self.rng.random() < rate

    def _wrap(self, env: Any, key: int, tool: Tool) -> Any:
        fn = tool.fn

        async def faulty(**arguments: Any) -> str:
            self._ensure_create_fault()
            if self._draw("delay"):
                self._count("delay", key)
                await asyncio.sleep(self.plan.delay_s)
            if self._draw("infra"):
                self._count("infra", key)
                raise InjectedFault(f"injected infrastructure fault in {tool.name}")
            if self._draw("kill"):
                self._schedule_kill(env, key)
            if self.service is not None:
                if self._draw("stall"):
                    self._count("stall", key)
                    self.service.stall(self.rng.uniform(*self.plan.stall_s))
                if self._draw("stop"):
                    self._count("stop", key)
                    self._spawn(asyncio.to_thread(self.service.restart, self.plan.restart_down_s))
            return await fn(**arguments)

        return faulty

    def _count(self, kind: str, key: int) -> None:
        self._injected[kind] += 1
        self.per_env[key] += 1

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _schedule_kill(self, env: Any, key: int) -> None:
        held = find_sandboxes(env)
        if not held:
            self.missed["kill"] += 1
            return
        sandbox = held[self.rng.randrange(len(held))]  # in a team: any seat's
        self._count("kill", key)

        async def later() -> None:
            await asyncio.sleep(self.rng.uniform(0.0, self.plan.kill_window_s))
            if not await asyncio.to_thread(kill_sandbox, sandbox):
                self.missed["kill"] += 1

        self._spawn(later())

    def _ensure_create_fault(self) -> None:
        """Put a :class:`~sandboxes.FaultyBackend` in front of the backend of each shared
        pool, once per pool; its seed is drawn here, so runs replay."""
        if self.plan.rate("create") <= 0:
            return
        for pool in find_pools():
            if any(p is pool for p, _ in self._faulty):
                continue
            faulty = FaultyBackend(pool.backend, rate=self.plan.rate("create"), seed=self.rng.getrandbits(32))
            pool.backend = faulty
            self._faulty.append((pool, faulty))


def _env_key(env: Any) -> int:
    """One key per env under any wrappers: the identity of its ``tool_middleware`` list."""
    return id(env_attr(env, "tool_middleware"))
