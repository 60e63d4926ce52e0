"""The interpreter that runs the agent's code, one persistent namespace per process.

Started by the supervisor with fd 3 = requests in, fd 4 = results out, fd 1/2 = pipes the
supervisor drains, stdin = /dev/null. Stdlib only until it imports the preload modules
(numpy, pandas) so that a fresh worker is ready before it is needed.

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
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    except Exception:
        pass


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
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text, False
    half = limit // 2
    marker = f"\n[... {len(data) - 2 * half:,} bytes truncated ...]\n".encode()
    cut = data[:half] + marker + data[-half:]
    return cut.decode("utf-8", "replace"), True


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


def serve(options: dict) -> None:
    namespace = {"__name__": "__main__", "__builtins__": builtins}
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
        _flush()
        _write_frame(result)


def main() -> None:
    global CTRL_IN, CTRL_OUT
    options = json.loads(sys.argv[1])
    CTRL_IN, CTRL_OUT = options.get("ctrl_in", CTRL_IN), options.get("ctrl_out", CTRL_OUT)
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")  # the kernel should kill this process, not the supervisor
    except OSError:
        pass
    _harden()
    _apply_limits(options.get("rlimits", {}))
    if options.get("workdir"):
        os.chdir(options["workdir"])
    versions, errors = _preload(options.get("preload", []))
    _flush()
    _write_frame({"ready": True, "pid": os.getpid(), "versions": versions, "errors": errors})
    serve(options)


if __name__ == "__main__":
    main()
