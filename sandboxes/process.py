"""Local-process deployment: the same supervisor and worker, without a container.

Used automatically only when no Docker engine is reachable. Isolation is weaker and the
class says so: each setting of :class:`SandboxConfig` it cannot enforce is named in a
:class:`SandboxIsolationWarning` (once per process). What it does enforce:

- network, PID, IPC and UTS namespaces through ``unshare`` where the kernel allows it
  (root, or unprivileged user namespaces); then reset kills every process the agent
  started, and the network has only a down loopback;
- rlimits on the worker: address space (``mem_limit``), processes (``pids_limit``, not
  for root), file size (``tmpfs_size``), no core dumps; ``no_new_privs``;
- a private working directory and ``TMPDIR`` under a fresh temporary directory.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Literal

from sandboxes.protocol import SandboxConfig, default_env, parse_size
from sandboxes.supervised import RUNTIME_DIR, SupervisedSandbox

__all__ = ["ProcessSandbox", "ProcessBackend", "SandboxIsolationWarning", "namespace_support"]

Isolation = Literal["auto", "none"]
_ADDRESS_SPACE_HEADROOM = 2 * 1024**3
"""RLIMIT_AS counts reserved, not resident, memory: numpy/pandas reserve about 1 GiB
they never touch, so the limit is ``mem_limit`` plus this headroom."""


class SandboxIsolationWarning(UserWarning):
    """A sandbox setting could not be enforced by the chosen backend."""


@functools.lru_cache(maxsize=1)
def namespace_support() -> tuple[tuple[str, ...], str]:
    """The ``unshare`` prefix that works here, or ``()`` and the reason it does not."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return (), "the `unshare` program (util-linux) is not installed"
    common = ["--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--ipc"]
    prefix = [unshare, *common] if os.geteuid() == 0 else [unshare, "--user", "--map-root-user", *common]
    try:
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        return (), f"`unshare` failed to run: {e}"
    if probe.returncode != 0:
        reason = probe.stderr.decode(errors="replace").strip() or f"exit {probe.returncode}"
        return (), f"`{' '.join(prefix)} true` failed: {reason}"
    return tuple(prefix), ""


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, SandboxIsolationWarning, stacklevel=3)


_warned: set[str] = set()


def _unenforced(config: SandboxConfig, namespaces: bool) -> list[str]:
    """Settings of ``config`` this backend cannot enforce, each with the reason."""
    missing = []
    root = os.geteuid() == 0
    if config.network == "none" and not namespaces:
        missing.append("network='none' (no network namespace)")
    if config.read_only_root:
        missing.append("read_only_root (the host filesystem is writable where the user may write)")
    if config.user and not root:
        missing.append(f"user={config.user!r} (runs as the calling user)")
    elif root:
        missing.append(f"user={config.user!r} (runs as root: the interpreter is not always readable by others)")
    if root and not namespaces:
        missing.append("pids_limit (root ignores RLIMIT_NPROC)")
    missing.append(f"cpus={config.cpus} (no CPU quota outside cgroups)")
    missing.append("mem_limit as a resident limit (enforced as an address-space rlimit)")
    if root:
        missing.append("cap_drop_all (root keeps its capabilities)")
    return missing


class ProcessSandbox(SupervisedSandbox):
    """A sandbox whose supervisor is a local subprocess.

    Args:
        config: isolation and resource settings; unenforceable ones raise a warning.
        isolation: ``"auto"`` uses namespaces when ``unshare`` works; ``"none"`` never.
        python: interpreter for the supervisor and worker (default: this one, so the
            worker imports the host's numpy and pandas).
        base_dir: where per-sandbox directories go (default: the system temp dir).
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        isolation: Isolation = "auto",
        python: str | None = None,
        base_dir: str | None = None,
    ) -> None:
        super().__init__(config)
        self.isolation = isolation
        self.python = python or sys.executable
        self.base_dir = base_dir
        self._proc: subprocess.Popen | None = None
        self._dir: Path | None = None
        self._namespaced = False

    @property
    def id(self) -> str:
        return f"process-{self._proc.pid}" if self._proc else "process-unstarted"

    @property
    def workdir(self) -> str:
        return str(self._dir / "work") if self._dir else ""

    async def _launch(self) -> str:
        prefix: tuple[str, ...] = ()
        if self.isolation == "auto":
            prefix, reason = namespace_support()
            if not prefix:
                _warn_once(f"ProcessSandbox: no namespaces ({reason}); the code can use the network")
        self._namespaced = bool(prefix)
        missing = _unenforced(self.config, self._namespaced)
        if missing:
            _warn_once(
                "ProcessSandbox does not enforce: " + "; ".join(missing)
                + ". Use DockerSandbox (start a Docker engine) for full isolation."
            )
        self._dir = Path(tempfile.mkdtemp(prefix="agentgym-sb-", dir=self.base_dir))
        for sub in ("work", "tmp"):
            (self._dir / sub).mkdir()
        socket_path = str(self._dir / "supervisor.sock")
        argv = [*prefix, *self._supervisor_argv(socket_path)]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **default_env(self.config)}
        env["HOME"] = self.workdir
        with open(self._dir / "supervisor.log", "ab") as log:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd=self.workdir,
                start_new_session=True,
            )
        return socket_path

    def _supervisor_argv(self, socket_path: str) -> list[str]:
        c = self.config
        rlimits: dict[str, Any] = {
            "as": c.mem_limit_bytes + _ADDRESS_SPACE_HEADROOM,
            "fsize": parse_size(c.tmpfs_size),
            "core": 0,
        }
        if os.geteuid() != 0 or self._namespaced:
            rlimits["nproc"] = c.pids_limit + (0 if self._namespaced else _user_process_count())
        argv = [
            self.python, "-E", "-s", str(RUNTIME_DIR / "supervisor.py"),
            "--socket", socket_path,
            "--workdir", self.workdir,
            "--tmpdir", str(self._dir / "tmp"),
            "--preload", ",".join(c.preload),
            "--output-limit", str(c.output_limit_bytes),
            "--value-limit", str(c.value_limit_bytes),
            "--default-timeout", str(c.default_timeout_s),
            "--grace", str(c.grace_s),
            "--rlimits", json.dumps(rlimits),
        ]  # fmt: skip
        if self._namespaced:
            argv.append("--kill-all")  # safe: the supervisor is alone in its PID namespace
        return argv

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    async def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            _kill_group(proc)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["namespaces"] = self._namespaced
        return info


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM lets the supervisor kill its worker; SIGKILL if it does not go quickly."""
    for sig, wait in ((signal.SIGTERM, 0.5), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _user_process_count() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


class ProcessBackend:
    """Creates :class:`ProcessSandbox` instances for a :class:`~sandboxes.SandboxPool`."""

    name = "process"

    def __init__(self, config: SandboxConfig | None = None, **sandbox_kwargs: Any) -> None:
        self.config = config or SandboxConfig()
        self.sandbox_kwargs = sandbox_kwargs

    async def create(self) -> ProcessSandbox:
        sandbox = ProcessSandbox(self.config, **self.sandbox_kwargs)
        return await sandbox.start()

    async def remove_orphans(self) -> int:
        """Process sandboxes exit on their own when their host goes away."""
        return 0

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "namespaces": bool(namespace_support()[0]),
            "config": self.config.fingerprint(),
        }

    async def close(self) -> None:
        return None
