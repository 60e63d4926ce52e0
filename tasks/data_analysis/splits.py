"""DataAnalysis-v2's splits: tables and templates held out for validation and test.

v1 had no split: every split drew the same 20 templates over the same tables. v2 holds
out 7 tables and 14 templates for validation and another 7 and 14 for test, and a
question belongs to a split by what it uses:

- **train**: a train template over train tables only;
- **validation** / **test**: anything from train and that split's held-out set, with at
  least one held-out part (a held-out template, or a held-out table, or both).

So nothing a train question shows (a template's wording, a table's columns and values)
is what makes a test question: a test question either asks something train never asks,
or asks it of a table train never shows. Validation and test never share a held-out part.

The held-out sets are drawn alike: templates are dealt per category (:data:`CATEGORY`,
20% of each category to validation and 20% to test, seed 2026 over sorted ids); tables
were chosen by hand so each split has the same mix of roles (grouped measurements, a date
series, an entity table, a join partner, a panel). ``python -m tasks.data_analysis.audit_v2``
prints the per-split counts of templates by tier and category, and of tables by role.
"""

from __future__ import annotations

import zlib
from typing import Iterable, Literal

from tasks.data_analysis.tables import TABLES
from tasks.data_analysis.templates import Template
from tasks.data_analysis.templates_v2 import CATEGORY, TEMPLATES_V2

__all__ = ["Split", "SPLITS", "HELD_TABLES", "HELD_TEMPLATES", "split_of", "templates_of", "tables_of",
           "train_part_tables", "split_summary"]

Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")

HELD_TABLES: dict[str, tuple[str, ...]] = {
    "validation": ("airports", "cows", "iris", "linnerud_physiological", "lincoln_weather", "marriages",
                   "titanic"),
    "test": ("forensic_glass", "nile", "seattle_weather", "statecrime", "tips", "wine", "world_gapminder"),
}

HELD_TEMPLATES: dict[str, tuple[str, ...]] = {
    "validation": ("t1_distinct", "t2_group_argmax", "t3_top3_ratio", "t4_ols2", "v2_covariance",
                   "v2_filtered_median", "v2_group_count_above", "v2_groups_above_overall",
                   "v2_join_ratio_top", "v2_largest_jump", "v2_most_distinct_text", "v2_range",
                   "v2_rolling", "v2_std"),
    "test": ("t1_missing", "t3_ratio_group", "t4_pearson", "v2_count_between", "v2_group_std",
             "v2_join_count", "v2_mean_diff", "v2_median", "v2_month_of_year", "v2_months_up",
             "v2_most_correlated_pair", "v2_quantile", "v2_rank_entity", "v2_spearman"),
}


def _label(held: dict[str, tuple[str, ...]], name: str) -> str:
    for split, names in held.items():
        if name in names:
            return split
    return "train"


def split_of(template_id: str, tables: Iterable[str]) -> Split | None:
    """The split a question of ``template_id`` over ``tables`` belongs to; None when it
    mixes validation's and test's held-out parts (such a question is never asked)."""
    labels = {_label(HELD_TEMPLATES, template_id)} | {_label(HELD_TABLES, t) for t in tables}
    held = labels - {"train"}
    if len(held) > 1:
        return None
    return held.pop() if held else "train"  # type: ignore[return-value]


def templates_of(split: Split) -> tuple[Template, ...]:
    """The templates a question of ``split`` may use (train's plus the split's own)."""
    return tuple(t for t in TEMPLATES_V2 if _label(HELD_TEMPLATES, t.id) in ("train", split))


def tables_of(split: Split) -> tuple[str, ...]:
    """The tables a question of ``split`` may use (train's plus the split's own)."""
    return tuple(sorted(n for n in TABLES if _label(HELD_TABLES, n) in ("train", split)))


def train_part_tables(k: int, n: int) -> tuple[str, ...]:
    """The train tables of the ``k``-th of ``n`` fixed parts, dealt by a hash of the table's
    name (CRC-32, the same in every process and Python version).

    Why by table: every training question is a fresh draw, so two sets of train *questions*
    still share their tables, and what a held-out question needs is a table the policy has
    never seen. With SFT on one part and RL on another, RL's tables are as new to the
    policy as the test split's (DataAnalysis-v2's ``train_part``). Two parts hold 11 and 10
    of the 21 train tables."""
    if not 0 <= k < n or n < 2:
        raise ValueError(f"Expected 0 <= k < n and n >= 2, actual values: k={k}, n={n}")
    return tuple(t for t in tables_of("train") if zlib.crc32(t.encode()) % n == k)


def split_summary(split: Split) -> dict[str, object]:
    """What the fingerprint shows of a split: its held-out tables and templates and what
    it may draw from."""
    return {
        "name": split,
        "held_out_tables": list(HELD_TABLES.get(split, ())),
        "held_out_templates": list(HELD_TEMPLATES.get(split, ())),
        "tables": list(tables_of(split)),
        "templates": [t.id for t in templates_of(split)],
    }


def _check() -> None:
    known = {t.id for t in TEMPLATES_V2}
    for split, ids in HELD_TEMPLATES.items():
        unknown = set(ids) - known
        assert not unknown, f"{split}: unknown templates {sorted(unknown)}"
    for split, names in HELD_TABLES.items():
        unknown = set(names) - set(TABLES)
        assert not unknown, f"{split}: unknown tables {sorted(unknown)}"
    assert not set(HELD_TEMPLATES["validation"]) & set(HELD_TEMPLATES["test"])
    assert not set(HELD_TABLES["validation"]) & set(HELD_TABLES["test"])
    assert set(CATEGORY) == known


_check()
