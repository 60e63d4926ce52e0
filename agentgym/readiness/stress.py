"""``agentgym stress``: many episodes under load, adversarial actions and injected faults.

The oracle plays every episode; each turn is replaced by an adversarial action with
probability ``adversarial`` (:mod:`agentgym.readiness.adversarial`), and the tools suffer
the faults of a :class:`~agentgym.readiness.faults.FaultPlan`. The guarantees checked
(each one a reason to refuse to start a training run):

* **no lost episodes** — every episode ends with an observation, or is *flagged*
  ``infra_failed``; nothing raises out of ``reset``/``step`` but ``InfraError`` at reset,
  and nothing hangs past ``episode_timeout_s``;
* **no silent failures** — an episode the oracle played without adversarial turns that
  is not flagged must be solved: an infrastructure fault may cost an episode, never
  turn into a wrong reward the learner would see;
* **no leaked containers** — this process owns no more ``agentgym.owner`` containers
  after the run (and its pools are closed) than before;
* **agent faults are not infra faults** — with no fault injected into an episode, an
  adversarial action never yields ``infra_error`` (else a policy could have its bad
  episodes dropped instead of scored).
"""

from __future__ import annotations

import asyncio
import re
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from agentgym.errors import ConfigError, InfraError
from agentgym.readiness.adversarial import (
    BOUNDARY_ATTACKS,
    CANARY,
    AdversarialAction,
    MixedPolicy,
    adversarial_actions,
)
from agentgym.readiness.containers import ContainerCount, count_containers, wait_for_containers
from agentgym.readiness.faults import FaultInjector, FaultPlan
from agentgym.readiness.lifecycle import aclose_shared_resources
from agentgym.readiness.services import RetrieverProcess
from agentgym.runner import drain_episodes
from agentgym.runtime import run_sync
from agentgym.wrappers import areset, astep, env_attr
from agentgym.telemetry import Telemetry

__all__ = ["StressConfig", "EpisodeOutcome", "Guarantee", "StressReport", "run_stress", "UNBOUNDED_PROCESS_ACTIONS"]

UNBOUNDED_PROCESS_ACTIONS = frozenset({"fork_bomb", "thread_bomb", *BOUNDARY_ATTACKS})
"""Dropped when agent code runs unconfined (``AGENTGYM_SANDBOX=unsafe-process``): nothing
bounds its processes there, and there is no trust boundary for the attacks in
:data:`BOUNDARY_ATTACKS` to test. Docker and the bubblewrap process backend get them all."""
_LEAKS_LINE = re.compile(r"LEAKS \[(.*?)\]")


@dataclass(frozen=True)
class StressConfig:
    """What to run. ``env_kwargs`` go to ``gym.make``; with ``stall``/``stop`` faults the
    harness starts a retriever process and adds ``retriever_url`` (and a 1 s client
    timeout unless given) for envs that accept them."""

    env_id: str
    episodes: int = 200
    concurrency: int = 32
    faults: FaultPlan = field(default_factory=FaultPlan)
    adversarial: float = 0.3
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    episode_timeout_s: float = 300.0
    exclude_actions: frozenset[str] | None = None
    """Adversarial actions to drop; None drops :data:`UNBOUNDED_PROCESS_ACTIONS` unless
    the sandbox backend is Docker."""
    check_containers: bool = True
    container_grace_s: float = 30.0

    def __post_init__(self) -> None:
        if self.episodes < 1 or self.concurrency < 1:
            raise ConfigError(f"Expected episodes >= 1 and concurrency >= 1, actual values: "
                              f"{self.episodes}, {self.concurrency}")
        if not 0.0 <= self.adversarial <= 1.0:
            raise ConfigError(f"Expected --adversarial in [0, 1], actual value: {self.adversarial}")
        if self.episode_timeout_s <= 0:
            raise ConfigError(f"Expected episode_timeout_s > 0, actual value: {self.episode_timeout_s}")


@dataclass(frozen=True)
class EpisodeOutcome:
    """How one episode ended."""

    index: int
    task_id: str | None
    reward: float
    terminated: bool
    truncated: bool
    infra_failed: bool
    reset_failed: bool
    turns: int
    adversarial_turns: int
    faults: int
    oracle_errors: int = 0
    shared_faults: bool = False
    """Faults were injected into a service every episode shares (the retriever process):
    one may have hit this episode though none was injected into its own env."""

    @property
    def clean(self) -> bool:
        """Played by the oracle alone (faults may still have hit it)."""
        return self.adversarial_turns == 0 and self.oracle_errors == 0

    @property
    def silent_failure(self) -> bool:
        return self.clean and not self.infra_failed and not self.reset_failed and self.reward < 1.0


@dataclass(frozen=True)
class Guarantee:
    name: str
    value: int | None
    ok: bool
    detail: str


@dataclass
class StressReport:
    """Everything ``agentgym stress`` prints; :attr:`passed` gates a training job."""

    config: StressConfig
    outcomes: list[EpisodeOutcome] = field(default_factory=list)
    lost: list[tuple[int, str]] = field(default_factory=list)
    telemetry: Telemetry = field(default_factory=Telemetry)
    adversarial: Counter[tuple[str, str]] = field(default_factory=Counter)
    misclassified: list[str] = field(default_factory=list)
    faults_injected: dict[str, int] = field(default_factory=dict)
    faults_missed: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    containers_before: ContainerCount | None = None
    containers_after: ContainerCount | None = None
    fingerprint: str = ""
    notes: list[str] = field(default_factory=list)
    attack_uses: Counter[str] = field(default_factory=Counter)
    """Trust-boundary attacks sent, by name."""
    infra_after_attack: Counter[str] = field(default_factory=Counter)
    """Fault-free episodes that ended infra-failed after this adversarial action."""
    leaks: list[tuple[int, str]] = field(default_factory=list)
    """(probing episode, what it found) for every canary of another episode."""
    probes: int = 0

    @property
    def completed(self) -> int:
        return len(self.outcomes)

    @property
    def infra_failed(self) -> int:
        return sum(o.infra_failed or o.reset_failed for o in self.outcomes)

    @property
    def episodes_per_s(self) -> float:
        return self.completed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def leaked_containers(self) -> int | None:
        if self.containers_before is None or self.containers_after is None:
            return None
        return max(0, self.containers_after.mine - self.containers_before.mine)

    def guarantees(self) -> list[Guarantee]:
        silent = [o for o in self.outcomes if o.silent_failure]
        leaked = self.leaked_containers
        accounted = self.completed + len(self.lost)
        return [
            Guarantee("lost episodes", len(self.lost), not self.lost,
                      "every episode ends or is flagged infra_failed"),
            Guarantee("accounted episodes", accounted, accounted == self.config.episodes,
                      f"{accounted} of {self.config.episodes} episodes reported"),
            Guarantee("silent failures", len(silent), not silent,
                      "clean oracle episodes that were neither solved nor flagged"
                      + (f" (e.g. {silent[0].task_id}, reward {silent[0].reward})" if silent else "")),
            Guarantee("leaked containers", leaked, leaked in (None, 0),
                      "no Docker engine: not checked" if leaked is None else
                      f"owned before {self.containers_before.mine}, after {self.containers_after.mine}"),  # type: ignore[union-attr]
            Guarantee("agent faults reported as infra", len(self.misclassified), not self.misclassified,
                      "adversarial actions in fault-free episodes must not give infra_error"
                      + (f" (e.g. {self.misclassified[0]})" if self.misclassified else "")),
            Guarantee("infra-failed episodes caused by agent actions", self.agent_caused_infra,
                      not self.agent_caused_infra,
                      "fault-free episodes with adversarial actions must never end infra_failed"
                      + (f" ({dict(self.infra_after_attack)})" if self.agent_caused_infra else "")),
            Guarantee("cross-episode leaks", len(self.leaks), not self.leaks,
                      f"{self.probes} probes for what earlier episodes planted"
                      + (f" (e.g. episode {self.leaks[0][0]} found {self.leaks[0][1]})" if self.leaks else "")),
        ]

    @property
    def agent_caused_infra(self) -> int:
        """Infra-failed episodes with adversarial turns and no fault that could explain it:
        none in their own env, none in a shared service (the same rule as
        ``infra_after_attack``; a stalled retriever can fail any concurrent episode)."""
        return sum(1 for o in self.outcomes
                   if o.infra_failed and not o.reset_failed and o.adversarial_turns and not o.faults and not o.shared_faults)

    def boundary_table(self) -> dict[str, dict[str, int]]:
        """Per trust-boundary attack: uses, infra-failed episodes after it, leaks it caused."""
        leaked_by: Counter[str] = Counter()
        for _, found in self.leaks:
            leaked_by["plant_ipc" if found.startswith("sysv-") else "plant_files"] += 1
        names = sorted(set(self.attack_uses) | set(self.infra_after_attack))
        return {name: {"uses": self.attack_uses[name], "infra_failed_episodes": self.infra_after_attack[name],
                       "cross_episode_leaks": leaked_by[name.split(":")[-1]]} for name in names}

    @property
    def passed(self) -> bool:
        return all(g.ok for g in self.guarantees())

    def summary(self) -> dict[str, Any]:
        clean = [o for o in self.outcomes if o.clean and not (o.infra_failed or o.reset_failed)]
        return {
            "env": self.config.env_id, "fingerprint": self.fingerprint, "episodes": self.config.episodes,
            "concurrency": self.config.concurrency, "faults": dict(self.config.faults.rates),
            "adversarial_rate": self.config.adversarial, "completed": self.completed,
            "infra_failed": self.infra_failed, "lost": len(self.lost),
            "clean_success_rate": sum(o.reward >= 1 for o in clean) / len(clean) if clean else None,
            "adversarial_turns": sum(o.adversarial_turns for o in self.outcomes),
            "oracle_errors": sum(o.oracle_errors for o in self.outcomes),
            "truncated": sum(o.truncated for o in self.outcomes),
            "faults_injected": dict(self.faults_injected), "faults_missed": dict(self.faults_missed),
            "leaked_containers": self.leaked_containers, "elapsed_s": self.elapsed_s,
            "episodes_per_s": self.episodes_per_s, "passed": self.passed,
        }

    def to_dict(self) -> dict[str, Any]:
        adv: dict[str, dict[str, int]] = {}
        for (name, status), n in sorted(self.adversarial.items()):
            adv.setdefault(name, {})[status] = n
        return {**self.summary(),
                "guarantees": [g.__dict__ for g in self.guarantees()],
                "telemetry": self.telemetry.metrics(),
                "adversarial_actions": adv,
                "lost_tracebacks": [{"episode": i, "traceback": tb} for i, tb in self.lost[:5]],
                "misclassified": self.misclassified[:20],
                "trust_boundary": self.boundary_table(),
                "leaks": self.leaks[:20],
                "notes": list(self.notes)}


# ---------------------------------------------------------------------------- running
def _accepts(env_id: str, name: str) -> bool:
    from agentgym.envs.validation import env_kwargs_of

    return name in env_kwargs_of(env_id)  # the env's own kwargs and its family's


def _sandbox_is_confined(env_kwargs: dict[str, Any]) -> bool:
    """Docker, or the process backend under bubblewrap; not the unsafe opt-in."""
    try:
        from sandboxes.pool import choose_backend
        from sandboxes.process import isolation_support

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            backend = choose_backend(env_kwargs.get("backend"))
        return backend == "docker" or (backend == "process" and isolation_support().bwrap is not None)
    except Exception:  # noqa: BLE001 - no sandboxes or no engine: treat as unconfined
        return False


def run_stress(config: StressConfig) -> StressReport:
    """Run the stress test and return its report (see :attr:`StressReport.passed`)."""
    before = count_containers() if config.check_containers else None
    env_kwargs = dict(config.env_kwargs)
    service: RetrieverProcess | None = None
    notes: list[str] = []
    if config.faults.needs_service:
        if _accepts(config.env_id, "retriever_url"):
            service = RetrieverProcess().start()
            env_kwargs.setdefault("retriever_url", service.url)
            env_kwargs.setdefault("retriever_timeout_s", 1.0)
        else:
            notes.append(f"stall/stop faults need a retriever service; {config.env_id} uses none, so they were not injected")
    exclude = config.exclude_actions
    if exclude is None:
        exclude = frozenset() if _sandbox_is_confined(env_kwargs) else UNBOUNDED_PROCESS_ACTIONS
    try:
        report = run_sync(_arun(config, env_kwargs, service, exclude))
    finally:
        if service is not None:
            report_service = (service.stalls, service.restarts)
            service.close()
    if service is not None:
        notes.append(f"retriever process: {report_service[0]} stalls, {report_service[1]} restarts")
    if exclude:
        notes.append(f"adversarial actions left out: {sorted(exclude)}")
    report.notes.extend(notes)
    report.containers_before = before
    if before is not None:
        report.containers_after = wait_for_containers(before.mine, config.container_grace_s)
    return report


async def _arun(config: StressConfig, env_kwargs: dict[str, Any], service: RetrieverProcess | None,
                exclude: frozenset[str]) -> StressReport:
    injector = FaultInjector(config.faults, seed=config.seed, service=service)
    n_envs = min(config.concurrency, config.episodes)
    envs = [gym.make(config.env_id, **env_kwargs) for _ in range(n_envs)]
    for env in envs:
        injector.install(env)
    report = StressReport(config)
    mixed: MixedPolicy | None = None
    global_faults = config.faults.needs_service and service is not None
    retired: list[Any] = []

    def replace_hung(env: Any) -> Any:
        retired.append(env)
        fresh = gym.make(config.env_id, **env_kwargs)
        injector.install(fresh)
        envs.append(fresh)
        return fresh

    def _mixed(info: dict[str, Any], env: Any) -> MixedPolicy:
        nonlocal mixed
        if mixed is None:
            actions = adversarial_actions(info["tools"], env_attr(env, "parser").name,
                                          max_action_chars=env_attr(env, "max_action_chars"), exclude=exclude)
            mixed = MixedPolicy(actions, config.adversarial)
        return mixed

    def run_one(env: Any, i: int) -> Any:
        return _episode(env, i, config, lambda info: _mixed(info, env), injector, report, global_faults)

    start = time.perf_counter()
    try:
        outcomes, lost = await drain_episodes(list(envs), config.episodes, run_one,
                                              timeout_s=config.episode_timeout_s, replace=replace_hung)
        report.outcomes.extend(outcomes)
        report.lost.extend(lost)
    finally:
        report.elapsed_s = time.perf_counter() - start
        for env in [*envs, *retired]:
            try:
                await asyncio.wait_for(env_attr(env, "aclose")(), 60)  # the harness owns these envs
            except Exception as e:  # noqa: BLE001
                report.notes.append(f"releasing an env failed: {type(e).__name__}: {e}")
        await injector.aclose()
        problem = await aclose_shared_resources()
        if problem:
            report.notes.append(problem)
        for env in [*envs, *retired]:
            env.close()
    report.outcomes.sort(key=lambda o: o.index)
    report.telemetry = Telemetry.merged(env_attr(e, "telemetry") for e in [*envs, *retired])
    report.faults_injected = dict(injector.injected)
    report.faults_missed = dict(injector.missed)
    report.fingerprint = str(env_attr(envs[0], "fingerprint"))
    return report


async def _episode(env: Any, index: int, config: StressConfig, policy_for: Any, injector: FaultInjector,
                   report: StressReport, global_faults: bool) -> EpisodeOutcome:
    rng = np.random.default_rng([config.seed, index, 0x5EED])
    faults_at_start = injector.faults_for(env)
    try:
        obs, info = await areset(env, seed=config.seed + index)
    except InfraError:
        return EpisodeOutcome(index, None, 0.0, False, False, True, True, 0, 0,
                              injector.faults_for(env) - faults_at_start)
    mixed: MixedPolicy = policy_for(info)
    adversarial_turns = oracle_errors = 0
    used: set[str] = set()
    probe = next((a for a in mixed.actions if a.name.endswith(":probe_leaks")), None)
    first_turn = True
    while True:
        action: AdversarialAction | None = mixed.choose(rng)
        probing = first_turn and probe is not None and mixed.rate > 0 and rng.random() < mixed.rate
        if probing:
            action = probe  # at the start, anything found was left by another episode
        first_turn = False
        text = action.text.replace(CANARY, f"agentgym-canary-E{index}") if action is not None else None
        if text is None:
            try:
                text = env_attr(env, "oracle_action")()
            except Exception:  # noqa: BLE001 - the oracle lost its footing after adversarial turns
                oracle_errors += 1
                text = "Let me start over."  # no tool call: the oracle starts afresh next turn
        obs, reward, terminated, truncated, info = await astep(env, text)
        if action is not None:
            adversarial_turns += 1
            used.add(action.name)
            if action.category == "trust_boundary":
                report.attack_uses[action.name] += 1
            if probing:
                report.probes += 1
                report.leaks.extend((index, found) for found in _foreign_canaries(obs, index))
            _record_adversarial(report, action, info, injector.faults_for(env) == faults_at_start and not global_faults)
        if terminated or truncated:
            faults = injector.faults_for(env) - faults_at_start
            if info.get("infra_failed") and not faults and not global_faults:
                for name in sorted(used):  # a set: the report's order must not follow the hash seed
                    report.infra_after_attack[name] += 1
            return EpisodeOutcome(index, info.get("task_id"), float(reward), bool(terminated), bool(truncated),
                                  bool(info.get("infra_failed")), False, int(info.get("turns", 0)),
                                  adversarial_turns, faults, oracle_errors, shared_faults=global_faults)


def _foreign_canaries(observation: str, index: int) -> list[str]:
    """What a leak probe found that this episode did not put there itself."""
    match = _LEAKS_LINE.search(observation)
    if match is None:
        return []
    found = [item.strip().strip("'\"") for item in match.group(1).split(",") if item.strip()]
    return [f for f in found if f != str(index)]


def _record_adversarial(report: StressReport, action: AdversarialAction, info: dict[str, Any], fault_free: bool) -> None:
    results = info.get("tool_results") or []
    statuses = [r["status"] for r in results] or ["no_call"]
    for status in statuses:
        report.adversarial[(action.name, status)] += 1
    if fault_free and "infra_error" in statuses:
        report.misclassified.append(f"{action.name} -> infra_error ({info.get('task_id')})")
