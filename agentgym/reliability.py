"""The one reliability policy of agentgym: retries, backoff and deadlines.

Every retry in the project is a :func:`retrying` loop under a :class:`Budget` opened by
:func:`call_budget`; layers join the budget of the operation they run under, so their
attempts add up instead of multiplying. The implementation lives in
:mod:`sandboxes.reliability` (the lowest layer that retries, which may not import
agentgym); this module is its public name. See ``docs/reliability.md``.
"""

from sandboxes.reliability import (
    Budget,
    RetryPolicy,
    apolling,
    call_budget,
    call_with_retries,
    current_budget,
    polling,
    remaining_s,
    retrying,
)

__all__ = ["RetryPolicy", "Budget", "call_budget", "current_budget", "retrying", "call_with_retries", "remaining_s",
           "polling", "apolling"]
