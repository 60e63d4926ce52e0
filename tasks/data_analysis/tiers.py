"""The concrete question templates, by tier.

- Tier 1, one operation: mean, median, distinct count, missing count, arg-max.
- Tier 2, filter plus aggregate or group-by: threshold counts, group arg-max, filtered
  mean, frequent categories, z-score outliers.
- Tier 3, multi-step: derived ratio per group, top-3 by derived ratio, monthly/yearly
  resampling, year-over-year change, joins of two tables.
- Tier 4, closed-form statistics: Pearson r, OLS slope and intercept, OLS with two
  predictors (least squares), Welch's t.

Every wording pins the choices the code makes (missing values, ddof, strict bounds,
rounding, tie-breaking); the knobs list the alternative readings the ambiguity filter
tries. Parameters are drawn from the canonical table, then bound to the episode's
variant (renamed columns) when the question is rendered.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import numpy as np
import pandas as pd

from tasks.data_analysis.schema import AnswerSchema, Field
from tasks.data_analysis.tables import TABLES, TableSpec, load_table
from tasks.data_analysis.templates import Draw, Template

__all__ = ["TEMPLATES", "templates_for_tier", "template_by_id", "JOIN_PAIRS"]

_PRE = "import numpy as np\nimport pandas as pd\ndf = pd.read_csv({path})\n"
_PRE2 = "import numpy as np\nimport pandas as pd\na = pd.read_csv({path})\nb = pd.read_csv({path2})\n"
_TIE = "If several tie, give the one that sorts first as text."
_SKIPNA = {"skipna": ("True", "False")}
_STRICT = {"op": (">", ">=")}
_TIEK = {"tie": ("0", "-1")}


@lru_cache(maxsize=None)
def _frame(name: str) -> pd.DataFrame:
    return load_table(name)


def _pick(rng: np.random.Generator, items: list[Any] | tuple[Any, ...]) -> Any:
    return items[int(rng.integers(len(items)))]


def _native(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _text(v: Any) -> str:
    return f"'{v}'" if isinstance(v, str) else str(v)


def _nice(v: float) -> float | int:
    """Round a threshold to 3 significant digits (an int when it has no fraction)."""
    if v == 0 or not np.isfinite(v):
        return 0
    r = float(f"{v:.3g}")
    return int(r) if r.is_integer() else r


def _specs(pred: Callable[[TableSpec], bool]) -> list[TableSpec]:
    return [t for t in TABLES.values() if pred(t)]


def _usable_categories(spec: TableSpec, max_levels: int = 30) -> list[str]:
    df = _frame(spec.name)
    return [c for c in spec.category if 2 <= df[c].nunique() <= max_levels]


def _one_numeric(rng: np.random.Generator, pool: list[TableSpec] | None = None) -> tuple[TableSpec, str]:
    spec = _pick(rng, pool or _specs(lambda t: bool(t.numeric)))
    return spec, _pick(rng, spec.numeric)


# ---- tier 1 ----------------------------------------------------------------------

def _draw_numeric(rng: np.random.Generator) -> Draw:
    spec, x = _one_numeric(rng)
    return Draw((spec.name,), {"x": (0, x)})


def _draw_category(rng: np.random.Generator) -> Draw | None:
    spec = _pick(rng, _specs(lambda t: bool(_usable_categories(t))))
    return Draw((spec.name,), {"c": (0, _pick(rng, _usable_categories(spec)))})


def _unprotected(spec: TableSpec) -> list[str]:
    return [c for c in _frame(spec.name).columns
            if c not in spec.no_missing() and c not in spec.category]


def _draw_any_unprotected(rng: np.random.Generator) -> Draw:
    spec = _pick(rng, _specs(lambda t: bool(_unprotected(t))))
    return Draw((spec.name,), {"x": (0, _pick(rng, _unprotected(spec)))})


def _draw_entity_numeric(rng: np.random.Generator) -> Draw:
    spec, x = _one_numeric(rng, _specs(lambda t: bool(t.entity and t.numeric)))
    return Draw((spec.name,), {"x": (0, x), "e": (0, spec.entity)})


T1 = [
    Template(
        "t1_mean", 1,
        "In {file}, what is the mean of column '{x}'? Ignore missing values. "
        "Round to 3 decimal places.",
        _PRE + "result = float(df[{x}].mean(skipna={skipna}))\n",
        AnswerSchema("float", decimals=3), _draw_numeric, knobs=_SKIPNA),
    Template(
        "t1_median", 1,
        "In {file}, what is the median of column '{x}'? Ignore missing values. "
        "Round to 3 decimal places.",
        _PRE + "result = float(df[{x}].median(skipna={skipna}))\n",
        AnswerSchema("float", decimals=3), _draw_numeric, knobs=_SKIPNA),
    Template(
        "t1_distinct", 1,
        "In {file}, how many distinct non-missing values does column '{c}' contain?",
        _PRE + "result = int(df[{c}].nunique(dropna={dropna}))\n",
        AnswerSchema("int"), _draw_category, knobs={"dropna": ("True", "False")}),
    Template(
        "t1_missing", 1,
        "In {file}, how many rows have a missing (empty) value in column '{x}'?",
        _PRE + "result = int(df[{x}].isna().sum())\n",
        AnswerSchema("int"), _draw_any_unprotected, missing_rates=(0.01, 0.02, 0.05)),
    Template(
        "t1_argmax", 1,
        "In {file}, which '{e}' has the largest '{x}'? Ignore rows where '{x}' is missing. "
        + _TIE,
        _PRE + "s = df.dropna(subset=[{x}])\n"
        "top = s.loc[s[{x}] == s[{x}].max(), {e}]\n"
        "result = sorted(str(v) for v in top)[{tie}]\n",
        AnswerSchema("str"), _draw_entity_numeric, knobs=_TIEK),
]


# ---- tier 2 ----------------------------------------------------------------------

def _draw_threshold(rng: np.random.Generator) -> Draw:
    spec, x = _one_numeric(rng)
    q = float(rng.uniform(0.15, 0.85))
    t = _nice(float(_frame(spec.name)[x].quantile(q)))
    return Draw((spec.name,), {"x": (0, x)}, {"t": t})


def _draw_group_numeric(rng: np.random.Generator) -> Draw:
    spec = _pick(rng, _specs(lambda t: bool(t.numeric and _usable_categories(t))))
    g = _pick(rng, _usable_categories(spec))
    return Draw((spec.name,), {"g": (0, g), "x": (0, _pick(rng, spec.numeric))})


def _draw_filtered(rng: np.random.Generator) -> Draw:
    d = _draw_group_numeric(rng)
    g = d.columns["g"][1]
    values = sorted(_frame(d.tables[0])[g].dropna().unique().tolist(), key=str)
    v = _native(_pick(rng, values))
    return Draw(d.tables, d.columns, {"v": v, "v_text": _text(v)})


def _draw_frequent(rng: np.random.Generator) -> Draw | None:
    spec = _pick(rng, _specs(lambda t: bool(_usable_categories(t))))
    g = _pick(rng, _usable_categories(spec))
    counts = sorted(set(_frame(spec.name)[g].value_counts().tolist()))
    if len(counts) < 2:
        return None
    i = int(rng.integers(len(counts) - 1))
    k = int(round(0.85 * (counts[i] + counts[i + 1]) / 2))
    return Draw((spec.name,), {"g": (0, g)}, {"k": k})


def _draw_zscore(rng: np.random.Generator) -> Draw:
    spec, x = _one_numeric(rng)
    return Draw((spec.name,), {"x": (0, x)}, {"z": _pick(rng, (1, 1.5, 2))})


T2 = [
    Template(
        "t2_count_above", 2,
        "In {file}, how many rows have '{x}' strictly greater than {t}? "
        "Rows where '{x}' is missing do not count.",
        _PRE + "result = int((df[{x}] {op} {t}).sum())\n",
        AnswerSchema("int"), _draw_threshold, knobs=_STRICT),
    Template(
        "t2_group_argmax", 2,
        "In {file}, group the rows by '{g}' (rows with a missing '{g}' are left out) and "
        "compute the mean of '{x}' in each group, ignoring missing values. Which '{g}' "
        "value has the highest mean? " + _TIE,
        _PRE + "m = df.groupby({g})[{x}].mean().dropna()\n"
        "top = m[m == m.max()].index\n"
        "result = sorted(str(v) for v in top)[{tie}]\n",
        AnswerSchema("str"), _draw_group_numeric, knobs=_TIEK),
    Template(
        "t2_filtered_mean", 2,
        "In {file}, what is the mean of '{x}' over the rows whose '{g}' is {v_text}? "
        "Ignore missing values of '{x}'. Round to 3 decimal places.",
        _PRE + "sub = df[df[{g}] == {v}]\n"
        "result = float(sub[{x}].mean(skipna={skipna}))\n",
        AnswerSchema("float", decimals=3), _draw_filtered, knobs=_SKIPNA),
    Template(
        "t2_frequent", 2,
        "In {file}, which values of '{g}' occur in strictly more than {k} rows? "
        "Rows with a missing '{g}' are not counted.",
        _PRE + "counts = df[{g}].value_counts()\n"
        "result = sorted(str(v) for v in counts[counts {op} {k}].index)\n",
        AnswerSchema("list"), _draw_frequent, knobs=_STRICT),
    Template(
        "t2_zscore", 2,
        "In {file}, how many rows have '{x}' strictly more than {z} standard deviations "
        "above the mean of '{x}'? Use the sample standard deviation (ddof=1) and ignore "
        "missing values.",
        _PRE + "s = df[{x}].dropna()\n"
        "result = int((s > s.mean() + {z} * s.std(ddof={ddof})).sum())\n",
        AnswerSchema("int"), _draw_zscore, knobs={"ddof": ("1", "0")}),
]


# ---- tier 3 ----------------------------------------------------------------------

def _draw_ratio_group(rng: np.random.Generator) -> Draw:
    spec = _pick(rng, _specs(lambda t: bool(t.ratios and _usable_categories(t))))
    x, y = _pick(rng, spec.ratios)
    g = _pick(rng, [c for c in _usable_categories(spec) if c not in (x, y)])
    return Draw((spec.name,), {"x": (0, x), "y": (0, y), "g": (0, g)})


def _draw_top3(rng: np.random.Generator) -> Draw:
    spec = _pick(rng, _specs(lambda t: bool(t.entity and t.ratios)))
    x, y = _pick(rng, spec.ratios)
    return Draw((spec.name,), {"x": (0, x), "y": (0, y), "e": (0, spec.entity)})


def _draw_yearly_change(rng: np.random.Generator) -> Draw:
    symbols = sorted(_frame("stocks")["symbol"].unique().tolist())
    fn = _pick(rng, ("max", "min"))
    return Draw(("stocks",), {"x": (0, "price"), "date": (0, "date"), "s": (0, "symbol")},
                {"sym": str(_pick(rng, symbols)), "fn": fn,
                 "hl": "largest increase" if fn == "max" else "largest decrease (most negative change)"})


_PERIODS = {"month": ("%Y-%m", "YYYY-MM"), "year": ("%Y", "YYYY")}


def _draw_resample(rng: np.random.Generator) -> Draw:
    spec = _pick(rng, _specs(lambda t: bool(t.date) and t.name != "stocks"))
    x = _pick(rng, spec.numeric)
    unit = _pick(rng, ("month", "year"))
    fn = _pick(rng, ("max", "min"))
    fmt, shown = _PERIODS[unit]
    return Draw((spec.name,), {"x": (0, x), "date": (0, spec.date)},
                {"fmt": fmt, "shown": shown, "unit": unit, "fn": fn,
                 "hl": "highest" if fn == "max" else "lowest"})


JOIN_PAIRS: tuple[tuple[str, str, str, str], ...] = (
    ("sunspots", "nile", "year", "year"),
    ("nile", "sunspots", "year", "year"),
    ("marriages", "unemployment1948", "Year", "Year"),
    ("unemployment1948", "marriages", "Year", "Year"),
    ("linnerud_exercise", "linnerud_physiological", "athlete", "athlete"),
    ("linnerud_physiological", "linnerud_exercise", "athlete", "athlete"),
)
"""(left table, right table, left key, right key) for the join-then-filter template."""


def _draw_join_filter(rng: np.random.Generator) -> Draw:
    left, right, ka, kb = _pick(rng, JOIN_PAIRS)
    x = _pick(rng, TABLES[left].numeric)
    y = _pick(rng, TABLES[right].numeric)
    t = _nice(float(_frame(left)[x].quantile(float(rng.uniform(0.2, 0.8)))))
    return Draw((left, right), {"ka": (0, ka), "kb": (1, kb), "x": (0, x), "y": (1, y)},
                {"t": t})


def _draw_join_group(rng: np.random.Generator) -> Draw:
    left = _pick(rng, ("world_gapminder", "gapminder"))
    numeric = {"world_gapminder": ("fertility", "life_expectancy"),
               "gapminder": ("lifeExp", "gdpPercap")}[left]
    years = sorted(_frame(left)["year"].unique().tolist())
    year = int(_pick(rng, years))
    fn = _pick(rng, ("max", "min"))
    return Draw((left, "gapminder_regions"),
                {"ka": (0, "country"), "kb": (1, "Country"), "g": (1, "Group"),
                 "yr": (0, "year"), "x": (0, _pick(rng, numeric))},
                {"year": year, "fn": fn, "hl": "highest" if fn == "max" else "lowest"})


_GROUP_VALUE = AnswerSchema("fields", fields=(Field("group", "str"), Field("value", "float", 4)))

T3 = [
    Template(
        "t3_ratio_group", 3,
        "In {file}, compute for every row the ratio '{x}' / '{y}', leaving out rows where "
        "'{x}', '{y}' or '{g}' is missing. Average the ratio within each '{g}' value. Which "
        "'{g}' value has the highest average ratio, and what is that average (rounded to "
        "4 decimal places)? " + _TIE,
        _PRE + "d = df.dropna(subset=[{x}, {y}, {g}])\n"
        "m = (d[{x}] / d[{y}]).groupby(d[{g}]).mean()\n"
        "key = sorted(m[m == m.max()].index, key=str)[{tie}]\n"
        "result = {{'group': str(key), 'value': float(m[key])}}\n",
        _GROUP_VALUE, _draw_ratio_group, knobs=_TIEK),
    Template(
        "t3_top3_ratio", 3,
        "In {file}, compute for every row the ratio '{x}' / '{y}', leaving out rows where "
        "either is missing. Which three '{e}' values have the three largest ratios?",
        _PRE + "d = df.dropna(subset=[{x}, {y}]).copy()\n"
        "d['_ratio'] = d[{x}] / d[{y}]\n"
        "top = d.nlargest(3, '_ratio', keep={keep})\n"
        "result = sorted(str(v) for v in top[{e}])\n",
        AnswerSchema("list"), _draw_top3, knobs={"keep": ("'first'", "'last'")}),
    Template(
        "t3_resample", 3,
        "In {file}, parse '{date}' as dates and resample to calendar {unit}s, averaging "
        "'{x}' over the rows of each {unit} (ignore missing values; {unit}s without values "
        "are left out). Which {unit} has the {hl} average, and what is it? Give the {unit} "
        "as {shown} in the field 'group' and the average rounded to 4 decimal places in "
        "'value'. If several tie, give the earliest.",
        _PRE + "d = df.dropna(subset=[{x}])\n"
        "when = pd.to_datetime(d[{date}], format='%Y-%m-%d')\n"
        "m = d[{x}].groupby(when.dt.strftime({fmt}).to_numpy()).mean()\n"
        "key = sorted(m[m == m.agg({fn})].index)[{tie}]\n"
        "result = {{'group': str(key), 'value': float(m[key])}}\n",
        _GROUP_VALUE, _draw_resample, knobs=_TIEK),
    Template(
        "t3_join_filter_mean", 3,
        "Join {file} and {file2} on {file}'s '{ka}' = {file2}'s '{kb}', keeping only keys "
        "present in both. Over the joined rows whose '{x}' is strictly greater than {t}, "
        "what is the mean of '{y}'? Ignore missing values. Round to 3 decimal places.",
        _PRE2 + "j = a.merge(b, left_on={ka}, right_on={kb}, how='inner')\n"
        "result = float(j.loc[j[{x}] {op} {t}, {y}].mean())\n",
        AnswerSchema("float", decimals=3), _draw_join_filter, knobs=_STRICT),
    Template(
        "t3_join_group", 3,
        "Join {file} and {file2} on {file}'s '{ka}' = {file2}'s '{kb}', keeping only "
        "countries present in both. Using only the rows of year {year}, average '{x}' "
        "within each '{g}' (ignore missing values). Which '{g}' has the {hl} average, and "
        "what is it (rounded to 4 decimal places)? " + _TIE,
        _PRE2 + "j = a[a[{yr}] == {year}].merge(b, left_on={ka}, right_on={kb}, how='inner')\n"
        "m = j.groupby({g})[{x}].mean().dropna()\n"
        "key = sorted(m[m == m.agg({fn})].index, key=str)[{tie}]\n"
        "result = {{'group': str(key), 'value': float(m[key])}}\n",
        _GROUP_VALUE, _draw_join_group, knobs=_TIEK),
    Template(
        "t3_yearly_change", 3,
        "In {file}, take the rows whose '{s}' is '{sym}', parse '{date}' as dates and average "
        "'{x}' within each calendar year. Then compute each year's percentage change of that "
        "yearly average relative to the previous calendar year present in the data "
        "(100 * (this - previous) / previous; the first year has none). Which year has the "
        "{hl}, and what is the percentage change? Give the year as YYYY in the field 'group' "
        "and the change rounded to 4 decimal places in 'value'. If several tie, give the "
        "earliest.",
        _PRE + "d = df[df[{s}] == {sym}].dropna(subset=[{x}])\n"
        "years = pd.to_datetime(d[{date}], format='%Y-%m-%d').dt.year.to_numpy()\n"
        "m = d[{x}].groupby(years).mean().sort_index()\n"
        "change = (100 * (m - m.shift(1)) / m.shift(1)).dropna()\n"
        "key = sorted(change[change == change.agg({fn})].index)[{tie}]\n"
        "result = {{'group': str(key), 'value': float(change[key])}}\n",
        _GROUP_VALUE, _draw_yearly_change, knobs=_TIEK),
]


# ---- tier 4 ----------------------------------------------------------------------

def _draw_pair(rng: np.random.Generator) -> Draw:
    spec = _pick(rng, _specs(lambda t: len(t.numeric) >= 2))
    x, y = (str(c) for c in rng.choice(list(spec.numeric), size=2, replace=False))
    return Draw((spec.name,), {"x": (0, x), "y": (0, y)})


def _draw_two_groups(rng: np.random.Generator) -> Draw | None:
    spec = _pick(rng, _specs(lambda t: bool(t.numeric and _usable_categories(t))))
    g = _pick(rng, _usable_categories(spec))
    x = _pick(rng, spec.numeric)
    counts = _frame(spec.name).dropna(subset=[x])[g].value_counts()
    levels = sorted((k for k, n in counts.items() if n >= 8), key=str)
    if len(levels) < 2:
        return None
    v1, v2 = (_native(levels[i]) for i in rng.choice(len(levels), size=2, replace=False))
    return Draw((spec.name,), {"g": (0, g), "x": (0, x)},
                {"v1": v1, "v2": v2, "v1_text": _text(v1), "v2_text": _text(v2)})


def _draw_triple(rng: np.random.Generator) -> Draw:
    spec = _pick(rng, _specs(lambda t: len(t.numeric) >= 3))
    y, x1, x2 = (str(c) for c in rng.choice(list(spec.numeric), size=3, replace=False))
    return Draw((spec.name,), {"y": (0, y), "x1": (0, x1), "x2": (0, x2)})


_XY = ("d = df[[{x}, {y}]].dropna()\n"
       "xv = d[{x}].to_numpy(dtype=float)\n"
       "yv = d[{y}].to_numpy(dtype=float)\n"
       "xc = xv - xv.mean()\n"
       "yc = yv - yv.mean()\n")

T4 = [
    Template(
        "t4_pearson", 4,
        "In {file}, what is the Pearson correlation coefficient between '{x}' and '{y}', "
        "using only rows where both are present? Round to 4 decimal places.",
        _PRE + _XY + "result = float((xc * yc).sum() / np.sqrt((xc ** 2).sum() * (yc ** 2).sum()))\n",
        AnswerSchema("float", decimals=4), _draw_pair),
    Template(
        "t4_ols", 4,
        "In {file}, fit '{y}' = intercept + slope * '{x}' by ordinary least squares on the "
        "rows where both are present. Report 'slope' and 'intercept', each rounded to 4 "
        "decimal places.",
        _PRE + _XY + "slope = (xc * yc).sum() / (xc ** 2).sum()\n"
        "result = {{'slope': float(slope), 'intercept': float(yv.mean() - slope * xv.mean())}}\n",
        AnswerSchema("fields", fields=(Field("slope", "float", 4), Field("intercept", "float", 4))),
        _draw_pair),
    Template(
        "t4_welch_t", 4,
        "In {file}, compute Welch's t statistic (unequal variances; sample variances with "
        "ddof=1) for the difference in mean '{x}' between rows whose '{g}' is {v1_text} and "
        "rows whose '{g}' is {v2_text} (first group minus second). Ignore missing values of "
        "'{x}'. Round to 3 decimal places.",
        _PRE + "a = df.loc[df[{g}] == {v1}, {x}].dropna().to_numpy(dtype=float)\n"
        "b = df.loc[df[{g}] == {v2}, {x}].dropna().to_numpy(dtype=float)\n"
        "se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))\n"
        "result = float((a.mean() - b.mean()) / se)\n",
        AnswerSchema("float", decimals=3), _draw_two_groups),
    Template(
        "t4_ols2", 4,
        "In {file}, fit '{y}' = b0 + b1 * '{x1}' + b2 * '{x2}' by ordinary least squares on "
        "the rows where all three are present. Report 'b1' and 'b2', each rounded to 4 "
        "decimal places.",
        _PRE + "d = df[[{y}, {x1}, {x2}]].dropna()\n"
        "X = np.column_stack([np.ones(len(d)), d[{x1}].to_numpy(dtype=float), "
        "d[{x2}].to_numpy(dtype=float)])\n"
        "coef = np.linalg.lstsq(X, d[{y}].to_numpy(dtype=float), rcond=None)[0]\n"
        "result = {{'b1': float(coef[1]), 'b2': float(coef[2])}}\n",
        AnswerSchema("fields", fields=(Field("b1", "float", 4), Field("b2", "float", 4))),
        _draw_triple),
]

TEMPLATES: tuple[Template, ...] = tuple(T1 + T2 + T3 + T4)
_BY_ID = {t.id: t for t in TEMPLATES}


def templates_for_tier(tier: int) -> tuple[Template, ...]:
    return tuple(t for t in TEMPLATES if t.tier == tier)


def template_by_id(template_id: str) -> Template:
    try:
        return _BY_ID[template_id]
    except KeyError:
        raise KeyError(f"Expected one of {sorted(_BY_ID)}, actual value: {template_id!r}") from None
