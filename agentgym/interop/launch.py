"""Start ``agentgym serve-env`` / ``serve-mcp`` in the background and wait until it answers.

For scripts that play both sides (a trainer that rolls out through its own env server,
the tests, the benchmarks): the server is a real process, stopped with SIGTERM (the way a
user stops it) when the ``with`` block ends, and SIGKILLed by the kernel if the process
that started it dies first (:func:`agentgym.lifeline.popen_tied`).

>>> free_port() > 0
True
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from agentgym.lifeline import popen_tied
from agentgym.reliability import polling

__all__ = ["ServerStartError", "agentgym_server", "free_port"]


class ServerStartError(RuntimeError):
    """The server exited or did not answer in time; the message carries its last log lines."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def agentgym_server(args: list[str], health_url: str, timeout_s: float = 120.0, accept_http_error: bool = False,
                    env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """``agentgym <args>`` in a subprocess, yielded once ``health_url`` answers (with any
    HTTP status if ``accept_http_error``: an MCP endpoint answers GET with an error)."""
    log = tempfile.TemporaryFile()  # not a pipe: a chatty server must never block on a full one
    proc = popen_tied([sys.executable, "-m", "agentgym.cli", *args], stdout=subprocess.DEVNULL,
                      stderr=log, env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"})
    try:
        _wait_until_answering(proc, log, args, health_url, timeout_s, accept_http_error)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait_until_answering(proc: subprocess.Popen, log: tempfile._TemporaryFileWrapper[bytes], args: list[str],
                          health_url: str, timeout_s: float, accept_http_error: bool) -> None:
    try:
        for attempt in polling(_NotYet, deadline_s=timeout_s):
            with attempt:
                if proc.poll() is not None:
                    log.seek(0)
                    raise ServerStartError(f"agentgym {' '.join(args)} exited with {proc.returncode}: "
                                           f"{log.read().decode(errors='replace')[-2000:]}")
                try:
                    with urllib.request.urlopen(health_url, timeout=2):
                        return
                except urllib.error.HTTPError:
                    if accept_http_error:
                        return  # it answered
                    raise _NotYet() from None
                except OSError as e:
                    raise _NotYet() from e
    except _NotYet as e:
        raise ServerStartError(f"agentgym {' '.join(args)} did not answer {health_url} "
                               f"within {timeout_s:g} s") from e.__cause__


class _NotYet(Exception):
    """Internal: the server does not answer yet."""
