"""In-sandbox supervisor: owns the worker interpreter and answers the host (stdlib only).

Runs as the sandbox's main process (under tini in containers, under ``unshare`` for the
process backend) and speaks the wire protocol on its own stdin and stdout: the host
reaches them through the engine's attach endpoint (containers) or a pipe (processes).
Nothing on that path is a file agent code could replace, and the stream cannot be
re-opened: when the host goes away, stdin reaches EOF and the supervisor exits.

The trust boundary (containers): the supervisor and the zygote run as root with only
SETUID, SETGID and KILL; agent code runs in workers that dropped to the sandbox uid before
any of it ran. A different uid cannot signal, ptrace or read ``/proc`` of root processes,
and both are non-dumpable. File operations and the reset's clean-up run with the
sandbox uid as the *effective* uid (real and saved stay root, so agent code still cannot
signal the supervisor while it does so), which gives them exactly the agent's access:
a symlink planted by the agent leads nowhere the agent could not go itself.

Why a separate supervisor: the worker runs untrusted code that may loop, fork, flood its
output or die, so something outside it must enforce the deadline (interrupt, short grace,
kill the worker's processes, start a fresh worker), drain its stdout/stderr so it never
blocks, and keep a head+tail of the output. Requests carry increasing sequence numbers;
the host never resends one (a broken channel retires the sandbox), so a repeated or older
number is refused, never run twice.

Everything a worker sends is treated as hostile: the worker runs agent code, which holds
its control pipe and can write anything to it. A malformed result is the agent's crash,
never an error of the supervisor.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import hmac
import json
import os
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import libc  # noqa: E402
import wire  # noqa: E402
from headtail import HeadTail  # noqa: E402

HEARTBEAT_S = 1.0
F_SETPIPE_SZ = 1031


def _set_nonblocking(fd: int) -> None:
    os.set_blocking(fd, False)
    try:
        import fcntl

        fcntl.fcntl(fd, F_SETPIPE_SZ, 1 << 20)
    except OSError:
        pass


def _read_available(fd: int) -> tuple:
    """Read what is there without blocking; returns (data, eof)."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return b"".join(chunks), False
        except OSError:
            return b"".join(chunks), True
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        if len(chunks) >= 8:
            return b"".join(chunks), False


OOM_FILES = ["/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"]
"""Where the sandbox's cgroup counts OOM kills (inside a container); ``--oom-file``
names the file for the process backend's own cgroup."""


def _mib(n: int) -> int:
    return max(0, n) >> 20


def _oom_kills() -> int:
    """The cgroup's OOM-kill counter (v2 or v1), or -1 when unreadable."""
    for path in OOM_FILES:
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return -1


RESTART_RESERVE_BYTES = 32 << 20
"""Memory an interpreter restart must find free in the sandbox's cgroup. Less than this
after every agent process is gone means what agent code left behind (files and their
xattrs in the tmpfs mounts, SysV IPC objects) fills the sandbox: a new interpreter would
start at the limit and be killed, or thrash for longer than its start may take. A sandbox
whose limits hold never gets here: ``SandboxConfig`` keeps the writable mounts' caps
128 MiB under ``mem_limit``, and the supervisor and zygote use about 60 MiB of that."""


MEMORY_SETTLE_S = 1.0
"""How long a full sandbox may take to free what its dead processes held before agent
files are removed: a worker's IPC namespace, and the SysV segments in it, is torn down
after the worker has exited (the supervisor measured 6 MiB free, then the next cell ran)."""


def _memory_headroom() -> int | None:
    """Bytes the sandbox's memory cgroup can still charge without reclaiming anything but
    page cache (v2 or v1), or None where its files cannot be read or it has no limit.

    tmpfs pages are not page cache here: they sit on the anon lists (no swap to go to),
    and the slab of tmpfs inodes and xattrs cannot be reclaimed while the files exist."""
    names = (("memory.current", "memory.max", "active_file", "inactive_file"),
             ("memory.usage_in_bytes", "memory.limit_in_bytes", "total_active_file", "total_inactive_file"))
    for directory in dict.fromkeys(os.path.dirname(path) for path in OOM_FILES):
        for usage_name, limit_name, *cache_keys in names:
            try:
                with open(os.path.join(directory, limit_name)) as f:
                    limit_text = f.read().strip()
                with open(os.path.join(directory, usage_name)) as f:
                    usage = int(f.read())
                with open(os.path.join(directory, "memory.stat")) as f:
                    stat = dict(line.split(" ", 1) for line in f.read().splitlines() if " " in line)
            except (OSError, ValueError):
                continue
            if limit_text == "max" or not limit_text.isdigit() or int(limit_text) >= 1 << 60:
                return None
            cache = sum(int(stat.get(key, 0)) for key in cache_keys)
            return int(limit_text) - (usage - cache)
    return None


def _can_allocate(nbytes: int) -> bool:
    """Whether a process in this sandbox gets ``nbytes`` of memory now, once the kernel has
    reclaimed what it can: a forked child touches that much and exits.

    What :func:`_memory_headroom` counts as used includes kernel memory the kernel frees
    on demand: negative dentries from lookups of missing names outlive agent code and the
    reset, and 325,000 of them (2.5 s of ``os.stat``) made a sandbox look full, so the next
    episode was told of and lost its files for what an earlier one did. The child asks
    the kernel instead; its OOM score is the highest, so a sandbox that is really full
    kills only it."""
    try:
        pid = os.fork()
    except OSError:  # no pid or no memory left for even this: the sandbox is full
        return False
    if pid == 0:
        try:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)  # never the supervisor's shutdown
            try:
                libc.prctl(libc.PR_SET_DUMPABLE, 1)  # a non-dumpable process's /proc files are root's
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write("1000")
            except Exception:
                pass
            block = b"\1" * nbytes  # every page written, so every page charged
            os._exit(0 if len(block) == nbytes else 1)
        finally:
            os._exit(1)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status) == 0
        except InterruptedError:
            continue
        except ChildProcessError:
            return False


def _become_subreaper() -> None:
    """Orphans of the worker (it is double-forked by the zygote) become our children."""
    try:
        libc.prctl(libc.PR_SET_CHILD_SUBREAPER, 1)
    except Exception:
        pass


def _process_state(pid: int, task: str = "") -> str:
    """State letter of process ``pid`` (of its thread ``task`` when given); ``X`` when gone."""
    try:
        with open(f"/proc/{pid}/task/{task}/stat" if task else f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def _has_live_thread(pid: int) -> bool:
    """Whether any thread of process ``pid`` still runs.

    The process's own state is its main thread's: one that called ``SYS_exit`` (not
    ``exit_group``) shows ``Z`` while its other threads go on, so a scan of states alone
    would pass over a running process. Threads are counted instead."""
    if _process_state(pid) not in ("Z", "X"):
        return True
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any(_process_state(pid, tid) not in ("Z", "X") for tid in tids)



class SandboxUser:
    """The uid:gid agent code runs as, and a way to act with exactly its file access.

    ``None`` uid (the process backend, where one uid is all there is) makes every method
    a plain call in the supervisor's own identity.
    """

    def __init__(self, spec: str) -> None:
        uid, _, gid = spec.partition(":")
        self.uid = int(uid) if uid else None
        self.gid = int(gid or uid) if uid else None
        if self.uid is not None and os.geteuid() != 0:
            raise SystemExit("supervisor: --sandbox-user needs the supervisor to start as root")

    def __enter__(self) -> "SandboxUser":
        if self.uid is not None:
            os.setresgid(-1, self.gid, -1)
            os.setresuid(-1, self.uid, -1)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.uid is not None:
            os.setresuid(-1, 0, -1)
            os.setresgid(-1, 0, -1)

    def kill_all(self) -> None:
        """``kill(-1, SIGKILL)`` as the sandbox uid, from a child that dropped to it for
        good: the kernel's own "every process of this uid", which no process state, thread
        layout or ``/proc`` quirk can hide from. (Its return value proves nothing: Linux
        answers 0 whenever any other process exists, permitted or not, so the check after
        a reset stays the ``/proc`` scan.)"""
        if self.uid is None:
            return
        try:
            child = os.fork()
        except OSError:  # no pids left (a fork bomb): the /proc scan frees them, then again
            return
        if child == 0:
            try:
                os.seteuid(0)  # we may be acting as the sandbox user: its capabilities back first
                os.setgroups([])
                os.setresgid(self.gid, self.gid, self.gid)
                os.setresuid(self.uid, self.uid, self.uid)
                os.kill(-1, signal.SIGKILL)  # every process this uid may signal, except this one
            finally:
                os._exit(0)
        # The child is the sandbox uid's once it has dropped, so agent code can SIGSTOP it
        # (kill(-1, SIGSTOP) in a loop): never wait for it unboundedly, kill it instead.
        end = time.monotonic() + 0.5
        while True:
            try:
                pid, _ = os.waitpid(child, os.WNOHANG)
            except ChildProcessError:
                return
            if pid:
                return
            if time.monotonic() > end:
                os.kill(child, signal.SIGKILL)  # kills a stopped process too
                try:
                    os.waitpid(child, 0)
                except ChildProcessError:
                    pass
                return
            time.sleep(0.0002)

    def pids(self) -> list:
        """Live (non-zombie) processes of the sandbox uid: everything agent code started."""
        if self.uid is None:
            return []
        found, me = [], os.getpid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            if _real_uid(int(entry)) == self.uid and _has_live_thread(int(entry)):
                found.append(int(entry))
        return found


def _real_uid(pid: int) -> int | None:
    """The real uid from ``/proc/<pid>/status``: unlike the owner of ``/proc/<pid>``, which
    turns to root when a process makes itself non-dumpable, agent code cannot change it."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


ROOT_TIME = 1_000_000_000
"""The access and modification time every writable root gets back at a reset."""

AGENT_XATTRS = ("user.", "system.posix_acl_")
"""The extended attributes an unprivileged owner can set; others (``security.selinux``
on an SELinux host) belong to the host and stay."""


def _agent_xattrs(root: str) -> list:
    try:
        return [n for n in os.listxattr(root) if n.startswith(AGENT_XATTRS)]
    except OSError:
        return []  # a filesystem without xattrs holds none


def _clear_root_metadata(root: str) -> None:
    """Remove what agent code can attach to a writable root itself, which emptying it
    leaves: every extended attribute it can set (a default ACL made every next episode's
    file mode 000; ``user.*`` values held the tmpfs's inodes, so the next upload had no
    room) and its times (a message to the next episode). Run as the root's owner."""
    for name in _agent_xattrs(root):
        try:
            os.removexattr(root, name)
        except OSError:
            pass
    try:
        os.utime(root, (ROOT_TIME, ROOT_TIME))
    except OSError:
        pass


def _unlink_files_queue_dirs(fd: int) -> list:
    """Unlink every entry of the open directory ``fd`` but its subdirectories, and return
    their names."""
    subdirs = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry.name)
                    else:
                        os.unlink(entry.name, dir_fd=fd)
                except OSError:
                    pass
    except OSError:
        pass
    return subdirs


def _remove_tree_contents(root: str) -> None:
    """Delete everything under ``root`` whatever modes agent code set (run as the owner;
    the caller restores the root's own mode afterwards).

    Iterative, and relative to one open directory at a time: agent code can nest
    directories deeper than Python's recursion limit (1,100 levels made a recursive
    removal raise RecursionError, so the supervisor failed and its sandbox was replaced as
    infrastructure) and paths longer than PATH_MAX (20 levels of 250-character names:
    every full-path call failed). Depth and name length cost nothing here, and each
    directory is read once (4,096 sibling directories: linear, not one rescan each)."""
    try:
        os.chmod(root, 0o700)  # a root dir agent code made read-only (fails on /tmp: not ours)
    except OSError:
        pass
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(root, flags)
    except OSError:
        return
    # One open directory at a time; each directory is scanned once, on the way down: its
    # files are unlinked there and its subdirectories queued (linear in the tree's size).
    stack: list = []  # per level below root: (its name in the parent, the parent's subdirs to do)
    pending = _unlink_files_queue_dirs(fd)
    try:
        for _ in range(1 << 24):  # bounded: every turn enters or leaves a directory
            if pending:  # down a level
                name = pending.pop()
                try:
                    os.chmod(name, 0o700, dir_fd=fd)
                    sub = os.open(name, flags, dir_fd=fd)
                except OSError:
                    continue  # left for the reset's check to report
                os.close(fd)
                fd = sub
                stack.append((name, pending))
                pending = _unlink_files_queue_dirs(fd)
                continue
            if not stack:
                return
            name, pending = stack.pop()  # this directory is done: up, and remove it
            parent = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = parent
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                pass
    except OSError:
        return
    finally:
        os.close(fd)


_IPC_FILES = (("/proc/sysvipc/shm", "shmctl"), ("/proc/sysvipc/msg", "msgctl"), ("/proc/sysvipc/sem", "semctl"))
IPC_RMID = 0


def _ipc_objects() -> list:
    """(kind, id) of every SysV IPC object in this IPC namespace."""
    found = []
    for path, call in _IPC_FILES:
        try:
            with open(path) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 1:
                        found.append((call, int(fields[1])))
        except OSError:
            continue
    return found


_SOCKET_TABLES = ("/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6", "/proc/net/raw",
                  "/proc/net/raw6")


def _sockets() -> int:
    """Internet sockets this network namespace still lists. None is the machinery's, so
    after the agent's processes are gone any row is state they left: a closed connection
    stays in TIME_WAIT for 60 s, and the ports it holds can be read by the next episode
    (a bind to them fails). No user can end that state early; the sandbox is retired."""
    rows = 0
    for path in _SOCKET_TABLES:
        try:
            with open(path) as f:
                rows += max(0, sum(1 for line in f if line.strip()) - 1)
        except OSError:
            continue
    return rows


def _remove_ipc_objects() -> None:
    for call, ident in _ipc_objects():
        if call == "semctl":
            libc.libc.semctl(ident, 0, IPC_RMID)
        else:
            getattr(libc.libc, call)(ident, IPC_RMID, None)


class Zygote:
    """The pre-imported interpreter that forks workers (see worker.py)."""

    def __init__(self, argv: list, options: dict, env: dict, cwd: str) -> None:
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                argv + [json.dumps(dict(options, zygote_fd=child.fileno()))],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # never the protocol stream
                pass_fds=(child.fileno(),),
                start_new_session=True,
                env=env,
                cwd=cwd,
            )
        finally:
            child.close()
        self.pid = self.proc.pid
        self.hello: dict | None = None

    def fork(self, fds: list) -> None:
        socket.send_fds(self.sock, [b"{}"], fds)

    def close(self) -> None:
        self.sock.close()


class Worker:
    """One forked worker and the four pipes to it; ``pid`` is known once it is ready."""

    def __init__(self, zygote: Zygote) -> None:
        ctrl_in_r, self.ctrl_in_w = os.pipe()
        self.ctrl_out_r, ctrl_out_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        theirs = [ctrl_in_r, ctrl_out_w, out_w, err_w]
        try:
            zygote.fork(theirs)
        except OSError:
            for fd in (self.ctrl_in_w, self.ctrl_out_r, self.out_r, self.err_r):
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        for fd in (self.ctrl_out_r, self.out_r, self.err_r):
            _set_nonblocking(fd)
        os.set_blocking(self.ctrl_in_w, False)  # agent code can stop reading it (see send)
        self.decoder = wire.FrameDecoder(max_bytes=WORKER_FRAME_LIMIT)
        self.pid = 0
        self.pgid = 0
        self.ns_init = 0
        """Outer pid of the init of the worker's PID namespace (process backend), else 0."""
        self.ready = False
        self.dead = False
        self.code = 0
        self.started = time.monotonic()

    def send(self, header: dict, deadline: float, beat: Any = None) -> None:
        """Write a request to the worker by ``deadline`` or raise :class:`TimeoutError`.

        The worker's end of the pipe belongs to agent code, which can shrink it
        (``F_SETPIPE_SZ``) and stop reading it (``dup2`` another pipe over it): a blocking
        write would hang the supervisor and silence its heartbeat, which the host must read
        as a hung sandbox. Non-blocking writes with the cell's deadline make that the
        agent's timeout instead; ``beat()`` keeps the host informed meanwhile.
        """
        data = memoryview(wire.encode(header))
        while data:
            try:
                data = data[os.write(self.ctrl_in_w, data) :]
                continue
            except BlockingIOError:
                pass
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise TimeoutError("the interpreter stopped reading its requests")
            select.select([], [self.ctrl_in_w], [], min(wait, HEARTBEAT_S))
            if beat is not None:
                beat()

    def close_fds(self) -> None:
        for fd in (self.ctrl_in_w, self.ctrl_out_r, self.out_r, self.err_r):
            try:
                os.close(fd)
            except OSError:
                pass


DOWNLOAD_LIMIT = 256 << 20
WORKER_FRAME_LIMIT = 1 << 20
"""A worker's result frame is a few KiB (values and errors are capped inside it); a bigger
one is agent code writing to the control pipe, and ends the worker like a crash."""
RESET_SETTLE_S = 10.0
"""How long a reset waits for killed agent processes to finish exiting before it counts
one still listed as a survivor (and the sandbox is discarded). A reset ends as soon as
none is left, so this only bounds the pathological case: after a fork bomb on a loaded
2-core machine, one SIGKILLed process was still listed after 3 s (the old value)."""
WORKER_STATUS_GRACE_S = 0.5
"""How long a worker whose control pipe closed has to report its exit status before
everything of agent code is killed (it returns at once when the status is there)."""
WORKER_FORK_TIMEOUT_S = 10.0
"""A forked worker that is not ready this long means the zygote is stuck (stopped by a
signal, say): it is killed and a new one imports the modules again."""


class Supervisor:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.worker_argv = [sys.executable, "-E", "-s", os.path.join(HERE, "worker.py")]
        self.user = SandboxUser(args.sandbox_user)
        self.worker_options = {
            "preload": [m for m in args.preload.split(",") if m],
            "value_limit": args.value_limit,
            "workdir": args.workdir,
            "rlimits": json.loads(args.rlimits),
            "user": [self.user.uid, self.user.gid] if self.user.uid is not None else None,
            "isolate": args.isolate_worker,
            "path": [p for p in args.site.split(",") if p],
        }
        self.env = dict(os.environ)
        self.env["TMPDIR"] = args.tmpdir
        self.scrub_dirs = [d for d in [args.workdir, args.tmpdir, *args.scrub.split(",")] if d]
        self.key = b""
        self.proto_in = 0
        self.proto_out = 1
        self.zygote: Zygote | None = None
        self.worker: Worker | None = None
        self.exit_codes: dict = {}
        self.cell = 0
        self.last_seq = -1
        self.last_beat = 0.0
        self.versions: dict = {}
        self.memory_freed: str | None = None
        """Why agent files were removed to let an interpreter start; told in the next result."""

    # ----------------------------------------------------------------- process life
    def reap_children(self) -> None:
        """Collect exited children (the zygote, workers, orphans we adopted)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            if self.zygote is not None and pid == self.zygote.pid:
                self.zygote.proc.returncode = code
                self.zygote_died()
            elif self.worker is not None and pid == self.worker.pid:
                self.exit_codes[pid] = code
            elif self.worker is not None and self.worker.ns_init and pid == self.worker.ns_init:
                # The worker's namespace init passes on its status (128 + N for signal N).
                self.exit_codes[self.worker.pid] = -(code - 128) if code > 128 else code

    def zygote_died(self) -> None:
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    def start_zygote(self, seq: int) -> None:
        """Start the zygote and wait (sending heartbeats) until its imports are done."""
        for attempt in range(3):
            z = Zygote(self.worker_argv, self.worker_options, self.env, self.args.workdir)
            self.zygote = z
            while z.hello is None and self.zygote is z:
                self.heartbeat(seq)
                readable, _, _ = select.select([z.sock], [], [], HEARTBEAT_S)
                if readable:
                    message = z.sock.recv(65536)
                    if not message:
                        break
                    z.hello = json.loads(message)
                    self.versions = z.hello.get("versions", {})
            if z.hello is not None:
                return
            self.kill_zygote()
            sys.stderr.write(f"supervisor: zygote died while importing (attempt {attempt + 1})\n")
        raise RuntimeError("the interpreter died 3 times while importing its preload modules")

    def kill_zygote(self) -> None:
        z = self.zygote
        if z is None:
            return
        try:
            os.kill(z.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            z.proc.wait(timeout=5)
        except (subprocess.TimeoutExpired, ChildProcessError):
            pass
        self.zygote_died()

    def spawn_worker(self, seq: int) -> None:
        self.free_memory_if_full()  # every new interpreter starts here
        for attempt in range(50):  # a fork bomb's zombies may hold the pids for a moment
            if self.zygote is None:
                self.start_zygote(seq)
            try:
                self.worker = Worker(self.zygote)
                return
            except OSError:
                self.reap_children()  # notices a dead zygote; the next attempt restarts it
                if attempt == 49:
                    raise
                time.sleep(0.05)

    def ensure_ready(self, seq: int) -> None:
        """Have a worker that is ready for code, forking (or starting) one if needed."""
        failures = 0
        while True:
            if self.worker is None or self.worker.dead:
                self.spawn_worker(seq)
            w = self.worker
            if w.ready:
                return
            self.heartbeat(seq)
            readable, _, _ = select.select([w.ctrl_out_r, w.out_r, w.err_r], [], [], 0.2)
            for fd in readable:
                data, eof = _read_available(fd)
                if fd != w.ctrl_out_r:
                    sys.stderr.buffer.write(data)  # start-up noise goes to the log
                    continue
                for header, _ in w.decoder.feed(data):
                    w.ready, w.pid, w.pgid = True, header.get("pid", 0), header.get("pgid", 0)
                    w.ns_init = header.get("ns_init") or 0
                if eof and not w.ready:
                    failures += 1
                    self.discard_worker()
            if not w.ready and time.monotonic() - w.started > WORKER_FORK_TIMEOUT_S:
                failures += 1
                self.discard_worker()
                self.kill_zygote()
            if failures >= 3:
                raise RuntimeError("the worker interpreter failed to start 3 times")

    def free_memory_if_full(self) -> bool:
        """Before a fresh interpreter starts: if what agent code left (files, xattrs, IPC
        objects) leaves it less than :data:`RESTART_RESERVE_BYTES`, remove it, as a reset
        would, and keep the reason for the agent. Returns whether it removed anything.
        Called wherever an interpreter starts (:meth:`spawn_worker`), so a start that
        failed for want of memory finds it freed on the next try, and one the machinery
        itself starved still fails after 3 tries.

        The agent's files are its state, so they go only when they fill the sandbox: an
        interpreter that cannot start is a sandbox the pool would replace, with the files
        lost anyway and the agent's doing counted as the infrastructure's."""
        headroom = _memory_headroom()
        settle_until = time.monotonic() + MEMORY_SETTLE_S
        while headroom is not None and headroom < RESTART_RESERVE_BYTES and time.monotonic() < settle_until:
            time.sleep(0.02)  # what dying processes and namespaces hold is freed a moment later
            headroom = _memory_headroom()
        if not self.memory_full(headroom):
            return False
        self.kill_processes()
        with self.user:
            self.remove_agent_files()
        after = _memory_headroom()
        freed = f"{_mib(after - headroom)} MiB" if after is not None else "its memory"
        self.memory_freed = (
            f"the sandbox's memory was full of what your code left ({_mib(headroom)} MiB free), so "
            f"your files in {', '.join(self.scrub_dirs)} and any IPC objects were removed ({freed} freed)")
        sys.stderr.write(f"supervisor: {self.memory_freed}\n")
        return True

    def memory_full(self, headroom: int | None) -> bool:
        """Whether the sandbox has less than :data:`RESTART_RESERVE_BYTES` for a new
        interpreter: ``headroom`` says so and the kernel, asked by :func:`_can_allocate`,
        cannot reclaim that much. The probe's own OOM kill is not the agent's: the OOM
        count is read again after it."""
        if headroom is None or headroom >= RESTART_RESERVE_BYTES:
            return False
        full = not _can_allocate(RESTART_RESERVE_BYTES)
        self.oom_baseline = _oom_kills()
        return full

    def remove_agent_files(self) -> None:
        """Empty every place agent code can write, with what it attached to those places
        themselves, and remove its IPC objects (as the sandbox user: a planted symlink
        leads nowhere the agent could not go itself)."""
        for root in self.scrub_dirs:
            _remove_tree_contents(root)
            _clear_root_metadata(root)
        _remove_ipc_objects()

    def discard_worker(self) -> None:
        w = self.worker
        if w is not None and not w.dead:
            self.kill_processes()
            w.close_fds()
            w.dead = True

    def kill_processes(self) -> None:
        """Kill the worker and everything it started (the zygote survives)."""
        w = self.worker
        if self.user.uid is not None:
            self.user.kill_all()
            self.reap_children()
            self._kill_until_gone(self.agent_pids)
            self.user.kill_all()  # again, now that a fork bomb's pids are free
            self.reap_children()
        elif self.args.isolate_worker:
            # Every process agent code can start is found by agent_pids, whatever it did.
            self._kill_until_gone(self.agent_pids)
        elif w is not None and w.pgid:
            for _ in range(20):
                try:
                    os.killpg(w.pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    break
                time.sleep(0.001)

    def _kill_until_gone(self, find: Any) -> None:
        """SIGKILL what ``find()`` lists, wait for it to be gone, and look again (for what
        it forked meanwhile) until nothing is left."""
        for _ in range(1000):
            victims = find()
            if not victims:
                return
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                self.reap_children()
                if not any(_has_live_thread(pid) for pid in victims):
                    break
                time.sleep(0.0005)

    def reap_worker(self, killed: bool, grace_s: float = 0.0) -> int:
        """Wait for the worker to exit and close its pipes; returns its exit status.

        ``grace_s``: how long a worker that is already exiting may take to report its own
        status before the kill. On the process backend the status comes from the worker's
        namespace init, which passes it on a moment after the worker dies; killed in that
        moment, it reported ``os._exit(3)`` as a SIGKILL (20 times in 30)."""
        w = self.worker
        if w is None:
            return 0
        if w.dead:
            return w.code
        if killed:
            settle_until = time.monotonic() + grace_s
            while w.pid and w.pid not in self.exit_codes and time.monotonic() < settle_until:
                self.reap_children()
                time.sleep(0.001)
            self.kill_processes()
        end = time.monotonic() + 5
        next_kill = time.monotonic() + 1
        while w.pid and w.pid not in self.exit_codes and time.monotonic() < end:
            self.reap_children()
            if w.pid in self.exit_codes:
                break
            if not _has_live_thread(w.pid) and not (w.ns_init and _has_live_thread(w.ns_init)):
                # Dead, and not (or no longer) ours to wait for: where the runtime has no
                # child subreapers (gVisor), the worker's parent is the init, which reaps it.
                # (A namespace init still alive is about to pass the status on: wait for it.)
                self.reap_children()
                break
            time.sleep(0.001)
            if killed and time.monotonic() > next_kill:
                self.kill_processes()
                next_kill += 1
        w.code = self.exit_codes.pop(w.pid, -signal.SIGKILL)
        w.close_fds()
        w.dead = True
        return w.code

    # ----------------------------------------------------------------- transport
    def heartbeat(self, seq: int) -> None:
        if seq <= 0:  # work before the first request (start-up imports) has nobody waiting
            return
        now = time.monotonic()
        if now - self.last_beat >= HEARTBEAT_S:
            self.last_beat = now
            self.send({"seq": seq, "heartbeat": True})

    def send(self, header: dict, payload: bytes = b"") -> None:
        data = memoryview(wire.encode(header, payload))
        try:
            while data:
                data = data[os.write(self.proto_out, data) :]
        except OSError:
            self.shutdown(0)  # the host is gone: nobody can use this sandbox any more

    # ----------------------------------------------------------------- operations
    def op_run(self, req: dict) -> tuple:
        seq = req["seq"]
        timeout = float(req.get("timeout") or self.args.default_timeout)
        w, started, sent, lost_reason = self.start_cell(seq, req["code"], timeout)
        if sent:
            outcome, out, err, interrupted, duration = self.wait_for_cell(w, seq, timeout, started)
        else:
            self.kill_processes()
            outcome, interrupted, duration = {"status": "timeout", "error": (
                f"killed after the {timeout:g}s deadline: the interpreter stopped reading its requests")}, True, timeout
            out, err = HeadTail(self.args.output_limit), HeadTail(self.args.output_limit)

        if outcome["status"] == "malformed":
            self.reap_worker(killed=True)
            outcome = {"status": "crash", "error": "the interpreter wrote a malformed result "
                       f"to its control pipe and was replaced ({outcome['error']})"}
        if outcome["status"] == "died":
            outcome = self.worker_died(interrupted)
        if outcome["status"] == "timeout" or w.dead:
            self.reap_worker(killed=True)
            if outcome["status"] == "timeout":
                lost_reason = "your code was killed at its deadline"
            else:
                lost_reason = f"your code ended the interpreter ({outcome.get('error') or outcome['status']})"
            self.spawn_worker(seq)  # a fresh fork, ready by the time the host asks again
        if self.memory_freed is not None:
            lost_reason = "; ".join(r for r in (lost_reason, self.memory_freed) if r)
            self.memory_freed = None
        status = outcome.get("status", "crash")
        if status == "interrupted":
            status = "timeout" if interrupted else "error"
        stdout, out_cut = out.render()
        stderr, err_cut = err.render()
        return {
            "seq": seq,
            "status": status,
            "stdout": stdout,
            "stderr": stderr,
            "value": _capped(outcome.get("value"), self.args.value_limit),
            "error": _capped(outcome.get("error"), self.args.output_limit),
            "duration_s": duration,
            "stdout_truncated": out_cut,
            "stderr_truncated": err_cut,
            "value_truncated": bool(outcome.get("value_truncated")),
            "stdout_bytes": out.total,
            "stderr_bytes": err.total,
            "state_lost": lost_reason is not None,
            "state_lost_reason": lost_reason,
        }, b""

    def start_cell(self, seq: int, code: str, timeout: float) -> tuple:
        """Hand ``code`` to a live worker; returns it, when the cell's clock started (once
        a worker was ready: a restart is not the agent's time), whether the code reached it
        within ``timeout`` of that, and, when state was lost, why (the previous worker died
        between calls, or wrote to its control pipe after its result).

        Replacing a dead worker kills every process of the sandbox user first, so agent
        code left running cannot keep killing new workers."""
        lost = None
        for _ in range(3):
            self.reap_children()
            w = self.worker
            if w is not None and not w.dead and w.pid in self.exit_codes:
                exit_status = self.reap_worker(killed=True)
                lost = f"your interpreter exited between calls (exit status {exit_status})"
            elif w is not None and not w.dead and w.ready and _control_pipe_dirty(w):
                # One result per cell: anything more is agent code writing frames, and the
                # worker's own result may still be in the pipe, where it would pass for the
                # next cell's. This worker cannot be trusted to answer in order any more.
                self.reap_worker(killed=True)
                lost = "your code wrote to the interpreter's control pipe, so it was restarted"
            self.ensure_ready(seq)
            w = self.worker
            self.cell += 1
            started = time.monotonic()
            try:
                w.send({"op": "run", "code": code, "cell": self.cell}, started + timeout, lambda: self.heartbeat(seq))
                return w, started, True, lost
            except TimeoutError:  # the code may be half written: this worker is done
                return w, started, False, lost
            except OSError:  # it died just now; the code has not run
                self.reap_worker(killed=True)
                lost = "your interpreter exited between calls"
        raise RuntimeError("the worker died twice before it could take the code")

    def wait_for_cell(self, w: Worker, seq: int, timeout: float, start: float) -> tuple:
        """Drain the worker's output until it answers, interrupting it at the deadline
        and killing it ``grace`` seconds later. Returns (outcome, stdout, stderr,
        interrupted, duration)."""
        out, err = HeadTail(self.args.output_limit), HeadTail(self.args.output_limit)
        # One clock for the cell, started before its code was sent: a worker that reads its
        # request slowly cannot stretch the cell to twice its timeout.
        deadline, kill_at, interrupted = start + timeout, None, False
        outcome = None
        while outcome is None:
            now = time.monotonic()
            if kill_at is None and now >= deadline:
                interrupted, kill_at = True, now + self.args.grace
                try:
                    os.kill(w.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
            elif kill_at is not None and now >= kill_at:
                self.kill_processes()
                outcome = {"status": "timeout", "error": f"killed after the {timeout:g}s deadline"}
                break
            wake = kill_at if kill_at is not None else deadline
            readable, _, _ = select.select(
                [w.ctrl_out_r, w.out_r, w.err_r], [], [], max(0.0, min(wake - now, HEARTBEAT_S))
            )
            for fd in readable:
                data, eof = _read_available(fd)
                if fd == w.out_r:
                    out.add(data)
                elif fd == w.err_r:
                    err.add(data)
                else:
                    try:
                        frames = w.decoder.feed(data)
                    except Exception as e:  # noqa: BLE001 - agent code wrote to the control pipe
                        outcome = {"status": "malformed", "error": f"{type(e).__name__}: {str(e)[:200]}"}
                        break
                    if len(frames) > 1:
                        outcome = {"status": "malformed", "error": f"{len(frames)} results for one cell"}
                    elif frames:
                        outcome = _checked_outcome(frames[0][0], self.cell)
                    elif eof:
                        outcome = {"status": "died"}
            self.heartbeat(seq)
        duration = time.monotonic() - start
        for fd, buf in ((w.out_r, out), (w.err_r, err)):
            buf.add(_read_available(fd)[0])
        return outcome, out, err, interrupted, duration

    def worker_died(self, interrupted: bool) -> dict:
        before = self.oom_baseline
        code = self.reap_worker(killed=True, grace_s=WORKER_STATUS_GRACE_S)
        after = _oom_kills()
        self.oom_baseline = after
        if code == -signal.SIGKILL and (after > before or before < 0):
            return {"status": "oom", "error": "killed by the out-of-memory killer"}
        headroom = _memory_headroom()
        if code == -signal.SIGKILL and self.memory_full(headroom):
            # Whoever sent it, a SIGKILL in a sandbox with no memory left is best told as
            # the memory's: an unexplained crash would not say what to change.
            return {"status": "oom", "error": "killed: the sandbox's memory is full "
                    f"({_mib(headroom)} MiB left after your processes were gone)"}
        if interrupted and code == -signal.SIGINT:
            return {"status": "interrupted"}
        return {"status": "crash", "error": f"interpreter exited with status {code}"}

    def op_reset(self, req: dict) -> tuple:
        """Kill every agent process, empty every place agent code can write, then check.

        The check is what makes a reset trustworthy: if anything survives (a file, an IPC
        object, a process, a changed mode), the answer is ``ok: false`` and the host
        discards the whole sandbox instead of reusing it.
        """
        self.reap_worker(killed=True)
        # A SIGKILLed process can take a while to finish exiting on a loaded machine (its
        # threads still show R or D): give the kills time to land before the check below
        # calls anything still listed a survivor.
        settle_until = time.monotonic() + RESET_SETTLE_S
        while True:
            self._settle(settle_until)
            with self.user:
                self.remove_agent_files()
                for root in self.scrub_dirs:
                    mode = self.root_modes.get(root)
                    if mode is not None:
                        try:
                            os.chmod(root, mode)
                        except OSError:
                            pass
                leftovers = self.leftovers()
            # A fork bomb's straggler can show up after the scans came back empty (1 reset
            # in 6 after a bomb, on a quiet machine): kill it and check again, in the time left.
            if not leftovers or not self.agent_pids() or time.monotonic() >= settle_until:
                break
        if leftovers:
            return {"seq": req["seq"], "ok": False, "error": "reset incomplete: " + "; ".join(leftovers)[:2000]}, b""
        self.cell = 0  # an episode's cells are numbered from 1: a count across resets tells of earlier episodes
        self.ensure_ready(req["seq"])
        # The OOM kills of this episode's processes are not the next one's: a SIGKILLed
        # interpreter there would read "oom" (and tell it of this episode).
        self.oom_baseline = _oom_kills()
        self.memory_freed = None  # after the reset's own interpreter start: the next episode hears nothing of this one
        return {"seq": req["seq"], "ok": True}, b""

    def _settle(self, until: float) -> None:
        """Kill agent processes until a scan finds none (or ``until``)."""
        self.kill_processes()
        while self.agent_pids() and time.monotonic() < until:
            time.sleep(0.01)
            self.kill_processes()

    def leftovers(self) -> list:
        """What a reset failed to remove (empty when the sandbox is as new)."""
        found = []
        for root in self.scrub_dirs:
            try:
                entries = os.listdir(root)
                mode = os.stat(root).st_mode & 0o7777
            except OSError as e:
                found.append(f"{root}: {_os_error(e)}")
                continue
            if entries:
                found.append(f"{root} holds {sorted(entries)[:5]}")
            if root in self.root_modes and mode != self.root_modes[root]:
                found.append(f"{root} has mode {mode:o}, not {self.root_modes[root]:o}")
            attrs = _agent_xattrs(root)
            if attrs:
                found.append(f"{root} has extended attributes {sorted(attrs)[:5]}")
        objects = _ipc_objects()
        if objects:
            found.append(f"{len(objects)} SysV IPC objects")
        sockets = _sockets()
        if sockets:
            found.append(f"{sockets} sockets (a closed connection lingers in TIME_WAIT)")
        pids = self.agent_pids()
        if pids:
            found.append(f"{len(pids)} processes of agent code")
        return found

    def agent_pids(self) -> list:
        """Live processes of agent code: in the process backend everything but the
        machinery (a worker not ready yet included), in a container everything of the
        sandbox uid; none known in the unsafe mode (its worker's group is killed instead)."""
        return self.stray_pids() if self.args.isolate_worker else self.user.pids()

    def stray_pids(self) -> list:
        """Live processes other than the init, this supervisor and the zygote."""
        keep = {1, os.getpid(), os.getppid()}
        if self.zygote is not None:
            keep.add(self.zygote.pid)
        return [int(p) for p in os.listdir("/proc")
                if p.isdigit() and int(p) not in keep and _has_live_thread(int(p))]

    def op_upload(self, req: dict, payload: bytes) -> tuple:
        path = self.resolve(req["path"])
        try:
            with self.user:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = path + ".agentgym-upload"
                # Whatever agent code left at the temporary name (a FIFO would block this
                # open until a reader came) goes first; O_EXCL then makes a new regular file.
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with open(fd, "wb") as f:
                    f.write(payload)
                os.replace(tmp, path)
        except OSError as e:
            return {"seq": req["seq"], "error": _os_error(e)}, b""
        return {"seq": req["seq"], "ok": True}, b""

    def op_download(self, req: dict) -> tuple:
        try:
            with self.user:
                fd = os.open(self.resolve(req["path"]), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with open(fd, "rb") as f:
                    # Only a regular file: a FIFO, socket or device that agent code left
                    # there reads as nothing (None, non-blocking) or forever.
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        raise OSError(errno.EINVAL, "not a regular file", req["path"])
                    data = f.read(DOWNLOAD_LIMIT + 1)
        except OSError as e:
            return {"seq": req["seq"], "error": _os_error(e)}, b""
        if len(data) > DOWNLOAD_LIMIT:
            return {"seq": req["seq"], "error": f"ValueError: file larger than {DOWNLOAD_LIMIT} bytes"}, b""
        return {"seq": req["seq"], "ok": True}, data

    def op_hello(self, req: dict) -> tuple:
        if req.get("wait_ready"):
            self.ensure_ready(req["seq"])
        w = self.worker
        return {
            "seq": req["seq"],
            "pid": os.getpid(),
            "worker_pid": w.pid if w else None,
            "zygote_pid": self.zygote.pid if self.zygote else None,
            "ready": bool(w and w.ready),
            "versions": self.versions,
            "workdir": self.args.workdir,
            "sandbox_uid": self.user.uid,
            "reset_verifiable": all(os.path.exists(path) for path, _ in _IPC_FILES),
            # Proof that this is the supervisor the host started: only it knows the key.
            "proof": hmac.new(self.key, str(req.get("nonce", "")).encode(), hashlib.sha256).hexdigest(),
        }, b""

    def resolve(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.args.workdir, path))

    def dispatch(self, req: dict, payload: bytes) -> tuple:
        seq = req.get("seq")
        if not isinstance(seq, int):
            return {"seq": seq, "error": "ValueError: request without an integer seq"}, b""
        if seq <= self.last_seq:  # the host never resends: a repeat is a broken peer
            return {"seq": seq, "error": f"ValueError: stale seq {seq} <= {self.last_seq}"}, b""
        try:
            response = self.dispatch_op(req, payload)
        except Exception as e:  # report, do not die: the host decides whether to recycle
            response = {"seq": seq, "error": f"SupervisorError: {type(e).__name__}: {e}"}, b""
        self.last_seq = seq
        return response

    def dispatch_op(self, req: dict, payload: bytes) -> tuple:
        seq, op = req["seq"], req.get("op")
        if op == "run":
            response = self.op_run(req)
        elif op == "upload":
            response = self.op_upload(req, payload)
        elif op == "download":
            response = self.op_download(req)
        elif op == "reset":
            response = self.op_reset(req)
        elif op == "hello":
            response = self.op_hello(req)
        elif op == "shutdown":
            self.send({"seq": seq, "ok": True})
            self.shutdown(0)
        else:
            response = {"seq": seq, "error": f"ValueError: unknown op {op!r}"}, b""
        return response

    # ----------------------------------------------------------------- main loop
    def serve(self) -> None:
        """Answer the host's requests on stdin/stdout until stdin closes."""
        self.oom_baseline = _oom_kills()
        _become_subreaper()
        with self.user:
            self.root_modes = {}
            for root in self.scrub_dirs:
                try:
                    self.root_modes[root] = os.stat(root).st_mode & 0o7777
                except OSError:
                    pass
        self.scrub_dirs = [d for d in self.scrub_dirs if d in self.root_modes]
        self.ensure_ready(0)  # import the preload modules before the host asks
        read = lambda n: os.read(self.proto_in, n)  # noqa: E731
        while True:
            try:
                req, payload = wire.read_frame(read)
            except (EOFError, OSError, wire.FrameError):
                self.shutdown(0)  # the host went away, or broke the protocol
            header, body = self.dispatch(req, payload)
            self.send(header, body)

    def shutdown(self, code: int) -> None:
        try:
            self.kill_processes()
            self.kill_zygote()
            if self.args.cleanup_dir:
                shutil.rmtree(self.args.cleanup_dir, ignore_errors=True)
        finally:
            os._exit(code)


_WORKER_STATUSES = ("ok", "error", "interrupted", "oom")
"""What a worker's result frame may say; ``died``, ``timeout`` and ``malformed`` are the
supervisor's own findings and never come from the pipe agent code holds."""


def _checked_outcome(outcome: object, cell: int) -> dict:
    """A worker's result frame, or ``malformed`` if it is not one the worker code would
    send for this ``cell`` (agent code holds the control pipe and can write any frame)."""
    if not isinstance(outcome, dict) or outcome.get("status") not in _WORKER_STATUSES:
        return {"status": "malformed", "error": "result is not a known status"}
    if outcome.get("cell") != cell:
        return {"status": "malformed", "error": "result is not for this cell"}
    checked = {"status": outcome["status"], "value_truncated": outcome.get("value_truncated") is True}
    for key in ("value", "error"):
        text = outcome.get(key)
        if text is not None and not isinstance(text, str):
            return {"status": "malformed", "error": f"result field {key!r} is not text"}
        checked[key] = _valid_text(text)
    return checked


def _valid_text(text: str | None) -> str | None:
    """``text`` as valid UTF-8: JSON can carry lone surrogates (``"\\ud800"``), which no
    encoder or tokenizer on the host accepts; each becomes U+FFFD."""
    if text is None or text.isascii():
        return text
    return re.sub("[\ud800-\udfff]", "\ufffd", text)


def _control_pipe_dirty(w: "Worker") -> bool:
    """Whether the worker wrote anything after its last result (bytes in the pipe or in
    the decoder's buffer)."""
    if w.decoder.pending:
        return True
    if not select.select([w.ctrl_out_r], [], [], 0)[0]:
        return False  # the common case, without the cost of a BlockingIOError
    data, _ = _read_available(w.ctrl_out_r)
    return bool(data)  # readable with no data: the worker died, which start_cell sees next


def _capped(text: object, limit: int) -> object:
    """Head and tail of ``text`` with the usual marker: no field of a result is unbounded."""
    if not isinstance(text, str) or len(text) <= limit // 4:
        return text
    buf = HeadTail(limit)
    buf.add(text.encode("utf-8", "replace"))
    return buf.render()[0]


def _os_error(e: OSError) -> str:
    return f"{type(e).__name__}: [Errno {e.errno}] {e.strerror}: {e.filename}"


def _read_line(fd: int, limit: int) -> bytes:
    """Bytes up to and including the first newline on ``fd``, one at a time, so nothing
    of the protocol that follows is consumed."""
    line = bytearray()
    while len(line) < limit and not line.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        line += chunk
    return bytes(line)


def _reap_as_init() -> None:
    """As PID 1 (a container without tini): fork, and let the parent only reap orphans,
    like tini, so that the supervisor proper is an ordinary, killable process."""
    child = os.fork()
    if child == 0:
        return
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, f: os.kill(child, s))
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid == child:
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workdir", required=True)
    p.add_argument("--tmpdir", default="/tmp")
    p.add_argument("--preload", default="numpy,pandas")
    p.add_argument("--output-limit", type=int, default=65536)
    p.add_argument("--value-limit", type=int, default=16384)
    p.add_argument("--default-timeout", type=float, default=30.0)
    p.add_argument("--grace", type=float, default=0.05)
    p.add_argument("--rlimits", default="{}", help="JSON: as, nproc, fsize, core, nofile")
    p.add_argument("--sandbox-user", default="", help="uid:gid agent code runs as (supervisor started as root)")
    p.add_argument("--key-fd", type=int, default=-1, help="read the per-sandbox key from this descriptor")
    p.add_argument("--key-stdin", action="store_true", help="read the per-sandbox key as the first line of stdin")
    p.add_argument("--site", default="", help="comma-separated directories the worker adds to sys.path")
    p.add_argument("--isolate-worker", action="store_true",
                   help="run each worker in its own user/PID/IPC namespaces, capability-free (process backend)")
    p.add_argument("--scrub", default="", help="comma-separated extra directories a reset empties (/dev/shm)")
    p.add_argument("--oom-file", default="", help="cgroup file with the oom_kill counter")
    p.add_argument("--cleanup-dir", default="", help="directory to remove when the supervisor exits")
    return p.parse_args(argv)


def main(argv: list | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.oom_file:
        OOM_FILES.insert(0, args.oom_file)
    if os.getpid() == 1:
        _reap_as_init()
    if args.sandbox_user:
        os.setgroups([])
    libc.try_prctl(libc.PR_SET_DUMPABLE, 0)  # /proc/<pid>/mem, environ, fd stay root's alone
    key = b""
    if args.key_stdin:  # containers: the first line on the host's stream, never in an environment
        key = _read_line(0, 256).strip()
    elif args.key_fd >= 0:  # the process backend: never in an environment block at all
        with os.fdopen(args.key_fd, "rb") as f:
            key = f.read().strip()
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    supervisor = Supervisor(args)
    supervisor.key = key
    # The protocol moves to private descriptors; 0 and 1 become /dev/null, so no child
    # (the zygote, its workers) can ever inherit the host's stream.
    supervisor.proto_in, supervisor.proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    signal.signal(signal.SIGTERM, lambda s, f: supervisor.shutdown(0))
    supervisor.serve()


if __name__ == "__main__":
    main()
