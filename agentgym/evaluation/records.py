"""The episode-record file: one JSON line per episode, written the moment it ends.

A run file starts with one header line (``"kind": "run"``: the env, its kwargs and
fingerprint, the agent and its sampling settings, the episode plan) and then holds one
``"kind": "episode"`` line per finished episode, in the order they finished. Writing
each line as its episode ends (and flushing it) is what makes a killed run resumable:
everything the file holds was finished, and :func:`open_for_resume` keeps exactly those
episodes, so a resumed run never plays a finished episode again and never counts one
twice. Infra-failed episodes are not finished: their outcome says nothing about the
agent, so a resume plays them again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from agentgym.errors import ConfigError

__all__ = ["RunHeader", "RecordWriter", "RunFile", "read_run", "open_for_resume", "RunFileError",
           "IDENTITY_KEYS"]

FORMAT_VERSION = 1

IDENTITY_KEYS = ("env", "env_kwargs", "fingerprint", "agent", "sampling", "seed", "tasks", "samples")
"""Header fields a resumed run must share with the file it continues: anything else
(concurrency, the progress display) may change between the two invocations."""


class RunFileError(ConfigError):
    """A run file that cannot be read or continued (not a run file, another run's file)."""


@dataclass
class RunHeader:
    """What a run is: the first line of its file.

    Attributes:
        env: the env id. env_kwargs: its kwargs.
        fingerprint: the env's fingerprint digest; fingerprint_fields: everything hashed
            into it, so ``agentgym eval compare`` can name the fields two runs differ in.
        agent: who acted: ``{"kind": "policy", "name": ...}`` or a model's
            ``{"kind": "openai", "model": ..., "base_url": ..., "tool_mode": ...}``.
        sampling: the model's sampling settings (empty for scripted policies).
        seed: episode ``i`` plays task ``i // samples``, reset with ``seed + i // samples``.
        tasks / samples: the plan: ``tasks * samples`` episodes.
    """

    env: str
    env_kwargs: dict[str, Any]
    fingerprint: str
    fingerprint_fields: dict[str, Any]
    agent: dict[str, Any]
    sampling: dict[str, Any]
    seed: int
    tasks: int
    samples: int = 1

    @property
    def episodes(self) -> int:
        return self.tasks * self.samples

    def to_json(self) -> dict[str, Any]:
        return {"kind": "run", "format": FORMAT_VERSION, "env": self.env, "env_kwargs": self.env_kwargs,
                "fingerprint": self.fingerprint, "fingerprint_fields": self.fingerprint_fields,
                "agent": self.agent, "sampling": self.sampling, "seed": self.seed, "tasks": self.tasks,
                "samples": self.samples}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "RunHeader":
        return cls(obj["env"], dict(obj.get("env_kwargs") or {}), obj["fingerprint"],
                   dict(obj.get("fingerprint_fields") or {}), dict(obj["agent"]), dict(obj.get("sampling") or {}),
                   int(obj["seed"]), int(obj["tasks"]), int(obj.get("samples", 1)))

    def identity(self) -> dict[str, Any]:
        return {k: json.loads(json.dumps(self.to_json()[k])) for k in IDENTITY_KEYS}


class RecordWriter:
    """Appends episode records to a run file, one flushed line each."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    @classmethod
    def create(cls, path: str | Path, header: RunHeader) -> "RecordWriter":
        """A new run file (refuses to overwrite one: pass ``resume`` to continue it)."""
        path = Path(path)
        if path.exists() and path.stat().st_size > 0:
            raise RunFileError(f"Expected a new run file, actual: {path} exists; pass --resume to continue it "
                               "or choose another --out")
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = cls(path.open("w", encoding="utf-8"))
        writer._line(header.to_json())
        return writer

    def write(self, record: dict[str, Any]) -> None:
        self._line({"kind": "episode", **record})

    def _line(self, obj: dict[str, Any]) -> None:
        self._stream.write(json.dumps(obj, ensure_ascii=False, default=_jsonable) + "\n")
        self._stream.flush()

    def close(self) -> None:
        self._stream.close()


def _jsonable(value: Any) -> Any:
    """What ``json`` cannot write itself (numpy scalars, sets, tuples in info)."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return str(value)


@dataclass
class RunFile:
    """A run file read back: its header and one record per finished episode."""

    header: RunHeader
    records: list[dict[str, Any]]
    infra_failed_seen: int = 0
    """Infra-failed records in the file that a resume will replay."""


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                if line.endswith("\n"):
                    raise RunFileError(f"Expected JSON on every line of {path}, actual: line {n} is not") from None
                return  # a last line cut by a kill: that episode is not finished


def read_run(path: str | Path, *, keep_infra_failed: bool = True) -> RunFile:
    """Read a run file. Each episode index appears once: its last finished record, or
    (with ``keep_infra_failed``) its last infra-failed one when it never finished."""
    path = Path(path)
    if not path.is_file():
        raise RunFileError(f"Expected a run file (JSONL written by agentgym run/eval), actual: no file {path}")
    lines = _lines(path)
    first = next(lines, None)
    if not first or first.get("kind") != "run":
        raise RunFileError(f"Expected {path} to start with a run header line, actual: {str(first)[:80]!r}")
    finished: dict[int, dict[str, Any]] = {}
    failed: dict[int, dict[str, Any]] = {}
    for obj in lines:
        if obj.get("kind") != "episode":
            continue
        (failed if obj.get("infra_failed") else finished)[int(obj["episode"])] = obj
    kept = dict(finished)
    if keep_infra_failed:
        kept.update({i: r for i, r in failed.items() if i not in finished})
    records = [kept[i] for i in sorted(kept)]
    return RunFile(RunHeader.from_json(first), records, sum(1 for i in failed if i not in finished))


def open_for_resume(path: str | Path, header: RunHeader) -> tuple[RecordWriter, RunFile]:
    """Continue ``path``: check it is this run, rewrite it with its finished episodes only
    (atomically), and return a writer appending to it and what it held."""
    path = Path(path)
    old = read_run(path, keep_infra_failed=False)
    diff = {k: (v, header.identity()[k]) for k, v in old.header.identity().items() if v != header.identity()[k]}
    if diff:
        named = ", ".join(f"{k} (file: {a!r}, now: {b!r})" for k, (a, b) in diff.items())
        raise RunFileError(f"Expected --resume to continue the same run, actual differences: {named}")
    tmp = path.with_name(path.name + ".resume-tmp")
    with tmp.open("w", encoding="utf-8") as f:
        writer = RecordWriter(f)
        writer._line(old.header.to_json())
        for record in old.records:
            writer.write({k: v for k, v in record.items() if k != "kind"})
    os.replace(tmp, path)
    return RecordWriter(path.open("a", encoding="utf-8")), old

