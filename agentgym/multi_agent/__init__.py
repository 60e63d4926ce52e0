"""Multi-agent environments: PettingZoo ``ParallelEnv`` teams of tool-using text agents.

A ``TeamEnv`` is team rules over a :class:`~agentgym.TaskFamily`, with every seat's turns
taken by the same turn engine as ``ToolEnv`` (``agentgym.turns``), so a team episode has
the same guarantees: every tool call has a status, infrastructure failures flag the
episode instead of faking a zero reward, and the fingerprint covers every role's tools
and prompts. ``ReviewTeamEnv`` puts any family in a solver-and-reviewer team; the
registered team envs live beside their families (``agentgym.envs.search_team``,
``agentgym.envs.analysis_review``).

>>> from agentgym import multi_agent
>>> env = multi_agent.make("SearchTeam-v1", num_searchers=2)
>>> env.possible_agents
['planner', 'searcher_0', 'searcher_1']
"""

from agentgym.multi_agent.base import EndReason, TeamEnv
from agentgym.multi_agent.errors import UnknownAgentError, UnknownTeamEnvError
from agentgym.multi_agent.policies import TeamPolicy, get_team_policy, oracle_team_policy, random_team_policy
from agentgym.multi_agent.registry import (
    RETIRED_IDS,
    MULTI_AGENT_ENVS,
    MultiAgentEnvSpec,
    is_multi_agent_env,
    make,
    register,
    spec,
)
from agentgym.multi_agent.review import Proposal, ReviewTeamEnv
from agentgym.multi_agent.runner import arun_team_episodes, run_team_episode, run_team_episodes

__all__ = [
    "RETIRED_IDS", "MULTI_AGENT_ENVS", "EndReason", "MultiAgentEnvSpec", "Proposal", "ReviewTeamEnv", "TeamEnv", "TeamPolicy",
    "UnknownAgentError",
    "UnknownTeamEnvError", "arun_team_episodes", "get_team_policy", "is_multi_agent_env", "make",
    "oracle_team_policy", "random_team_policy", "register", "run_team_episode", "run_team_episodes", "spec",
]
