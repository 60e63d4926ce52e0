"""One error hierarchy for the baselines package.

Each class subclasses :class:`BaselinesError` and the matching builtin, so callers can
catch either. Messages say what was expected, what came, and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "BaselinesError",
    "ConfigError",
    "TokenizationError",
    "EngineError",
    "EngineUnavailableError",
    "CheckpointError",
]


class BaselinesError(Exception):
    """Base class of every error raised by :mod:`baselines`."""


class ConfigError(BaselinesError, ValueError):
    """A training config (YAML file or ``key=value`` override) is invalid."""


class TokenizationError(BaselinesError, ValueError):
    """The chat template cannot be used for token-in/token-out accounting.

    Raised when rendering a base conversation is not a prefix of rendering the base plus
    a delta, which means observation tokens cannot be appended without re-tokenising.
    """


class EngineError(BaselinesError, RuntimeError):
    """A rollout engine failed to generate or to receive weights."""


class EngineUnavailableError(EngineError, ImportError):
    """The requested rollout engine's optional dependency is not installed."""


class CheckpointError(BaselinesError, OSError):
    """A checkpoint is missing, incomplete or from an incompatible run."""
