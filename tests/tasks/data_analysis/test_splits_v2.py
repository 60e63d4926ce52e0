"""DataAnalysis-v2's splits: held-out tables and templates, drawn alike, honoured by the generator."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tasks.data_analysis.generator_v2 import generate_question_v2, reachable_templates
from tasks.data_analysis.splits import HELD_TABLES, HELD_TEMPLATES, split_of, split_summary, tables_of, templates_of
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
