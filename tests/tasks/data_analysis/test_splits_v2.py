"""DataAnalysis-v2's splits: held-out tables and templates, drawn alike, honoured by the generator."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tasks.data_analysis.generator_v2 import generate_question_v2, reachable_templates
from tasks.data_analysis.splits import (HELD_TABLES, HELD_TEMPLATES, split_of, split_summary, tables_of, templates_of,
                                        train_part_tables)
from tasks.data_analysis.templates_v2 import CATEGORY, template_v2_by_id


def test_a_question_belongs_to_the_split_of_what_it_uses():
    train_t, val_t, test_t = "v2_mean", HELD_TEMPLATES["validation"][0], HELD_TEMPLATES["test"][0]
    assert split_of(train_t, ["penguins"]) == "train"
    assert split_of(train_t, ["penguins", HELD_TABLES["test"][0]]) == "test"
    assert split_of(test_t, ["penguins"]) == "test"
    assert split_of(val_t, [HELD_TABLES["validation"][0]]) == "validation"
    assert split_of(val_t, [HELD_TABLES["test"][0]]) is None  # never asked
    assert split_of(train_t, [HELD_TABLES["validation"][0], HELD_TABLES["test"][0]]) is None


def test_train_sees_no_held_out_part():
    train_ids = {t.id for t in templates_of("train")}
    for split in ("validation", "test"):
        assert not train_ids & set(HELD_TEMPLATES[split])
        assert not set(tables_of("train")) & set(HELD_TABLES[split])
    assert not set(HELD_TABLES["validation"]) & set(HELD_TABLES["test"])


def test_held_out_templates_are_drawn_alike():
    """Each held-out set has every category and the same tier mix within one template."""
    tiers = {s: Counter(template_v2_by_id(i).tier for i in HELD_TEMPLATES[s]) for s in ("validation", "test")}
    cats = {s: Counter(CATEGORY[i] for i in HELD_TEMPLATES[s]) for s in ("validation", "test")}
    assert cats["validation"] == cats["test"] and set(cats["test"]) == set(CATEGORY.values())
    for tier in (1, 2, 3, 4):
        assert abs(tiers["validation"][tier] - tiers["test"][tier]) <= 1
    assert len(HELD_TABLES["validation"]) == len(HELD_TABLES["test"])


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_generated_questions_stay_in_their_split(split):
    seen_held = 0
    for seed in range(12):
        q = generate_question_v2(np.random.default_rng(seed), split=split)
        tables = [name.removesuffix(".csv") for name in q.files]
        assert split_of(q.template_id, tables) == split
        seen_held += q.template_id in HELD_TEMPLATES.get(split, ())
    if split != "train":
        assert seen_held > 0  # held-out templates are actually drawn


def test_every_held_out_template_reaches_its_split():
    for split, ids in HELD_TEMPLATES.items():
        reachable = {t.id for t in reachable_templates(split)}  # type: ignore[arg-type]
        assert set(ids) <= reachable


def test_summary_names_the_held_out_parts():
    summary = split_summary("test")
    assert summary["held_out_tables"] == list(HELD_TABLES["test"])
    assert set(HELD_TEMPLATES["test"]) <= set(summary["templates"])  # type: ignore[arg-type]
    assert not set(HELD_TEMPLATES["validation"]) & set(summary["templates"])  # type: ignore[arg-type]


def test_train_parts_deal_every_train_table_to_exactly_one_part():
    for n in (2, 3):
        parts = [train_part_tables(k, n) for k in range(n)]
        assert sorted(t for part in parts for t in part) == sorted(tables_of("train"))
        assert all(part for part in parts)
    assert train_part_tables(0, 2) == ("barley", "breast_cancer", "cars", "election", "engel", "experiment",
                                       "gapminder_regions", "mpg", "penguins", "stackloss", "sunspots")  # CRC-32: fixed
    for k, n in ((2, 2), (-1, 2), (0, 1)):
        with pytest.raises(ValueError, match="0 <= k < n"):
            train_part_tables(k, n)


def test_a_train_part_draws_only_its_own_tables_and_every_tier_one_template():
    """Tier 1 (the CPU baseline's tier) keeps all seven of its templates in either half, so
    SFT on one half and RL on the other practise the same operations on different tables."""
    tier1 = {t.id for t in reachable_templates("train") if t.tier == 1}
    for k in (0, 1):
        tables = frozenset(train_part_tables(k, 2))
        assert {t.id for t in reachable_templates("train", tables) if t.tier == 1} == tier1
        rng = np.random.default_rng(k)
        for _ in range(12):
            question = generate_question_v2(rng, split="train", tier=1, tables=tables)
            assert {f.removesuffix(".csv") for f in question.files} <= tables
    with pytest.raises(ValueError, match="from these tables"):  # a template only part 1's tables can draw
        generate_question_v2(np.random.default_rng(0), split="train", template_id=_template_only_in(1),
                             tables=frozenset(train_part_tables(0, 2)))


def _template_only_in(k: int) -> str:
    """A train template that part ``k`` of two can draw and the other cannot."""
    mine, other = (frozenset(train_part_tables(j, 2)) for j in (k, 1 - k))
    only = {t.id for t in reachable_templates("train", mine)} - {t.id for t in reachable_templates("train", other)}
    assert only
    return sorted(only)[0]
