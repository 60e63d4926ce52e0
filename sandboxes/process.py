"""Local-process deployment: the same supervisor and worker, without a container.

Used automatically only when no Docker engine is reachable. Isolation is weaker and the
class says so: each setting of :class:`SandboxConfig` it cannot enforce is named in a
:class:`SandboxIsolationWarning` (once per process). What it does enforce:

- network, PID and IPC namespaces through ``unshare`` where the kernel allows it
  (root, or unprivileged user namespaces); then reset kills every process the agent
  started, and the network has only a down loopback;
- as root, also a private mount namespace in which ``/`` is read-only except the
  sandbox's own directory, and no capabilities (``setpriv``), so root cannot undo it
  and RLIMIT_NPROC applies;
- as root, a cgroup per sandbox with the ``pids_limit``, ``mem_limit`` and ``cpus`` that
  Docker would set (:mod:`sandboxes.cgroups`);
- otherwise rlimits on the worker: address space (``mem_limit``), processes
  (``pids_limit``); always file size (``tmpfs_size``), no core dumps, ``no_new_privs``;
- a private working directory and ``TMPDIR`` under a fresh temporary directory.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sandboxes import cgroups
from sandboxes.protocol import SandboxConfig, default_env, parse_size
from sandboxes.reaper import remove_dead_sandbox_dirs, socket_root
from sandboxes.runtime import wire
from sandboxes.supervised import KEY_ENV, RUNTIME_DIR, SupervisedSandbox, runtime_digest

__all__ = [
    "ProcessSandbox",
    "ProcessBackend",
    "SandboxIsolationWarning",
    "IsolationSupport",
    "isolation_support",
    "namespace_support",
]

IsolationChoice = Literal["auto", "none"]
_ADDRESS_SPACE_HEADROOM = 2 * 1024**3
"""RLIMIT_AS counts reserved, not resident, memory: numpy/pandas reserve about 1 GiB
they never touch, so the limit is ``mem_limit`` plus this headroom."""


class SandboxIsolationWarning(UserWarning):
    """A sandbox setting could not be enforced by the chosen backend."""


_CONFINE_ROOT = (
    'd="$1"; shift; mount --bind "$d" "$d" && mount -o remount,bind,ro / && '
    'exec setpriv --bounding-set=-all --inh-caps=-all --no-new-privs -- "$@"'
)
"""Run inside a fresh mount namespace as root: only the sandbox directory stays
writable, and the supervisor runs with no capabilities at all (so it cannot remount,
and RLIMIT_NPROC binds it)."""


@dataclass(frozen=True)
class IsolationSupport:
    """What the process backend can do on this machine (probed once per process)."""

    prefix: tuple[str, ...]
    """``unshare ...`` command prefix, or ``()`` without namespaces."""
    confined_root: bool
    """Root only: read-only ``/`` except the sandbox directory, and no capabilities."""
    reason: str
    """Why namespaces (or root confinement) are unavailable, for the warning."""

    @property
    def namespaces(self) -> bool:
        return bool(self.prefix)

    def wrap(self, sandbox_dir: str, argv: list[str]) -> list[str]:
        if self.confined_root:
            return [*self.prefix, "sh", "-c", _CONFINE_ROOT, "sh", sandbox_dir, *argv]
        return [*self.prefix, *argv]


def _probe(argv: list[str]) -> str:
    """'' if ``argv`` runs and exits 0, else why not."""
    try:
        probe = subprocess.run(argv, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        return f"`{argv[0]}` failed to run: {e}"
    if probe.returncode != 0:
        return probe.stderr.decode(errors="replace").strip() or f"exit {probe.returncode}"
    return ""


@functools.lru_cache(maxsize=1)
def isolation_support() -> IsolationSupport:
    unshare = shutil.which("unshare")
    if unshare is None:
        return IsolationSupport((), False, "the `unshare` program (util-linux) is not installed")
    common = ["--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--ipc"]
    reason = ""
    if os.geteuid() == 0:
        confined = IsolationSupport((unshare, "--mount", "--propagation", "private", *common), True, "")
        if shutil.which("setpriv") is None:
            reason = "`setpriv` is not installed"
        else:
            with tempfile.TemporaryDirectory() as probe_dir:
                reason = _probe(confined.wrap(probe_dir, ["true"]))
            if not reason:
                return confined
        plain = [unshare, *common]
    else:
        plain = [unshare, "--user", "--map-root-user", *common]
    failure = _probe([*plain, "true"])
    if failure:
        return IsolationSupport((), False, f"`{' '.join(plain)} true` failed: {failure}")
    return IsolationSupport(tuple(plain), False, reason and f"root confinement failed: {reason}")


def namespace_support() -> tuple[tuple[str, ...], str]:
    """The ``unshare`` prefix that works here (or ``()``) and why namespaces do not."""
    support = isolation_support()
    return support.prefix, support.reason


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, SandboxIsolationWarning, stacklevel=3)


_warned: set[str] = set()


def _unenforced(config: SandboxConfig, support: IsolationSupport, *, cgroup: bool) -> list[str]:
    """Settings of ``config`` this backend cannot enforce, each with the reason."""
    missing = []
    root = os.geteuid() == 0
    if config.network == "none" and not support.namespaces:
        missing.append("network='none' (no network namespace)")
    if config.read_only_root and not support.confined_root:
        missing.append("read_only_root (the host filesystem is writable where the user may write)")
    if root:
        how = "without capabilities" if support.confined_root else "with its capabilities"
        missing.append(f"user={config.user!r} (runs as root {how}: the interpreter may be unreadable to others)")
        if not support.confined_root:
            missing.append("cap_drop_all (root keeps its capabilities)")
        if not cgroup:
            missing.append("pids_limit (root ignores RLIMIT_NPROC and no cgroup could be made)")
    else:
        missing.append(f"user={config.user!r} (runs as the calling user)")
    if not cgroup:
        missing.append(f"cpus={config.cpus} (no CPU quota outside cgroups)")
        missing.append("mem_limit as a resident limit (enforced as an address-space rlimit)")
    missing.append(f"tmpfs_size={config.tmpfs_size!r} (enforced per file, as a file-size rlimit)")
    return missing


class ProcessSandbox(SupervisedSandbox):
    """A sandbox whose supervisor is a local subprocess.

    Args:
        config: isolation and resource settings; unenforceable ones raise a warning.
        isolation: ``"auto"`` uses namespaces when ``unshare`` works; ``"none"`` never.
        python: interpreter for the supervisor and worker (default: this one, so the
            worker imports the host's numpy and pandas).
        base_dir: where per-sandbox directories go (default: this process's directory
            under ``$TMPDIR/agentgym-sandboxes``, which the reaper cleans up).
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        isolation: IsolationChoice = "auto",
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
        self._support: IsolationSupport | None = None
        self._cgroup: cgroups.SandboxCgroup | None = None
        self._stream: PipeStream | None = None

    @property
    def id(self) -> str:
        return f"process-{self._proc.pid}" if self._proc else "process-unstarted"

    @property
    def workdir(self) -> str:
        return str(self._dir / "work") if self._dir else ""

    async def _launch(self, key: str) -> "PipeStream":
        support = isolation_support() if self.isolation == "auto" else IsolationSupport((), False, "isolation='none'")
        self._support = support
        self._namespaced = support.namespaces
        self._dir = Path(tempfile.mkdtemp(prefix="p-", dir=self.base_dir or socket_root()))
        self._cgroup = cgroups.create(
            self._dir.name,
            pids=self.config.pids_limit + 2,  # + the `sh` and `unshare` in front
            memory_bytes=self.config.mem_limit_bytes,
            cpus=self.config.cpus,
        )
        missing = _unenforced(self.config, support, cgroup=self._cgroup is not None)
        if missing:
            _warn_once(
                "ProcessSandbox does not enforce: " + "; ".join(missing)
                + ". Use DockerSandbox (start a Docker engine) for full isolation."
            )
        for sub in ("work", "tmp"):
            (self._dir / sub).mkdir()
        argv = support.wrap(str(self._dir), self._supervisor_argv())
        if self._cgroup is not None:
            argv = [*self._cgroup.join_prefix(), *argv]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **default_env(self.config)}
        env["HOME"] = self.workdir
        env[KEY_ENV] = key
        with open(self._dir / "supervisor.log", "ab") as log:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=self.workdir,
                start_new_session=True,
            )
        self._stream = await PipeStream.open(self._proc)
        return self._stream

    def _supervisor_argv(self) -> list[str]:
        c = self.config
        rlimits: dict[str, Any] = {"fsize": parse_size(c.tmpfs_size), "core": 0}
        if self._cgroup is None:
            rlimits["as"] = c.mem_limit_bytes + _ADDRESS_SPACE_HEADROOM
        if os.geteuid() != 0:
            # RLIMIT_NPROC counts every process of the user, so allow for those running now
            rlimits["nproc"] = c.pids_limit + _user_process_count()
        argv = [
            self.python, "-E", "-s", str(RUNTIME_DIR / "supervisor.py"),
            "--workdir", self.workdir,
            "--tmpdir", str(self._dir / "tmp"),
            "--preload", ",".join(c.preload),
            "--output-limit", str(c.output_limit_bytes),
            "--value-limit", str(c.value_limit_bytes),
            "--default-timeout", str(c.default_timeout_s),
            "--grace", str(c.grace_s),
            "--rlimits", json.dumps(rlimits),
            "--cleanup-dir", str(self._dir),
        ]  # fmt: skip
        if self._cgroup is not None and self._cgroup.oom_events is not None:
            argv += ["--oom-file", str(self._cgroup.oom_events)]
        if self._namespaced:
            argv.append("--kill-all")  # safe: the supervisor is alone in its PID namespace
        return argv

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    async def _terminate(self) -> None:
        if self._stream is not None:
            self._stream.close()
        proc, self._proc = self._proc, None
        cgroup, self._cgroup = self._cgroup, None
        # Waiting for the process group, removing the cgroup and the directory block for up to
        # seconds; off the event loop, so the other episodes' tool calls keep running.
        await asyncio.to_thread(_clean_up, proc, cgroup, self._dir)

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["namespaces"] = self._namespaced
        info["confined_root"] = self._support.confined_root if self._support else False
        info["cgroup"] = self._cgroup is not None
        return info


class PipeStream:
    """The supervisor's stdin and stdout pipes as an asyncio stream (see SupervisorStream)."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.WriteTransport, read_transport: Any) -> None:
        self.reader = reader
        self._transport = transport
        self._read_transport = read_transport

    @classmethod
    async def open(cls, proc: subprocess.Popen) -> "PipeStream":
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=wire.MAX_HEADER_BYTES, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), proc.stdout
        )
        transport, _ = await loop.connect_write_pipe(asyncio.Protocol, proc.stdin)
        return cls(reader, transport, read_transport)

    def write(self, data: bytes) -> None:
        if self._transport.is_closing():
            raise BrokenPipeError("the supervisor's stdin is closed")
        self._transport.write(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def close(self) -> None:
        self._transport.close()
        self._read_transport.close()


def _clean_up(proc: subprocess.Popen | None, cgroup: Any, directory: Path | None) -> None:
    if proc is not None:
        _kill_group(proc)
    if cgroup is not None:
        cgroup.remove()
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


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


def _library_versions(modules: tuple[str, ...]) -> dict[str, str | None]:
    """Versions the worker will import (this interpreter's), without importing them."""
    from importlib import metadata

    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in modules:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


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
        """Process sandboxes exit on their own when their host goes away (no host
        connected for a minute); this removes the directories of dead hosts."""
        return await asyncio.to_thread(remove_dead_sandbox_dirs)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "versions": _library_versions(self.config.preload),
            "runtime": runtime_digest(),
            "namespaces": isolation_support().namespaces,
            "confined_root": isolation_support().confined_root,
            "config": self.config.fingerprint(),
        }

    async def close(self) -> None:
        return None
