"""Child processes that die with the process that started them, even when it is SIGKILLed.

Why: a service the project starts for a run (``agentgym serve-retriever`` for the stress
harness) is started in a session of its own, so that the harness can stop and resume it
with signals. Nothing then ends it when its starter dies without running its clean-up
(SIGKILL, an OOM kill, a CI timeout): it lives on, orphaned, for hours. The kernel's
parent-death signal (``PR_SET_PDEATHSIG``) ends it instead, and with SIGKILL it ends it
even while it is stopped (``SIGSTOP``), where a child that watches a pipe could not react.

Two details make that signal reliable:

* the kernel sends it when the *thread* that forked the child ends, not the process; so
  children are forked from the main thread or from one daemon thread that lives as long
  as the process, never from a worker thread that may end earlier (a thread pool's);
* a parent that died between the fork and the ``prctl`` would never send it; the child
  checks that its parent is still the one that forked it, and exits otherwise.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from typing import Any, Callable, TypeVar

__all__ = ["popen_tied", "process_state", "live_children"]

T = TypeVar("T")

PR_SET_PDEATHSIG = 1
"""``prctl`` option from <linux/prctl.h>: the signal this process gets when its parent dies."""


def popen_tied(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(args, **kwargs)`` whose child is SIGKILLed when this process
    dies (Linux; elsewhere a plain ``Popen``). ``start_new_session`` and the other
    keywords work as usual; ``preexec_fn`` is taken by this function.

    Raises:
        ValueError: ``preexec_fn`` was given.
    """
    if "preexec_fn" in kwargs:
        raise ValueError("Expected no preexec_fn: popen_tied sets its own")
    preexec = _die_with_parent_preexec()
    if preexec is not None:
        kwargs["preexec_fn"] = preexec
    return _in_lasting_thread(lambda: subprocess.Popen(args, **kwargs))


def _die_with_parent_preexec() -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in the child
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:  # runs in the child between fork and exec: no imports, no locks
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return preexec


_jobs: "queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]" = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _in_lasting_thread(fn: Callable[[], T]) -> T:
    """Run ``fn`` on a thread that ends only with the process: the main thread, or this
    module's daemon thread."""
    global _thread
    if threading.current_thread() is threading.main_thread():
        return fn()
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="agentgym-child-starter", daemon=True)
            _thread.start()
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    _jobs.put((fn, done))
    return done.result()


def _serve() -> None:
    while True:
        fn, done = _jobs.get()
        if not done.set_running_or_notify_cancel():
            continue
        try:
            done.set_result(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            done.set_exception(e)


def process_state(pid: int) -> str | None:
    """The state letter of ``pid`` (``R``, ``S``, ``T``, ...), or None once it is gone (a
    zombie counts as gone: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    return None if state in ("Z", "X") else state


def live_children(parent: int | None = None) -> dict[int, list[bytes]]:
    """The live (non-zombie) children of ``parent`` (default: this process), with their
    command lines: what a clean exit must not leave behind."""
    parent = os.getpid() if parent is None else parent
    found: dict[int, list[bytes]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) != parent or fields[0] in ("Z", "X"):
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found[int(entry)] = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
    return found
