"""One error hierarchy for the sandboxes package.

Every class subclasses both :class:`SandboxError` and the matching builtin, so callers
can catch either (``except SandboxInfraError`` or ``except ConnectionError``).

The split that matters to an environment is *agent* versus *infrastructure*: what the
agent's code does (raises, loops, eats memory) comes back as an :class:`ExecResult`
status and is never an exception. Exceptions are for the machinery failing; anything
that survives the pool's retries is a :class:`SandboxInfraError`, which an env maps to
the ``infra_error`` tool status.
"""

from __future__ import annotations

__all__ = [
    "SandboxError",
    "SandboxInfraError",
    "EngineUnreachableError",
    "SandboxTransportError",
    "SandboxCrashedError",
    "InjectedFaultError",
    "SandboxClosedError",
    "ImageBuildError",
    "SandboxConfigError",
]


class SandboxError(Exception):
    """Base class of every error raised by :mod:`sandboxes`."""


class SandboxInfraError(SandboxError, RuntimeError):
    """The sandbox machinery failed (not the agent's code); retrying may help.

    Raised by the pool once its own retries are exhausted. Environments map it to the
    ``infra_error`` tool status and flag the episode instead of scoring it.
    """


class EngineUnreachableError(SandboxInfraError, ConnectionError):
    """No Docker engine answered at the configured URL.

    Start the engine (``dockerd`` or ``systemctl start docker``), point ``DOCKER_HOST``
    or the pool's ``engine_urls`` at it, or set ``AGENTGYM_SANDBOX=process`` to use the
    weaker local-process sandbox instead.
    """


class SandboxTransportError(SandboxInfraError, ConnectionError):
    """The host could not talk to the in-sandbox supervisor (socket closed, bad frame,
    no answer before the outer deadline)."""


class SandboxCrashedError(SandboxInfraError):
    """The sandbox (container or supervisor process) died and cannot serve requests."""


class SandboxMemoryKilledError(SandboxCrashedError):
    """The sandbox died because its memory limit was reached: the kernel's OOM killer
    took the machinery (supervisor, zygote) because agent processes had filled the
    sandbox with memory no process owns (socket buffers). The agent's doing, not the
    infrastructure's: :meth:`SupervisedSandbox.run` turns it into an ``oom`` result, and a
    pool's lease replaces the sandbox with nothing replayed when any other call finds it."""

    reason = ("your processes filled the sandbox's memory (memory no process owns, such as socket buffers, "
              "counts too) and the sandbox was ended")
    """What the agent is told it lost, and why."""


class InjectedFaultError(SandboxInfraError):
    """A failure made on purpose by :class:`~sandboxes.faulty.FaultyBackend`: the same
    class of error as a real one (so every retry path treats it alike), but recognisable
    in tests and reports."""


class SandboxClosedError(SandboxError, RuntimeError):
    """The sandbox or pool was used after ``close()``; acquire a new one."""


class ImageBuildError(SandboxError, RuntimeError):
    """Building the sandbox image failed; the message names the failing step and log."""


class SandboxConfigError(SandboxError, ValueError):
    """A sandbox or pool configuration value is invalid; the message says how to fix it."""
