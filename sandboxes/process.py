"""Local-process deployment: the same supervisor and worker, without a container.

Used when no Docker engine is reachable. By default it is a real sandbox, built with
bubblewrap (``bwrap``, Debian package ``bubblewrap``), and it never runs agent code as host
root:

- as an ordinary user, bwrap maps the sandbox uid to that user in a user namespace; as
  root, bwrap builds the sandbox with root's access to the host's files and its first
  process (:mod:`sandboxes.runtime.confine`) drops everything to a host uid of the
  sandbox's own (``2e9 + pid``), unprivileged and never shared with another sandbox;
- a mount namespace in which only the interpreter, its standard library, the allowed
  libraries (``config.preload`` and what they need), the shared libraries their ELF
  objects load (:mod:`sandboxes.interpreter_files`) and the supervisor's code are visible,
  all read-only; ``/usr/bin``, ``/usr/local``, the system's ``dist-packages``, the project,
  the rest of the venv, ``$HOME``, ``/root``, ``/etc`` and every host socket directory do not
  exist there, so ``import agentgym`` fails inside;
- private tmpfs mounts capped at ``tmpfs_size`` for the workdir and ``/tmp`` and at
  ``shm_size`` for ``/dev/shm``, each at ``tmpfs_inodes`` inodes (made by ``unshare`` and
  ``mount`` in the sandbox's own mount namespace: bubblewrap's ``--tmpfs`` caps no
  inodes, and empty files are kernel memory that a size does not count);
- the host device nodes bwrap binds into ``/dev`` and ``/proc/sys`` are read-only mounts
  in every worker's mount namespace, so neither a node's mode, owner or times nor a
  kernel setting can be changed from inside;
- new PID, network, IPC, UTS and cgroup namespaces, no ``/sys``, and a minimal
  environment;
- limits the sandbox cannot rewrite: as root, a cgroup per sandbox with the ``pids``,
  memory and CPU limits Docker sets (joined before bwrap starts; its cgroup filesystem is
  not visible inside); as any user, rlimits (``RLIMIT_NPROC`` counts the user's processes,
  the address space stands in for memory when there is no cgroup);
- each worker in namespaces of its own, capability-free and behind a syscall filter
  (:mod:`sandboxes.runtime.confine`), so agent code cannot reach the supervisor.

What is not hidden: ``/proc/self/mountinfo`` names the host paths of the read-only
mounts (the interpreter's prefix, the venv's site-packages); hiding them would mean
copying ~200 MB of libraries into every sandbox.

Where bubblewrap cannot run, the backend refuses to run agent code
(:class:`SandboxIsolationError` says how to get Docker or bubblewrap), unless the caller
opts in loudly with ``isolation="unsafe"`` (``AGENTGYM_SANDBOX=unsafe-process``): then the
supervisor runs as a plain subprocess with rlimits only, and says so everywhere.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from sandboxes import cgroups, interpreter_files
from sandboxes.errors import SandboxConfigError
from sandboxes.protocol import SandboxConfig, default_env, parse_size
from sandboxes.reaper import remove_dead_sandbox_dirs, sandbox_root
from sandboxes.runtime import wire
from sandboxes.supervised import RUNTIME_DIR, SupervisedSandbox, runtime_digest

__all__ = [
    "ProcessSandbox",
    "ProcessBackend",
    "SandboxIsolationWarning",
    "SandboxIsolationError",
    "IsolationSupport",
    "isolation_support",
    "allowed_site_entries",
]

IsolationChoice = Literal["auto", "unsafe"]
_ADDRESS_SPACE_HEADROOM = 2 * 1024**3
"""RLIMIT_AS counts reserved, not resident, memory: numpy/pandas reserve about 1 GiB
they never touch, so the limit is ``mem_limit`` plus this headroom."""
_IN_RUNTIME = "/opt/agentgym"
_IN_SITE = "/opt/site"
_IN_MEMORY = "/run/agentgym-memory"
"""Where the sandbox's memory cgroup directory is bound, read-only: the supervisor reads
its OOM-kill counter and how full it is (a container sees its own the same way)."""
_HOST_PATH = "/usr/bin:/bin"
"""Where the sandbox's host-side tools (``unshare``, ``mount``, ``sh``) are looked up and
what the launch runs with: never the caller's ``PATH``."""


class SandboxIsolationWarning(UserWarning):
    """A sandbox runs with weaker isolation than asked for (the unsafe process mode)."""


class SandboxIsolationError(SandboxConfigError):
    """The process backend cannot isolate agent code on this machine, so it refuses.

    Fix it by starting a Docker engine (``dockerd &``), installing bubblewrap
    (``apt-get install bubblewrap``) where unprivileged user namespaces are allowed
    (``sysctl kernel.unprivileged_userns_clone=1`` on some kernels), or — only for code you
    trust — opting in to no isolation with ``AGENTGYM_SANDBOX=unsafe-process``.
    """


@dataclass(frozen=True)
class IsolationSupport:
    """What the process backend can do on this machine (probed once per process)."""

    bwrap: str | None
    """Path of a working bubblewrap, or None."""
    reason: str
    """Why isolation is impossible here ('' when it is possible)."""


def isolation_level(isolation: IsolationChoice) -> str:
    """What a sandbox made with ``isolation`` reports: ``namespaces`` (bubblewrap) or
    ``none`` (the unsafe opt-in)."""
    return "none" if isolation == "unsafe" else "namespaces"


def allowed_site_entries(modules: tuple[str, ...]) -> dict[str, str]:
    """Top-level site-packages entries of the distributions ``modules`` need.

    Maps entry name (``numpy``, ``numpy.libs``, ``dateutil``, ...) to its host path: the
    only third-party code the sandbox can import.
    """
    entries: dict[str, str] = {}
    seen: set[str] = set()
    todo = [m for m in modules]
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        root = Path(str(dist.locate_file("")))
        for file in dist.files or []:
            top = file.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth") or top.startswith("__editable__"):
                continue
            path = root / top
            if path.exists():
                entries[top] = str(path)
        for requirement in dist.requires or []:
            if "extra ==" in requirement:
                continue
            req_name = requirement.split(";")[0].strip()
            for sep in "<>=!~[ (":
                req_name = req_name.split(sep)[0]
            if req_name:
                todo.append(req_name)
    return entries


def _interpreter() -> tuple[str, str]:
    """The base interpreter (not a venv's) and its prefix."""
    prefix = sys.base_prefix
    executable = os.path.realpath(sys.executable)
    if sys.prefix != sys.base_prefix:
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        candidate = os.path.join(prefix, "bin", version)
        executable = os.path.realpath(candidate if os.path.exists(candidate) else executable)
    return executable, prefix


_HOST_UID_BASE = 2_000_000_000
"""As root, a sandbox's processes run as host uid ``_HOST_UID_BASE + <pid of its bwrap>``:
unprivileged, owning no file on the host, and different for every live sandbox, so the
kernel's per-user counters (processes, inotify instances, pipe buffers, pending signals)
are never shared between sandboxes. Nothing on a Debian/Ubuntu host allocates uids in
[2e9, 2e9 + pid_max), below the 2^31 some tools treat as negative."""
_HOST_UID_ENV = "AGENTGYM_SANDBOX_HOST_UID"  # read by runtime/confine.py


def _runs_as_root() -> bool:
    return os.geteuid() == 0


@functools.lru_cache(maxsize=8)
def _visible_files(modules: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The bwrap arguments that show the interpreter, its standard library and the shared
    libraries everything loads at their host paths; the directories covered empty; and the
    allowed site-packages entries (name, host path)."""
    entries = allowed_site_entries(modules)
    python, _ = _interpreter()
    show, hide = interpreter_files.interpreter_paths(python, list(entries.values()))
    binds: dict[str, None] = {}
    links: dict[str, str] = {}
    for path in [*show, "/etc/ld.so.cache", "/etc/localtime", "/usr/lib/locale/C.utf8"]:
        if not os.path.lexists(path):
            continue
        for kind, source, link in interpreter_files.path_ops(path):
            if kind == "symlink":
                links.setdefault(link, source)
            elif os.path.exists(source):
                binds.setdefault(source)
    argv: list[str] = []
    # bwrap copies the modes of the host's parent directories (``/root`` is 0700): make
    # every directory on the way world-searchable, or the sandbox uid could not reach them.
    parents = sorted({d for path in [*binds, *links] for d in _ancestors(path)} - set(links), key=len)
    for directory in parents:
        argv += ["--perms", "0755", "--dir", directory]
    for link, target in links.items():
        argv += ["--symlink", target, link]
    for path in binds:
        argv += ["--ro-bind", path, path]
    return tuple(argv), tuple(hide), tuple(sorted(entries.items()))


def bwrap_argv(config: SandboxConfig, bwrap: str, *, mounts: str, oom_file: str | None = None) -> list[str]:
    """The bubblewrap command line for one sandbox (everything but the command itself).

    ``mounts`` holds the writable places (``work``, ``tmp``, ``shm``), the tmpfs mounts
    :func:`launch_argv` makes in a mount namespace of the sandbox's own, bound to the
    workdir, ``/tmp`` and ``/dev/shm``.

    As an ordinary user, bwrap maps the sandbox uid to that user in a new user namespace.
    As root it builds the sandbox with root's access to the host's files and starts
    :data:`_CONFINE` with only CAP_SETUID, CAP_SETGID and CAP_CHOWN: it hands the writable
    mounts to the sandbox's own unprivileged host uid and becomes that uid before anything
    else runs (see :func:`launch_argv`); mapping a uid in a user namespace would make it
    host root.
    """
    uid, _, gid = (config.user or "1000:1000").partition(":")
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if _runs_as_root():
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_CHOWN"]
    else:
        # --cap-drop ALL: bwrap is uid 0 of the user namespace unshare made, so it would
        # otherwise keep that namespace's full bounding set for the sandbox
        argv += ["--unshare-user", "--uid", uid, "--gid", gid or uid, "--cap-drop", "ALL"]
    shown, hide, entries = _visible_files(tuple(dict.fromkeys(config.preload + config.libraries)))
    made = {shown[i + 3] for i in range(len(shown) - 3) if shown[i + 2] == "--dir"}
    dests = [_IN_RUNTIME, f"{_IN_SITE}/x", config.workdir, "/tmp", *([_IN_MEMORY] if oom_file else [])]
    for directory in sorted({d for dest in dests
                             for d in _ancestors(dest)} - made, key=len):
        argv += ["--perms", "0755", "--dir", directory]  # not the 0700 bwrap makes them
    argv += shown
    for site in hide:
        argv += ["--tmpfs", site]  # the interpreter's own packages stay out of reach
    argv += ["--ro-bind", str(RUNTIME_DIR), _IN_RUNTIME]
    for name, path in entries:
        argv += ["--ro-bind", path, f"{_IN_SITE}/{name}"]
    if oom_file:
        argv += ["--ro-bind", os.path.dirname(oom_file), _IN_MEMORY]
    argv += [
        "--proc", "/proc", "--dev", "/dev",
        # no pseudo-terminals (the host's one kernel.pty.max table): /dev/ptmx leads nowhere
        "--tmpfs", "/dev/pts", "--remount-ro", "/dev/pts",
        "--bind", f"{mounts}/shm", "/dev/shm",
        "--bind", f"{mounts}/tmp", "/tmp",
        "--bind", f"{mounts}/work", config.workdir,
        "--chdir", config.workdir,
    ]  # fmt: skip
    # Read-only: the root bwrap builds, its /dev and the empty dirs over hidden packages (all
    # tmpfs without a size); the capped tmpfs mounts above stay the only writable places.
    # (bwrap's --remount-ro would also make the host device nodes it binds unusable, so
    # each worker remounts those, and /proc/sys, read-only in a mount namespace of its own:
    # see runtime/confine.py.)
    for path in ["/", "/dev", *hide]:
        argv += ["--remount-ro", path]
    return argv


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


_CONFINE = f"{_IN_RUNTIME}/confine.py"


def writable_mounts(config: SandboxConfig) -> dict[str, str]:
    """The tmpfs mount options of the writable places under :func:`bwrap_argv`'s
    ``mounts``, capped in bytes and in inodes as a container's are (``nr_inodes`` also
    caps ``user.*`` xattrs; bubblewrap's ``--tmpfs`` takes a size only)."""
    def options(size: str, mode: str, extra: str = "") -> str:
        return f"size={parse_size(size)},nr_inodes={config.tmpfs_inodes},mode={mode},nosuid,nodev{extra}"

    return {"work": options(config.tmpfs_size, "0755"), "tmp": options(config.tmpfs_size, "01777"),
            "shm": options(config.shm_size, "01777", ",noexec")}


def launch_argv(config: SandboxConfig, bwrap: str, command: list[str], *, mounts: str, oom_file: str | None = None,
                cgroup_procs: list[str] = ()) -> list[str]:
    """The whole command that starts ``command`` in a sandbox.

    ``unshare`` gives the sandbox a mount namespace of its own (as an ordinary user, in a
    user namespace that maps the user to root, which bubblewrap's own user namespace then
    nests in), where a shell mounts the capped tmpfs of :func:`writable_mounts` on the
    directories of ``mounts``: they exist for the sandbox's processes only and vanish with
    the last of them. The shell first moves itself into the sandbox's cgroups
    (``cgroup_procs``, as root), so that bubblewrap and everything it starts are counted
    there; as root it also names the sandbox's host uid after its own pid (which ``unshare``,
    the shell and bwrap keep, each exec'ing the next), and the sandbox's first process,
    :data:`_CONFINE`, becomes that uid before it execs ``command``.
    """
    python, _ = _interpreter()
    unshare, mount = (shutil.which(tool, path=_HOST_PATH) or tool for tool in ("unshare", "mount"))
    inner = [*bwrap_argv(config, bwrap, mounts=mounts, oom_file=oom_file)]
    script = 'for p in $0; do echo $$ > "$p" || exit 111; done; '
    for name, options in writable_mounts(config).items():
        script += f"{mount} -t tmpfs -o {options} tmpfs {shlex.quote(f'{mounts}/{name}')} || exit {_MOUNT_FAILED}; "
    if _runs_as_root():
        script += f"{_HOST_UID_ENV}=$(({_HOST_UID_BASE} + $$)); export {_HOST_UID_ENV}; "
        owned = [f"--own={path}" for path in (config.workdir, "/tmp", "/dev/shm")]
        inner += [python, "-I", "-S", _CONFINE, *owned, "--exec", *command]
    else:
        inner += command
    namespace = [unshare, *([] if _runs_as_root() else ["--map-root-user"]), "--mount", "--propagation", "private"]
    return [*namespace, "/bin/sh", "-c", script + 'exec "$@"', " ".join(cgroup_procs), *inner]


_MOUNT_FAILED = 112  # launch_argv's exit status when a capped tmpfs could not be mounted


def make_mount_points(directory: Path) -> str:
    """The (empty, host-side) directories :func:`launch_argv` mounts the writable places on."""
    for name in ("work", "tmp", "shm"):
        (directory / name).mkdir(parents=True, exist_ok=True)
    return str(directory)


def host_uid(pid: int) -> int:
    """The host uid a root sandbox launched as process ``pid`` runs as."""
    return _HOST_UID_BASE + pid


_PROBE = (
    "import ctypes, os, sys\n"
    "sys.path.insert(0, '/opt/agentgym')\n"
    "import confine\n"
    "if os.getuid() == 0 and open('/proc/self/uid_map').read().split() == ['0', '0', '4294967295']:\n"
    "    sys.exit('the sandbox would run as host root')\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.prctl(4, 0, 0, 0, 0)  # non-dumpable, as the zygote that forks workers is\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    try:\n"
    "        confine.unshare_worker_namespaces()\n"
    "        child = os.fork()\n"
    "        if child == 0:\n"
    "            confine.drop_capabilities()\n"
    "            if confine.syscall_filter_supported():\n"
    "                confine.install_syscall_filter()\n"
    "            os._exit(0)\n"
    "        os._exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))\n"
    "    except BaseException as e:\n"
    "        print(f'{type(e).__name__}: {e}', file=sys.stderr)\n"
    "        os._exit(1)\n"
    "os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
)


@functools.lru_cache(maxsize=1)
def isolation_support() -> IsolationSupport:
    """Whether a sandbox can start here: bubblewrap, as this user, then a worker's nested
    namespaces made by the non-dumpable child of a non-dumpable process, exactly as a
    sandbox's zygote makes them."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return IsolationSupport(None, "bubblewrap (`bwrap`) is not installed")
    missing = [tool for tool in ("unshare", "mount") if shutil.which(tool, path=_HOST_PATH) is None]
    if missing:
        return IsolationSupport(None, f"{' and '.join(f'`{t}`' for t in missing)} (util-linux) not found in "
                                      f"{_HOST_PATH}: the sandbox's capped tmpfs mounts need them")
    python, _ = _interpreter()
    try:
        with tempfile.TemporaryDirectory(prefix="agentgym-probe-") as directory:
            mounts = make_mount_points(Path(directory))
            argv = launch_argv(SandboxConfig(), bwrap, [python, "-I", "-S", "-c", _PROBE], mounts=mounts)
            probe = subprocess.run(argv, capture_output=True, timeout=60, env={"PATH": _HOST_PATH}, cwd="/")
    except (OSError, subprocess.SubprocessError) as e:
        return IsolationSupport(None, f"`bwrap` failed to run: {e}")
    if probe.returncode != 0:
        why = probe.stderr.decode(errors="replace").strip()[-500:] or f"exit status {probe.returncode}"
        if probe.returncode == _MOUNT_FAILED:
            why = f"the capped tmpfs mounts failed (`unshare` then `mount -t tmpfs`): {why}"
        return IsolationSupport(None, f"`bwrap` could not build the sandbox: {why} (hosts that restrict "
                                      "unprivileged user namespaces, such as Ubuntu's AppArmor "
                                      "`kernel.apparmor_restrict_unprivileged_userns=1`, refuse both)")
    return IsolationSupport(bwrap, "")


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, SandboxIsolationWarning, stacklevel=3)


_warned: set[str] = set()


class ProcessSandbox(SupervisedSandbox):
    """A sandbox whose supervisor is a local subprocess, confined by bubblewrap.

    Args:
        config: isolation and resource settings (``network`` must be ``"none"``).
        isolation: ``"auto"`` confines with bubblewrap and raises
            :class:`SandboxIsolationError` where that is impossible; ``"unsafe"`` runs
            agent code unconfined, for code you trust, with a warning.
        base_dir: where the per-sandbox directory (the supervisor's log) goes; default a
            directory of this process under the per-user ``$TMPDIR/agentgym-<uid>``.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        isolation: IsolationChoice = "auto",
        base_dir: str | None = None,
    ) -> None:
        super().__init__(config)
        if isolation not in ("auto", "unsafe"):
            raise SandboxConfigError(f"Expected isolation 'auto' or 'unsafe', actual value: {isolation!r}")
        if self.config.network != "none" and isolation == "auto":
            raise SandboxConfigError(
                f"Expected network='none' for the process backend (it has no network to give), "
                f"actual value: {self.config.network!r}; use the Docker backend"
            )
        self.isolation = isolation
        self.base_dir = base_dir
        self._proc: subprocess.Popen | None = None
        self._dir: Path | None = None
        self._cgroup: cgroups.SandboxCgroup | None = None
        self._stream: PipeStream | None = None
        self._oom_mark: tuple[int | None, int] | None = None
        """The cgroup's OOM counts at the supervisor's last answer (``SandboxCgroup.oom_mark``)."""
        self._ended_by_memory = False
        """Read at tear-down, before the cgroup is removed: its own limit killed since the mark."""

    @property
    def id(self) -> str:
        return f"process-{self._proc.pid}" if self._proc else "process-unstarted"

    @property
    def workdir(self) -> str:
        if self.isolation == "unsafe":
            return str(self._dir / "work") if self._dir else ""
        return self.config.workdir

    @property
    def isolation_level(self) -> str:
        return isolation_level(self.isolation)

    async def _launch(self, key: str) -> "PipeStream":
        support = await asyncio.to_thread(isolation_support)
        if self.isolation == "auto" and support.bwrap is None:
            raise SandboxIsolationError(
                f"The process sandbox cannot isolate agent code here: {support.reason}. Start a "
                "Docker engine, or install bubblewrap (`apt-get install bubblewrap`); to run "
                "trusted code unconfined anyway, set AGENTGYM_SANDBOX=unsafe-process."
            )
        if self.isolation == "unsafe":
            _warn_once(
                "AGENTGYM_SANDBOX=unsafe-process: agent code runs UNCONFINED as this user, with "
                "this user's files, sockets and network namespace. Use it only for trusted code."
            )
        self._dir = Path(tempfile.mkdtemp(prefix="p-", dir=self.base_dir or sandbox_root()))
        self._cgroup = cgroups.create(
            cgroups.name_for(self._dir),
            pids=self.config.pids_limit + 4,  # + sh, bwrap and its init in front
            memory_bytes=self.config.mem_limit_bytes,
            cpus=self.config.cpus,
        )
        oom = str(self._cgroup.oom_events) if self._cgroup and self._cgroup.oom_events else None
        procs = [str(d / "cgroup.procs") for d in self._cgroup.dirs] if self._cgroup is not None else []
        if self.isolation == "unsafe":
            for sub in ("work", "tmp"):
                (self._dir / sub).mkdir()
            argv = [sys.executable, "-E", "-s", str(RUNTIME_DIR / "supervisor.py"), *self._supervisor_args(oom)]
            if self._cgroup is not None:
                argv = [*self._cgroup.join_prefix(), *argv]
            cwd = self.workdir
        else:
            python, _ = _interpreter()
            supervisor = [python, "-I", "-S", f"{_IN_RUNTIME}/supervisor.py",
                          *self._supervisor_args(f"{_IN_MEMORY}/{os.path.basename(oom)}" if oom else None)]
            argv = launch_argv(self.config, support.bwrap, supervisor, mounts=make_mount_points(self._dir / "mnt"),
                               oom_file=oom, cgroup_procs=procs)
            cwd = str(self._dir)
        env = {"PATH": _HOST_PATH, **default_env(self.config)}
        env["HOME"] = self.workdir
        # The key goes through a pipe, not the environment: /proc/<pid>/environ keeps the
        # original environment of bwrap and the supervisor for their whole lives.
        key_r, key_w = os.pipe()
        os.write(key_w, key.encode())
        os.close(key_w)
        argv = [*argv, "--key-fd", str(key_r)]
        try:
            with open(self._dir / "supervisor.log", "ab") as log:
                self._proc = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                    env=env, cwd=cwd, start_new_session=True, pass_fds=(key_r,),
                )  # fmt: skip
        finally:
            os.close(key_r)
        self._stream = await PipeStream.open(self._proc)
        return self._stream

    def _supervisor_args(self, oom_file: str | None) -> list[str]:
        c = self.config
        unsafe = self.isolation == "unsafe"
        rlimits: dict[str, Any] = {"core": 0, "nofile": c.open_files}
        if unsafe:
            rlimits["fsize"] = parse_size(c.tmpfs_size)  # no tmpfs: a per-file cap at least
        if self._cgroup is None:
            rlimits["as"] = c.mem_limit_bytes + _ADDRESS_SPACE_HEADROOM
        if os.geteuid() != 0:
            # RLIMIT_NPROC counts every process of the user, so allow for those running now.
            rlimits["nproc"] = c.pids_limit + _user_process_count()
        elif not unsafe and self._cgroup is None:
            # As root without a cgroup: the sandbox's host uid is its own, so RLIMIT_NPROC
            # counts exactly its processes (the supervisor and zygote included).
            rlimits["nproc"] = c.pids_limit + 4
        args = [
            "--workdir", self.workdir,
            "--tmpdir", str(self._dir / "tmp") if unsafe else "/tmp",
            "--preload", ",".join(c.preload),
            "--output-limit", str(c.output_limit_bytes),
            "--value-limit", str(c.value_limit_bytes),
            "--default-timeout", str(c.default_timeout_s),
            "--grace", str(c.grace_s),
            "--rlimits", json.dumps(rlimits),
        ]  # fmt: skip
        if unsafe:
            args += ["--cleanup-dir", str(self._dir)]
        else:
            args += ["--site", _IN_SITE, "--isolate-worker", "--scrub", "/dev/shm"]
        if oom_file:
            args += ["--oom-file", oom_file]
        return args

    def _alive(self) -> bool:
        """Called from a worker thread after the channel broke. A supervisor that died
        closed its stdout a moment before it can be reaped: at end of stream, wait that
        moment (never otherwise: a host that closes the pipe on a bad frame makes a live
        supervisor exit too)."""
        if self._proc is None or self._proc.poll() is not None:
            return False
        if self._stream is None or not self._stream.ended_by_peer:
            return True
        try:
            self._proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return True
        return False

    def _note_answer(self) -> None:
        self._oom_mark = self._cgroup.oom_mark() if self._cgroup is not None else None

    def _killed_by_memory(self, since: float) -> bool:
        """Whether the sandbox's own memory limit was reached and an OOM killer took one of
        its processes after the supervisor's last answer (read at tear-down: the cgroup is
        gone by now). A kill without the limit reached is the host's, and no counts (no
        cgroup, an old kernel) say False."""
        return self._ended_by_memory

    def kill(self) -> None:
        """SIGKILL the whole process tree at once (bubblewrap gives the sandbox a session
        of its own, so the process group alone would leave it running for a moment)."""
        if self._proc is not None:
            _kill_tree(self._proc.pid)

    async def _terminate(self) -> None:
        if self._stream is not None:
            self._stream.close()
        proc, self._proc = self._proc, None
        cgroup, self._cgroup = self._cgroup, None
        if cgroup is not None:  # before it is removed: a death is told apart by it
            self._ended_by_memory = cgroup.killed_by_own_limit_since(self._oom_mark)
        # Waiting for the process group, removing the cgroup and the directory block for up to
        # seconds; off the event loop, so the other episodes' tool calls keep running.
        await asyncio.to_thread(_clean_up, proc, cgroup, self._dir)

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["isolation"] = self.isolation_level
        info["cgroup"] = self._cgroup is not None
        return info


class PipeStream:
    """The supervisor's stdin and stdout pipes as an asyncio stream (see SupervisorStream)."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.WriteTransport, read_transport: Any) -> None:
        self.reader = reader
        self._transport = transport
        self._read_transport = read_transport
        self._closed = False
        self.ended_by_peer = False
        """Whether the supervisor's stdout had ended when the host closed the stream (its
        own close ends the reader too, and makes a live supervisor exit)."""

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
        if not self._closed:
            self._closed = True
            self.ended_by_peer = self.reader.at_eof()
        self._transport.close()
        self._read_transport.close()


def _clean_up(proc: subprocess.Popen | None, cgroup: Any, directory: Path | None) -> None:
    if proc is not None:
        _kill_group(proc)
    if cgroup is not None:
        cgroup.remove()
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def process_tree(root: int) -> list[int]:
    """``root`` and every descendant, found through ``/proc/<pid>/stat`` (parents first)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    todo, tree = [root], []
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def _kill_tree(root: int) -> None:
    """SIGKILL ``root`` and every descendant."""
    for pid in process_tree(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


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

    @property
    def isolation_level(self) -> str:
        return isolation_level(self.sandbox_kwargs.get("isolation", "auto"))

    async def create(self) -> ProcessSandbox:
        sandbox = ProcessSandbox(self.config, **self.sandbox_kwargs)
        return await sandbox.start()

    async def remove_orphans(self) -> int:
        """Process sandboxes exit with their host (their stdin closes); this removes the
        directories and cgroups that dead hosts left."""
        dirs = await asyncio.to_thread(remove_dead_sandbox_dirs)
        groups = await asyncio.to_thread(cgroups.reap_dead)
        return dirs + groups

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "isolation": self.isolation_level,
            "versions": _library_versions(self.config.preload),
            "runtime": runtime_digest(),
            "config": self.config.fingerprint(),
        }

    async def close(self) -> None:
        return None
