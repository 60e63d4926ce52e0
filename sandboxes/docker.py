"""Docker deployment: one container per sandbox, the supervisor as its main process.

The host reaches the supervisor through a Unix socket in a per-sandbox directory that
is bind-mounted into the container (``/run/agentgym``); the runtime code is bind-mounted
read-only at ``/opt/agentgym``. So the hot path never touches the Docker daemon (no
``docker exec``), and the engine must share this host's filesystem (a local engine, or
several local engines).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from sandboxes.engine import connect, default_engine_url
from sandboxes.errors import EngineUnreachableError, SandboxCrashedError, SandboxInfraError
from sandboxes.image import ImageInfo, build_image, default_image
from sandboxes.protocol import SandboxConfig, default_env, parse_size
from sandboxes.reaper import OWNER_LABEL, SANDBOX_LABEL, owner_id, reap_orphans, register_engine, socket_root
from sandboxes.supervised import RUNTIME_DIR, SupervisedSandbox, runtime_digest

__all__ = ["DockerSandbox", "DockerBackend", "container_options"]

_IN_SOCKET_DIR = "/run/agentgym"
_IN_RUNTIME_DIR = "/opt/agentgym"
ORPHAN_EXIT_S = 60.0
"""A supervisor with no host connected for this long exits, removing its container."""


def container_options(config: SandboxConfig, image: str, socket_dir: str, owner: str) -> dict[str, Any]:
    """Keyword arguments for ``containers.run``: every isolation setting, explicitly."""
    size = config.tmpfs_size
    uid, _, gid = config.user.partition(":")
    supervisor = [
        "python3", "-E", "-s", f"{_IN_RUNTIME_DIR}/supervisor.py",
        "--socket", f"{_IN_SOCKET_DIR}/supervisor.sock",
        "--workdir", config.workdir,
        "--tmpdir", "/tmp",
        "--preload", ",".join(config.preload),
        "--output-limit", str(config.output_limit_bytes),
        "--value-limit", str(config.value_limit_bytes),
        "--default-timeout", str(config.default_timeout_s),
        "--grace", str(config.grace_s),
        "--orphan-exit-s", str(ORPHAN_EXIT_S),
        "--startup-wait-s", str(ORPHAN_EXIT_S * 2),
        "--kill-all",
    ]  # fmt: skip
    entrypoint = (["/usr/bin/tini", "--"] if config.init else []) + supervisor
    env = default_env(config)
    labels = {  # user labels first: they must never overwrite the owner (the reaper relies on it)
        **dict(config.labels),
        OWNER_LABEL: owner,
        SANDBOX_LABEL: "1",
        "agentgym.runtime": runtime_digest(),
    }
    tmpfs_opts = f"rw,nosuid,nodev,size={size}"
    return {
        "image": image,
        "entrypoint": entrypoint,
        "command": [],
        "user": config.user,
        "working_dir": config.workdir,
        "environment": env,
        "labels": labels,
        "network_mode": config.network,
        "read_only": config.read_only_root,
        "tmpfs": {
            "/tmp": f"{tmpfs_opts},mode=1777",
            config.workdir: f"{tmpfs_opts},mode=0755,uid={uid},gid={gid or uid}",
        },
        "pids_limit": config.pids_limit,
        "mem_limit": config.mem_limit_bytes,
        "memswap_limit": config.mem_limit_bytes,
        "nano_cpus": int(config.cpus * 1e9),
        "cap_drop": ["ALL"] if config.cap_drop_all else [],
        "security_opt": ["no-new-privileges"] if config.no_new_privileges else [],
        "volumes": {
            str(RUNTIME_DIR): {"bind": _IN_RUNTIME_DIR, "mode": "ro"},
            socket_dir: {"bind": _IN_SOCKET_DIR, "mode": "rw"},
        },
        "hostname": "sandbox",
        "detach": True,
        "auto_remove": True,
        "stdin_open": False,
        "init": False,  # tini comes from the image (ENTRYPOINT), see config.init
    }


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
        self._dir: Path | None = None
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

    async def _launch(self) -> str:
        docker = await asyncio.to_thread(self._docker)
        register_engine(self.engine_url)
        image = self._image or (await asyncio.to_thread(default_image, engine_url=self.engine_url)).tag
        self._dir = Path(tempfile.mkdtemp(prefix="sb-", dir=socket_root()))
        uid, _, gid = self.config.user.partition(":")
        try:
            os.chown(self._dir, int(uid), int(gid or uid))
        except (OSError, ValueError):
            os.chmod(self._dir, 0o777)  # not root: let the container user create the socket
        options = container_options(self.config, image, str(self._dir), owner_id())
        starting = asyncio.ensure_future(asyncio.to_thread(docker.containers.run, **options))
        try:
            self._container = await asyncio.shield(starting)
        except asyncio.CancelledError:
            starting.add_done_callback(_remove_when_started)  # the thread still runs
            raise
        except Exception as e:
            raise _infra_error(e, f"could not start a container from {image}") from e
        return str(self._dir / "supervisor.sock")

    def _alive(self) -> bool:
        if self._container is None or self._dead:
            return False
        try:
            self._container.reload()
        except Exception:
            self._dead = True
            return False
        return self._container.status in ("created", "running")

    async def _terminate(self) -> None:
        container = self._container
        self._dead = True
        if container is not None:
            await asyncio.to_thread(_remove_quietly, container)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def kill_container(self) -> None:
        """Kill the container from outside (for fault-injection tests and the pool)."""
        if self._container is not None:
            _remove_quietly(self._container)

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["engine"] = self.engine_url
        # attrs, not .image: that property asks the engine, and envs call this per episode
        info["image"] = self._container.attrs.get("Image") if self._container is not None else self._image
        return info


def _remove_quietly(container: Any) -> None:
    try:
        container.remove(force=True)
    except Exception:  # auto-remove got there first, or the engine is gone
        pass


def _remove_when_started(future: "asyncio.Future[Any]") -> None:
    if not future.cancelled() and future.exception() is None:
        threading.Thread(target=_remove_quietly, args=(future.result(),), daemon=True).start()


def _infra_error(e: Exception, what: str) -> SandboxInfraError:
    text = str(e)
    if "Connection" in type(e).__name__ or "connection" in text.lower():
        return EngineUnreachableError(f"{what}: the engine stopped answering ({text})")
    return SandboxCrashedError(f"{what}: {text}")


class _Engine:
    """One engine URL with its client, capacity and live sandbox count."""

    def __init__(self, url: str, capacity: int | None, per_sandbox_bytes: int) -> None:
        self.url = url
        self.client = connect(url)
        if capacity is None:
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
            if self._build:
                urls = list(dict.fromkeys(self.engine_urls))
                self.image_info = await asyncio.to_thread(build_image, engine_urls=urls)
            else:
                self.image_info = await asyncio.to_thread(default_image, build=False)
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
            "image": self.image_info.fingerprint() if self.image_info else self._image_tag,
            "runtime": runtime_digest(),
            "config": self.config.fingerprint(),
        }

    async def close(self) -> None:
        for engine in self._engines or []:
            await asyncio.to_thread(engine.client.close)
        self._engines = None

