"""The interpreter that runs the agent's code, one persistent namespace per process.

The supervisor starts this file once per sandbox as a *zygote*: it imports the preload
modules (numpy, pandas) and then forks a fresh worker whenever asked, so a new
interpreter (after a reset, a timeout kill or a crash) is ready in milliseconds instead
of the second an import of pandas takes. A worker gets requests and sends results on
two control pipes; its stdout and stderr are pipes the supervisor drains; stdin is
/dev/null. Stdlib only apart from the preload modules.

A cell behaves like a notebook cell: the value of a final bare expression is returned as
its ``repr``. SIGINT (sent by the supervisor at the deadline) raises KeyboardInterrupt
only while agent code runs, so an interrupt that arrives while a result is being written
cannot corrupt the frame.
"""

from __future__ import annotations

import ast
import builtins
import json
import linecache
import os
import signal
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402
from headtail import HeadTail  # noqa: E402

CTRL_IN, CTRL_OUT = 3, 4  # replaced by the fd numbers the supervisor passes
_running = False


def _on_sigint(signum, frame):  # noqa: ARG001
    if _running:
        raise KeyboardInterrupt


def _write_frame(header: dict, payload: bytes = b"") -> None:
    data = wire.encode(header, payload)
    view = memoryview(data)
    while view:
        n = os.write(CTRL_OUT, view)
        view = view[n:]


def _apply_limits(limits: dict) -> None:
    import resource

    names = {
        "as": resource.RLIMIT_AS,
        "nproc": resource.RLIMIT_NPROC,
        "fsize": resource.RLIMIT_FSIZE,
        "core": resource.RLIMIT_CORE,
        "nofile": resource.RLIMIT_NOFILE,
    }
    for key, value in limits.items():
        if key in names and value is not None:
            try:
                resource.setrlimit(names[key], (int(value), int(value)))
            except (ValueError, OSError) as e:
                print(f"agentgym worker: cannot set rlimit {key}={value}: {e}", file=sys.stderr)


def _harden() -> None:
    """Die with the supervisor; never gain privileges through exec (Linux only)."""
    import libc

    libc.try_prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)
    libc.try_prctl(libc.PR_SET_NO_NEW_PRIVS, 1)


def _preload(modules: list) -> tuple:
    versions, errors = {}, {}
    for name in modules:
        try:
            module = __import__(name)
            versions[name] = getattr(module, "__version__", None)
        except Exception as e:  # a missing library must not stop the sandbox
            errors[name] = f"{type(e).__name__}: {e}"
    versions["python"] = sys.version.split()[0]
    return versions, errors


def _cut(text: str, limit: int) -> tuple:
    buf = HeadTail(limit)
    buf.add(text.encode("utf-8", "replace"))
    return buf.render()


def _user_traceback(exc: BaseException) -> str:
    """Traceback without this file's frames, as the agent would see it in a notebook."""
    te = traceback.TracebackException.from_exception(exc)
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if f.filename != __file__]
    )
    return "".join(te.format())


def run_cell(code: str, cell: int, namespace: dict, value_limit: int) -> dict:
    global _running
    filename = f"<cell-{cell}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    result = {"status": "ok", "value": None, "error": None, "value_truncated": False}
    try:
        try:
            tree = ast.parse(code, filename, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            body = compile(tree, filename, "exec")
            final = compile(last, filename, "eval") if last is not None else None
            _running = True
            exec(body, namespace)
            value = eval(final, namespace) if final is not None else None
            _running = False
            if value is not None:
                try:
                    text = repr(value)
                except Exception as e:
                    text = f"<repr failed: {type(e).__name__}: {e}>"
                result["value"], result["value_truncated"] = _cut(text, value_limit)
        finally:
            _running = False
    except KeyboardInterrupt:
        result.update(status="interrupted", error="KeyboardInterrupt")
        sys.stderr.write("KeyboardInterrupt: execution interrupted at its deadline\n")
    except MemoryError as e:
        result.update(status="oom", error=f"MemoryError: {e}")
        sys.stderr.write(_user_traceback(e))
    except SystemExit as e:
        result.update(status="error", error=f"SystemExit: {e.code}")
    except BaseException as e:
        result.update(status="error", error=f"{type(e).__name__}: {e}")
        sys.stderr.write(_user_traceback(e))
    return result


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass


WORKER_MODULE = "agentgym_worker"
"""Where this script's own module stays in ``sys.modules`` once agent code has ``__main__``."""


def _agent_main() -> dict:
    """The namespace cells run in: a real ``__main__`` module, as in a script or Jupyter.

    ``pickle`` finds a function or class by ``sys.modules[obj.__module__]``, so with a
    plain dict a function defined in a cell could not be sent to a ``multiprocessing`` or
    ``ProcessPoolExecutor`` worker ("attribute lookup f on __main__ failed"). This script's
    module stays importable as :data:`WORKER_MODULE`; its functions keep their globals."""
    import types

    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules.setdefault(WORKER_MODULE, sys.modules["__main__"])
    sys.modules["__main__"] = main
    return main.__dict__


def serve(options: dict) -> None:
    namespace = _agent_main()
    read = lambda n: os.read(CTRL_IN, n)  # noqa: E731
    while True:
        try:
            header, _ = wire.read_frame(read)
        except (EOFError, OSError):
            return
        if header.get("op") != "run":
            _write_frame({"status": "error", "error": f"unknown op {header.get('op')!r}"})
            continue
        result = run_cell(header["code"], header["cell"], namespace, options["value_limit"])
        result["cell"] = header["cell"]  # the supervisor checks it: one result per cell, in order
        _flush()
        if result.get("error"):  # a message can be any size; the result frame must not be
            result["error"] = _cut(result["error"], options["value_limit"])[0]
        _write_frame(result)


def _set_oom_score(score: int) -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(score))
    except OSError:
        pass


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except Exception:
        pass


def become_worker(options: dict, hello: dict) -> None:
    """Serve cells on the control pipes given in ``options`` until they close."""
    global CTRL_IN, CTRL_OUT
    CTRL_IN, CTRL_OUT = options["ctrl_in"], options["ctrl_out"]
    _set_oom_score(1000)  # the kernel should kill this process, not the supervisor
    _flush()
    pid = options.get("outer_pid") or os.getpid()  # as the supervisor numbers it
    _write_frame({**hello, "pid": pid, "pgid": os.getpgid(0) if pid == os.getpid() else pid,
                  "ns_init": options.get("ns_init")})
    serve(options)


def _become_sandbox_user(user: list | None) -> None:
    """Drop from the zygote's root to the sandbox uid, for good, before any agent code.

    Real, effective and saved ids all change, so every capability is gone and cannot come
    back (no_new_privs stops setuid binaries); from here on this process can neither
    signal nor trace nor read the memory of the supervisor and the zygote.
    """
    if not user:
        return
    uid, gid = int(user[0]), int(user[1])
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        os._exit(70)


def _namespace_init(fds: list) -> int:
    """Split into the PID namespace's init and the worker; return the init's outer pid.

    The init (PID 1) only reaps, and exits with the worker's status (a death by signal N
    as 128 + N), taking every other process of the namespace with it. The worker is an
    ordinary process, so signals it sends itself work as in a container.
    """
    import confine

    init_pid = confine.outer_pid()
    child = os.fork()
    if child:
        _prctl(4, 0)
        for fd in [*fds, 0, 1, 2]:
            try:
                os.close(fd)
            except OSError:
                pass
        confine.drop_capabilities()
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                os._exit(70)
            if pid == child:
                code = os.waitstatus_to_exitcode(status)
                os._exit(code if code >= 0 else 128 - code)
    return init_pid


def _confine_worker(options: dict) -> None:
    """As PID 1 of a fresh namespace set (process backend): note the pid the supervisor
    knows us by, then give up every capability."""
    import confine

    options["outer_pid"] = confine.outer_pid()
    confine.drop_capabilities()


def _filter_syscalls() -> None:
    """Every backend, before any agent code: no_new_privs, then the syscall filter
    (``confine.install_syscall_filter``). In a container it comes on top of the engine's
    own profile, which still lets agent code take host-wide tables such as AIO contexts."""
    import confine

    if confine.syscall_filter_supported():
        _prctl(38, 1)  # PR_SET_NO_NEW_PRIVS: a filter needs it without CAP_SYS_ADMIN
        confine.install_syscall_filter()


def _reseed() -> None:
    """A forked child shares its parent's RNG state; give it its own (``random``
    reseeds itself after fork, numpy does not)."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        try:
            numpy.random.seed()
        except Exception:
            pass


def zygote(options: dict, hello: dict) -> None:
    """Fork a fresh worker for every request from the supervisor, in milliseconds.

    Each request carries four file descriptors (control in, control out, stdout,
    stderr). The child double-forks so that the worker is adopted by the supervisor
    (a child subreaper), which can then wait for it and read its exit status. The zygote
    never runs agent code, and is not dumpable, so a worker cannot ptrace it to plant
    state in later workers.
    """
    import gc
    import socket

    sock = socket.socket(fileno=options["zygote_fd"])
    _prctl(4, 0)  # PR_SET_DUMPABLE = 0
    gc.freeze()  # keep the collector from touching (and un-sharing) inherited objects
    sock.send(json.dumps(hello).encode())
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 65536, 4)
        except OSError:
            return
        if not message:
            return
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            continue
        _flush()
        try:
            pid = os.fork()
        except OSError:  # no pids left (agent processes): the supervisor sees EOF and retries
            for fd in fds:
                os.close(fd)
            continue
        if pid == 0:
            serving = False
            try:
                sock.close()
                os.setsid()
                if options.get("isolate"):
                    import confine

                    confine.unshare_worker_namespaces()  # the next child is PID 1 in its own namespace
                if os.fork():
                    os._exit(0)
                if options.get("isolate"):
                    options["ns_init"] = _namespace_init(fds)  # returns in the worker only
                    _confine_worker(options)
                ctrl_in, ctrl_out, out_w, err_w = fds
                os.dup2(out_w, 1)
                os.dup2(err_w, 2)
                os.close(out_w)
                os.close(err_w)
                _become_sandbox_user(options.get("user"))
                _apply_limits(options.get("rlimits", {}))
                _filter_syscalls()
                _prctl(4, 1)  # dumpable again: its /proc files belong to it, not root
                _reseed()
                serving = True
                become_worker(dict(options, ctrl_in=ctrl_in, ctrl_out=ctrl_out), hello)
            except BaseException:
                if not serving:  # a start that failed (the filter refused...): the supervisor logs why
                    import traceback

                    traceback.print_exc()
                    _flush()
            finally:
                os._exit(0)
        for fd in fds:
            os.close(fd)
        os.waitpid(pid, 0)


def main() -> None:
    options = json.loads(sys.argv[1])
    signal.signal(signal.SIGINT, _on_sigint)
    _harden()
    if "zygote_fd" not in options:
        _apply_limits(options.get("rlimits", {}))  # a zygote's workers apply them after fork
    sys.path.extend(options.get("path") or [])  # the allowed libraries (process backend)
    if options.get("workdir"):
        os.chdir(options["workdir"])
    versions, errors = _preload(options.get("preload", []))
    hello = {"ready": True, "versions": versions, "errors": errors}
    if "zygote_fd" in options:
        zygote(options, hello)
    else:
        become_worker(options, hello)


if __name__ == "__main__":
    main()
