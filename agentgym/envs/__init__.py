"""Registration of agentgym's environments with Gymnasium.

Ids follow ``agentgym/<Name>-v<N>``; difficulty and split are kwargs, never id suffixes.
Entry points are strings so ``import agentgym`` stays cheap: an env's module (and its data)
loads only when the env is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentgym.envs.validation import check_env_id, check_env_kwargs

__all__ = ["EnvSpec", "ENVS", "LEGACY_IDS", "check_env_id", "check_env_kwargs", "register_all"]


@dataclass(frozen=True)
class EnvSpec:
    """What ``agentgym envs`` shows and ``gymnasium.register`` receives."""

    env_id: str
    entry_point: str
    tools: tuple[str, ...]
    summary: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    needs: str = ""


ENVS: tuple[EnvSpec, ...] = (
    EnvSpec("agentgym/Calculator-v0", "agentgym.envs.calculator:CalculatorEnv", ("calculate", "answer"),
            "arithmetic word problems, difficulty 1-3"),
    EnvSpec("agentgym/Search-v1", "agentgym.envs.search:SearchEnv", ("search", "open", "answer"),
            "1-4-hop questions over a bundled Wikipedia corpus (BM25 or a retriever service); hops=N"),
    EnvSpec("agentgym/SearchR1-v1", "agentgym.envs.search:SearchEnv", ("search", "answer"),
            "Search-v1 tasks with the Search-R1 tag prompt (<search>, <answer>)", {"parser": "tags"}),
    EnvSpec("agentgym/DataAnalysis-v1", "agentgym.envs.data_analysis:DataAnalysisEnv", ("python", "answer"),
            "pandas questions over bundled real tables, in a sandbox", needs="Docker (or the process fallback)"),
)


LEGACY_IDS: dict[str, str] = {"agentgym/Search-v0": "agentgym/Search-v1", "agentgym/SearchR1-v0": "agentgym/SearchR1-v1"}
"""Old ids that still make the current version while code and configs move over. What they
make is the new version, and its fingerprint says so (``env``, ``dataset_builder``), so a run
on an old id never matches one recorded on the old data."""


def register_all() -> None:
    """Register every env (idempotent: a re-import does not warn about re-registration)."""
    current = {spec.env_id: spec for spec in ENVS}
    for old, new in LEGACY_IDS.items():
        if old not in gym.registry:
            spec = current[new]
            gym.register(id=old, entry_point=spec.entry_point, kwargs=dict(spec.kwargs),
                         disable_env_checker=False, order_enforce=True)
    for spec in ENVS:
        if spec.env_id not in gym.registry:
            gym.register(id=spec.env_id, entry_point=spec.entry_point, kwargs=dict(spec.kwargs),
                         disable_env_checker=False, order_enforce=True)
