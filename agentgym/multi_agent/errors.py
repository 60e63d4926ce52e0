"""Errors of the multi-agent package; both subclass the agentgym base and a builtin."""

from __future__ import annotations

from agentgym.errors import AgentgymError

__all__ = ["UnknownAgentError", "UnknownTeamEnvError"]


class UnknownAgentError(AgentgymError, KeyError):
    """``step`` received an action for an agent id the env does not have."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownTeamEnvError(AgentgymError, KeyError):
    """``agentgym.multi_agent.make`` was given a name that is not registered."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
