"""DataAnalysis-v2's audit: what each split holds and how much answers move between variants.

    python -m tasks.data_analysis.audit_v2 --drafts 6 --markdown

prints two tables (the ones in docs/data-analysis.md):

1. per split: the templates it may draw (of them held out), by tier and category, and its
   tables (of them held out) — the evidence that the held-out sets are drawn alike;
2. per category: how often a question's answer changes when the same drawn question
   (template, columns, parameters) is asked of two independent variants of its tables.
   An answer that never changes can be memorised; v1's category answers mostly did not.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from tasks.data_analysis.generator import question_from_draft, render_drawn
from tasks.data_analysis.generator_v2 import V2_GENERATOR, bind_precision, check_question_v2, reachable_templates
from tasks.data_analysis.grading_v2 import score_answer_v2
from tasks.data_analysis.reference import answer_arguments
from tasks.data_analysis.splits import HELD_TABLES, HELD_TEMPLATES, SPLITS, tables_of
from tasks.data_analysis.templates import Template
from tasks.data_analysis.templates_v2 import CATEGORY, TEMPLATES_V2, template_v2_by_id

__all__ = ["split_rows", "variant_change", "markdown"]


def split_rows() -> list[dict[str, Any]]:
    """Per split: its drawable templates by tier and category, and its tables."""
    rows = []
    for split in SPLITS:
        pool = reachable_templates(split)
        rows.append({
            "split": split,
            "templates": len(pool),
            "held_out_templates": len(HELD_TEMPLATES.get(split, ())),
            "held_out_by_tier": dict(sorted(Counter(template_v2_by_id(i).tier
                                                    for i in HELD_TEMPLATES.get(split, ())).items())),
            "by_tier": dict(sorted(Counter(t.tier for t in pool).items())),
            "by_category": dict(sorted(Counter(CATEGORY[t.id] for t in pool).items())),
            "tables": len(tables_of(split)),
            "held_out_tables": list(HELD_TABLES.get(split, ())),
        })
    return rows


def _truth_pair(template: Template, rng: np.random.Generator) -> tuple[Any, Any, Any] | None:
    draw = template.draw(rng)
    if draw is None:
        return None
    bound = bind_precision(template, draw)
    truths = []
    for _ in range(2):
        question, _ = question_from_draft(*render_drawn(bound, draw, rng, V2_GENERATOR.variant), rng,
                                          check=check_question_v2)
        if question is None:
            return None
        truths.append(question.truth)
    return bound.schema, truths[0], truths[1]


def variant_change(drafts: int = 6, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per category: pairs compared and the share whose two answers differ (by the v2 scorer)."""
    rng = np.random.default_rng(seed)
    changed: dict[str, list[bool]] = defaultdict(list)
    for template in TEMPLATES_V2:
        for _ in range(drafts):
            pair = _truth_pair(template, rng)
            if pair is not None:
                schema, a, b = pair
                changed[CATEGORY[template.id]].append(score_answer_v2(schema, answer_arguments(schema, a), b).reward < 1)
    out = {k: {"pairs": len(v), "changed": sum(v) / len(v)} for k, v in sorted(changed.items())}
    every = [x for v in changed.values() for x in v]
    out["all"] = {"pairs": len(every), "changed": sum(every) / max(1, len(every))}
    return out


def markdown(rows: list[dict[str, Any]], change: dict[str, dict[str, float]]) -> str:
    lines = ["| split | templates (held out) | tiers 1 / 2 / 3 / 4 (held out) | categories | tables (held out) |",
             "|---|---|---|---|---|"]
    for r in rows:
        tiers = " / ".join(f"{r['by_tier'].get(t, 0)} ({r['held_out_by_tier'].get(t, 0)})" for t in (1, 2, 3, 4))
        cats = ", ".join(f"{k} {v}" for k, v in r["by_category"].items())
        held = ", ".join(r["held_out_tables"]) or "none"
        lines.append(f"| {r['split']} | {r['templates']} ({r['held_out_templates']}) | {tiers} | {cats} | "
                     f"{r['tables']} ({held}) |")
    lines += ["", "| category | templates | question pairs | answer changes between two variants |", "|---|---|---|---|"]
    sizes = Counter(CATEGORY.values())
    for k, v in change.items():
        n = sizes.get(k, len(TEMPLATES_V2))
        lines.append(f"| {k} | {n} | {int(v['pairs'])} | {100 * v['changed']:.0f}% |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drafts", type=int, default=6, help="drawn questions per template for the change rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", action="store_true", help="print the docs' tables")
    args = parser.parse_args(argv)
    rows, change = split_rows(), variant_change(args.drafts, args.seed)
    text = markdown(rows, change) if args.markdown else json.dumps({"splits": rows, "variant_change": change},
                                                                   indent=1) + "\n"
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
