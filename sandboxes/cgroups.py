"""Per-sandbox cgroups for the process backend when it runs as root.

Root ignores RLIMIT_NPROC, and an address-space rlimit is not a memory limit, so as root
the process backend puts each sandbox in its own cgroup with ``pids``, ``memory`` and
``cpu`` limits (v1 or v2), the same limits Docker sets. Best effort: where the cgroup
filesystem is not writable, :func:`create` returns None and the caller warns.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SandboxCgroup", "create", "name_for", "reap_dead"]

_ROOT = Path("/sys/fs/cgroup")
_PARENT = "agentgym"


@dataclass
class SandboxCgroup:
    """The cgroup directories of one sandbox (one per v1 hierarchy, or one for v2)."""

    dirs: list[Path]
    oom_events: Path | None
    """File with the ``oom_kill`` counter the supervisor watches."""

    def oom_mark(self) -> tuple[int | None, int] | None:
        """What :meth:`killed_by_own_limit_since` compares with: this cgroup's count of
        reaching its memory limit (v2 ``memory.events`` ``oom``; None on v1, whose
        high-water mark is restarted here instead) and of processes an OOM killer took
        (``oom_kill``; v1 ``memory.oom_control`` since kernel 4.13). None where the
        counts cannot be read."""
        try:
            fields = self._oom_fields()
            if fields is None:
                return None
            if self.oom_events.name == "memory.events":
                return int(fields["oom"]), int(fields["oom_kill"])
            for peak in self._v1_peaks():  # v1's failcnt stays 0 here: the mark is the peak
                _write(peak, "0")
            return None, int(fields["oom_kill"])
        except (OSError, ValueError, KeyError):
            return None

    def killed_by_own_limit_since(self, mark: tuple[int | None, int] | None) -> bool:
        """Whether, since ``mark``, this cgroup reached its own memory limit and an OOM
        killer took one of its processes. A kill alone can be the host's (``oom_kill``
        counts the victims of any OOM killer, a host-wide one too)."""
        now = self.oom_mark_peek()
        if mark is None or now is None:
            return False
        (hits_then, kills_then), (hits_now, kills_now) = mark, now
        return kills_now > kills_then and (hits_now > hits_then if hits_then is not None else bool(hits_now))

    def oom_mark_peek(self) -> tuple[int, int] | None:
        """The counts now, without restarting anything; on v1 the first is whether the
        high-water mark has reached the limit since it was restarted (0 or 1)."""
        try:
            fields = self._oom_fields()
            if fields is None:
                return None
            if self.oom_events.name == "memory.events":
                return int(fields["oom"]), int(fields["oom_kill"])
            reached = any(int(peak.read_text()) >= int(peak.with_name(peak.name.replace("max_usage", "limit")).read_text())
                          for peak in self._v1_peaks())
            return int(reached), int(fields["oom_kill"])
        except (OSError, ValueError, KeyError):
            return None

    def _oom_fields(self) -> dict[str, str] | None:
        """The ``key value`` lines of :attr:`oom_events` (None without one)."""
        if self.oom_events is None:
            return None
        return dict(line.split(" ", 1) for line in self.oom_events.read_text().splitlines() if " " in line)

    def _v1_peaks(self) -> list[Path]:
        """v1's high-water marks: memory's, and memory + swap's where swap is accounted."""
        names = ("memory.max_usage_in_bytes", "memory.memsw.max_usage_in_bytes")
        return [self.oom_events.parent / n for n in names if (self.oom_events.parent / n).exists()]

    def join_prefix(self) -> list[str]:
        """Command prefix that moves itself into the cgroups, then execs the rest."""
        procs = " ".join(str(d / "cgroup.procs") for d in self.dirs)
        script = 'for p in $0; do echo $$ > "$p" || exit 111; done; exec "$@"'
        return ["sh", "-c", script, procs]

    def remove(self) -> None:
        """Kill whatever is left inside, then remove the directories."""
        for _ in range(50):
            alive = False
            for d in self.dirs:
                for pid in _read_pids(d):
                    alive = True
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            for d in self.dirs:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    alive = True
            if not alive:
                return
            time.sleep(0.02)


def _read_pids(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def name_for(sandbox_dir: Path) -> str:
    """``<owner pid>_<start>-<sandbox dir>``: the owner part lets :func:`reap_dead` tell
    whether the process that made the cgroup is still alive."""
    return f"{sandbox_dir.parent.name}-{sandbox_dir.name}"


def reap_dead() -> int:
    """Remove the sandbox cgroups of processes that are gone (killed without closing their
    pools); return how many."""
    from sandboxes.reaper import owner_alive

    import socket

    removed = 0
    seen: dict[str, list[Path]] = {}
    for parent in [_ROOT / _PARENT, *(_ROOT.glob(f"*/{_PARENT}"))]:
        if not parent.is_dir():
            continue
        for d in parent.iterdir():
            if d.is_dir():
                seen.setdefault(d.name, []).append(d)
    for name, dirs in seen.items():
        owner, _, _ = name.partition("-")
        pid, _, started = owner.partition("_")
        if owner_alive(f"{socket.gethostname()}:{pid}:{started}") is False:
            SandboxCgroup(dirs, None).remove()
            removed += 1
    return removed


def create(name: str, *, pids: int, memory_bytes: int, cpus: float) -> SandboxCgroup | None:
    """A fresh cgroup with these limits, or None where cgroups cannot be managed."""
    if os.geteuid() != 0:
        return None
    try:
        if (_ROOT / "cgroup.controllers").exists():
            return _create_v2(name, pids, memory_bytes, cpus)
        return _create_v1(name, pids, memory_bytes, cpus)
    except OSError:
        return None


def _create_v1(name: str, pids: int, memory_bytes: int, cpus: float) -> SandboxCgroup | None:
    hierarchies = {c: _ROOT / c for c in ("pids", "memory", "cpu")}
    if not all((h / "cgroup.procs").exists() for h in hierarchies.values()):
        return None
    dirs = {c: h / _PARENT / name for c, h in hierarchies.items()}
    for d in dirs.values():
        d.mkdir(parents=True)
    cgroup = SandboxCgroup(list(dirs.values()), dirs["memory"] / "memory.oom_control")
    try:
        _write(dirs["pids"] / "pids.max", str(pids))
        _write(dirs["memory"] / "memory.limit_in_bytes", str(memory_bytes))
        swap = dirs["memory"] / "memory.memsw.limit_in_bytes"
        if swap.exists():
            _write(swap, str(memory_bytes))
        _write(dirs["cpu"] / "cpu.cfs_period_us", "100000")
        _write(dirs["cpu"] / "cpu.cfs_quota_us", str(int(cpus * 100000)))
    except OSError:
        cgroup.remove()
        raise
    return cgroup


def _create_v2(name: str, pids: int, memory_bytes: int, cpus: float) -> SandboxCgroup | None:
    available = set((_ROOT / "cgroup.controllers").read_text().split())
    if not {"pids", "memory", "cpu"} <= available:
        return None
    parent = _ROOT / _PARENT
    parent.mkdir(exist_ok=True)
    _write(_ROOT / "cgroup.subtree_control", "+pids +memory +cpu")
    _write(parent / "cgroup.subtree_control", "+pids +memory +cpu")
    d = parent / name
    d.mkdir()
    cgroup = SandboxCgroup([d], d / "memory.events")
    try:
        _write(d / "pids.max", str(pids))
        _write(d / "memory.max", str(memory_bytes))
        if (d / "memory.swap.max").exists():
            _write(d / "memory.swap.max", "0")
        _write(d / "cpu.max", f"{int(cpus * 100000)} 100000")
    except OSError:
        cgroup.remove()
        raise
    return cgroup
