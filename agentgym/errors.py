"""The agentgym error hierarchy.

Two families matter to a trainer:

* :class:`AgentError` and :class:`InfraError` are raised *by tools* to classify a failed
  call. The executor turns them into a result status (``agent_error`` is shown to the agent
  and never retried; ``infra_error`` is retried and, when the retries run out, flags the
  episode as ``infra_failed`` so the learner never sees a fake zero reward).
* :class:`AgentgymError` subclasses raised *to the caller* mean the caller used the API
  wrongly (stepping a finished episode, an unknown reset option, a bad config).
"""

from __future__ import annotations

__all__ = [
    "AgentgymError",
    "ToolFailure",
    "AgentError",
    "InfraError",
    "ToolTimeout",
    "EpisodeFinishedError",
    "ResetNeededError",
    "InvalidOptionError",
    "ConfigError",
]


class AgentgymError(Exception):
    """Base class of every error agentgym raises on purpose."""


class ToolFailure(AgentgymError):
    """Base of the exceptions a tool raises to classify a failed call."""


class AgentError(ToolFailure):
    """The agent caused the failure (bad id, code error, impossible request).

    The message is shown to the agent verbatim, so write it as an instruction:
    what was wrong and what to do instead.
    """


class InfraError(ToolFailure, RuntimeError):
    """The tool's infrastructure failed (sandbox died, service down, transport error).

    Retried with backoff; never blamed on the agent.
    """


class ToolTimeout(ToolFailure, TimeoutError):
    """The agent's work ran past a deadline the tool enforces itself (e.g. sandbox code).

    Counted as status ``timeout`` (never retried); the message is shown to the agent.
    """


class EpisodeFinishedError(AgentgymError, RuntimeError):
    """``step`` was called after the episode ended; call ``reset`` first."""


class ResetNeededError(AgentgymError, RuntimeError):
    """``step`` was called before the first ``reset``."""


class InvalidOptionError(AgentgymError, ValueError):
    """``reset`` received an option the env does not understand."""


class ConfigError(AgentgymError, ValueError):
    """A constructor argument or config value is out of range."""
