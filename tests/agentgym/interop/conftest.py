"""Servers the interop tests talk to: agentgym's CLI verbs, started as real processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def agentgym_server(args: list[str], health_url: str, timeout_s: float = 120.0, accept_http_error: bool = False,
                    env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """``agentgym <args>`` in a subprocess, yielded once ``health_url`` answers (with any
    HTTP status if ``accept_http_error``); stopped with SIGTERM (the way a user stops it)
    and waited for."""
    log = tempfile.TemporaryFile()  # not a pipe: a chatty server must never block on a full one
    proc = subprocess.Popen([sys.executable, "-m", "agentgym.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=log, env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"agentgym {' '.join(args)} exited with {proc.returncode}: {log.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(health_url, timeout=2):
                    break
            except OSError as e:
                if accept_http_error and isinstance(e, urllib.error.HTTPError):
                    break  # it answered
                if time.monotonic() > deadline:
                    pytest.fail(f"agentgym {' '.join(args)} did not answer {health_url} within {timeout_s:g} s")
                time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
