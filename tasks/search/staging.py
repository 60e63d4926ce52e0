"""Staging directories for build-then-rename caches, which a killed build cannot leak.

Caches (the search data, the BM25 index) are built in a staging directory and renamed
into place, so readers never see half a build. A build killed with SIGKILL (or by the
OOM killer) cannot clean up, so the staging directory's name records its builder:
``.<final name>.staging.<pid>@<host>.<random>``. ``reap_stale_staging`` removes the
staging directories of builders on this host that no longer run; the loaders call it
whenever they open a cache, so the next start cleans up after a killed build.
Directories of other hosts (a shared cache on NFS) are left to those hosts, and a dead
builder's pid reused by a live process delays its reaping until that process ends.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

__all__ = ["reap_stale_staging", "staging_dir"]

log = logging.getLogger(__name__)

_MARK = ".staging."
_NAME = re.compile(r"^\..+\.staging\.(?P<pid>\d+)@(?P<host>.+)\.[A-Za-z0-9_]+$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "localhost"


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def staging_dir(final: Path) -> Path:
    """A new empty staging directory beside ``final``, named after this process."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{final.name}{_MARK}{os.getpid()}@{_host()}.", dir=final.parent))


def reap_stale_staging(parent: Path) -> list[Path]:
    """Remove the staging directories in ``parent`` whose builder on this host is gone."""
    reaped: list[Path] = []
    try:
        entries = list(parent.iterdir())
    except FileNotFoundError:
        return reaped
    host = _host()
    for entry in entries:
        match = _NAME.match(entry.name)
        if match and match["host"] == host and not _running(int(match["pid"])) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
            log.info("removed %s, left by a build that did not finish", entry)
            reaped.append(entry)
    return reaped
