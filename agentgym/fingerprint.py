"""A stable hash over everything that changes what the agent sees or how it is scored.

A training env and an eval env "match" when their fingerprints are equal; when they do
not, ``fingerprint_diff`` names the fields, so the mismatch is a fact in a log rather than
a suspicion after a bad eval.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Fingerprint", "make_fingerprint", "fingerprint_diff"]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr, ensure_ascii=False)


@dataclass(frozen=True)
class Fingerprint:
    """The fields and their hash. ``str(fp)`` is the short hash shown in ``info``."""

    fields: dict[str, Any]
    digest: str

    def __str__(self) -> str:
        return self.digest


def make_fingerprint(fields: dict[str, Any]) -> Fingerprint:
    """Hash ``fields`` canonically (key order and float repr independent of dict order).

    >>> make_fingerprint({"a": 1, "b": 2}).digest == make_fingerprint({"b": 2, "a": 1}).digest
    True
    """
    canon = json.loads(_canonical(fields))
    digest = hashlib.sha256(_canonical(canon).encode()).hexdigest()[:16]
    return Fingerprint(canon, digest)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _fields_of(x: "Fingerprint | dict[str, Any] | Any") -> dict[str, Any]:
    if isinstance(x, Fingerprint):
        return x.fields
    if isinstance(x, dict):
        return json.loads(_canonical(x))
    env = getattr(x, "unwrapped", x)
    fp = getattr(env, "fingerprint", None)
    if isinstance(fp, Fingerprint):
        return fp.fields
    raise TypeError(f"Expected a Fingerprint, a dict of fields or an agentgym env, actual value: {type(x).__name__}")


def fingerprint_diff(a: Any, b: Any) -> dict[str, tuple[Any, Any]]:
    """Name the fields that differ between two fingerprints (or envs), as dotted paths.

    Returns ``{path: (value_in_a, value_in_b)}``; empty means the envs match. A field
    missing on one side shows as ``None`` there.

    >>> fingerprint_diff({"max_turns": 8, "tools": {"x": 1}}, {"max_turns": 10, "tools": {"x": 1}})
    {'max_turns': (8, 10)}
    """
    fa, fb = _flatten(_fields_of(a)), _flatten(_fields_of(b))
    return {k: (fa.get(k), fb.get(k)) for k in sorted(fa.keys() | fb.keys()) if fa.get(k) != fb.get(k)}
