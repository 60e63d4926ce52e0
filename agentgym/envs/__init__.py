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

__all__ = ["EnvSpec", "ENVS", "RETIRED_IDS", "check_env_id", "check_env_kwargs", "register_all"]


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
    EnvSpec("agentgym/Search-v2", "agentgym.envs.search:SearchEnvV2", ("search", "open", "answer"),
            "1-4-hop questions whose hops count the documents needed (shortcut-audited), 3+ wordings per "
            "template, alias-aware scorer; hops=N"),
    EnvSpec("agentgym/SearchR1-v2", "agentgym.envs.search:SearchEnvV2", ("search", "answer"),
            "Search-v2 tasks with the Search-R1 tag prompt (<search>, <answer>)", {"parser": "tags"}),
    EnvSpec("agentgym/DataAnalysis-v1", "agentgym.envs.data_analysis:DataAnalysisEnv", ("python", "answer"),
            "pandas questions over bundled real tables, in a sandbox", needs="Docker (or the process fallback)"),
    EnvSpec("agentgym/DataAnalysis-v2", "agentgym.envs.data_analysis_v2:DataAnalysisV2Env", ("python", "answer"),
            "72 analysis templates (joins, chains, time series, schema questions); held-out test tables "
            "and templates", needs="Docker (or the process fallback)"),
    EnvSpec("agentgym/AnalysisReport-v0", "agentgym.envs.analysis_report:AnalysisReportEnv", ("python", "answer"),
            "open 'what drives X?' questions over DataAnalysis tables, a judged report gated by checked numbers",
            needs="Docker (or the process fallback); a judge model for real runs"),
)


RETIRED_IDS: dict[str, str] = {
    "agentgym/Search-v0": "agentgym/Search-v2",
    "agentgym/SearchR1-v0": "agentgym/SearchR1-v2",
    "agentgym/DataAnalysis-v0": "agentgym/DataAnalysis-v1",
}
"""Old ids and what replaced them. They are not registered: what they made cannot be made
any more (the questions were rebuilt), and an alias that quietly made the new version would
let a config written for the old data train on the new. ``gym.make`` of one raises
Gymnasium's ``DeprecatedEnv`` naming the new id; ``check_env_id`` (the CLI, configs) says
the same as a ``ConfigError``."""


def register_all() -> None:
    """Register every env (idempotent: a re-import does not warn about re-registration)."""
    for spec in ENVS:
        if spec.env_id not in gym.registry:
            gym.register(id=spec.env_id, entry_point=spec.entry_point, kwargs=dict(spec.kwargs),
                         disable_env_checker=False, order_enforce=True)
