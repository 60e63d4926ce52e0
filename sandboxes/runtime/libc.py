"""The runtime's one binding to the C library (stdlib ctypes; runs inside sandboxes).

The supervisor, the worker and the process backend's confinement all call ``prctl`` and
friends; they share this module so each option has one name and one number.
"""

from __future__ import annotations

import ctypes
import os

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

libc = ctypes.CDLL(None, use_errno=True)


def check(result: int, what: str) -> None:
    """Raise ``OSError`` with errno for a failed call (``result != 0``)."""
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def prctl(option: int, value: int, *, what: str | None = None) -> None:
    """``prctl(option, value, 0, 0, 0)``; raises ``OSError`` when it fails."""
    check(libc.prctl(option, value, 0, 0, 0), what or f"prctl({option})")


def try_prctl(option: int, value: int) -> bool:
    """``prctl`` for hardening that is best effort where the kernel lacks the option."""
    try:
        prctl(option, value)
    except (OSError, AttributeError):
        return False
    return True
