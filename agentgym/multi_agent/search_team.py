"""Old import path of SearchTeam-v1, which now lives beside its family in
:mod:`agentgym.envs.search_team`; kept so existing imports keep working."""

from agentgym.envs.search_team import PLANNER, SearchTeamEnv

__all__ = ["SearchTeamEnv", "PLANNER"]
