"""The table manifest: for every table its source package, version, sha256 and licence.

``manifest.json`` beside this file is committed; ``python -m tasks.data_analysis.manifest
--write`` rebuilds it from the installed packages and ``--check`` (the default) exits
non-zero when the installed data no longer matches. The manifest's own digest is part
of the DataAnalysis environment fingerprint. Reading the committed file lives in
:mod:`tasks.data_analysis.recorded` (re-exported here), which the tables use.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tasks.data_analysis import sources
from tasks.data_analysis.recorded import MANIFEST_PATH, manifest_digest, manifest_entry, read_manifest
from tasks.data_analysis.tables import TABLES, csv_sha256, table_csv

__all__ = ["MANIFEST_PATH", "build_manifest", "read_manifest", "manifest_entry",
           "manifest_digest", "check_manifest"]


def build_manifest() -> dict[str, Any]:
    """Load every table from its package (checking licences) and describe it."""
    entries = []
    for spec in TABLES.values():
        df = spec.loader()
        data = table_csv(df)
        entries.append({
            "name": spec.name,
            "file": f"{spec.name}.csv",
            "title": spec.title,
            "package": spec.package,
            "version": sources.package_version(spec.package),
            "source": spec.source,
            "licence": spec.licence_text(),
            "sha256": csv_sha256(data),
            "rows": int(len(df)),
            "columns": [str(c) for c in df.columns],
        })
    return {"schema": 1, "tables": entries}


def check_manifest() -> list[str]:
    """Differences between the committed manifest and the installed data (empty if none)."""
    built = {e["name"]: e for e in build_manifest()["tables"]}
    stored = {e["name"]: e for e in read_manifest()["tables"]}
    problems = [f"{n}: missing from manifest" for n in built.keys() - stored.keys()]
    problems += [f"{n}: in manifest but not in TABLES" for n in stored.keys() - built.keys()]
    for name in built.keys() & stored.keys():
        for key in ("sha256", "licence", "rows", "columns"):
            if built[name][key] != stored[name][key]:
                problems.append(f"{name}: {key} differs")
    return sorted(problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rebuild manifest.json")
    args = parser.parse_args(argv)
    if args.write:
        text = json.dumps(build_manifest(), indent=1, ensure_ascii=False) + "\n"
        MANIFEST_PATH.write_text(text, "utf-8")
        sys.stdout.write(f"wrote {MANIFEST_PATH}\n")
        return 0
    problems = check_manifest()
    sys.stdout.write("\n".join(problems) + ("\n" if problems else "manifest ok\n"))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
