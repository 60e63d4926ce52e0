"""The optional dependencies of the interop adapters, and the error that names them.

Every adapter imports its third-party package through :func:`require`, inside the
function that needs it, so ``import agentgym.interop`` costs nothing and a missing
package is one clear line that says which extra to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from agentgym.errors import ConfigError

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(ConfigError, ImportError):
    """An interop adapter was used without the optional package it speaks through."""


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming the extra to install.

    >>> require("json", "none").dumps(1)
    '1'
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(
            f"Expected the optional package that provides {module!r} (agentgym's {extra!r} extra), "
            f"actual value: not importable ({e}). Install it with: pip install 'agentgym[{extra}]'"
        ) from e
