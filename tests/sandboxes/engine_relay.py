"""A Unix-socket relay in front of the Docker engine's socket, to make the engine fail on
cue without touching the real ``dockerd`` (that would kill every other test's sandboxes).

Two failures, both seen for real:

- ``cut()``: the engine stops. Every connection is reset and new ones are refused.
- ``stall(method, path)``: the engine stays up (``/_ping`` answers) but requests that
  match are read and never answered. Docker 20.10 did this when 63 containers were removed
  at once: every ``DELETE /containers/...`` and every inspect of a locked container waited
  forever on the container's lock, while ``/_ping`` kept answering.

To see each request, the relay asks the engine to close every plain connection after its
reply (``Connection: close``), so a client's keep-alive connection cannot carry a later
request past the check. Attach connections (``Upgrade: tcp``) are relayed untouched.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import threading

__all__ = ["EngineRelay"]


class EngineRelay:
    """Relay ``unix://<self.path>`` to the engine socket at ``engine_path``, in threads."""

    def __init__(self, engine_path: str) -> None:
        self.engine_path = engine_path
        self.dir = tempfile.mkdtemp(prefix="agentgym-relay-")
        self.path = os.path.join(self.dir, "docker.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(64)
        self._conns: list[socket.socket] = []
        self._attached: list[socket.socket] = []
        self._stalls: list[tuple[str, re.Pattern[str]]] = []
        self.stalled: list[str] = []
        """``"METHOD path"`` of every request held unanswered so far."""
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    # ------------------------------------------------------------------ failures
    def stall(self, method: str, path_pattern: str) -> None:
        """From now on, hold requests whose method is ``method`` and whose path (API
        version prefix removed) matches ``path_pattern`` unanswered."""
        with self._lock:
            self._stalls.append((method.upper(), re.compile(path_pattern)))

    def unstall(self) -> None:
        """Answer new requests again (held ones stay held until their client gives up)."""
        with self._lock:
            self._stalls.clear()

    def cut_attached(self) -> None:
        """Reset every attach connection (a sandbox's channel), nothing else."""
        with self._lock:
            conns = list(self._attached)
        for conn in conns:
            _reset(conn)

    def cut(self) -> None:
        """Stop: refuse new connections and reset every open one."""
        os.unlink(self.path)  # new connections are refused ...
        self._listener.close()
        with self._lock:  # ... and open ones, the sandbox's own included, reset
            conns = list(self._conns)
        for conn in conns:
            _reset(conn)

    # ------------------------------------------------------------------ relaying
    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    client.close()
                    return
                head += chunk
        except OSError:
            return
        request_head, _, rest = head.partition(b"\r\n\r\n")
        lines = request_head.decode("latin-1").split("\r\n")
        method, target = (lines[0].split(" ") + ["", ""])[:2]
        path = re.sub(r"^/v[0-9.]+", "", target.split("?")[0])
        with self._lock:
            held = any(m == method and p.search(path) for m, p in self._stalls)
            if held:
                self.stalled.append(f"{method} {path}")
        if held:
            _drain(client)  # read and never answer, until the client gives up
            return
        upgrade = any(line.lower().startswith("upgrade:") for line in lines[1:])
        if not upgrade:
            lines = [lines[0]] + [line for line in lines[1:] if not line.lower().startswith("connection:")]
            lines.append("Connection: close")
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.engine_path)
            upstream.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + rest)
        except OSError:
            _reset(client)
            return
        with self._lock:
            self._conns.append(upstream)
            if upgrade:
                self._attached += [client, upstream]
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
        _pipe(client, upstream)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _drain(conn: socket.socket) -> None:
    try:
        while conn.recv(65536):
            pass
    except OSError:
        pass


def _reset(conn: socket.socket) -> None:
    try:  # shutdown, not just close: it wakes the relay's blocked reads
        conn.shutdown(socket.SHUT_RDWR)
        conn.close()
    except OSError:
        pass
