"""Per-episode table variants."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from tasks.data_analysis.tables import TABLES, load_table
from tasks.data_analysis.variants import VariantConfig, make_variant, rename_style


def variant(name, seed, **kw):
    return make_variant(TABLES[name], np.random.default_rng(seed), **kw)


def test_same_seed_same_bytes_different_seed_different_bytes():
    assert variant("penguins", 3).data == variant("penguins", 3).data
    assert variant("penguins", 3).data != variant("penguins", 4).data


@pytest.mark.parametrize("seed", range(5))
def test_rows_are_a_shuffled_subsample_of_the_real_table(seed):
    v = variant("statecrime", seed, allow_rename=False, allow_missing=False)
    base, df = load_table("statecrime"), v.frame()
    assert 0.8 * len(base) - 1 <= len(df) <= 0.95 * len(base) + 1
    assert set(df["state"]) <= set(base["state"])
    merged = df.merge(base, on="state", suffixes=("", "_base"))
    assert len(merged) == len(df)
    for col in ("violent", "murder"):
        assert (merged[col] == merged[f"{col}_base"]).all()
    order = [list(base["state"]).index(s) for s in df["state"]]
    assert order != sorted(order), "rows should be shuffled"


def test_tables_at_or_below_min_rows_keep_all_rows():
    v = variant("linnerud_exercise", 0, config=VariantConfig(min_rows=20))
    assert v.rows == 20 and len(v.frame()) == 20
    assert variant("linnerud_exercise", 0).rows >= 16


def test_missing_values_are_injected_but_never_in_protected_columns():
    cfg = VariantConfig(missing_rates=(0.2,), rename_probability=0.0)
    v = make_variant(TABLES["world_gapminder"], np.random.default_rng(1), config=cfg)
    df = v.frame()
    base_missing = load_table("world_gapminder")["population"].isna().mean()
    expected = 1 - (1 - base_missing) * (1 - 0.2)
    assert df["population"].isna().mean() == pytest.approx(expected, abs=0.03)
    assert df["country"].notna().all() and df["year"].notna().all()


def test_integer_categories_keep_their_labels():
    cfg = VariantConfig(missing_rates=(0.2,), rename_probability=0.0)
    df = make_variant(TABLES["cars"], np.random.default_rng(2), config=cfg).frame()
    assert pd.api.types.is_integer_dtype(df["cylinders"])


def test_renames_show_in_the_header_and_map_back():
    cfg = VariantConfig(rename_probability=1.0, missing_rates=(0.0,))
    v = make_variant(TABLES["penguins"], np.random.default_rng(0), config=cfg)
    df = v.frame()
    assert v.renames, "with probability 1 some column must be renamed"
    for old, new in v.renames.items():
        assert new in df.columns and old not in df.columns and v.col(old) == new
    base = Counter(load_table("penguins")["body_mass_g"].dropna())
    got = Counter(df[v.col("body_mass_g")].dropna())
    assert not got - base, "renamed column must hold the original column's values"


def test_no_renames_or_missing_when_the_question_forbids_them():
    for seed in range(5):
        v = variant("penguins", seed, allow_rename=False, allow_missing=False)
        assert v.renames == {} and v.missing_rate == 0.0
        assert list(v.frame().columns) == list(load_table("penguins").columns)


@pytest.mark.parametrize("style,expected", [(0, "BODY_MASS_G"), (1, "Body Mass G"), (2, "bodyMassG")])
def test_rename_styles(style, expected):
    assert rename_style("body_mass_g", style) == expected


def test_config_validates():
    with pytest.raises(ValueError):
        VariantConfig(min_fraction=0.9, max_fraction=0.5)


# ------------------------------------------------------------------ made-up names
@pytest.mark.parametrize("like, shape", [
    ("seattle_weather", r"[a-z]{4,}_[a-z]{4,}"),
    ("TEMP_MIN", r"[A-Z]{2,}_[A-Z]{2,}"),
    ("gdpPercap", r"[a-z]+[A-Z][a-z]+"),
    ("Temp Min", r"[A-Z][a-z]+ [A-Z][a-z]+"),
    ("pm2_5_avg", r"pm2_5_[a-z]{3,}"),
    ("RI", r"[A-Z]{2,5}"),
    ("co2", r"[a-z]{2,5}2"),
])
def test_made_up_names_keep_the_shape_of_the_name_they_replace(like, shape):
    import re

    from tasks.data_analysis.names import made_up_name

    rng = np.random.default_rng(0)
    names = {made_up_name(like, rng) for _ in range(20)}
    assert all(re.fullmatch(shape, n) for n in names), names
    assert like not in names
    assert len(names) > 10  # made up afresh, not a fixed spelling


def test_invented_variants_rename_the_file_and_every_renamable_column():
    spec = TABLES["seattle_weather"]
    v = make_variant(spec, np.random.default_rng(2), config=VariantConfig(invent_probability=1.0))
    assert v.file != "seattle_weather.csv" and v.file.endswith(".csv") and "_" in v.file
    renamable = [c for c in load_table(spec.name).columns if c not in spec.no_missing()]
    assert renamable and all(c in v.renames for c in renamable)
    assert list(v.frame().columns) == [v.col(c) for c in load_table(spec.name).columns]
    assert len(set(v.renames.values())) == len(v.renames)


def test_invent_probability_zero_draws_exactly_the_old_variants():
    """The default config must not consume the generator: every existing task id keeps its question."""
    for seed in range(5):
        a = variant("tips", seed)
        b = variant("tips", seed, config=VariantConfig(invent_probability=0.0))
        assert (a.data, a.file, a.renames) == (b.data, b.file, b.renames) and a.file == "tips.csv"


def test_invent_probability_is_validated():
    with pytest.raises(ValueError, match="invent_probability"):
        VariantConfig(invent_probability=1.5)


def test_spelled_variants_use_only_the_pieces_and_spell_zero_replays_the_syllable_variants():
    """``spell_probability`` spells an invented variant's names with the given pieces (so a
    tokenizer's ``ps``/``qu``/``x`` occur in training names, which syllables never give);
    at 0 it draws nothing, so every invented task id keeps its names."""
    import re

    spec = TABLES["seattle_weather"]
    pieces = ("ps", "qu", "x")
    spelled = make_variant(spec, np.random.default_rng(2),
                           config=VariantConfig(invent_probability=1.0, spell_probability=1.0, spell_pieces=pieces))
    words = re.findall(r"[a-z]{3,}", " ".join([spelled.stem or "", *spelled.renames.values()]).lower())
    assert words and all(re.fullmatch(r"(ps|qu|x)+", w) for w in words), words
    assert spelled.stem and "_" in spelled.stem  # the shape of seattle_weather stays
    for seed in range(5):
        a = make_variant(spec, np.random.default_rng(seed), config=VariantConfig(invent_probability=1.0))
        b = make_variant(spec, np.random.default_rng(seed),
                         config=VariantConfig(invent_probability=1.0, spell_probability=0.0, spell_pieces=pieces))
        assert (a.data, a.file, a.renames) == (b.data, b.file, b.renames)
    half = [make_variant(spec, np.random.default_rng(s), config=VariantConfig(
        invent_probability=1.0, spell_probability=0.5, spell_pieces=pieces)).stem for s in range(40)]
    assert 5 < sum(bool(re.fullmatch(r"((ps|qu|x)+_?)+", s or "")) for s in half) < 35, half


@pytest.mark.parametrize("pieces", [(), ("Ps",), ("p s",), "psqu", {"ps", "qu"}])
def test_spelling_needs_lowercase_pieces(pieces):
    with pytest.raises(ValueError, match="name pieces"):
        VariantConfig(invent_probability=1.0, spell_probability=0.5, spell_pieces=pieces)


def _quotable_words(spec, v):
    """The variant's final names of the columns a question may quote, as a file stem writes them."""
    import re

    return {re.sub(r"[^a-z0-9]+", "_", v.col(c).lower()).strip("_") for c in load_table(spec.name).columns
            if c == spec.entity or c in spec.numeric or c in spec.category}


def test_related_stems_hold_one_of_the_variants_own_columns_in_every_form():
    """``relate_probability`` builds a made-up stem from one of the variant's own quotable
    columns, as real files are named (``statecrime.csv`` holds ``state``): stems made of
    syllables alone never share a word with a column, so a policy trained on them never
    has to tell the file from the column. Each of the four forms occurs."""
    spec = TABLES["linnerud_exercise"]
    forms = Counter()
    for seed in range(60):
        v = variant("linnerud_exercise", seed, config=VariantConfig(invent_probability=1.0, relate_probability=1.0))
        words = _quotable_words(spec, v)
        held = [w for w in words if w in v.stem]
        assert held and v.stem not in TABLES, (v.stem, words)
        w = held[0]
        forms["same" if v.stem == w else "plural" if v.stem == w + "s" else
              "after" if v.stem.endswith("_" + w) else "before" if v.stem.startswith(w) else "?"] += 1
        assert v.file in {f"{v.stem}.csv"} and v.stem == v.stem.lower()
    assert set(forms) == {"same", "plural", "after", "before"} and min(forms.values()) >= 5, forms


def test_relate_zero_draws_exactly_the_invented_variants_and_half_relates_some():
    spec = TABLES["linnerud_exercise"]
    for seed in range(5):
        a = variant("linnerud_exercise", seed, config=VariantConfig(invent_probability=1.0))
        b = variant("linnerud_exercise", seed, config=VariantConfig(invent_probability=1.0, relate_probability=0.0))
        assert (a.data, a.file, a.renames) == (b.data, b.file, b.renames)
    half = [variant("linnerud_exercise", s, config=VariantConfig(invent_probability=1.0, relate_probability=0.5))
            for s in range(40)]
    related = sum(any(w in v.stem for w in _quotable_words(spec, v)) for v in half)
    assert 8 < related < 32, related
    plain = variant("linnerud_exercise", 0, config=VariantConfig(relate_probability=1.0))
    assert plain.file == "linnerud_exercise.csv"  # relates only invented stems
    with pytest.raises(ValueError, match="relate_probability"):
        VariantConfig(relate_probability=1.5)


def test_two_variants_with_one_file_name_are_told_apart(monkeypatch):
    """Two stems made from one shared, protected column (``year`` of nile and sunspots)
    can be the same name; the second file must not overwrite the first."""
    import tasks.data_analysis.generator as generator
    from tasks.data_analysis.templates import Draw
    from tasks.data_analysis.templates_v2 import TEMPLATES_V2

    same = variant("nile", 0, config=VariantConfig(invent_probability=1.0))
    monkeypatch.setattr(generator, "make_variant", lambda *a, **k: same)
    join = next(t for t in TEMPLATES_V2 if "join" in t.id)
    _, variants = generator.render_drawn(join, Draw(("nile", "nile"), {}, {}), np.random.default_rng(0), VariantConfig())
    assert [v.file for v in variants] == [same.file, f"{same.stem}2.csv"]
    assert variants[1].data == same.data


def _text_values(frame, columns):
    return {v for c in columns for v in frame[c] if isinstance(v, str)}


@pytest.mark.parametrize("name", ["penguins", "tips", "gapminder", "mpg"])
def test_value_probability_makes_up_each_text_value_of_the_category_and_entity_columns(name):
    """``value_probability`` (an invented variant's levels and entity names made up too)
    changes nothing but those values: the same rows, renames and stem as the invented
    variant without it, each real text value replaced by one made-up value everywhere
    (injective, none of them a real one, none read back as missing), the other columns'
    bytes untouched. At 0 it draws exactly the invented variants."""
    spec = TABLES[name]
    valued = [c for c in load_table(name).columns if c in spec.category or c == spec.entity]
    if name in {"penguins", "tips", "mpg"}:
        assert valued, name
    for seed in range(4):
        plain = variant(name, seed, config=VariantConfig(invent_probability=1.0))
        zero = variant(name, seed, config=VariantConfig(invent_probability=1.0, value_probability=0.0))
        assert (zero.data, zero.file, zero.renames, zero.values) == (plain.data, plain.file, plain.renames, {})
        made = variant(name, seed, config=VariantConfig(invent_probability=1.0, value_probability=1.0))
        assert (made.file, made.renames, made.rows) == (plain.file, plain.renames, plain.rows)
        cols = [made.col(c) for c in valued]
        a, b = plain.frame(), made.frame()
        real = _text_values(a, cols)
        assert set(made.values) == {v for v in real if any(ch.isalpha() for ch in v)}
        assert len(set(made.values.values())) == len(made.values) and not set(made.values.values()) & real
        expected = a.copy()
        for c in cols:
            expected[c] = expected[c].map(lambda v: made.values.get(v, v) if isinstance(v, str) else v)
            assert b[c].isna().sum() == a[c].isna().sum()
        pd.testing.assert_frame_equal(b, expected)
    assert variant(name, 0, allow_values=False,
                   config=VariantConfig(invent_probability=1.0, value_probability=1.0)).values == {}
    assert variant(name, 0, config=VariantConfig(value_probability=1.0)).values == {}  # only invented variants
    with pytest.raises(ValueError, match="value_probability"):
        VariantConfig(value_probability=-0.1)


def test_made_up_values_are_never_spellings_pandas_reads_as_something_else():
    """A made-up level ``nan`` or ``True`` would come back from the CSV as a missing value
    or a bool: the question would quote a level the table does not hold."""
    from tasks.data_analysis.variants import _invented_values

    spec = TABLES["penguins"]
    words = iter(["nan", "true", "none", "kol", "nan", "bur", "dim", "tas", "ler", "mip", "sov", "zat"] * 4)
    values = _invented_values(load_table("penguins"), spec, np.random.default_rng(0), lambda n, rng: next(words))
    assert values and not {v.lower() for v in values.values()} & {"nan", "true", "none"}
    frame = pd.read_csv(__import__("io").StringIO("x\n" + "\n".join(values.values())))
    assert frame["x"].notna().all() and set(frame["x"]) == set(values.values())


@pytest.mark.parametrize("name", ["penguins", "tips", "diabetes", "mpg"])
def test_level_prefix_probability_names_each_category_level_after_its_column(name):
    """``level_prefix_probability``: when a variant's values are made up, a category
    column's text levels become its own (made-up) name and a number, as wine's
    ``cultivar_1`` and diabetes's ``sex_1`` are, so a policy trained on them must tell a
    level from the column it begins with. Everything else is the made-up-values variant's:
    the same rows, renames, stem, and entity names. At 0 it draws exactly that variant."""
    spec = TABLES[name]
    categories = [c for c in load_table(name).columns if c in spec.category]
    for seed in range(4):
        made = variant(name, seed, config=VariantConfig(invent_probability=1.0, value_probability=1.0))
        zero = variant(name, seed, config=VariantConfig(invent_probability=1.0, value_probability=1.0,
                                                        level_prefix_probability=0.0))
        assert (zero.data, zero.values) == (made.data, made.values)
        pre = variant(name, seed, config=VariantConfig(invent_probability=1.0, value_probability=1.0,
                                                       level_prefix_probability=1.0))
        assert (pre.file, pre.renames, pre.rows) == (made.file, made.renames, made.rows)
        a, b = made.frame(), pre.frame()
        assert len(set(pre.values.values())) == len(pre.values)  # still injective
        assert set(pre.values) == set(made.values)
        prefixed = 0
        for c in categories:
            levels = sorted(v for v in set(load_table(name)[c]) if isinstance(v, str) and v in pre.values)
            own = {pre.values[v] for v in levels}
            column = pre.col(c)
            if levels and not any(v in set(load_table(name)[o]) for o in load_table(name).columns if o != c
                                  for v in levels):
                assert own == {f"{column}_{k}" for k in range(1, len(levels) + 1)}, (name, c, own)
                prefixed += 1
            assert b[column].isna().sum() == a[column].isna().sum()
        if name in {"penguins", "tips", "diabetes"}:
            assert prefixed, name  # every one of these has a text category of its own
        for c in (x for x in a.columns if x not in {pre.col(k) for k in categories}):
            pd.testing.assert_series_equal(b[c], a[c])  # numbers and entity names: as before
    with pytest.raises(ValueError, match="level_prefix_probability"):
        VariantConfig(level_prefix_probability=1.5)
