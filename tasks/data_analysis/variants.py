"""Per-episode table variants: the same real table, never the same file twice.

From the episode's generator a variant subsamples rows (80-95%), shuffles their order,
injects missing values into unprotected columns (at a rate of 0, 2 or 5%) and, when the
question allows it, renames some columns. Questions are worded with the variant's
column names and their ground truth is recomputed on the variant's CSV bytes — exactly
the bytes that are uploaded to the sandbox — so an answer cannot be memorised.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tasks.data_analysis.names import check_pieces, made_up_name, made_up_word, piece_speller
from tasks.data_analysis.tables import TableSpec, load_table, table_csv

__all__ = ["VariantConfig", "TableVariant", "make_variant", "related_stem", "rename_style"]


@dataclass(frozen=True)
class VariantConfig:
    min_fraction: float = 0.80
    max_fraction: float = 0.95
    min_rows: int = 16
    """Tables at or below this many rows keep all of them (only shuffled)."""
    missing_rates: tuple[float, ...] = (0.0, 0.0, 0.02, 0.05)
    rename_probability: float = 0.3
    """Chance that each unprotected column is renamed (when the question allows)."""
    invent_probability: float = 0.0
    """Chance that the variant's file and every unprotected column (when the question
    allows renames) get made-up names (:func:`tasks.data_analysis.names.made_up_name`):
    a training augmentation, so that names must be copied, not recalled. At 0 the
    generator draws exactly what it drew before the option existed."""
    spell_probability: float = 0.0
    """Chance that an invented variant's names are spelled with random ``spell_pieces``
    (:func:`tasks.data_analysis.names.piece_speller`) instead of syllables. At 0 no
    number is drawn for it: the generator draws what it drew before the option existed."""
    spell_pieces: tuple[str, ...] = ()
    """Lowercase words to spell with (e.g. a policy tokenizer's letter tokens)."""
    relate_probability: float = 0.0
    """Chance that an invented variant's file stem is built from one of its own columns'
    (final) names, as real files often are: ``statecrime.csv`` holds ``state``,
    ``seattle_weather.csv`` ``weather``, ``tips.csv`` ``tip``, ``co2.csv`` ``co2``
    (:func:`related_stem`). Stems invented from syllables alone never share a word with
    a column, so a policy trained only on them never has to tell the file ``statecrime``
    from the column ``state`` it also read (the tiny model wrote ``file = 'state'``).
    At 0 no number is drawn for it: the generator draws what it drew before."""
    value_probability: float = 0.0
    """Chance that an invented variant's text values are made up too: the levels of its
    category columns and the names in its entity column (``Biscoe`` -> ``Drouson``,
    ``cultivar_1`` -> ``stame_1``), one made-up value per real one, injective, shaped
    like it. Without it a policy trained on the train tables meets the same few dozen
    levels in every question and recalls them: the tiny model wrote ``== 1957`` (a year
    from a train table) for ``'cultivar_1'``, and garbled a level it had to copy from
    the printed result (``'WinNF'`` answered ``'WinNah'``). Single-table questions only
    (a join's tables must share their values). The values made up are those of the
    variant's rows: a level the draw picked from the whole table that the subsample
    dropped keeps its real spelling in the question, with its true count of 0 (1 of 106
    tier-1 level questions in a 400-question probe). Mapping the whole table's values
    instead would close that, at the cost of every task id drawing other names than the
    measured runs did. At 0 no number is drawn for it."""
    level_prefix_probability: float = 0.0
    """Chance, per category column of a variant whose values are made up, that its text
    levels are made up as the column's own (made-up) name and a number, ``<column>_1``,
    ``<column>_2``, ... in a random order, as real tables name them (wine's
    ``cultivar_1``, diabetes's ``sex_1``). A level of a made-up table otherwise never
    begins with its column's name, so a policy trained on them never has to tell the
    level ``'cultivar_1'`` from the column ``'cultivar'`` that the question quotes just
    before it: the tiny model wrote ``value = 'cultivar'`` (12 of the 63 failed test
    questions on training templates after RL, sampled). A column that shares a level with
    another valued column keeps its made-up levels (one value, one made-up spelling).
    At 0 no number is drawn for it."""

    def __post_init__(self) -> None:
        if not 0 < self.min_fraction <= self.max_fraction <= 1:
            raise ValueError(
                "Expected 0 < min_fraction <= max_fraction <= 1, actual values: "
                f"{self.min_fraction}, {self.max_fraction}"
            )
        if any(not 0 <= r < 0.5 for r in self.missing_rates) or not self.missing_rates:
            raise ValueError(f"Expected missing rates in [0, 0.5), actual: {self.missing_rates}")
        if not 0 <= self.invent_probability <= 1:
            raise ValueError(f"Expected invent_probability in [0, 1], actual value: {self.invent_probability}")
        if not 0 <= self.spell_probability <= 1:
            raise ValueError(f"Expected spell_probability in [0, 1], actual value: {self.spell_probability}")
        if not 0 <= self.relate_probability <= 1:
            raise ValueError(f"Expected relate_probability in [0, 1], actual value: {self.relate_probability}")
        if not 0 <= self.value_probability <= 1:
            raise ValueError(f"Expected value_probability in [0, 1], actual value: {self.value_probability}")
        if not 0 <= self.level_prefix_probability <= 1:
            raise ValueError(f"Expected level_prefix_probability in [0, 1], actual value: "
                             f"{self.level_prefix_probability}")
        if self.spell_probability > 0:
            check_pieces(self.spell_pieces)


@dataclass(frozen=True)
class TableVariant:
    spec: TableSpec
    data: bytes = field(repr=False)
    """The CSV bytes the sandbox gets; the ground truth is computed from them."""
    renames: dict[str, str]
    """Original column name -> the variant's name (only renamed columns)."""
    missing_rate: float
    rows: int
    stem: str | None = None
    """A made-up file stem (``invent_probability``); None keeps the table's name."""
    values: dict[str, str] = field(default_factory=dict)
    """Real text value -> the variant's made-up one (``value_probability``), in the
    category and entity columns; empty when the values are the table's."""

    @property
    def file(self) -> str:
        return f"{self.stem or self.spec.name}.csv"

    def col(self, original: str) -> str:
        return self.renames.get(original, original)

    def frame(self) -> pd.DataFrame:
        return pd.read_csv(io.BytesIO(self.data))


def rename_style(name: str, style: int) -> str:
    """Rename a column in one of three spellings people use for the same thing."""
    words = [w for w in re.split(r"[_\s]+", name) if w]
    if style == 0:
        return "_".join(w.upper() for w in words)
    if style == 1:
        return " ".join(w.capitalize() for w in words)
    return words[0].lower() + "".join(w.capitalize() for w in words[1:])


def _renames(df: pd.DataFrame, spec: TableSpec, rng: np.random.Generator, p: float) -> dict[str, str]:
    taken = set(df.columns)
    out: dict[str, str] = {}
    for col in df.columns:
        draw = rng.random()
        style = int(rng.integers(3))
        if col in spec.no_missing() or draw >= p:
            continue
        new = rename_style(str(col), style)
        if new != col and new not in taken:
            out[col] = new
            taken.add(new)
    return out


def make_variant(
    spec: TableSpec,
    rng: np.random.Generator,
    *,
    allow_rename: bool = True,
    allow_missing: bool = True,
    allow_values: bool = True,
    config: VariantConfig = VariantConfig(),
) -> TableVariant:
    """Draw one variant of ``spec``'s table; a pure function of the generator's state.
    ``allow_values``: whether ``config.value_probability`` may make up its text values
    (not for a question over several tables, whose values must match)."""
    df = load_table(spec.name)
    n = len(df)
    if n > config.min_rows:
        frac = rng.uniform(config.min_fraction, config.max_fraction)
        n = max(config.min_rows, int(round(frac * len(df))))
    rows = rng.choice(len(df), size=n, replace=False)  # random order: subsample + shuffle
    df = df.iloc[rows].reset_index(drop=True)
    rate = float(rng.choice(config.missing_rates)) if allow_missing else 0.0
    if rate > 0:
        for col in df.columns:
            # Integer-coded categories (years, cylinder counts) would turn into floats
            # ("2007.0") and change their labels; they keep all values.
            int_label = col in spec.category and pd.api.types.is_integer_dtype(df[col])
            if col in spec.no_missing() or int_label:
                continue
            mask = rng.random(n) < rate
            if mask.any():
                df[col] = df[col].astype(object).where(~mask, None)
    renames = _renames(df, spec, rng, config.rename_probability) if allow_rename else {}
    stem = None
    values: dict[str, str] = {}
    if config.invent_probability > 0 and rng.random() < config.invent_probability:
        spell = made_up_word
        if config.spell_probability > 0 and rng.random() < config.spell_probability:
            spell = piece_speller(config.spell_pieces)
        stem = made_up_name(spec.name, rng, spell)
        if allow_rename:
            renames = _invented_renames(df, spec, renames, rng, spell)
        if config.relate_probability > 0 and rng.random() < config.relate_probability:
            stem = related_stem([str(renames.get(c, c)) for c in df.columns if _quotable(spec, c)], rng, spell) or stem
        if allow_values and config.value_probability > 0 and rng.random() < config.value_probability:
            values = _invented_values(df, spec, rng, spell)
            if config.level_prefix_probability > 0:
                values.update(_prefixed_levels(df, spec, renames, values, rng, config.level_prefix_probability))
            for col in _valued_columns(spec, df):
                df[col] = df[col].map(lambda v: values.get(v, v) if isinstance(v, str) else v)
    df = df.rename(columns=renames)
    return TableVariant(spec=spec, data=table_csv(df), renames=renames, missing_rate=rate, rows=n, stem=stem,
                        values=values)


_READ_AS_OTHER = frozenset({"na", "nan", "null", "none", "n/a", "true", "false", "inf", "infinity"})
"""Lowercased spellings ``pandas.read_csv`` reads as missing, a bool or a float, not text."""


def _valued_columns(spec: TableSpec, df: pd.DataFrame) -> list[str]:
    """The columns whose text values ``value_probability`` makes up: category and entity."""
    return [c for c in df.columns if c in spec.category or c == spec.entity]


def _invented_values(df: pd.DataFrame, spec: TableSpec, rng: np.random.Generator,
                     spell: Callable[[int, Any], str] = made_up_word) -> dict[str, str]:
    """One made-up value per real text value (with a letter) of the category and entity
    columns, shaped like it (:func:`made_up_name`), in sorted order (the draws do not
    depend on the row order), injective and distinct from every real value, and never a
    spelling pandas reads back as something else (``nan``, ``True``)."""
    real = sorted({v for c in _valued_columns(spec, df) for v in df[c] if isinstance(v, str)})
    taken = set(real)
    out: dict[str, str] = {}
    for value in real:
        if not re.search(r"[A-Za-z]", value):
            continue
        new = made_up_name(value, rng, spell)
        while new in taken or new.strip().lower() in _READ_AS_OTHER:
            new = made_up_name(value, rng, spell) if re.search(r"[A-Za-z]{3}", value) else new + str(int(rng.integers(10)))
        taken.add(new)
        out[value] = new
    return out


def _prefixed_levels(df: pd.DataFrame, spec: TableSpec, renames: dict[str, str], values: dict[str, str],
                     rng: np.random.Generator, probability: float) -> dict[str, str]:
    """``<column>_<k>`` for the made-up text levels of each category column drawn with
    ``probability`` (``VariantConfig.level_prefix_probability``), the column's final name
    first; a column whose levels another valued column also holds, or whose new levels
    would be a value the table already holds, is left as it was."""
    out: dict[str, str] = {}
    for column in (c for c in df.columns if c in spec.category):
        if rng.random() >= probability:
            continue
        levels = sorted({v for v in df[column] if isinstance(v, str) and v in values})
        others = {v for c in _valued_columns(spec, df) if c != column for v in df[c] if isinstance(v, str)}
        if not levels or set(levels) & others:
            continue
        order = rng.permutation(len(levels))
        new = {level: f"{renames.get(column, column)}_{int(k) + 1}" for level, k in zip(levels, order)}
        kept = {values[v] for v in values if v not in new} | set(values)
        if not set(new.values()) & kept:
            out.update(new)
    return out


def _quotable(spec: TableSpec, column: Any) -> bool:
    """A column a question may quote: the entity, a numeric or a category column."""
    return column == spec.entity or column in spec.numeric or column in spec.category


_RELATED_FORMS = ("{c}", "{c}{w}", "{w}_{c}", "{c}s")
"""How a real stem holds a column: itself (``co2``), a word after it (``statecrime``),
a word before it (``seattle_weather``), its plural (``tips``)."""


def related_stem(columns: list[str], rng: np.random.Generator,
                 spell: Callable[[int, Any], str] = made_up_word) -> str | None:
    """A file stem holding one of ``columns`` (a variant's final names) in one of
    :data:`_RELATED_FORMS`, the other word made up by ``spell``; None when no column
    gives a lowercase word of three or more letters (a file name is written lowercase)."""
    words = [w for w in (re.sub(r"[^a-z0-9]+", "_", c.lower()).strip("_") for c in columns)
             if re.search(r"[a-z]{3}", w)]
    if not words:
        return None
    word = words[int(rng.integers(len(words)))]
    form = _RELATED_FORMS[int(rng.integers(len(_RELATED_FORMS)))]
    return form.format(c=word, w=spell(int(rng.integers(3, 7)), rng))


def _invented_renames(df: pd.DataFrame, spec: TableSpec, renames: dict[str, str],
                      rng: np.random.Generator, spell: Callable[[int, Any], str] = made_up_word) -> dict[str, str]:
    """Every unprotected column made up, shaped like its (possibly restyled) name; the
    protected ones (entity, date, keys) keep theirs, as with ordinary renames."""
    out: dict[str, str] = {}
    taken = {str(c) for c in df.columns if c in spec.no_missing()}
    for col in df.columns:
        if col in spec.no_missing():
            continue
        new = made_up_name(renames.get(col, str(col)), rng, spell)
        while new in taken or new == col:  # a clash (or, rarely, the same spelling drawn again)
            if not re.search(r"[A-Za-z]{3}", new):
                new = new + str(int(rng.integers(10)))
            else:
                new = made_up_name(renames.get(col, str(col)), rng, spell)
        taken.add(new)
        out[col] = new
    return out
