"""The judges' errors.

A judge that cannot give a verdict is infrastructure, like a dead sandbox: the call is
retried and then the episode is ``infra_failed`` (dropped by the trainer), never scored
0 or 1. So :class:`JudgeUnavailable` *is* an :class:`agentgym.errors.InfraError`, and a
judge tool that lets it through gets the status contract for free. A judge refused at
opening (it disagrees with the calibration items) is a configuration problem: nothing
should be trained or evaluated on it.
"""

from __future__ import annotations

from agentgym.errors import AgentgymError, ConfigError, InfraError

__all__ = ["JudgeError", "JudgeUnavailable", "VerdictParseError", "JudgeRefused"]


class JudgeError(AgentgymError):
    """Base of every error the judges raise."""


class JudgeUnavailable(JudgeError, InfraError):
    """The judge gave no verdict: transport failure, timeout, server error. Retried, then
    the episode is ``infra_failed``."""


class VerdictParseError(JudgeUnavailable):
    """The judge replied, but not with a verdict that fits the schema. A verdict that
    cannot be parsed is a judge failure, never a score."""


class JudgeRefused(JudgeError, ConfigError):
    """The judge disagreed with the calibration items when it was opened; use another
    judge model or settings (the message lists the items it got wrong)."""
