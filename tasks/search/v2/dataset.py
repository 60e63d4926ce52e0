"""Load the Search-v2 data: the v2 corpus and questions, built once and cached.

Built like v1's (``tasks.search.dataset``) and cached next to it under
``$AGENTGYM_CACHE_DIR/search/v2-<key>``; the key hashes the v2 builder version, the data
packages' versions and the seed. The splits are answer-disjoint and matched per template
like v1's, with a larger test share (``FRACTIONS_V2``) so that every hop count of the test
split has at least 100 distinct answers.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tasks.search.dataset import (ProgressCallback, SearchDataset, _build, _dataset, _read_cache, _write_cache,
                                  cache_root)
from tasks.search.quality import AUDIT_LABELS_VERSION
from tasks.search.sources import source_versions
from tasks.search.splits import Split
from tasks.search.staging import reap_stale_staging
from tasks.search.v2.corpus import build_knowledge_base_v2
from tasks.search.v2.generators import generate_audited_v2

__all__ = ["BUILDER_VERSION_V2", "FRACTIONS_V2", "load_default_dataset_v2"]

BUILDER_VERSION_V2 = "search-data-v2-1"
FRACTIONS_V2: dict[Split, float] = {"train": 0.7, "validation": 0.1, "test": 0.2}


def _key(seed: int) -> str:
    payload = json.dumps({"builder": BUILDER_VERSION_V2, "sources": source_versions(), "seed": seed,
                          "audit_labels": AUDIT_LABELS_VERSION}, sort_keys=True)
    return "v2-" + hashlib.sha256(payload.encode()).hexdigest()[:16]


def load_default_dataset_v2(seed: int = 0, cache_dir: str | os.PathLike[str] | None = None,
                            progress: ProgressCallback | None = None) -> SearchDataset:
    """The v2 corpus and its train/validation/test questions, built once and cached."""
    directory = Path(cache_dir) if cache_dir else cache_root() / "search" / _key(seed)
    reap_stale_staging(directory.parent)
    if (directory / "manifest.json").exists():
        return _read_cache(directory, BUILDER_VERSION_V2)
    corpus, splits, audit = _build(seed, progress, build_knowledge_base_v2, generate_audited_v2, FRACTIONS_V2,
                                   "search-v2 data")
    _write_cache(directory, corpus, splits, audit, BUILDER_VERSION_V2)
    return _dataset(corpus, dict(splits), BUILDER_VERSION_V2, audit)
