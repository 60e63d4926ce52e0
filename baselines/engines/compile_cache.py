"""A private torch-inductor compile cache for each vLLM engine.

vLLM compiles kernels through torch-inductor even with ``enforce_eager``, and inductor
keeps them in one machine-wide directory (``/tmp/torchinductor_<user>``) unless
``TORCHINDUCTOR_CACHE_DIR`` says otherwise. Two engines compiling at once there left a
0-byte kernel behind, and every later engine on the machine died loading it ("file too
short"). So each engine starts with the variable pointing at a fresh directory of its
own (its engine process inherits it), removed when the engine closes. The price is a
compile per engine start instead of a cache hit. A ``TORCHINDUCTOR_CACHE_DIR`` the user
set is used as it is: sharing one between runs is then the user's choice.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

__all__ = ["CACHE_ENV", "PrivateCompileCache"]

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"

_LIVE: set[str] = set()  # directories this process made and has not removed yet


class PrivateCompileCache:
    """Points ``TORCHINDUCTOR_CACHE_DIR`` at a new private directory until :meth:`close`.

    Create it just before the engine (and its processes) start. ``path`` is None when
    the user had set the variable: then nothing is changed or removed.

    Args:
        environ: the environment to set it in (``os.environ``; a dict in tests).
    """

    def __init__(self, environ: MutableMapping[str, str] | None = None) -> None:
        self._environ: MutableMapping[str, str] = os.environ if environ is None else environ
        self._previous = self._environ.get(CACHE_ENV)
        self.path: Path | None = None
        if self._previous is not None and self._previous not in _LIVE:
            return  # the user's: leave it alone
        self.path = Path(tempfile.mkdtemp(prefix="agentgym-inductor-"))
        _LIVE.add(str(self.path))
        self._environ[CACHE_ENV] = str(self.path)

    def close(self) -> None:
        """Remove the directory and give the variable back its value before (idempotent)."""
        if self.path is None:
            return
        mine = str(self.path)
        _LIVE.discard(mine)
        if self._environ.get(CACHE_ENV) == mine:
            if self._previous is not None and self._previous in _LIVE:  # another engine's, still open
                self._environ[CACHE_ENV] = self._previous
            else:
                self._environ.pop(CACHE_ENV, None)
        shutil.rmtree(self.path, ignore_errors=True)
        self.path = None
