"""DataAnalysis-v2's question templates: v1's plus 50 new ones, in seven categories.

v1 asked one operation per question, with the column named and the code almost spelled
out. v2 keeps v1's sound templates and adds the analyses a data analyst is actually asked
for (:data:`CATEGORY` names each template's):

- ``basic``: one statistic of one column;
- ``filter_group``: a filter, a group-by, or both, then one aggregate;
- ``chain``: filter -> group -> rank chains (the k-th group, top-3 lists, two-key groups);
- ``time_series``: date-ordered questions (rolling means, runs, first crossings, seasonality);
- ``join``: questions over two tables joined on a key (anti-joins, joined correlations);
- ``schema``: questions that name no column (which column has the most missing values,
  which pair of columns is most correlated): the agent must inspect the file first;
- ``stats``: closed-form statistics (correlations, regressions, effect sizes, chi-square).

Float answers state their precision per question (``dp`` among the draw's values, 2-4
decimals capped so the answer keeps at most 8 significant digits); the v2 scorer accepts
exactly half a unit of that last decimal (:mod:`tasks.data_analysis.grading_v2`). Many
answers depend on which rows a table variant kept (first crossing dates, run lengths,
anti-joins, the column with most missing values), so they change from episode to episode.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np
import pandas as pd

from tasks.data_analysis.schema import AnswerSchema, Field
from tasks.data_analysis.tables import TableSpec
from tasks.data_analysis.templates import Draw, Template
from tasks.data_analysis import tiers as v1
from tasks.data_analysis.tiers import (
    JOIN_PAIRS,
    _frame,
    _native,
    _nice,
    _pick,
    _specs,
    _text,
    _usable_categories,
)

__all__ = ["TEMPLATES_V2", "CATEGORY", "template_v2_by_id"]

_PRE = "import numpy as np\nimport pandas as pd\ndf = pd.read_csv({path})\n"
_PRE2 = "import numpy as np\nimport pandas as pd\na = pd.read_csv({path})\nb = pd.read_csv({path2})\n"
_TIE = "If several tie, give the one that sorts first as text."
_TIEK = {"tie": ("0", "-1")}
_STRICT = {"op": (">", ">=")}
_FLOAT = AnswerSchema("float", decimals=4)
"""Float templates carry 4 here; the generator replaces it by the draw's ``dp``."""
_INT = AnswerSchema("int")
_STR = AnswerSchema("str")
_LIST = AnswerSchema("list")
_TOP_KEY = "result = sorted(str(k) for k in m[m == m.max()].index)[{tie}]\n"
"""The key of Series ``m`` with the largest value; ties go to the one sorting first as text."""
_ORDER = "Sort the rows by '{date}' (ISO dates) and leave out rows where '{x}' is missing."


# ---- drawing helpers ---------------------------------------------------------------

def _scale(table: str, col: str, times_rows: bool = False) -> float:
    s = _frame(table)[col].dropna().abs()
    m = float(s.max()) if len(s) else 1.0
    return m * len(s) if times_rows else m


def _dp(rng: np.random.Generator, scale: float) -> int:
    """2-4 decimals, capped so the answer has at most 8 significant digits."""
    digits = int(math.floor(math.log10(scale))) + 1 if scale >= 1 else 1
    return max(0, min(int(_pick(rng, (2, 3, 4))), 8 - digits))


def _with_dp(draw: Draw, rng: np.random.Generator, scale: float) -> Draw:
    return Draw(draw.tables, draw.columns, {**draw.values, "dp": _dp(rng, scale)})


def _numeric_specs() -> list[TableSpec]:
    return _specs(lambda t: bool(t.numeric))


def _grouped_specs(min_numeric: int = 1) -> list[TableSpec]:
    return _specs(lambda t: len(t.numeric) >= min_numeric and bool(_usable_categories(t)))


def _quantile(table: str, col: str, rng: np.random.Generator, lo: float = 0.2, hi: float = 0.8) -> float | int:
    return _nice(float(_frame(table)[col].quantile(float(rng.uniform(lo, hi)))))


def _num(rng: np.random.Generator) -> tuple[TableSpec, str]:
    spec = _pick(rng, _numeric_specs())
    return spec, _pick(rng, spec.numeric)


def _two_num(spec: TableSpec, rng: np.random.Generator) -> tuple[str, str]:
    x, y = (str(c) for c in rng.choice(list(spec.numeric), size=2, replace=False))
    return x, y


def _level(table: str, g: str, rng: np.random.Generator) -> Any:
    values = sorted(_frame(table)[g].dropna().unique().tolist(), key=str)
    return _native(_pick(rng, values))


def _series_specs() -> list[TableSpec]:
    return _specs(lambda t: bool(t.date) and t.name != "stocks")


def _hl(fn: str) -> str:
    return "highest" if fn == "max" else "lowest"


# ---- basic ---------------------------------------------------------------------------

def _d_stat(rng: np.random.Generator, times_rows: bool = False) -> Draw:
    spec, x = _num(rng)
    return _with_dp(Draw((spec.name,), {"x": (0, x)}), rng, _scale(spec.name, x, times_rows))


def _d_sum(rng: np.random.Generator) -> Draw:
    return _d_stat(rng, times_rows=True)


def _d_quantile(rng: np.random.Generator) -> Draw:
    d = _d_stat(rng)
    return Draw(d.tables, d.columns, {**d.values, "p": int(_pick(rng, (10, 25, 75, 90)))})


def _d_argext(rng: np.random.Generator) -> Draw:
    d = v1._draw_entity_numeric(rng)
    fn = _pick(rng, ("max", "min"))
    return Draw(d.tables, d.columns, {"fn": fn, "word": "largest" if fn == "max" else "smallest"})


def _d_level(rng: np.random.Generator) -> Draw | None:
    d = v1._draw_category(rng)
    if d is None:
        return None
    v = _level(d.tables[0], d.columns["c"][1], rng)
    return Draw(d.tables, d.columns, {"v": v, "v_text": _text(v)})


BASIC = [
    Template("v2_mean", 1, "In {file}, what is the average of '{x}' over the rows where it is present?",
             _PRE + "result = float(df[{x}].mean())\n", _FLOAT, _d_stat),
    Template("v2_median", 1, "In {file}, what is the median of '{x}'? Leave out missing values.",
             _PRE + "result = float(df[{x}].median())\n", _FLOAT, _d_stat),
    Template("v2_std", 1, "In {file}, what is the sample standard deviation (ddof=1) of '{x}', "
             "leaving out missing values?",
             _PRE + "result = float(df[{x}].std(ddof=1))\n", _FLOAT, _d_stat),
    Template("v2_range", 1, "In {file}, how far apart are the largest and the smallest '{x}' "
             "(largest minus smallest, missing values left out)?",
             _PRE + "result = float(df[{x}].max() - df[{x}].min())\n", _FLOAT, _d_stat),
    Template("v2_sum", 1, "In {file}, what is the total of '{x}' over all rows (missing values count as "
             "nothing)?", _PRE + "result = float(df[{x}].sum())\n", _FLOAT, _d_sum),
    Template("v2_quantile", 1, "In {file}, what is the {p}th percentile of '{x}' (missing values left "
             "out; linear interpolation between data points, numpy's and pandas' default)?",
             _PRE + "result = float(df[{x}].quantile({p} / 100, interpolation='linear'))\n", _FLOAT,
             _d_quantile),
    Template("v2_iqr", 1, "In {file}, what is the interquartile range of '{x}' (75th minus 25th "
             "percentile, linear interpolation, missing values left out)?",
             _PRE + "result = float(df[{x}].quantile(0.75) - df[{x}].quantile(0.25))\n", _FLOAT, _d_stat),
    Template("v2_argext", 1, "In {file}, which '{e}' has the {word} '{x}'? Leave out rows where '{x}' "
             "is missing. " + _TIE,
             _PRE + "s = df.dropna(subset=[{x}])\n"
             "top = s.loc[s[{x}] == s[{x}].agg({fn}), {e}]\n"
             "result = sorted(str(v) for v in top)[{tie}]\n", _STR, _d_argext, knobs=_TIEK),
    Template("v2_mode", 1, "In {file}, which value of '{c}' occurs in the most rows (missing values "
             "not counted)? " + _TIE,
             _PRE + "n = df[{c}].value_counts()\n"
             "result = sorted(str(v) for v in n[n == n.max()].index)[{tie}]\n", _STR,
             v1._draw_category, knobs=_TIEK),
    Template("v2_count_level", 1, "In {file}, how many rows have '{c}' equal to {v_text}?",
             _PRE + "result = int((df[{c}] == {v}).sum())\n", _INT, _d_level),
    Template("v2_share_level", 1, "In {file}, what percentage of the rows with a value in '{c}' have "
             "'{c}' equal to {v_text}? Give a percentage (0-100).",
             _PRE + "s = df[{c}].dropna()\nresult = float(100 * (s == {v}).mean())\n",
             AnswerSchema("float", decimals=2), _d_level),
]


# ---- filter and group ------------------------------------------------------------------

def _d_between(rng: np.random.Generator) -> Draw:
    spec, x = _num(rng)
    lo, hi = sorted((_quantile(spec.name, x, rng, 0.1, 0.5), _quantile(spec.name, x, rng, 0.5, 0.9)))
    return Draw((spec.name,), {"x": (0, x)}, {"lo": lo, "hi": hi})


def _d_group_agg(rng: np.random.Generator) -> Draw:
    d = v1._draw_group_numeric(rng)
    fn, agg = _pick(rng, ("max", "min")), _pick(rng, ("mean", "median", "max", "min"))
    return Draw(d.tables, d.columns, {"fn": fn, "hl": _hl(fn), "agg": agg,
                                      "aggword": {"mean": "average", "median": "median",
                                                  "max": "largest", "min": "smallest"}[agg]})


def _d_group_threshold(rng: np.random.Generator) -> Draw:
    d = v1._draw_group_numeric(rng)
    return Draw(d.tables, d.columns, {"t": _quantile(d.tables[0], d.columns["x"][1], rng)})


def _d_level_threshold(rng: np.random.Generator) -> Draw:
    d = v1._draw_filtered(rng)
    return Draw(d.tables, d.columns, {**d.values, "t": _quantile(d.tables[0], d.columns["x"][1], rng)})


def _d_groups_above(rng: np.random.Generator) -> Draw | None:
    d = v1._draw_group_numeric(rng)
    g, x = d.columns["g"][1], d.columns["x"][1]
    means = sorted(_frame(d.tables[0]).groupby(g)[x].mean().dropna().tolist())
    if len(means) < 3:
        return None
    i = int(rng.integers(len(means) - 1))
    return Draw(d.tables, d.columns, {"t": _nice((means[i] + means[i + 1]) / 2)})


def _d_mean_diff(rng: np.random.Generator) -> Draw | None:
    d = v1._draw_two_groups(rng)
    if d is None:
        return None
    return _with_dp(d, rng, _scale(d.tables[0], d.columns["x"][1]))


def _d_many_groups(rng: np.random.Generator) -> Draw | None:
    spec = _pick(rng, _specs(lambda t: bool(t.numeric) and any(
        _frame(t.name)[c].nunique() >= 4 for c in _usable_categories(t))))
    g = _pick(rng, [c for c in _usable_categories(spec) if _frame(spec.name)[c].nunique() >= 4])
    return Draw((spec.name,), {"g": (0, g), "x": (0, _pick(rng, spec.numeric))})


def _d_two_num_threshold(rng: np.random.Generator) -> Draw:
    spec = _pick(rng, _specs(lambda t: len(t.numeric) >= 2))
    x, y = _two_num(spec, rng)
    d = Draw((spec.name,), {"x": (0, x), "y": (0, y)}, {"t": _quantile(spec.name, y, rng)})
    return _with_dp(d, rng, _scale(spec.name, x))


FILTER_GROUP = [
    Template("v2_count_between", 2, "In {file}, how many rows have '{x}' between {lo} and {hi}, both "
             "included? Rows where '{x}' is missing do not count.",
             _PRE + "result = int(((df[{x}] {op} {lo}) & (df[{x}] <= {hi})).sum())\n", _INT, _d_between,
             knobs={"op": (">=", ">")}),
    Template("v2_group_agg", 2, "In {file}, group the rows by '{g}' (rows with a missing '{g}' left out) "
             "and take the {aggword} '{x}' of each group, ignoring missing values. Which '{g}' has the "
             "{hl} value? " + _TIE,
             _PRE + "m = df.groupby({g})[{x}].agg({agg}).dropna()\n"
             "result = sorted((str(k) for k in m[m == m.agg({fn})].index))[{tie}]\n", _STR, _d_group_agg,
             knobs=_TIEK),
    Template("v2_group_std", 2, "In {file}, which '{g}' value has the largest sample standard deviation "
             "(ddof=1) of '{x}'? Leave out missing values and groups with fewer than 2 values. " + _TIE,
             _PRE + "m = df.dropna(subset=[{x}]).groupby({g})[{x}].std(ddof=1).dropna()\n"
             + _TOP_KEY, _STR,
             v1._draw_group_numeric, knobs=_TIEK),
    Template("v2_group_count_above", 2, "In {file}, which '{g}' value has the most rows whose '{x}' is "
             "strictly greater than {t}? " + _TIE,
             _PRE + "n = df[df[{x}] {op} {t}][{g}].value_counts()\n"
             + _TOP_KEY.replace("m[m == m", "n[n == n"), _STR,
             _d_group_threshold, knobs={**_STRICT, **_TIEK}),
    Template("v2_count_level_above", 2, "In {file}, how many rows have '{g}' equal to {v_text} and '{x}' "
             "strictly greater than {t}?",
             _PRE + "result = int(((df[{g}] == {v}) & (df[{x}] {op} {t})).sum())\n", _INT,
             _d_level_threshold, knobs=_STRICT),
    Template("v2_groups_above", 2, "In {file}, average '{x}' within each '{g}' value (missing values "
             "left out). How many '{g}' values have an average strictly greater than {t}?",
             _PRE + "m = df.groupby({g})[{x}].mean().dropna()\nresult = int((m {op} {t}).sum())\n", _INT,
             _d_groups_above, knobs=_STRICT),
    Template("v2_mean_diff", 2, "In {file}, by how much does the average '{x}' of the rows whose '{g}' "
             "is {v1_text} exceed that of the rows whose '{g}' is {v2_text}? (First minus second, "
             "missing values left out; the result may be negative.)",
             _PRE + "result = float(df.loc[df[{g}] == {v1}, {x}].mean() - df.loc[df[{g}] == {v2}, {x}].mean())\n",
             _FLOAT, _d_mean_diff),
    Template("v2_filtered_median", 2, "In {file}, what is the median '{x}' over the rows whose '{y}' is "
             "strictly greater than {t}? Leave out missing values.",
             _PRE + "result = float(df.loc[df[{y}] {op} {t}, {x}].median())\n", _FLOAT,
             _d_two_num_threshold, knobs=_STRICT),
    Template("v2_share_above_mean", 2, "In {file}, what percentage of the rows with a value in '{x}' "
             "have '{x}' strictly above the average '{x}'? Give a percentage (0-100).",
             _PRE + "s = df[{x}].dropna()\nresult = float(100 * (s {op} s.mean()).mean())\n",
             AnswerSchema("float", decimals=2), v1._draw_numeric, knobs=_STRICT),
]


# ---- chains: filter -> group -> rank -------------------------------------------------

def _d_rank_k(rng: np.random.Generator) -> Draw | None:
    d = _d_many_groups(rng)
    if d is None:
        return None
    spec = d.tables[0]
    others = [c for c in _frame(spec).columns if c != d.columns["x"][1] and c in _numeric_of(spec)]
    y = _pick(rng, others) if others else d.columns["x"][1]
    k = int(_pick(rng, (1, 2, 3)))
    return Draw(d.tables, {**d.columns, "y": (0, y)},
                {"t": _quantile(spec, y, rng, 0.1, 0.5), "k": k, "kth": {1: "highest", 2: "second-highest",
                                                                        3: "third-highest"}[k]})


def _numeric_of(table: str) -> tuple[str, ...]:
    from tasks.data_analysis.tables import TABLES

    return TABLES[table].numeric


def _d_entity_filter(rng: np.random.Generator) -> Draw:
    spec = _pick(rng, _specs(lambda t: bool(t.entity) and len(t.numeric) >= 2))
    x, y = _two_num(spec, rng)
    return Draw((spec.name,), {"e": (0, spec.entity), "x": (0, x), "y": (0, y)},
                {"t": _quantile(spec.name, y, rng, 0.1, 0.5)})


def _d_two_keys(rng: np.random.Generator) -> Draw | None:
    spec = _pick(rng, _specs(lambda t: bool(t.numeric) and len(_usable_categories(t, 12)) >= 2))
    g1, g2 = (str(c) for c in rng.choice(_usable_categories(spec, 12), size=2, replace=False))
    return Draw((spec.name,), {"g1": (0, g1), "g2": (0, g2), "x": (0, _pick(rng, spec.numeric))})


def _d_spread(rng: np.random.Generator) -> Draw | None:
    d = _d_rank_k(rng)
    if d is None:
        return None
    return _with_dp(d, rng, _scale(d.tables[0], d.columns["x"][1]))


def _d_rank_entity(rng: np.random.Generator) -> Draw:
    d = v1._draw_entity_numeric(rng)
    return Draw(d.tables, d.columns, {"k": int(_pick(rng, (2, 3, 4, 5)))})


CHAIN = [
    Template("v2_filter_group_rank", 3, "In {file}, keep the rows whose '{y}' is strictly greater than "
             "{t}, group them by '{g}' (missing '{g}' left out) and average '{x}' in each group (missing "
             "values left out). Which '{g}' has the {kth} average? " + _TIE,
             _PRE + "d = df[df[{y}] {op} {t}]\n"
             "m = d.groupby({g})[{x}].mean().dropna()\n"
             "r = m.rank(method='min', ascending=False)\n"
             "result = sorted(str(k) for k in r[r == {k}].index)[{tie}]\n", _STR, _d_rank_k,
             knobs={**_STRICT, **_TIEK}),
    Template("v2_filter_top3", 3, "In {file}, among the rows whose '{y}' is strictly greater than {t}, "
             "which three '{e}' values have the largest '{x}'? (Rows with a missing '{x}' left out.)",
             _PRE + "d = df[df[{y}] {op} {t}].dropna(subset=[{x}])\n"
             "result = sorted(str(v) for v in d.nlargest(3, {x}, keep={keep})[{e}])\n", _LIST,
             _d_entity_filter, knobs={**_STRICT, "keep": ("'first'", "'last'")}),
    Template("v2_groups_above_overall", 3, "In {file}, which '{g}' values have an average '{x}' strictly "
             "above the average '{x}' of all rows? (Missing values left out; rows with a missing '{g}' "
             "count for the overall average.)",
             _PRE + "m = df.groupby({g})[{x}].mean().dropna()\n"
             "result = sorted(str(k) for k in m[m {op} df[{x}].mean()].index)\n", _LIST,
             v1._draw_group_numeric, knobs=_STRICT),
    Template("v2_two_key_group", 3, "In {file}, group the rows by both '{g1}' and '{g2}' (rows missing "
             "either left out) and average '{x}' in each group (missing values left out). Which pair "
             "has the highest average? Give the '{g1}' value in the field 'first' and the '{g2}' value "
             "in 'second'. If several pairs tie, give the one whose values sort first as text.",
             _PRE + "m = df.groupby([{g1}, {g2}])[{x}].mean().dropna()\n"
             "best = sorted((str(a), str(b)) for a, b in m[m == m.max()].index)[{tie}]\n"
             "result = {{'first': best[0], 'second': best[1]}}\n",
             AnswerSchema("fields", fields=(Field("first", "str"), Field("second", "str"))), _d_two_keys,
             knobs=_TIEK),
    Template("v2_min_of_max", 3, "In {file}, find the largest '{x}' within each '{g}' value (missing "
             "values left out). Which '{g}' has the smallest of these maxima? " + _TIE,
             _PRE + "m = df.groupby({g})[{x}].max().dropna()\n"
             + _TOP_KEY.replace("max", "min"), _STR,
             v1._draw_group_numeric, knobs=_TIEK),
    Template("v2_filter_group_spread", 3, "In {file}, keep the rows whose '{y}' is strictly greater than "
             "{t}, average '{x}' within each '{g}' value (missing values left out), and give the "
             "difference between the highest and the lowest group average.",
             _PRE + "m = df[df[{y}] {op} {t}].groupby({g})[{x}].mean().dropna()\n"
             "result = float(m.max() - m.min())\n", _FLOAT, _d_spread, knobs=_STRICT),
    Template("v2_group_share_above", 3, "In {file}, for each '{g}' value compute the share of its rows "
             "(with '{x}' present) whose '{x}' is strictly greater than {t}. Which '{g}' has the largest "
             "share? " + _TIE,
             _PRE + "d = df.dropna(subset=[{x}])\n"
             "m = (d[{x}] {op} {t}).groupby(d[{g}]).mean()\n"
             + _TOP_KEY, _STR,
             _d_group_threshold, knobs={**_STRICT, **_TIEK}),
    Template("v2_rank_entity", 3, "In {file}, rank the rows by '{x}' from largest to smallest (rows with "
             "a missing '{x}' left out). Which '{e}' is at rank {k}?",
             # The knob breaks ties both ways: a tie at rank k makes the readings disagree (dropped).
             _PRE + "d = df.dropna(subset=[{x}]).sort_values([{x}, {e}], ascending=[False, {asc}])\n"
             "result = str(d[{e}].iloc[{k} - 1])\n", _STR, _d_rank_entity, knobs={"asc": ("True", "False")}),
]


# ---- time series ----------------------------------------------------------------------

def _d_series(rng: np.random.Generator) -> Draw:
    spec = _pick(rng, _series_specs())
    x = _pick(rng, spec.numeric)
    return Draw((spec.name,), {"x": (0, x), "date": (0, spec.date)})


def _d_rolling(rng: np.random.Generator) -> Draw:
    d = _d_series(rng)
    fn = _pick(rng, ("max", "min"))
    d = Draw(d.tables, d.columns, {"w": int(_pick(rng, (3, 5, 7, 12))), "fn": fn, "hl": _hl(fn)})
    return _with_dp(d, rng, _scale(d.tables[0], d.columns["x"][1]))


def _d_series_threshold(rng: np.random.Generator) -> Draw:
    d = _d_series(rng)
    return Draw(d.tables, d.columns, {"t": _quantile(d.tables[0], d.columns["x"][1], rng, 0.5, 0.9)})


def _d_cumsum(rng: np.random.Generator) -> Draw | None:
    d = _d_series(rng)
    s = _frame(d.tables[0])[d.columns["x"][1]].dropna()
    if (s < 0).any():
        return None
    return Draw(d.tables, d.columns, {"t": _nice(float(s.sum()) * float(rng.uniform(0.2, 0.6)))})


def _d_lag(rng: np.random.Generator) -> Draw:
    return _d_series(rng)


_SORTED = _PRE + "d = df.dropna(subset=[{x}]).sort_values({date}, kind='mergesort')\n"
"""The rows with ``x`` present in date order (a stable sort: equal dates keep file order)."""
_DATE = "pd.to_datetime(d[{date}], format='%Y-%m-%d')"

TIME_SERIES = [
    Template("v2_rolling", 3, "In {file}: " + _ORDER + " Take the mean of '{x}' over each window of {w} "
             "consecutive rows (windows that are not full are left out). What is the {hl} window "
             "mean?",
             _SORTED +
             "result = float(d[{x}].rolling({w}).mean().dropna().agg({fn}))\n", _FLOAT, _d_rolling),
    Template("v2_longest_run", 3, "In {file}: " + _ORDER + " What is the largest number of consecutive "
             "rows whose '{x}' is strictly greater than {t}?",
             _SORTED +
             "above = (d[{x}] {op} {t}).to_numpy()\n"
             "best = run = 0\n"
             "for flag in above:\n    run = run + 1 if flag else 0\n    best = max(best, run)\n"
             "result = int(best)\n", _INT, _d_series_threshold, knobs=_STRICT),
    Template("v2_month_of_year", 3, "In {file}, average '{x}' by calendar month (January = 1 ... "
             "December = 12) over all years, using the dates in '{date}' and leaving out missing values. "
             "Which month number has the highest average? If several tie, give the smallest.",
             _PRE + "d = df.dropna(subset=[{x}])\n"
             "m = d[{x}].groupby(" + _DATE + ".dt.month.to_numpy()).mean()\n"
             "result = int(sorted(m[m == m.max()].index)[{tie}])\n", _INT, _d_series, knobs=_TIEK),
    Template("v2_first_exceed", 3, "In {file}: " + _ORDER + " On which date does '{x}' first exceed {t} "
             "(strictly greater)? Give the date as YYYY-MM-DD.",
             _SORTED +
             "result = str(d.loc[d[{x}] {op} {t}, {date}].iloc[0])\n", _STR, _d_series_threshold,
             knobs=_STRICT),
    Template("v2_largest_jump", 3, "In {file}: " + _ORDER + " Between consecutive rows, where does '{x}' "
             "change the most (largest absolute difference from the previous row)? Give the later "
             "row's date as YYYY-MM-DD. If several tie, give the earliest.",
             _SORTED +
             "jump = d[{x}].diff().abs()\n"
             "result = str(sorted(d.loc[jump == jump.max(), {date}])[{tie}])\n", _STR, _d_series,
             knobs=_TIEK),
    Template("v2_cumsum_cross", 3, "In {file}: " + _ORDER + " Add up '{x}' row by row in that order. On "
             "which date does the running total first exceed {t} (strictly greater)? Give the date as "
             "YYYY-MM-DD.",
             _SORTED +
             "result = str(d.loc[d[{x}].cumsum() {op} {t}, {date}].iloc[0])\n", _STR, _d_cumsum,
             knobs=_STRICT),
    Template("v2_months_up", 3, "In {file}, average '{x}' within each calendar month (YYYY-MM, from "
             "'{date}'; missing values and months without values left out). In how many months is the "
             "average strictly higher than in the previous month present?",
             _PRE + "d = df.dropna(subset=[{x}])\n"
             "m = d[{x}].groupby(" + _DATE + ".dt.strftime('%Y-%m').to_numpy()).mean().sort_index()\n"
             "result = int((m.diff() {op} 0).sum())\n", _INT, _d_series, knobs=_STRICT),
    Template("v2_lag1_autocorr", 3, "In {file}: " + _ORDER + " What is the Pearson correlation between "
             "'{x}' in each row and '{x}' in the row before it (lag-1 autocorrelation over the pairs "
             "of consecutive rows)?",
             _SORTED +
             "v = d[{x}].to_numpy(dtype=float)\n"
             "result = float(np.corrcoef(v[1:], v[:-1])[0, 1])\n", _FLOAT, _d_lag),
]


# ---- joins ------------------------------------------------------------------------------

JOIN_PAIRS_V2: tuple[tuple[str, str, str, str], ...] = JOIN_PAIRS + (
    ("sunspots", "unemployment1948", "year", "Year"),
    ("unemployment1948", "sunspots", "Year", "year"),
    ("sunspots", "marriages", "year", "Year"),
    ("unemployment1948", "nile", "Year", "year"),
)
"""v1's pairs plus pairs of train tables (v1's each hold out a validation or test table)."""
_ANTI_PAIRS: tuple[tuple[str, str, str, str], ...] = JOIN_PAIRS_V2 + (
    ("gapminder", "gapminder_regions", "country", "Country"),
    ("world_gapminder", "gapminder_regions", "country", "Country"),
)


def _d_join_two(rng: np.random.Generator) -> Draw:
    left, right, ka, kb = _pick(rng, JOIN_PAIRS_V2)
    from tasks.data_analysis.tables import TABLES

    x, y = _pick(rng, TABLES[left].numeric), _pick(rng, TABLES[right].numeric)
    return Draw((left, right), {"ka": (0, ka), "kb": (1, kb), "x": (0, x), "y": (1, y)},
                {"t": _quantile(left, x, rng, 0.2, 0.6), "u": _quantile(right, y, rng, 0.2, 0.6)})


def _d_anti(rng: np.random.Generator) -> Draw:
    left, right, ka, kb = _pick(rng, _ANTI_PAIRS)
    return Draw((left, right), {"ka": (0, ka), "kb": (1, kb)})


def _d_join_group_count(rng: np.random.Generator) -> Draw:
    d = v1._draw_join_group(rng)
    frame = _frame(d.tables[0])
    x = d.columns["x"][1]
    regions = sorted(_frame("gapminder_regions")["Group"].dropna().unique().tolist())
    t = _nice(float(frame.loc[frame["year"] == d.values["year"], x].quantile(float(rng.uniform(0.3, 0.7)))))
    return Draw(d.tables, d.columns, {"year": d.values["year"], "t": t, "grp": str(_pick(rng, regions))})


def _d_join_filter(rng: np.random.Generator) -> Draw:
    d = _d_join_two(rng)
    return Draw(d.tables, d.columns, {"t": d.values["t"]})


JOIN = [
    dataclasses.replace(v1.template_by_id("t3_join_filter_mean"), id="v2_join_filter_mean", draw=_d_join_filter),
    Template("v2_join_count", 3, "Join {file} and {file2} on {file}'s '{ka}' = {file2}'s '{kb}', keeping "
             "only keys present in both. How many joined rows have '{x}' strictly greater than {t} and "
             "'{y}' strictly greater than {u}?",
             _PRE2 + "j = a.merge(b, left_on={ka}, right_on={kb}, how='inner')\n"
             "result = int(((j[{x}] {op} {t}) & (j[{y}] > {u})).sum())\n", _INT, _d_join_two, knobs=_STRICT),
    Template("v2_join_corr", 3, "Join {file} and {file2} on {file}'s '{ka}' = {file2}'s '{kb}', keeping "
             "only keys present in both. What is the Pearson correlation between '{x}' (from {file}) "
             "and '{y}' (from {file2}) over the joined rows where both are present?",
             _PRE2 + "j = a.merge(b, left_on={ka}, right_on={kb}, how='inner')[[{x}, {y}]].dropna()\n"
             "result = float(np.corrcoef(j[{x}].to_numpy(dtype=float), j[{y}].to_numpy(dtype=float))[0, 1])\n",
             _FLOAT, _d_join_two),
    Template("v2_anti_join", 3, "How many distinct values of '{ka}' in {file} do not appear in the "
             "'{kb}' column of {file2}?",
             _PRE2 + "result = int(len(set(a[{ka}].dropna()) - set(b[{kb}].dropna())))\n", _INT, _d_anti),
    Template("v2_join_ratio_top", 3, "Join {file} and {file2} on {file}'s '{ka}' = {file2}'s '{kb}', "
             "keeping only keys present in both. For each joined row compute '{x}' / '{y}' (rows where "
             "either is missing or '{y}' is not positive left out). Which '{ka}' has the largest ratio?",
             _PRE2 + "j = a.merge(b, left_on={ka}, right_on={kb}, how='inner').dropna(subset=[{x}, {y}])\n"
             "j = j[j[{y}] > 0]\n"
             "r = j[{x}] / j[{y}]\n"
             "result = str(sorted(j.loc[r == r.max(), {ka}].astype(str))[{tie}])\n", _STR, _d_join_two,
             knobs=_TIEK),
    Template("v2_join_group_count", 3, "Join {file} and {file2} on {file}'s '{ka}' = {file2}'s '{kb}', "
             "keeping only countries present in both. In year {year}, how many countries whose '{g}' is "
             "'{grp}' have '{x}' strictly greater than {t}?",
             _PRE2 + "j = a[a[{yr}] == {year}].merge(b, left_on={ka}, right_on={kb}, how='inner')\n"
             "result = int(((j[{g}] == {grp}) & (j[{x}] {op} {t})).sum())\n", _INT, _d_join_group_count,
             knobs=_STRICT),
]


# ---- schema: questions that name no column ---------------------------------------------

_NUMERIC_COLS = "cols = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]\n"


def _d_table(pred: Callable[[TableSpec], bool]) -> Callable[[np.random.Generator], Draw]:
    def draw(rng: np.random.Generator) -> Draw:
        return Draw((_pick(rng, _specs(pred)).name,))
    return draw


def _n_numeric(t: TableSpec) -> int:
    df = _frame(t.name)
    return sum(1 for c in df.columns if pd.api.types.is_numeric_dtype(df[c]))


def _n_text(t: TableSpec) -> int:
    df = _frame(t.name)
    return sum(1 for c in df.columns if not pd.api.types.is_numeric_dtype(df[c]))


_MISSING = (0.02, 0.05, 0.1)
_MANY_COLS = _d_table(lambda t: len(_frame(t.name).columns) >= 4)
_NUMERIC_TABLE = _d_table(lambda t: _n_numeric(t) >= 3)

SCHEMA = [
    Template("v2_most_missing_column", 2, "In {file}, which column has the most missing (empty) values? "
             "Give its name exactly as in the file's header. " + _TIE,
             _PRE + "n = df.isna().sum()\n"
             "result = sorted(str(c) for c in n[n == n.max()].index)[{tie}]\n", _STR, _MANY_COLS,
             knobs=_TIEK, missing_rates=_MISSING),
    Template("v2_columns_with_missing", 2, "How many columns of {file} have at least one missing "
             "(empty) value?", _PRE + "result = int(df.isna().any().sum())\n", _INT, _MANY_COLS,
             missing_rates=_MISSING),
    Template("v2_complete_rows", 2, "How many rows of {file} have a value in every column (no missing "
             "value anywhere)?", _PRE + "result = int(df.notna().all(axis=1).sum())\n", _INT, _MANY_COLS,
             missing_rates=_MISSING),
    Template("v2_widest_column", 3, "Among the numeric columns of {file} (those pandas reads as numbers), "
             "which has the largest range (largest minus smallest value, missing values left out)? Give "
             "its name exactly as in the header. " + _TIE,
             _PRE + _NUMERIC_COLS + "r = pd.Series({{c: df[c].max() - df[c].min() for c in cols}})\n"
             "result = sorted(str(c) for c in r[r == r.max()].index)[{tie}]\n", _STR, _NUMERIC_TABLE,
             knobs=_TIEK),
    Template("v2_most_variable_column", 3, "Among the numeric columns of {file} (those pandas reads as "
             "numbers) whose average is positive, which has the largest coefficient of variation "
             "(sample standard deviation, ddof=1, divided by the average; missing values left out)? "
             "Give its name exactly as in the header. " + _TIE,
             _PRE + _NUMERIC_COLS + "m = df[cols].mean()\ncv = (df[cols].std(ddof=1) / m)[m > 0]\n"
             "result = sorted(str(c) for c in cv[cv == cv.max()].index)[{tie}]\n", _STR, _NUMERIC_TABLE,
             knobs=_TIEK),
    Template("v2_most_correlated_pair", 3, "Among the numeric columns of {file} (those pandas reads as "
             "numbers), which two columns have the strongest linear relationship (largest absolute "
             "Pearson correlation, each pair over the rows where both are present)? Give both names "
             "exactly as in the header.",
             _PRE + _NUMERIC_COLS + "c = np.array(df[cols].corr().abs(), dtype=float)\n"
             "np.fill_diagonal(c, -1.0)\n"
             "i, k = np.unravel_index(np.nanargmax(c), c.shape)\n"
             "result = sorted([str(cols[i]), str(cols[k])])\n", _LIST, _NUMERIC_TABLE),
    Template("v2_most_distinct_text", 2, "Among the text columns of {file} (those pandas does not read "
             "as numbers), which has the most distinct values (missing values not counted)? Give its "
             "name exactly as in the header. " + _TIE,
             _PRE + "n = df.select_dtypes(exclude='number').nunique()\n"
             "result = sorted(str(c) for c in n[n == n.max()].index)[{tie}]\n", _STR,
             _d_table(lambda t: _n_text(t) >= 2), knobs=_TIEK),
]


# ---- statistics -------------------------------------------------------------------------

def _d_pair(rng: np.random.Generator) -> Draw:
    return v1._draw_pair(rng)


def _d_cat_pair(rng: np.random.Generator) -> Draw | None:
    spec = _pick(rng, _specs(lambda t: len(_usable_categories(t, 12)) >= 2))
    g1, g2 = (str(c) for c in rng.choice(_usable_categories(spec, 12), size=2, replace=False))
    return Draw((spec.name,), {"g1": (0, g1), "g2": (0, g2)})


def _d_cv(rng: np.random.Generator) -> Draw | None:
    spec, x = _num(rng)
    return Draw((spec.name,), {"x": (0, x)}) if float(_frame(spec.name)[x].mean()) > 0 else None


STATS = [
    Template("v2_spearman", 4, "In {file}, what is the Spearman rank correlation between '{x}' and '{y}' "
             "over the rows where both are present (ties get their average rank)?",
             _PRE + "d = df[[{x}, {y}]].dropna()\nresult = float(d[{x}].rank().corr(d[{y}].rank()))\n",
             _FLOAT, _d_pair),
    Template("v2_r_squared", 4, "In {file}, fit '{y}' = intercept + slope * '{x}' by ordinary least "
             "squares over the rows where both are present. What is the coefficient of determination "
             "(R squared) of the fit?",
             _PRE + v1._XY + "slope = (xc * yc).sum() / (xc ** 2).sum()\n"
             "result = float(1 - ((yc - slope * xc) ** 2).sum() / (yc ** 2).sum())\n", _FLOAT, _d_pair),
    Template("v2_covariance", 4, "In {file}, what is the sample covariance (ddof=1) of '{x}' and '{y}' "
             "over the rows where both are present?",
             _PRE + "d = df[[{x}, {y}]].dropna()\nresult = float(d[{x}].cov(d[{y}], ddof=1))\n",
             AnswerSchema("float", decimals=2), _d_pair),
    Template("v2_cv", 4, "In {file}, what is the coefficient of variation of '{x}' (sample standard "
             "deviation, ddof=1, divided by the average; missing values left out)?",
             _PRE + "s = df[{x}].dropna()\nresult = float(s.std(ddof=1) / s.mean())\n", _FLOAT, _d_cv),
    Template("v2_skew", 4, "In {file}, what is the sample skewness of '{x}' (the adjusted Fisher-Pearson "
             "coefficient G1 that pandas' Series.skew computes; missing values left out)?",
             _PRE + "result = float(df[{x}].dropna().skew())\n", _FLOAT, v1._draw_numeric),
    Template("v2_cohens_d", 4, "In {file}, what is Cohen's d for the difference in '{x}' between the rows "
             "whose '{g}' is {v1_text} and those whose '{g}' is {v2_text} (first minus second, divided "
             "by the pooled standard deviation sqrt(((n1-1)s1^2 + (n2-1)s2^2) / (n1+n2-2)) with sample "
             "variances; missing values left out)?",
             _PRE + "a = df.loc[df[{g}] == {v1}, {x}].dropna().to_numpy(dtype=float)\n"
             "b = df.loc[df[{g}] == {v2}, {x}].dropna().to_numpy(dtype=float)\n"
             "sp = np.sqrt(((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2))\n"
             "result = float((a.mean() - b.mean()) / sp)\n", _FLOAT, v1._draw_two_groups),
    Template("v2_chi_square", 4, "In {file}, cross-tabulate '{g1}' against '{g2}' (rows missing either "
             "left out) and compute Pearson's chi-square statistic of independence: the sum over cells "
             "of (observed - expected)^2 / expected, expected = row total * column total / grand total, "
             "no continuity correction.",
             _PRE + "t = pd.crosstab(df[{g1}], df[{g2}]).to_numpy(dtype=float)\n"
             "e = t.sum(1, keepdims=True) * t.sum(0, keepdims=True) / t.sum()\n"
             "result = float(((t - e) ** 2 / e).sum())\n", AnswerSchema("float", decimals=3), _d_cat_pair),
]

_REUSED = ("t1_distinct", "t1_missing", "t2_count_above", "t2_group_argmax", "t2_filtered_mean",
           "t2_frequent", "t2_zscore", "t3_ratio_group", "t3_top3_ratio", "t3_resample",
           "t3_join_group", "t3_yearly_change", "t4_pearson", "t4_ols",
           "t4_welch_t", "t4_ols2")
"""v1 templates kept as they are (their wording and precision were audited sound)."""

_REUSED_CATEGORY = {"t1_distinct": "basic", "t1_missing": "basic", "t2_count_above": "filter_group",
                    "t2_group_argmax": "filter_group", "t2_filtered_mean": "filter_group",
                    "t2_frequent": "filter_group", "t2_zscore": "filter_group", "t3_ratio_group": "chain",
                    "t3_top3_ratio": "chain", "t3_resample": "time_series", "t3_join_group": "join", "t3_yearly_change": "time_series", "t4_pearson": "stats",
                    "t4_ols": "stats", "t4_welch_t": "stats", "t4_ols2": "stats"}

_GROUPS = {"basic": BASIC, "filter_group": FILTER_GROUP, "chain": CHAIN, "time_series": TIME_SERIES,
           "join": JOIN, "schema": SCHEMA, "stats": STATS}

TEMPLATES_V2: tuple[Template, ...] = tuple(v1.template_by_id(i) for i in _REUSED) + tuple(
    t for group in _GROUPS.values() for t in group)

CATEGORY: dict[str, str] = {**_REUSED_CATEGORY, **{t.id: name for name, group in _GROUPS.items() for t in group}}
"""Template id -> category (see the module docstring)."""

_BY_ID = {t.id: t for t in TEMPLATES_V2}
assert len(_BY_ID) == len(TEMPLATES_V2), "duplicate template ids"


def template_v2_by_id(template_id: str) -> Template:
    try:
        return _BY_ID[template_id]
    except KeyError:
        raise KeyError(f"Expected one of {sorted(_BY_ID)}, actual value: {template_id!r}") from None
