"""Confining the process backend's sandbox from inside (stdlib and ctypes only).

As root, bubblewrap builds the sandbox and starts this file first (``confine.py
--exec``), holding only CAP_SETUID, CAP_SETGID and CAP_CHOWN: it gives the writable mounts
to the sandbox's own unprivileged host uid, becomes that uid for good (no groups, no
capability, no_new_privs) and execs the supervisor. Agent code never runs as host root.

In a container, agent code is kept from the supervisor by a different uid. The process
backend runs everything as one unprivileged uid, so a worker is kept from the supervisor
and the zygote by namespaces instead:

- a new user, PID, IPC and mount namespace per worker: the supervisor's and zygote's pids
  do not exist in the worker's PID namespace, so it cannot signal them; both are
  non-dumpable and the worker holds no capability in their user namespace, so it cannot
  trace them or read their ``/proc/<pid>/mem``; every SysV IPC object it makes dies with
  it; and in its mount namespace the host's device nodes and ``/proc/sys`` are read-only;
- no capabilities at all afterwards (effective, permitted, inheritable, bounding), and a
  uid that is not root in its namespace, so ``exec`` gives none back;
- a seccomp filter that refuses new namespaces, mounts, kernel keyrings and host-wide
  tables: without it a fresh user namespace would let agent code mount an unbounded tmpfs
  (or remount the device nodes writable), the per-uid keyring would carry data into the
  next episode, and AIO contexts held by one sandbox would fail ``io_setup`` on the whole
  host. The worker installs the same filter in containers too, on top of the engine's.

Everything is Linux- and (for the syscall filter) x86_64-specific; :func:`syscall_filter_supported`
says whether the filter can be installed here.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
_NAMESPACE_FLAGS = 0x7E020000 | 0x00000080  # every CLONE_NEW* flag, CLONE_NEWTIME included
HOST_UID_ENV = "AGENTGYM_SANDBOX_HOST_UID"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # run as a script under -I, too
from libc import (  # noqa: E402
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_SECCOMP,
)
from libc import check as _check  # noqa: E402
from libc import libc as _libc  # noqa: E402


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def unshare_worker_namespaces() -> None:
    """New user, PID and IPC namespaces; the caller's uid keeps its number inside.

    The caller must fork afterwards: its next child is PID 1 of the new PID namespace,
    and it is born non-dumpable. The caller (the zygote's child) is non-dumpable like the
    zygote, so its ``/proc/self`` files belong to root, not to it: it turns dumpable just
    long enough to write its own maps. Only the supervisor's PID namespace can see it then,
    never a worker's.
    """
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNS), "unshare")
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    finally:
        _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    make_host_objects_read_only()


HOST_DEVICE_NODES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
"""The host's own device nodes bubblewrap's ``--dev`` binds into the sandbox."""
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC = 1, 32, 4096, 16384
_MS_KEEP = 2 | 4 | 8 | 1024 | 2048 | 4096  # nosuid, nodev, noexec, noatime, nodiratime, relatime


def _remount_read_only(path: str) -> None:
    flags = os.statvfs(path).f_flag & _MS_KEEP  # ST_* flags are the MS_* values; keep them (locked)
    _check(_libc.mount(None, path.encode(), None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags, None),
           f"remount {path} read-only")


def make_host_objects_read_only() -> None:
    """In this process's own mount namespace: the host's device nodes and ``/proc/sys``
    become read-only mounts, so chmod, chown and utime on ``/dev/null`` & co. (host inodes)
    fail with EROFS, and no kernel setting can be written even where a uid could.

    Reading and writing the devices themselves still work. Mounts made by a more privileged
    namespace are locked in this one: their flags can be tightened, never loosened, and the
    syscall filter refuses every mount call from here on.
    """
    for node in HOST_DEVICE_NODES:
        if os.path.exists(node):
            _remount_read_only(node)
    _check(_libc.mount(b"/proc/sys", b"/proc/sys", None, _MS_BIND | _MS_REC, None), "bind /proc/sys")
    _remount_read_only("/proc/sys")


def outer_pid() -> int:
    """This process's pid in the PID namespace of the ``/proc`` it sees (the supervisor's)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[1])
    return os.getpid()


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Drop every capability from every set, the bounding set first (it needs SETPCAP)."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break  # EINVAL: past the last capability this kernel knows
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


# x86_64 syscall numbers refused by the filter.
_DENIED_X86_64 = {
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "add_key": 248, "request_key": 249, "keyctl": 250, "bpf": 321, "perf_event_open": 298,
    "userfaultfd": 323, "io_uring_setup": 425, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432,
    # Host-wide tables charged to no cgroup: a sandbox's AIO contexts count against the
    # host's one fs.aio-max-nr (65,536), so holding them fails every io_setup on the host.
    "io_setup": 206,
    # Memory taken out of the kernel's direct map (fragments it for the whole host).
    "memfd_secret": 447,
    # Memory no process owns: a memfd written and never mapped is charged to the sandbox
    # but is in no process's resident set, so the OOM killer, which picks the largest
    # process, took the zygote and the supervisor first (and without a cgroup, in the
    # process backend run by an ordinary user, RLIMIT_AS does not count it at all). Agent
    # code keeps shared memory that is counted: files on the capped tmpfs mounts, and
    # anonymous shared mappings (in the mapping process's resident set).
    "memfd_create": 319,
}
_CLONE, _CLONE3 = 56, 435
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000


def syscall_filter_supported() -> bool:
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _filter_program() -> bytes:
    LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    KILL = 0x80000000  # SECCOMP_RET_KILL_PROCESS: a foreign architecture's syscall
    denied = sorted(_DENIED_X86_64.values())
    prog = [
        _bpf(LD_W_ABS, 4),                                   # arch
        _bpf(JEQ, _AUDIT_ARCH_X86_64, 1, 0),
        _bpf(RET, KILL),
        _bpf(LD_W_ABS, 0),                                   # syscall number
        _bpf(JGE, _X32_BIT, 0, 1),                           # x32 ABI aliases: refuse
        _bpf(RET, EPERM),
        _bpf(JEQ, _CLONE3, 0, 1),                            # clone3: glibc falls back to clone
        _bpf(RET, ENOSYS),
    ]
    for nr in denied:
        prog += [_bpf(JEQ, nr, 0, 1), _bpf(RET, EPERM)]
    prog += [
        _bpf(JEQ, _CLONE, 0, 3),
        _bpf(LD_W_ABS, 16),                                  # clone flags (low 32 bits of arg 0)
        _bpf(JSET, _NAMESPACE_FLAGS, 0, 1),
        _bpf(RET, EPERM),
        _bpf(RET, ALLOW),
    ]
    return b"".join(prog)


def install_syscall_filter() -> None:
    """Refuse new namespaces, mounts, keyrings and host-wide tables from now on (needs
    no_new_privs, or CAP_SYS_ADMIN)."""
    code = _filter_program()
    n = len(code) // 8
    buf = ctypes.create_string_buffer(code, len(code))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Prog(n, ctypes.cast(buf, ctypes.c_void_p))
    SECCOMP_MODE_FILTER = 2
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def become_host_uid(uid: int) -> None:
    """As the first process of a sandbox bubblewrap built as root (holding only CAP_SETUID,
    CAP_SETGID and CAP_CHOWN): become ``uid`` for good, with no groups and no capability left.

    The kernel clears every capability when all of a process's uids leave 0; this checks
    it did, and sets no_new_privs so that no later ``exec`` gives any back.
    """
    if uid <= 0:
        raise SystemExit(f"confine: refusing host uid {uid}")
    try:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    except OSError as e:  # e.g. root of a user namespace that does not map this uid
        raise SystemExit(f"confine: cannot become host uid {uid} ({e.strerror}); the process "
                         "backend run as root needs uids 2000000000 + pid to exist") from None
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    with open("/proc/self/status") as f:
        fields = (line.partition(":\t") for line in f)
        caps = {k: int(v, 16) for k, _, v in fields if k in ("CapPrm", "CapEff", "CapAmb")}
    ids = (os.getresuid(), os.getresgid())
    if ids != ((uid, uid, uid), (uid, uid, uid)) or os.getgroups() or any(caps.values()):
        raise SystemExit(f"confine: could not become host uid {uid} without privileges")


def main(argv: list) -> None:
    """``confine.py [--own=DIR]... --exec COMMAND...``: give each DIR (the sandbox's
    writable mounts) to the host uid named in the environment, become that uid, then exec
    COMMAND (the supervisor), with that variable gone from its environment."""
    owned = []
    while argv and argv[0].startswith("--own="):
        owned.append(argv.pop(0).partition("=")[2])
    if len(argv) < 2 or argv[0] != "--exec":
        raise SystemExit("usage: confine.py [--own=DIR]... --exec COMMAND...")
    uid = os.environ.pop(HOST_UID_ENV, "")
    if not uid.isdigit():
        raise SystemExit(f"confine: {HOST_UID_ENV} is not set")
    for path in owned:
        os.chown(path, int(uid), int(uid), follow_symlinks=False)
    become_host_uid(int(uid))
    os.execv(argv[1], argv[1:])


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
