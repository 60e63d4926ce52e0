"""Report questions: a table variant, a target column, and the facts about its drivers.

A question is a pure function of its seed: the table (one with at least three numeric
columns), a variant of it drawn with DataAnalysis-v1's :func:`make_variant` (rows
subsampled and shuffled, some values missing; no renames, so the report can name
columns as the question does), and a target. Its facts are, for every other numeric
column, Pearson's r with the target over the rows where both are present, and that row
count. A draw whose strongest association is not clear (the two largest ``|r|`` within
``min_gap``, or the largest below ``min_r``) is redrawn, so the question has one answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from tasks.data_analysis.tables import TABLES, TableSpec
from tasks.data_analysis.variants import VariantConfig, make_variant

__all__ = ["ColumnFact", "ReportQuestion", "generate_report_question", "report_tables", "MAX_REPORT_WORDS"]

MAX_REPORT_WORDS = 150
_DRAWS = 50


@dataclass(frozen=True)
class ColumnFact:
    """One column's association with the target: ``r`` (Pearson, pairwise complete) over ``n`` rows."""

    column: str
    r: float
    n: int


@dataclass(frozen=True)
class ReportQuestion:
    """One report question. Only ``files`` may leave the host."""

    table: str
    target: str
    text: str
    facts: tuple[ColumnFact, ...]
    rows: int
    files: dict[str, bytes] = field(repr=False)

    @property
    def driver(self) -> ColumnFact:
        """The column most strongly associated with the target (largest ``|r|``)."""
        return max(self.facts, key=lambda f: abs(f.r))

    @property
    def file(self) -> str:
        return f"{self.table}.csv"

    def oracle_code(self) -> str:
        """Code that computes the driver in the sandbox and prints it as JSON."""
        others = [f.column for f in self.facts]
        return (f"import pandas as pd, json\ndf = pd.read_csv({self.file!r})\nbest = None\n"
                f"for c in {others!r}:\n    both = df[[{self.target!r}, c]].dropna()\n"
                f"    r = both[{self.target!r}].corr(both[c])\n"
                "    if best is None or abs(r) > abs(best[1]):\n        best = (c, r, len(both))\n"
                "print(json.dumps({'column': best[0], 'r': round(float(best[1]), 2), 'n': best[2]}))")

    def report_from(self, column: str, r: float, n: int) -> str:
        """The oracle's report, written from what it computed."""
        direction = "rises" if r > 0 else "falls"
        return (f"In {self.file}, {column} is the column most strongly associated with {self.target}: "
                f"Pearson r = {r:.2f} over the {n} rows where both are present, so {self.target} {direction} "
                f"as {column} grows. Association is not causation: a third variable may explain part of the link.")


def report_tables() -> tuple[TableSpec, ...]:
    """The tables a report question can use (three or more numeric columns)."""
    return tuple(spec for spec in TABLES.values() if len(spec.numeric) >= 3)


def _facts(frame, target: str, others: list[str]) -> tuple[ColumnFact, ...]:
    out = []
    for c in others:
        both = frame[[target, c]].dropna()
        r = float(both[target].corr(both[c])) if len(both) > 2 else float("nan")
        out.append(ColumnFact(c, r, len(both)))
    return tuple(out)


def _text(spec: TableSpec, target: str, rows: int) -> str:
    return (f"What drives {target} in {spec.name}.csv ({rows} rows)? Write a short report (at most "
            f"{MAX_REPORT_WORDS} words) that names the numeric column most strongly associated with {target} "
            "(the largest absolute Pearson correlation, over the rows where both values are present), gives that "
            "correlation to 2 decimals and the number of rows it rests on, and adds one caveat. Every number in "
            "your report is checked against the table: write only figures you computed.")


def generate_report_question(seed: int, *, min_gap: float = 0.03, min_r: float = 0.2,
                             variants: VariantConfig = VariantConfig()) -> ReportQuestion:
    """The report question of ``seed`` (deterministic)."""
    rng = np.random.default_rng(seed)
    tables = report_tables()
    for _ in range(_DRAWS):
        spec = tables[int(rng.integers(len(tables)))]
        variant = make_variant(spec, rng, allow_rename=False, config=variants)
        frame = variant.frame()
        target = str(spec.numeric[int(rng.integers(len(spec.numeric)))])
        facts = _facts(frame, target, [c for c in spec.numeric if c != target])
        ranked = sorted((abs(f.r) for f in facts if np.isfinite(f.r)), reverse=True)
        if len(ranked) == len(facts) and ranked[0] >= min_r and ranked[0] - ranked[1] >= min_gap:
            return ReportQuestion(spec.name, target, _text(spec, target, variant.rows), facts, variant.rows,
                                  {variant.file: variant.data})
    raise RuntimeError(f"no clear report question in {_DRAWS} draws for seed {seed}")


def oracle_values(stdout: str) -> tuple[str, float, int]:
    """The oracle code's printed result."""
    got = json.loads(stdout.strip().splitlines()[-1])
    return str(got["column"]), float(got["r"]), int(got["n"])
