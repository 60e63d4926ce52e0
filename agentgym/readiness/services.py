"""A real retriever service in its own process, which fault injection can stall or stop.

Stalling a thread-hosted service would stall only a thread; a separate process lets the
harness do what happens in production: the service stops answering (``SIGSTOP``) and
resumes (``SIGCONT``), or dies and is restarted on the same port.

The service runs in a session of its own (so the signals reach it alone), which also
means nothing would end it if the harness died without closing it: it is started with a
parent-death signal (:func:`agentgym.lifeline.popen_tied`), so it dies with the process
that started it, SIGKILLed or stopped as it may be. Once :meth:`RetrieverProcess.close`
has run, nothing starts it again (a restart still sleeping through its downtime gives up).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field

from agentgym.errors import AgentgymError
from agentgym.lifeline import popen_tied
from agentgym.reliability import polling

__all__ = ["RetrieverProcess", "ServiceStartError"]


class ServiceStartError(AgentgymError, RuntimeError):
    """The retriever service did not come up; the message holds the end of its log."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RetrieverProcess:
    """``agentgym serve-retriever`` on 127.0.0.1, started with :meth:`start`.

    Use as a context manager; :meth:`close` always resumes and terminates it.
    """

    port: int = 0
    startup_timeout_s: float = 120.0
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _resume_at: float = 0.0
    _resumer: threading.Timer | None = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)
    stalls: int = 0
    restarts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> "RetrieverProcess":
        """Start the service and wait until it answers ``/health``.

        Raises:
            ServiceStartError: it exited or did not answer in time, or it was closed.
        """
        with self._lock:
            if self._closed:
                raise ServiceStartError("this retriever service was closed; make a new RetrieverProcess")
            if not self.port:
                self.port = _free_port()
            cmd = [sys.executable, "-c", "from agentgym.cli import app; app()", "serve-retriever",
                   "--host", "127.0.0.1", "--port", str(self.port)]
            self._proc = popen_tied(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    start_new_session=True)
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        try:
            for attempt in polling(OSError, deadline_s=self.startup_timeout_s, interval_s=0.1):
                with attempt:
                    proc = self._proc
                    if proc is None or self._closed:
                        raise ServiceStartError("the retriever service was closed while it started")
                    if proc.poll() is not None:
                        err = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace")
                        raise ServiceStartError(f"serve-retriever exited with {proc.returncode}: {err[-2000:]}")
                    with urllib.request.urlopen(f"{self.url}/health", timeout=1) as r:
                        json.loads(r.read())
        except OSError:
            self._stop()
            raise ServiceStartError(
                f"serve-retriever did not answer /health within {self.startup_timeout_s:g}s") from None
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        proc = self._proc
        if proc is not None and proc.stderr is not None:
            for _ in iter(lambda: proc.stderr.read(65536), b""):  # type: ignore[union-attr]
                pass

    def stall(self, seconds: float) -> None:
        """Stop the service (``SIGSTOP``) for ``seconds``; overlapping stalls extend it."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                return
            self.stalls += 1
            now = time.monotonic()
            if self._resume_at <= now:
                os.kill(self._proc.pid, signal.SIGSTOP)
            self._resume_at = max(self._resume_at, now + seconds)
            if self._resumer is not None:
                self._resumer.cancel()
            self._resumer = threading.Timer(self._resume_at - now, self.resume)
            self._resumer.daemon = True
            self._resumer.start()

    def resume(self) -> None:
        with self._lock:
            self._resume_at = 0.0
            if self._proc is not None and self._proc.poll() is None:
                os.kill(self._proc.pid, signal.SIGCONT)

    def restart(self, down_s: float = 0.5) -> None:
        """Kill the service and start it again on the same port after ``down_s``
        (unless it was closed meanwhile: then it stays down)."""
        with self._lock:
            if self._closed:
                return
            self.restarts += 1
            self._kill()
        time.sleep(down_s)
        try:
            self.start()
        except ServiceStartError:
            if not self._closed:
                raise

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait(10)

    def close(self) -> None:
        """Resume and terminate the service; it is never started again. Idempotent."""
        with self._lock:
            self._closed = True
        if self._resumer is not None:
            self._resumer.cancel()
        self._stop()

    def _stop(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self._proc = None

    def __enter__(self) -> "RetrieverProcess":
        return self.start() if self._proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()
