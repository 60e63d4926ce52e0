"""No leaks: owner labels, clean-up at exit, and removal of orphans.

Every container carries ``agentgym.owner=<hostname>:<pid>:<process start time>``; the
start time makes a recycled PID look dead, as it should. Three lines of defence:

1. ``atexit`` (which also runs after Ctrl-C) and SIGTERM/SIGHUP handlers remove this
   process's containers (:func:`install_signal_handlers` must run on the main thread),
   quietly: what cannot be removed is reported in one warning line that names
   ``agentgym reap``. Owners of pools stop them earlier, with :func:`before_executors_stop`,
   while Python's thread pools still take work;
2. a pool, when it starts, removes labelled containers whose owner on this host is dead
   (the SIGKILL case, where 1. cannot run), and :func:`reap_orphans` (``agentgym reap``)
   does the same on demand;
3. the in-sandbox supervisor exits when no host has been connected for a minute, and
   containers are started with auto-remove.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import signal
import socket
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from sandboxes.errors import EngineUnreachableError, SandboxConfigError
from sandboxes.engine import connect, default_engine_url, engine_calls

__all__ = [
    "OWNER_LABEL",
    "SANDBOX_LABEL",
    "owner_id",
    "owner_alive",
    "ContainerCount",
    "count_owned_containers",
    "reap_orphans",
    "register_engine",
    "sandbox_root",
    "remove_dead_sandbox_dirs",
    "before_executors_stop",
]

OWNER_LABEL = "agentgym.owner"
SANDBOX_LABEL = "agentgym.sandbox"


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks


@lru_cache(maxsize=1)
def _owner_for(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or '0'}"


def owner_id() -> str:
    """This process's owner label value (recomputed after a fork)."""
    return _owner_for(os.getpid())


def owner_alive(owner: str) -> bool | None:
    """True/False for owners on this host; None when the owner is on another host or the
    label is malformed (then nobody here can tell, and nothing is removed)."""
    host, _, rest = owner.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    return _start_time(int(pid_text)) == started


def _sandbox_dirs() -> Path:
    return Path(tempfile.gettempdir()) / f"agentgym-{os.getuid()}"


def sandbox_root() -> Path:
    """This process's directory for sandbox files (``<pid>_<start>``), inside a per-user
    ``$TMPDIR/agentgym-<uid>`` that must be private; the reaper removes those of dead
    processes.

    Raises:
        SandboxConfigError: the per-user directory belongs to someone else or is open to
            others (someone could plant files in it).
    """
    base = _sandbox_dirs()
    try:
        base.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = base.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise SandboxConfigError(
            f"Expected {base} to be a directory owned by uid {os.getuid()} with mode 0700, actual: "
            f"owner {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}; remove it (or set TMPDIR elsewhere)"
        )
    _, pid, started = owner_id().split(":")
    mine = base / f"{pid}_{started}"
    mine.mkdir(mode=0o700, exist_ok=True)
    return mine


def remove_dead_sandbox_dirs() -> int:
    """Remove sandbox directories left by dead processes of this host; return how many."""
    base = _sandbox_dirs()
    if not base.is_dir():
        return 0
    removed = 0
    for entry in base.iterdir():
        pid, _, started = entry.name.partition("_")
        if owner_alive(f"{socket.gethostname()}:{pid}:{started}") is False:
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def _remove(container: Any) -> str | None:
    """Remove one container; its id when it is gone afterwards (a container that another
    remover or auto-removal got to first counts as removed), None when it may remain."""
    import docker.errors

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass  # already gone: removed, not an error
    except Exception:  # engine trouble: the container may remain; the caller reports it
        return None
    return container.id


def _remove_all(containers: list[Any]) -> list[str]:
    """Remove containers in parallel. Plain threads, not an executor: this also runs in
    ``atexit``, after ``concurrent.futures`` has stopped accepting work."""
    removed: list[str | None] = [None] * len(containers)

    def remove_slice(start: int) -> None:
        for i in range(start, len(containers), 16):
            removed[i] = _remove(containers[i])

    threads = [threading.Thread(target=remove_slice, args=(i,)) for i in range(min(16, len(containers)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [cid for cid in removed if cid]


@dataclass(frozen=True)
class ContainerCount:
    """Containers labelled ``agentgym.owner`` (any state): this process's and everyone's."""

    mine: int
    total: int


def count_owned_containers(engine_urls: list[str] | None = None) -> ContainerCount:
    """Count labelled containers on each engine, this process's apart from the rest.

    A leak check counts before and after a run: a surplus in ``mine`` once everything is
    closed is a leak. Other owners (a parallel test run, another trainer) only add to
    ``total``, so they are never mistaken for ours. The raw listing is used, because
    inspecting each container races with auto-removal.

    Raises:
        EngineUnreachableError: an engine did not answer or failed to list.
    """
    import docker.errors
    import requests.exceptions

    me, mine, total = owner_id(), 0, 0
    for url in dict.fromkeys(engine_urls or [default_engine_url()]):
        client = connect(url, timeout=10)
        try:
            listed = client.api.containers(all=True, filters={"label": OWNER_LABEL})
        except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
            raise EngineUnreachableError(f"Expected the engine at {url} to list containers, but it failed: {e}") from e
        finally:
            client.close()
        total += len(listed)
        mine += sum(1 for c in listed if (c.get("Labels") or {}).get(OWNER_LABEL) == me)
    return ContainerCount(mine, total)


def reap_orphans(
    engine_urls: list[str] | None = None, *, include_unknown: bool = False
) -> list[str]:
    """Remove labelled containers whose owning process is dead; return their ids.

    ``include_unknown`` also removes containers whose owner cannot be checked (another
    host, or a malformed label); use it only when no other host shares the engine.
    Also removes socket directories left by dead owners on this host.
    """
    removed: list[str] = []
    for url in dict.fromkeys(engine_urls or [default_engine_url()]):
        client = connect(url)
        try:
            # ignore_removed: containers that auto-remove between the listing and their
            # inspection (common right after a pool closed many) are gone, not an error.
            with engine_calls(url, "listing sandbox containers"):
                containers = client.containers.list(all=True, filters={"label": OWNER_LABEL}, ignore_removed=True)
            doomed = []
            for c in containers:
                alive = owner_alive(c.labels.get(OWNER_LABEL, ""))
                if alive is False or (alive is None and include_unknown):
                    doomed.append(c)
            removed += _remove_all(doomed)
        finally:
            client.close()
    remove_dead_sandbox_dirs()
    return removed


# ---------------------------------------------------------------- clean-up at exit
_engines: set[str] = set()
_installed = False
_lock = threading.Lock()
_previous: dict[int, Any] = {}


def register_engine(url: str) -> None:
    """Remember that this process starts containers on ``url``, and make sure they are
    removed when it exits or is told to stop."""
    global _installed
    with _lock:
        _engines.add(url)
        if _installed:
            return
        _installed = True
    atexit.register(remove_own_containers)
    install_signal_handlers()


def install_signal_handlers() -> bool:
    """Remove this process's containers on SIGTERM/SIGHUP too (idempotent).

    Python only lets the main thread set signal handlers, and sandboxes are usually started
    from an event-loop thread, so code that creates pools (an env's constructor) calls this
    from the main thread as well. Returns whether the handlers are installed.
    """
    if threading.current_thread() is not threading.main_thread():
        return bool(_previous)
    with _lock:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if sig in _previous:
                continue
            try:
                _previous[sig] = signal.signal(sig, _on_signal)
            except (ValueError, OSError):
                pass
    return bool(_previous)


def remove_own_containers() -> list[str]:
    """Remove every container this process owns on every engine it used.

    Quiet when it succeeds; what it cannot remove (an engine that stopped answering) is
    reported in one warning line on stderr, with the command that removes it later."""
    removed: list[str] = []
    left: list[str] = []
    for url in list(_engines):
        try:
            client = connect(url, timeout=30)
        except ConnectionError:
            left.append(f"the containers on {url} (the engine did not answer)")
            continue
        try:
            mine = client.containers.list(
                all=True, filters={"label": f"{OWNER_LABEL}={owner_id()}"}, ignore_removed=True
            )
            gone = _remove_all(mine)
            removed += gone
            if len(gone) < len(mine):
                left.append(f"{len(mine) - len(gone)} container(s) on {url}")
        except Exception as e:  # noqa: BLE001 - reported below, never raised at exit
            left.append(f"the containers on {url} ({type(e).__name__})")
        finally:
            client.close()
    shutil.rmtree(sandbox_root(), ignore_errors=True)
    if left:
        _warn_left(", ".join(left))
    return removed


def _warn_left(what: str) -> None:
    """The one line a process prints when it could not clean up after itself."""
    import sys

    try:
        sys.stderr.write(f"agentgym warning: could not remove {what} at exit; "
                         "run `agentgym reap` to remove them\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: nothing more to do
        pass


def before_executors_stop(fn: Any) -> None:
    """Call ``fn()`` when the interpreter starts to exit, before Python's thread pools
    stop taking work.

    Why: ``atexit`` handlers run after ``concurrent.futures`` has shut every thread pool
    down, so anything that still needs ``asyncio.to_thread`` (closing a sandbox pool on
    an event loop) fails there with "cannot schedule new futures after shutdown".
    ``threading``'s exit hooks run before, in reverse order of registration; importing
    ``concurrent.futures.thread`` first makes sure its own hook is registered earlier, so
    ``fn`` runs ahead of it. ``fn`` must not raise and must bound its own time.
    """
    import concurrent.futures.thread  # noqa: F401 - registers its exit hook before ours

    register = getattr(threading, "_register_atexit", None)
    if register is None:  # not CPython: atexit is the best there is
        atexit.register(fn)
        return
    try:
        register(fn)
    except RuntimeError:  # the interpreter is already exiting: too late to run anything
        pass


def _on_signal(signum: int, frame: Any) -> None:
    remove_own_containers()
    previous = _previous.get(signum)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
