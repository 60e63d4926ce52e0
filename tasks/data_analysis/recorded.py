"""The committed table manifest, read only: what each table's data must hash to.

Reading is apart from building (:mod:`tasks.data_analysis.manifest`) so that the tables,
which check every load against this record, do not import the code that builds the
record from the tables: imports point one way, ``manifest -> tables -> recorded``.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from functools import lru_cache
from typing import Any

__all__ = ["MANIFEST_PATH", "read_manifest", "manifest_entry", "manifest_digest"]

MANIFEST_PATH = pathlib.Path(__file__).with_name("manifest.json")


@lru_cache(maxsize=1)
def read_manifest() -> dict[str, Any]:
    """The committed manifest as a dict (read once per process)."""
    return json.loads(MANIFEST_PATH.read_text("utf-8"))


def manifest_entry(name: str) -> dict[str, Any] | None:
    """The record of table ``name``; ``None`` when there is no manifest or no such entry."""
    if not MANIFEST_PATH.exists():
        return None
    for entry in read_manifest()["tables"]:
        if entry["name"] == name:
            return entry
    return None


def manifest_digest() -> str:
    """sha256 of the manifest file, part of the DataAnalysis environment fingerprint."""
    return hashlib.sha256(MANIFEST_PATH.read_bytes()).hexdigest()
