"""An in-process fake sandbox and backend for unit tests that need no Docker.

``FakeSandbox`` runs code with ``exec`` in this process: NO isolation, no deadlines. It
exists so env and pool tests can exercise the protocol fast and inject infrastructure
faults on purpose (``die()``, ``fail_next()``, ``FakeBackend(fail_creations=...)``).
"""

from __future__ import annotations

import ast
import contextlib
import io
import itertools
import time
from typing import Any

from sandboxes.errors import SandboxClosedError, SandboxCrashedError
from sandboxes.protocol import ExecResult, Sandbox, SandboxConfig

__all__ = ["FakeSandbox", "FakeBackend"]

_ids = itertools.count(1)


class FakeSandbox(Sandbox):
    """Protocol-complete stand-in for a sandbox; see the module docstring."""

    def __init__(self, config: SandboxConfig | None = None, *, die_on: str | None = None) -> None:
        self.config = config or SandboxConfig()
        self.die_on = die_on
        """Code containing this text kills the sandbox mid-call (like a real crash)."""
        self._id = f"fake-{next(_ids)}"
        self._namespace: dict[str, Any] = {"__name__": "__main__"}
        self._files: dict[str, bytes] = {}
        self._dead = False
        self._closed = False
        self._failures = 0
        self.calls: list[str] = []
        self.episodes = 0
        self.resets = 0

    @property
    def id(self) -> str:
        return self._id

    @property
    def workdir(self) -> str:
        return self.config.workdir

    @property
    def healthy(self) -> bool:
        return not (self._dead or self._closed)

    def die(self) -> None:
        """From now on every call raises :class:`SandboxCrashedError`."""
        self._dead = True

    def kill(self) -> None:
        """Killed from outside: the same as :meth:`die`."""
        self.die()

    def fail_next(self, n: int = 1) -> None:
        """The next ``n`` calls raise :class:`SandboxCrashedError` (the sandbox lives on)."""
        self._failures += n

    def _check(self, op: str) -> None:
        if self._closed:
            raise SandboxClosedError(f"{self._id} is closed")
        self.calls.append(op)
        if self._dead:
            raise SandboxCrashedError(f"{self._id} is dead")
        if self._failures:
            self._failures -= 1
            raise SandboxCrashedError(f"{self._id}: injected failure during {op}")

    async def run(self, code: str, timeout: float | None = None) -> ExecResult:
        self._check("run")
        if self.die_on is not None and self.die_on in code:
            self.die()
            raise SandboxCrashedError(f"{self._id} died running the code")
        out, err = io.StringIO(), io.StringIO()
        start = time.monotonic()
        status, value, error = "ok", None, None
        try:
            tree = ast.parse(code)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                exec(compile(tree, "<cell>", "exec"), self._namespace)
                if last is not None:
                    result = eval(compile(ast.Expression(last.value), "<cell>", "eval"), self._namespace)
                    value = None if result is None else repr(result)
        except MemoryError as e:
            status, error = "oom", f"MemoryError: {e}"
        except BaseException as e:  # noqa: BLE001 - agent code may raise anything
            status, error = "error", f"{type(e).__name__}: {e}"
        return ExecResult(
            status=status,  # type: ignore[arg-type]
            stdout=out.getvalue(),
            stderr=err.getvalue(),
            value=value,
            error=error,
            duration_s=time.monotonic() - start,
            stdout_bytes=len(out.getvalue().encode()),
            stderr_bytes=len(err.getvalue().encode()),
        )

    async def upload(self, path: str, data: bytes) -> None:
        self._check("upload")
        self._files[path] = bytes(data)

    async def download(self, path: str) -> bytes:
        self._check("download")
        if path not in self._files:
            raise FileNotFoundError(path)
        return self._files[path]

    async def reset(self) -> None:
        self._check("reset")
        self.resets += 1
        self._namespace = {"__name__": "__main__"}
        self._files.clear()

    async def close(self) -> None:
        self._closed = True


class FakeBackend:
    """Makes :class:`FakeSandbox` instances; the first ``fail_creations`` creations fail,
    and code containing ``die_on`` kills the sandbox running it."""

    name = "fake"

    def __init__(
        self, config: SandboxConfig | None = None, *, fail_creations: int = 0, die_on: str | None = None
    ) -> None:
        self.config = config or SandboxConfig()
        self.fail_creations = fail_creations
        self.die_on = die_on
        self.created: list[FakeSandbox] = []
        self.attempts = 0

    async def create(self) -> FakeSandbox:
        self.attempts += 1
        if self.fail_creations:
            self.fail_creations -= 1
            raise SandboxCrashedError("injected creation failure")
        sandbox = FakeSandbox(self.config, die_on=self.die_on)
        self.created.append(sandbox)
        return sandbox

    async def remove_orphans(self) -> int:
        return 0

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "config": self.config.fingerprint()}

    async def close(self) -> None:
        return None
