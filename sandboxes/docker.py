"""Docker deployment: one container per sandbox, the supervisor as its main process.

The host reaches the supervisor through the container's own stdin/stdout, attached once
through the engine (:mod:`sandboxes.attach`): no ``docker exec`` on the hot path, and no
directory shared with the host that agent code could write to. The runtime code is
bind-mounted read-only at ``/opt/agentgym``, so the engine must share this host's
filesystem (a local engine, or several local engines).

The container runs as root with every capability dropped except SETUID, SETGID and KILL,
which the supervisor needs to run agent code as its own uid (:func:`agent_user`) and to
clean up after it; agent code itself holds no capability (see ``runtime/supervisor.py``).
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from typing import Any

from sandboxes.attach import AttachedStream, attach_container
from sandboxes.engine import connect, default_engine_url, engine_calls, engine_error
from sandboxes.errors import EngineUnreachableError, SandboxConfigError, SandboxCrashedError, SandboxInfraError
from sandboxes.image import ImageInfo, build_image, default_image
from sandboxes.protocol import SandboxConfig, default_env, parse_size
from sandboxes.reaper import OWNER_LABEL, SANDBOX_LABEL, owner_id, reap_orphans, register_engine
from sandboxes.runtime import wire
from sandboxes.supervised import RUNTIME_DIR, SupervisedSandbox, runtime_digest

__all__ = ["AGENT_UIDS", "DockerSandbox", "DockerBackend", "agent_user", "container_options"]

_IN_RUNTIME_DIR = "/opt/agentgym"
SUPERVISOR_CAPS = ["SETUID", "SETGID", "KILL"]
"""All the supervisor keeps: run workers as the sandbox user, act as that user for file
operations and clean-up, kill its processes. Agent code holds none of them.

Not SYS_RESOURCE, though it would pin each worker's ``oom_score_adj`` floor at 1000 (a
process may lower its score only down to what a SYS_RESOURCE holder last set): engines
often run without it in their bounding set (this project's CI machines do), and then no
container starts. Memory is defended by caps instead (tmpfs inodes, IPC limits), and a
sandbox that dies anyway during a cell is the agent's crash (see ``PooledSandbox``)."""


GVISOR_SENTRY_THREADS = 128
"""Under gVisor the container's pids cgroup counts the sentry's host threads (a sandbox
with ``pids_limit=64`` does not even start); the sandbox's own processes are tasks inside
the sentry, which a fork bomb exhausts as memory and CPU, within the same limits."""


AGENT_UIDS = range(1_879_048_192, 2_000_000_000)
"""Host uids a container's agent code runs as when ``SandboxConfig.user`` is unset.

Without a user namespace a container's uid *is* a host uid, and the kernel keeps some
limits per uid, not per cgroup: inotify instances and watches, pipe buffer pages, POSIX
message queue bytes, pending signals, ``RLIMIT_NPROC``. With one uid for every container
(the image's 1000, also the host's first login user) a sandbox that held 128 inotify
instances gave that user and every other sandbox EMFILE. So each container draws its own
uid from this range: above systemd's ranges for login users, dynamic users and
containers (``systemd-nspawn --private-users=pick`` takes 0x80000 to 0x6FFFFFFF), below
the process backend's 2,000,000,000 + pid and 2^31; a draw that falls in a subordinate
range of ``/etc/subuid`` or ``/etc/subgid`` (LXD's, Podman's) is drawn again. Two live
containers share one with probability about n^2 / 2.4e8 (1.7e-5 for 64)."""
_uids = random.SystemRandom()


def agent_user(config: SandboxConfig) -> tuple[str, str]:
    """The ``(uid, gid)`` agent code runs as in a new container: ``config.user`` if set,
    else a fresh draw from :data:`AGENT_UIDS` (as uid and gid)."""
    if config.user:
        uid, _, gid = config.user.partition(":")
        return uid, gid or uid
    taken = _subordinate_ranges()
    for _ in range(100):
        uid = _uids.randrange(AGENT_UIDS.start, AGENT_UIDS.stop)
        if not any(start <= uid < start + count for start, count in taken):
            return str(uid), str(uid)
    raise SandboxConfigError(
        f"Expected some of AGENT_UIDS ({AGENT_UIDS.start}-{AGENT_UIDS.stop - 1}) outside the subordinate "
        "ranges of /etc/subuid and /etc/subgid, actual: 100 draws all inside them. Set SandboxConfig.user "
        "to a uid:gid of the sandboxes' own.")


def _subordinate_ranges() -> list[tuple[int, int]]:
    """``(start, count)`` of every range in ``/etc/subuid`` and ``/etc/subgid``."""
    found = []
    for path in ("/etc/subuid", "/etc/subgid"):
        try:
            with open(path) as f:
                for line in f:
                    fields = line.strip().split(":")
                    if len(fields) == 3 and fields[1].isdigit() and fields[2].isdigit():
                        found.append((int(fields[1]), int(fields[2])))
        except OSError:
            continue
    return found


def container_options(config: SandboxConfig, image: str, owner: str) -> dict[str, Any]:
    """Keyword arguments for ``containers.create``: every isolation setting, explicitly."""
    size = config.tmpfs_size
    uid, gid = agent_user(config)
    shm_bytes = parse_size(config.shm_size)
    supervisor = [
        "python3", "-E", "-s", f"{_IN_RUNTIME_DIR}/supervisor.py",
        "--sandbox-user", f"{uid}:{gid}",
        "--scrub", "/dev/shm,/dev/mqueue",
        "--workdir", config.workdir,
        "--tmpdir", "/tmp",
        "--preload", ",".join(config.preload),
        "--output-limit", str(config.output_limit_bytes),
        "--value-limit", str(config.value_limit_bytes),
        "--default-timeout", str(config.default_timeout_s),
        "--grace", str(config.grace_s),
        "--rlimits", json.dumps({"core": 0, "nofile": config.open_files}),
        "--key-stdin",
    ]  # fmt: skip
    entrypoint = (["/usr/bin/tini", "--"] if config.init else []) + supervisor
    # The key is the first line the host writes on stdin (see DockerSandbox._launch): an
    # environment block stays readable in /proc/<pid>/environ, and gVisor lets any uid
    # read it there.
    env = default_env(config)
    labels = {  # user labels first: they must never overwrite the owner (the reaper relies on it)
        **dict(config.labels),
        OWNER_LABEL: owner,
        SANDBOX_LABEL: "1",
        "agentgym.runtime": runtime_digest(),
    }
    tmpfs_opts = f"rw,nosuid,nodev,size={size},nr_inodes={config.tmpfs_inodes}"
    options: dict[str, Any] = {
        "image": image,
        "entrypoint": entrypoint,
        "command": [],
        "user": "0:0",
        "working_dir": config.workdir,
        "environment": env,
        "labels": labels,
        "network_mode": config.network,
        "read_only": config.read_only_root,
        "tmpfs": {
            "/tmp": f"{tmpfs_opts},mode=1777",
            config.workdir: f"{tmpfs_opts},mode=0755,uid={uid},gid={gid}",
            # Our own /dev/shm (the engine's takes only a size): capped in inodes too.
            "/dev/shm": f"rw,nosuid,nodev,noexec,size={shm_bytes},nr_inodes={config.tmpfs_inodes},mode=1777",
            # No pseudo-terminals: every devpts instance draws on the host's one table
            # (kernel.pty.max), and a sandbox took 3,071 of its 4,096. An empty read-only
            # tmpfs hides the engine's devpts, so /dev/ptmx leads nowhere.
            "/dev/pts": "ro,nosuid,nodev,noexec,size=4k,nr_inodes=16,mode=0755",
        },
        "pids_limit": config.pids_limit + (GVISOR_SENTRY_THREADS if config.runtime == "runsc" else 0),
        "mem_limit": config.mem_limit_bytes,
        "memswap_limit": config.mem_limit_bytes,
        "nano_cpus": int(config.cpus * 1e9),
        "shm_size": shm_bytes,
        "ipc_mode": "private",
        # IPC namespace limits: SysV shared memory is capped like /dev/shm, and a segment
        # no process has attached is destroyed, so it cannot outlive the code that made it.
        "sysctls": {
            "kernel.shmmax": str(shm_bytes),
            "kernel.shmall": str(shm_bytes // 4096),
            "kernel.shm_rmid_forced": "1",
            # Message queues and semaphore sets are kernel memory that outlives the code
            # that made them (until reset): few and small, so they cannot starve the
            # supervisor (the defaults allow 32000 queues of 16 KiB each).
            "kernel.msgmni": "32",
            "kernel.msgmnb": "16384",
            "kernel.sem": "250 8000 32 32",
        },
        "cap_drop": ["ALL"] if config.cap_drop_all else [],
        "cap_add": SUPERVISOR_CAPS,
        "security_opt": ["no-new-privileges"] if config.no_new_privileges else [],
        "volumes": {str(RUNTIME_DIR): {"bind": _IN_RUNTIME_DIR, "mode": "ro"}},
        "hostname": "sandbox",
        # Attached once, before start; StdinOnce closes the supervisor's stdin when that
        # connection ends (host exit or kill), so the supervisor exits and the container goes.
        "stdin_open": True,
        "detach": False,
        "log_config": {"type": "none"},  # protocol bytes never go to the engine's disk
        "auto_remove": True,
        "init": False,  # tini comes from the image (ENTRYPOINT), see config.init
    }
    if config.runtime:
        options["runtime"] = config.runtime
    return options


class DockerSandbox(SupervisedSandbox):
    """A sandbox in its own container on a (local) Docker engine.

    Args:
        config: isolation settings, all applied (see :func:`container_options`).
        image: image tag; default builds or reuses :func:`sandboxes.default_image`.
        engine_url: the engine to use (default ``DOCKER_HOST`` or the local socket).
        client: an existing ``docker.DockerClient`` for that engine (pools share one).
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        image: str | None = None,
        engine_url: str | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(config)
        self.engine_url = engine_url or default_engine_url()
        self._image = image
        self._client_obj = client
        self._container: Any = None
        self._stream: AttachedStream | None = None
        self._dead = False

    @property
    def id(self) -> str:
        return self._container.id[:12] if self._container is not None else "docker-unstarted"

    @property
    def container_id(self) -> str | None:
        return self._container.id if self._container is not None else None

    @property
    def workdir(self) -> str:
        return self.config.workdir

    def _docker(self) -> Any:
        if self._client_obj is None:
            self._client_obj = connect(self.engine_url)
        return self._client_obj

    async def _launch(self, key: str) -> AttachedStream:
        docker = await asyncio.to_thread(self._docker)
        register_engine(self.engine_url)
        if self.config.runtime:
            await asyncio.to_thread(check_runtime, docker, self.config.runtime, self.engine_url)
        image = self._image or (await asyncio.to_thread(default_image, engine_url=self.engine_url)).tag
        options = container_options(self.config, image, owner_id())
        creating = asyncio.ensure_future(asyncio.to_thread(docker.containers.create, **options))
        try:
            self._container = await asyncio.shield(creating)
        except asyncio.CancelledError:
            creating.add_done_callback(_remove_when_started)  # the thread still runs
            raise
        except Exception as e:
            raise _infra_error(e, f"could not create a container from {image}", self.engine_url) from e
        try:
            self._stream = await attach_container(
                self.engine_url, self._container.id, limit=wire.MAX_HEADER_BYTES
            )
            await asyncio.to_thread(self._container.start)
            self._stream.write(key.encode() + b"\n")  # the supervisor's first read (--key-stdin)
            await self._stream.drain()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            raise _infra_error(e, f"could not start a container from {image}", self.engine_url) from e
        return self._stream

    def _alive(self) -> bool:
        if self._container is None or self._dead:
            return False
        try:
            self._container.reload()
        except Exception:
            self._dead = True
            return False
        return self._container.status in ("created", "running")

    def _killed_by_memory(self, since: float) -> bool:
        """Whether the engine saw the container's memory cgroup kill a process after
        ``since``: its ``oom`` events (one per kill; the engine keeps recent events).
        Any trouble asking says False: the death then stays the infrastructure's."""
        if self._container is None:
            return False
        try:
            with engine_calls(self.engine_url, "asking the engine for the container's OOM events"):
                # Fractional timestamps: the stream ends at once with the history (an
                # ``until`` in the future would hold it open until then).
                events = self._docker().api.events(since=f"{since:.9f}", until=f"{time.time():.9f}", decode=True,
                                                   filters={"container": self._container.id, "event": "oom"})
                return any(int(e.get("timeNano", 0)) > int(since * 1e9) for e in events)
        except Exception:
            return False

    async def _terminate(self) -> None:
        container = self._container
        self._dead = True
        if self._stream is not None:
            self._stream.close()
        if container is not None:
            await asyncio.to_thread(_remove_quietly, container)

    def kill_container(self) -> None:
        """Kill the container from outside (for fault-injection tests and the pool)."""
        if self._container is not None:
            _remove_quietly(self._container)

    def kill(self) -> None:
        self.kill_container()

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["engine"] = self.engine_url
        # attrs, not .image: that property asks the engine, and envs call this per episode
        info["image"] = self._container.attrs.get("Image") if self._container is not None else self._image
        return info


def check_runtime(client: Any, runtime: str, engine_url: str) -> None:
    """Raise :class:`SandboxConfigError` unless the engine offers the OCI ``runtime``."""
    with engine_calls(engine_url, "asking the engine for its runtimes"):
        available = sorted((client.info().get("Runtimes") or {}).keys())
    if runtime not in available:
        raise SandboxConfigError(
            f"Expected an OCI runtime the engine at {engine_url} offers ({', '.join(available)}), "
            f"actual value: runtime={runtime!r}. Install it (gVisor: `runsc install`, then restart "
            "dockerd) or unset SandboxConfig.runtime / AGENTGYM_SANDBOX_RUNTIME."
        )


def _remove_quietly(container: Any) -> None:
    try:
        container.remove(force=True)
    except Exception:  # auto-remove got there first, or the engine is gone
        pass


def _remove_when_started(future: "asyncio.Future[Any]") -> None:
    if not future.cancelled() and future.exception() is None:
        threading.Thread(target=_remove_quietly, args=(future.result(),), daemon=True).start()


def _infra_error(e: Exception, what: str, url: str) -> SandboxInfraError:
    """The engine's own trouble (it stopped or stalled) as such; anything else in
    starting a container (it exited at once, the engine refused it) as a crash."""
    error = engine_error(e, url, what)
    return error if isinstance(error, EngineUnreachableError) else SandboxCrashedError(f"{what}: {e}")


class _Engine:
    """One engine URL with its client, capacity and live sandbox count."""

    def __init__(self, url: str, capacity: int | None, per_sandbox_bytes: int) -> None:
        self.url = url
        self.client = connect(url)
        if capacity is None:
            with engine_calls(url, "asking the engine for its memory"):
                total = int(self.client.info().get("MemTotal") or 0)
            capacity = max(1, total // per_sandbox_bytes) if total else 64
        self.capacity = capacity
        self.live = 0

    @property
    def free(self) -> int:
        return self.capacity - self.live


class DockerBackend:
    """Creates :class:`DockerSandbox` instances, spread over one or more engines.

    Each new sandbox goes to the engine with the most free capacity, where capacity is
    ``capacity_per_engine`` or the engine's memory divided by ``per_sandbox_memory``
    (what a live sandbox with pandas imported actually uses, not its limit).
    """

    name = "docker"

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        engine_urls: list[str] | None = None,
        image: str | None = None,
        capacity_per_engine: int | None = None,
        per_sandbox_memory: str = "160m",
        build: bool = True,
    ) -> None:
        self.config = config or SandboxConfig()
        self.engine_urls = list(engine_urls or [default_engine_url()])
        self._image_tag = image
        self._build = build
        self._capacity = capacity_per_engine
        self._per_sandbox = parse_size(per_sandbox_memory)
        self._engines: list[_Engine] | None = None
        self._setup_lock = asyncio.Lock()
        self.image_info: ImageInfo | None = None

    async def _ensure_engines(self) -> list[_Engine]:
        if self._engines is not None:
            return self._engines
        async with self._setup_lock:
            if self._engines is None:
                await self._setup()
        assert self._engines is not None
        return self._engines

    async def _setup(self) -> None:
        engines = []
        for url in self.engine_urls:  # two URLs may name the same engine; that is fine
            engines.append(await asyncio.to_thread(_Engine, url, self._capacity, self._per_sandbox))
        if self._image_tag is None:
            with engine_calls(self.engine_urls[0], "finding the sandbox image"):
                if self._build:
                    urls = list(dict.fromkeys(self.engine_urls))
                    self.image_info = await asyncio.to_thread(build_image, engine_urls=urls)
                else:
                    self.image_info = await asyncio.to_thread(default_image, build=False, engine_url=self.engine_urls[0])
            self._image_tag = self.image_info.tag
        for engine in engines:
            register_engine(engine.url)
        self._engines = engines

    async def create(self) -> DockerSandbox:
        engines = await self._ensure_engines()
        engine = max(engines, key=lambda e: (e.free, -e.live))
        engine.live += 1
        sandbox = DockerSandbox(self.config, image=self._image_tag, engine_url=engine.url, client=engine.client)
        sandbox._engine_slot = engine  # type: ignore[attr-defined]
        try:
            await sandbox.start()
        except BaseException:
            engine.live -= 1
            raise
        return sandbox

    def forget(self, sandbox: Any) -> None:
        """Called by the pool when a sandbox it created is closed (frees capacity)."""
        engine = getattr(sandbox, "_engine_slot", None)
        if engine is not None:
            engine.live -= 1
            sandbox._engine_slot = None

    def load(self) -> dict[str, int]:
        """Live sandboxes per engine (by position, since URLs may repeat)."""
        return {f"{i}:{e.url}": e.live for i, e in enumerate(self._engines or [])}

    async def remove_orphans(self) -> int:
        removed = await asyncio.to_thread(reap_orphans, self.engine_urls)
        return len(removed)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "isolation": f"container ({self.config.runtime or 'runc'})",
            "image": self.image_info.fingerprint() if self.image_info else self._image_tag,
            "runtime": runtime_digest(),
            "config": self.config.fingerprint(),
        }

    async def close(self) -> None:
        for engine in self._engines or []:
            await asyncio.to_thread(engine.client.close)
        self._engines = None

