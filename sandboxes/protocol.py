"""What you can do with a sandbox, independent of how it was started.

The split follows SWE-ReX: this module is the *runtime* contract (``Sandbox``,
``ExecResult``, ``SandboxConfig``); ``docker.py`` and ``process.py`` are *deployments*
that start the same in-sandbox supervisor in a container or a local subprocess.

Everything is async first. ``SyncSandbox`` in :mod:`sandboxes.sync` is a thin blocking
wrapper for scripts and notebooks.
"""

from __future__ import annotations

import abc
import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from sandboxes.errors import SandboxConfigError

__all__ = ["ExecStatus", "ExecResult", "Sandbox", "SandboxConfig"]

ExecStatus = Literal["ok", "error", "timeout", "oom", "crash"]
"""Outcome of one ``run``. All five are caused by the agent's code, never by the
machinery (that raises :class:`~sandboxes.errors.SandboxInfraError` instead):

- ``ok``: the code ran to the end.
- ``error``: it raised; ``ExecResult.error`` holds ``"Type: message"``, stderr the traceback.
- ``timeout``: it ran past its deadline and was interrupted (or killed, then
  ``state_lost`` is true).
- ``oom``: it ran out of memory (``MemoryError`` or the kernel's OOM killer).
- ``crash``: the interpreter died for another reason (segfault, ``os._exit``, killed
  its own supervisor); ``state_lost`` tells whether earlier state survived.
"""


@dataclass(frozen=True)
class ExecResult:
    """The result of running one cell of code in a sandbox.

    Output beyond the sandbox's ``output_limit_bytes`` is cut to head + tail with a
    visible marker such as ``[... 99,934,464 bytes truncated ...]``; the ``*_truncated``
    flags and ``*_bytes`` (original size in bytes) make the cut visible to callers too.
    """

    status: ExecStatus
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    """``repr`` of the cell's final expression (as in a notebook), or None."""
    error: str | None = None
    """``"ExceptionType: message"`` when status is ``error`` (or a short cause otherwise)."""
    duration_s: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    value_truncated: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    state_lost: bool = False
    """True when the interpreter was replaced during this call, so variables, imports
    and files from earlier calls of the episode may be gone."""
    state_lost_reason: str | None = None
    """Why, in words for the agent: its code exited the interpreter, was killed at the
    deadline, or a replay of its cells onto a replacement sandbox came out different.
    Every one of these is the agent's own outcome (see "Who is at fault" in DESIGN.md)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated or self.value_truncated

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ExecResult":
        """The result in a supervisor's reply. Every text field comes out valid UTF-8:
        JSON can carry lone surrogates, which agent code can get into a reply, and which
        would make the observation fail to encode or tokenize on the host."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: valid_utf8(v) if isinstance(v, str) else v for k, v in data.items() if k in names})


_SURROGATES = re.compile("[\ud800-\udfff]")


def valid_utf8(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (so it always encodes)."""
    return text if text.isascii() else _SURROGATES.sub("\ufffd", text)


NetworkMode = Literal["none", "bridge", "host"]
BackendName = Literal["auto", "docker", "process", "unsafe-process"]
"""Where sandboxes run: ``auto`` picks docker when an engine answers, else process."""


@dataclass(frozen=True)
class SandboxConfig:
    """Isolation and resource settings shared by every sandbox backend.

    Defaults are the safe ones. Every field is applied by the Docker backend; the
    process backend applies what the kernel lets it (rlimits, namespaces via
    ``unshare``) and warns, naming each setting it cannot enforce, rather than
    dropping it silently.
    """

    network: NetworkMode = "none"
    read_only_root: bool = True
    workdir: str = "/workspace"
    """Working directory of the agent's code; a tmpfs in containers, wiped on reset."""
    tmpfs_size: str = "256m"
    """Size of each tmpfs (``/tmp`` and ``workdir``). Files there are memory charged to
    the sandbox, so ``2 * tmpfs_size + shm_size`` must leave ``mem_limit`` room for the
    interpreter: full disks must end in the agent's own OOM, never the supervisor's."""
    shm_size: str = "64m"
    """Size of ``/dev/shm``, and the cap on SysV shared memory in the sandbox."""
    tmpfs_inodes: int = 4096
    """Files and directories per in-memory filesystem (workdir, ``/tmp``, ``/dev/shm``).
    ``size=`` caps file contents only: empty files and ``user.*`` extended attributes are
    kernel memory charged to the sandbox, enough to starve the supervisor (260k empty
    files cost 416 MB). The kernel counts xattrs in the same inode space (about 1 KiB an
    inode), so this caps both. Applied by Docker with runc; gVisor keeps only a tmpfs's
    size, mode and owner (and applies no IPC sysctls), so there filling kernel memory
    ends the sandbox, which the pool makes the agent's crash."""
    pids_limit: int = 128
    open_files: int = 256
    """Open files per process of agent code (``RLIMIT_NOFILE``, soft and hard). The host
    has one open-file table (``fs.file-max``, about 100,000 per GiB of RAM) and open files
    are charged only as memory: with the engine's 20,000 per process, one sandbox's 58
    children held 1.2 million, half of a 24 GiB host's table. A sandbox can hold at most
    ``pids_limit x open_files`` (32,768 with the defaults) through descriptors; keep that
    times the sandboxes running at once well under ``fs.file-max``. (Shared mappings hold
    files without a descriptor; those are bounded by the sandbox's memory.)"""
    mem_limit: str = "1g"
    """Memory limit; swap is disabled (memswap limit == mem limit)."""
    cpus: float = 1.0
    """CPU quota in cores."""
    user: str | None = None
    """Non-root ``uid:gid`` the agent's code runs as. ``None`` (the default): in Docker a
    host uid of each container's own (``sandboxes.docker.AGENT_UIDS``), so no host user and
    no other sandbox shares its per-user kernel limits; in the process backend its own
    host uid as root, 1000 inside its user namespace otherwise. In containers the
    supervisor runs as another user (root with only SETUID, SETGID and KILL), out of the
    agent's reach."""
    runtime: str | None = None
    """OCI runtime for containers (``"runsc"`` for gVisor, when the engine has it): a
    second wall against kernel exploits. ``None`` is the engine's default (runc)."""
    cap_drop_all: bool = True
    no_new_privileges: bool = True
    init: bool = True
    """Run ``tini`` as PID 1 so zombies are reaped and signals forwarded."""
    blas_threads: int = 1
    """Threads for OpenBLAS/MKL/OpenMP/numexpr, set through environment variables."""
    output_limit_bytes: int = 3_072
    """Per stream (and for the error text); longer output keeps head and tail with a
    marker giving the size. Sized with ``value_limit_bytes`` so that a whole cell reply
    (three streams' worth, plus notes) fits agentgym's ``python`` tool cap of 10,000
    characters: this cut, where the output is produced, is the only one the agent sees."""
    value_limit_bytes: int = 1_024
    default_timeout_s: float = 30.0
    grace_s: float = 0.05
    """After the deadline the code gets an interrupt; if it is still running after this
    long its process group is killed and a fresh interpreter replaces it."""
    transport_slack_s: float = 20.0
    """The supervisor sends a heartbeat every second while it works; silence this long
    means it is hung and the host kills the sandbox from outside. Generous, because a
    heavily loaded machine can delay both ends by seconds."""
    preload: tuple[str, ...] = ("numpy", "pandas")
    """Modules imported by the interpreter before it is handed out."""
    libraries: tuple[str, ...] = ("numpy", "pandas", "scipy")
    """Third-party distributions agent code may import (with what they need). The Docker
    image installs these; the process backend makes only these visible."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment variables as ``(name, value)`` pairs."""
    labels: tuple[tuple[str, str], ...] = ()
    """Extra container labels (the ``agentgym.*`` ones are always set)."""

    def __post_init__(self) -> None:
        if self.pids_limit < 8:
            raise SandboxConfigError(
                f"Expected pids_limit >= 8 (the supervisor and interpreter need a few), "
                f"actual value: {self.pids_limit}"
            )
        if self.cpus <= 0:
            raise SandboxConfigError(f"Expected cpus > 0, actual value: {self.cpus}")
        if self.blas_threads < 1:
            raise SandboxConfigError(
                f"Expected blas_threads >= 1, actual value: {self.blas_threads}"
            )
        if self.output_limit_bytes < 256:
            raise SandboxConfigError(
                f"Expected output_limit_bytes >= 256, actual value: {self.output_limit_bytes}"
            )
        if not self.workdir.startswith("/"):
            raise SandboxConfigError(
                f"Expected an absolute workdir, actual value: {self.workdir!r}"
            )
        if self.default_timeout_s <= 0 or self.grace_s < 0 or self.transport_slack_s <= 0:
            raise SandboxConfigError(
                "Expected default_timeout_s > 0, grace_s >= 0 and transport_slack_s > 0, "
                f"actual values: {self.default_timeout_s}, {self.grace_s}, "
                f"{self.transport_slack_s}"
            )
        if self.open_files < 32:
            raise SandboxConfigError(f"Expected open_files >= 32 (an interpreter needs a few dozen), "
                                     f"actual value: {self.open_files}")
        if self.tmpfs_inodes < 64:
            raise SandboxConfigError(f"Expected tmpfs_inodes >= 64, actual value: {self.tmpfs_inodes}")
        writable = 2 * parse_size(self.tmpfs_size) + parse_size(self.shm_size) + 3 * self.tmpfs_inodes * INODE_BYTES
        if writable > parse_size(self.mem_limit) - INTERPRETER_HEADROOM_BYTES:
            raise SandboxConfigError(
                f"Expected 2 * tmpfs_size + shm_size + 3 * tmpfs_inodes * 4 KiB <= mem_limit - 128m "
                f"(files in memory must not starve the supervisor), actual values: "
                f"tmpfs_size={self.tmpfs_size!r}, shm_size={self.shm_size!r}, "
                f"tmpfs_inodes={self.tmpfs_inodes}, mem_limit={self.mem_limit!r}; lower tmpfs_size "
                "or raise mem_limit"
            )

    @property
    def mem_limit_bytes(self) -> int:
        return parse_size(self.mem_limit)

    def thread_env(self) -> dict[str, str]:
        """Environment pinning BLAS/OpenMP pools, so one sandbox uses one core."""
        n = str(self.blas_threads)
        names = (
            "OMP_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "MKL_NUM_THREADS",
            "NUMEXPR_NUM_THREADS",
            "VECLIB_MAXIMUM_THREADS",
            "BLIS_NUM_THREADS",
        )
        return {name: n for name in names}

    def fingerprint(self) -> dict[str, Any]:
        """Settings that change what the agent sees, for environment fingerprints."""
        return dataclasses.asdict(self)


INTERPRETER_HEADROOM_BYTES = 128 * 1024**2
INODE_BYTES = 4096
"""Kernel memory budgeted per tmpfs inode (inode, dentry and its share of xattr space;
measured at about 1.6 KiB for an empty file, plus up to 1 KiB of xattrs)."""

_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str | int) -> int:
    """Parse a Docker-style size (``"512m"``, ``"1g"``, ``1048576``) into bytes."""
    if isinstance(text, int):
        return text
    s = str(text).strip().lower().removesuffix("ib").removesuffix("b")
    unit = s[-1:] if s[-1:].isalpha() else ""
    try:
        number = float(s[: len(s) - len(unit)])
    except ValueError:
        number = -1.0
    if unit not in _SIZE_UNITS or number <= 0:
        raise SandboxConfigError(
            f"Expected a size such as '512m' or '1g', actual value: {text!r}"
        )
    return int(number * _SIZE_UNITS[unit])


class Sandbox(abc.ABC):
    """An isolated, persistent Python interpreter with a private working directory.

    State (variables, imports, files in the workdir) persists across ``run`` calls until
    ``reset``. Implementations must be safe to ``close`` more than once.

    Example::

        async with ProcessSandbox() as sb:
            r = await sb.run("x = 2\\nx * 21", timeout=5)
            assert r.status == "ok" and r.value == "42"
    """

    @property
    @abc.abstractmethod
    def id(self) -> str:
        """A stable identifier (container id or process id) for logs and telemetry."""

    @abc.abstractmethod
    async def run(self, code: str, timeout: float | None = None) -> ExecResult:
        """Execute ``code`` in the persistent interpreter.

        ``timeout`` (seconds, default ``config.default_timeout_s``) bounds the code's
        run time; exceeding it gives status ``timeout``, never an exception. Raises
        :class:`~sandboxes.errors.SandboxInfraError` only when the sandbox itself fails.
        """

    @abc.abstractmethod
    async def upload(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` inside the sandbox (relative paths are under the
        workdir), creating parent directories."""

    @abc.abstractmethod
    async def download(self, path: str) -> bytes:
        """Read the file at ``path`` inside the sandbox. Raises ``FileNotFoundError``
        (a :class:`~sandboxes.errors.SandboxError` subclass is not used here because a
        missing file is the caller's problem, not the sandbox's)."""

    @abc.abstractmethod
    async def reset(self) -> None:
        """Return to a fresh state: a new interpreter, an empty workdir and ``/tmp``,
        no processes left from earlier code."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop the sandbox and free everything it holds. Idempotent."""

    def kill(self) -> None:
        """Kill the sandbox from outside, as the infrastructure might (the engine removing
        the container, the host's OOM killer), for fault injection and tests of recovery.

        The sandbox is not closed: its next call fails with
        :class:`~sandboxes.errors.SandboxInfraError`, as after a real crash. Blocking (it
        may wait for the engine), so call it through ``asyncio.to_thread`` from a loop.

        Raises:
            NotImplementedError: this kind of sandbox cannot be killed from outside.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot be killed from outside")

    @property
    def healthy(self) -> bool:
        """False once the sandbox has seen an anomaly and should not be reused."""
        return True

    def describe(self) -> dict[str, Any]:
        """Facts for fingerprints and logs (backend, image id, library versions)."""
        return {"backend": type(self).__name__}

    async def __aenter__(self) -> "Sandbox":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def default_env(config: SandboxConfig) -> dict[str, str]:
    """Environment every sandbox's interpreter starts with (besides ``config.env``)."""
    env = {
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg",
        "HOME": config.workdir,
        "USER": "sandbox",  # getpass.getuser() & co.: an agent uid may have no passwd entry
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    env.update(config.thread_env())
    env.update(dict(config.env))
    return env

