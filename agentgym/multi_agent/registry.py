"""The multi-agent env registry and ``make``.

PettingZoo has no registry of its own, so this one mirrors Gymnasium's: ids of the form
``agentgym/Name-vN`` (the namespace may be left out), string entry points so importing
the package loads no data, and a miss that names the closest id.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.multi_agent.base import TeamEnv
from agentgym.multi_agent.errors import UnknownTeamEnvError

__all__ = ["MultiAgentEnvSpec", "MULTI_AGENT_ENVS", "RETIRED_IDS", "make", "register", "is_multi_agent_env", "spec"]

_NAMESPACE = "agentgym/"


@dataclass(frozen=True)
class MultiAgentEnvSpec:
    """What ``agentgym envs`` shows and ``make`` builds.

    ``entry_point`` is ``"module:attr"`` (loaded only when the env is made) or the env
    class (or any callable that builds one) itself, as in ``gymnasium.register``.
    """

    env_id: str
    entry_point: str | Callable[..., TeamEnv]
    tools: tuple[str, ...] = ()
    summary: str = ""
    roles: tuple[str, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[..., TeamEnv]:
        """The class (or callable) ``make`` calls."""
        if not isinstance(self.entry_point, str):
            return self.entry_point
        module, _, attr = self.entry_point.partition(":")
        return getattr(importlib.import_module(module), attr)


MULTI_AGENT_ENVS: list[MultiAgentEnvSpec] = [
    MultiAgentEnvSpec(
        "agentgym/SearchTeam-v1", "agentgym.envs.search_team:SearchTeamEnv",
        ("delegate", "answer", "search", "open", "report"),
        "Search-v1 questions by a planner and k searchers (num_searchers=2)", ("planner", "searcher"),
    ),
    MultiAgentEnvSpec(
        "agentgym/AnalysisReview-v1", "agentgym.envs.analysis_review:AnalysisReviewEnv",
        ("python", "propose", "accept", "reject"),
        "DataAnalysis-v1 questions by an analyst and a reviewer, each with a sandbox", ("analyst", "reviewer"),
    ),
]


RETIRED_IDS: dict[str, str] = {
    "agentgym/SearchTeam-v0": "agentgym/SearchTeam-v1",
    "agentgym/AnalysisReview-v0": "agentgym/AnalysisReview-v1",
}
"""Old ids and what replaced them; not made (as the single-agent ``agentgym.envs.RETIRED_IDS``):
asking for one is an error that names the new id."""


def _canonical(name: str) -> str:
    return name if "/" in name else _NAMESPACE + name  # another namespace ("myorg/...") stays


def spec(name: str) -> MultiAgentEnvSpec:
    """The spec registered under ``name`` (with or without the ``agentgym/`` namespace)."""
    env_id = _canonical(name)
    if env_id in RETIRED_IDS:
        raise UnknownTeamEnvError(f"{env_id} was retired: its tasks changed, so runs on it could not be matched. "
                                  f"Use {RETIRED_IDS[env_id]!r}.")
    for s in MULTI_AGENT_ENVS:
        if s.env_id == env_id:
            return s
    ids = [s.env_id for s in MULTI_AGENT_ENVS]
    close = difflib.get_close_matches(env_id, ids, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownTeamEnvError(f"Expected a multi-agent env id in {ids}, actual value: {name!r}.{hint}")


def is_multi_agent_env(name: str) -> bool:
    """Whether ``name`` is a registered multi-agent env (``agentgym run`` dispatches on it)."""
    env_id = _canonical(name)
    return any(s.env_id == env_id for s in MULTI_AGENT_ENVS)


def register(new: MultiAgentEnvSpec) -> None:
    """Add an env. Idempotent for an identical spec, and for the same class defined again
    (a module imported twice): the newer definition replaces the older. A different
    spec under a taken id raises."""
    for i, s in enumerate(MULTI_AGENT_ENVS):
        if s.env_id == new.env_id:
            if dataclasses.replace(s, entry_point=_entry_name(s.entry_point)) != \
                    dataclasses.replace(new, entry_point=_entry_name(new.entry_point)):
                raise ValueError(f"Expected a new id, actual value: {new.env_id!r} is registered to {s.entry_point}")
            MULTI_AGENT_ENVS[i] = new
            return
    MULTI_AGENT_ENVS.append(new)


def _entry_name(entry_point: str | Callable[..., TeamEnv]) -> str:
    if isinstance(entry_point, str):
        return entry_point
    return f"{getattr(entry_point, '__module__', '?')}:{getattr(entry_point, '__qualname__', repr(entry_point))}"


def make(name: str, **kwargs: Any) -> TeamEnv:
    """Build a registered multi-agent env: ``make("SearchTeam-v1", num_searchers=3)``."""
    s = spec(name)
    env = s.load()(**{**s.kwargs, **kwargs})
    env.registered_id = s.env_id  # what it is named (``env_id``), as gym.make sets ``spec``
    if not s.env_id.startswith(_NAMESPACE) and "name" in env.metadata:
        env.metadata = {**env.metadata, "name": s.env_id.partition("/")[2]}  # PettingZoo's name: no namespace
    return env
