"""Infrastructure fault injection through public seams.

A :class:`FaultPlan` says how often each fault happens (``kill=0.05,stall=0.02``); a
:class:`FaultInjector` makes it happen to live envs without touching their code:

* it wraps every tool the env builds through ``ToolEnv.tool_middleware`` (the env's class
  is untouched, the ``answer`` tool and the fingerprint are unchanged) and, at each tool
  call, draws the per-call faults;
* it kills the episode's sandbox (the env's TaskFamily holds it) with ``Sandbox.kill()``
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

from agentgym.env import ToolEnv
from agentgym.errors import ConfigError, InfraError
from agentgym.readiness.services import RetrieverProcess
from agentgym.resources import shared_resources
from agentgym.wrappers import env_attr
from agentgym.tools import Tool
from sandboxes import FaultyBackend, Sandbox, SandboxPool
from sandboxes.errors import SandboxClosedError

__all__ = ["FaultKind", "FAULT_KINDS", "FaultPlan", "FaultInjector", "find_sandbox", "find_pools",
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


def find_sandbox(env: Any) -> Sandbox | None:
    """The sandbox ``env``'s episode holds now (a pool lease), or None between episodes:
    asked of the env's :class:`~agentgym.family.TaskFamily` (its public ``sandbox``)."""
    try:
        family = env_attr(env, "family")
    except AttributeError:
        return None
    held = getattr(family, "sandbox", None)
    return held if isinstance(held, Sandbox) else None


def find_pools(env: Any) -> list[SandboxPool]:
    """The sandbox pools ``env``'s episodes may lease from: the pools of the process's
    owner of shared resources (:func:`agentgym.resources.shared_resources`)."""
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
        self._installed: weakref.WeakSet[ToolEnv] = weakref.WeakSet()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def injected(self) -> Counter[str]:
        """Faults injected so far, by kind (``create``: as counted by the faulty backends)."""
        counts = Counter(self._injected)
        counts["create"] += sum(faulty.injected for _, faulty in self._faulty)
        return +counts

    # ------------------------------------------------------------ installing
    def install(self, env: Any) -> None:
        """Wrap the tools ``env`` builds from now on (idempotent)."""
        base: ToolEnv = env.unwrapped
        if base in self._installed:
            return
        base.tool_middleware.append(lambda t: dataclasses.replace(t, fn=self._wrap(base, t)))
        self._installed.add(base)

    def faults_for(self, env: Any) -> int:
        """How many faults were injected into ``env``'s calls so far."""
        return self.per_env[id(env.unwrapped)]

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

    def _wrap(self, base: ToolEnv, tool: Tool) -> Any:
        fn = tool.fn

        async def faulty(**arguments: Any) -> str:
            self._ensure_create_fault(base)
            if self._draw("delay"):
                self._count("delay", base)
                await asyncio.sleep(self.plan.delay_s)
            if self._draw("infra"):
                self._count("infra", base)
                raise InjectedFault(f"injected infrastructure fault in {tool.name}")
            if self._draw("kill"):
                self._schedule_kill(base)
            if self.service is not None:
                if self._draw("stall"):
                    self._count("stall", base)
                    self.service.stall(self.rng.uniform(*self.plan.stall_s))
                if self._draw("stop"):
                    self._count("stop", base)
                    self._spawn(asyncio.to_thread(self.service.restart, self.plan.restart_down_s))
            return await fn(**arguments)

        return faulty

    def _count(self, kind: str, base: ToolEnv) -> None:
        self._injected[kind] += 1
        self.per_env[id(base)] += 1

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _schedule_kill(self, base: ToolEnv) -> None:
        sandbox = find_sandbox(base)
        if sandbox is None:
            self.missed["kill"] += 1
            return
        self._count("kill", base)

        async def later() -> None:
            await asyncio.sleep(self.rng.uniform(0.0, self.plan.kill_window_s))
            if not await asyncio.to_thread(kill_sandbox, sandbox):
                self.missed["kill"] += 1

        self._spawn(later())

    def _ensure_create_fault(self, base: ToolEnv) -> None:
        """Put a :class:`~sandboxes.FaultyBackend` in front of the backend of each pool the
        env leases from, once per pool; its seed is drawn here, so runs replay."""
        if self.plan.rate("create") <= 0:
            return
        for pool in find_pools(base):
            if any(p is pool for p, _ in self._faulty):
                continue
            faulty = FaultyBackend(pool.backend, rate=self.plan.rate("create"), seed=self.rng.getrandbits(32))
            pool.backend = faulty
            self._faulty.append((pool, faulty))
