"""Counts for audits and reports: tables, templates and question space per tier.

``python -m tasks.data_analysis.audit --drafts 200`` prints, per tier, the number of
templates, the tables they draw from, the distinct parameterisations seen in that many
draws per template (a lower bound on the question space before the per-episode
variants multiply it), and the share of drafts the ambiguity filter keeps.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from tasks.data_analysis.generator import _attempt, GeneratorConfig
from tasks.data_analysis.tables import TABLES
from tasks.data_analysis.tiers import TEMPLATES

__all__ = ["tier_counts"]


def tier_counts(drafts: int = 100, seed: int = 0) -> dict[int, dict[str, Any]]:
    """Per-tier counts from ``drafts`` draws per template (pure function of ``seed``)."""
    rng = np.random.default_rng(seed)
    out: dict[int, dict[str, Any]] = defaultdict(lambda: {
        "templates": 0, "tables": set(), "parameterisations": 0, "drafts": 0, "kept": 0,
        "rejections": Counter()})
    config = GeneratorConfig()
    for template in TEMPLATES:
        row = out[template.tier]
        row["templates"] += 1
        seen = set()
        for _ in range(drafts):
            draw = template.draw(rng)
            if draw is None:
                continue
            seen.add(json.dumps([draw.tables, dict(draw.columns), dict(draw.values)], sort_keys=True))
            row["tables"].update(draw.tables)
        row["parameterisations"] += len(seen)
        for _ in range(drafts):
            question, reason = _attempt(template, rng, config)
            row["drafts"] += 1
            row["kept"] += question is not None
            if question is None:
                row["rejections"][reason.split(" gives ")[0].split(":")[0][:50]] += 1
    return {
        tier: {**row, "tables": len(row["tables"]), "keep_rate": row["kept"] / max(1, row["drafts"]),
               "rejections": dict(row["rejections"].most_common(5))}
        for tier, row in sorted(out.items())
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--drafts", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    report = {"tables": len(TABLES), "templates": len(TEMPLATES),
              "tiers": tier_counts(args.drafts, args.seed)}
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
