"""Judged items for the judge tests: two table questions with number checks, one without."""

from __future__ import annotations

import re

from agentgym.judges import CheckResult, Criterion, Rubric
from agentgym.readiness.judge_audit import JudgedItem

QUESTION = ("Which column of sales.csv is most associated with revenue? Give its Pearson correlation with "
            "revenue (2 decimals) and one caveat.")
RUBRIC = Rubric((
    Criterion("names_column", "Names the column most associated with revenue.", 2.0, ("price",)),
    Criterion("gives_strength", "Gives the correlation as a number.", 1.0, ("0.81",)),
    Criterion("gives_caveat", "Adds a caveat about causation or confounding.", 1.0, ("causation|confound",)),
), name="sales")
TRUTH = ("Price is the column most associated with revenue: Pearson r = 0.81 over 120 rows. Correlation is "
         "not causation; a confound such as season may drive both.")
OTHER = ("Quantity is the column most associated with returns: Pearson r = 0.64 over 97 rows. A confound "
         "such as store size may drive both; this is not causation.")


def number_checks(facts: set[float], key: float):
    """Every number must be one of ``facts``, and ``key`` must be stated."""

    def check(answer: str) -> CheckResult:
        numbers = [float(n) for n in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", answer)]
        wrong = [n for n in numbers if not any(abs(n - f) < 0.006 for f in facts)]
        if wrong:
            return CheckResult(0.0, failed=tuple(f"{n:g}: not a figure of the table" for n in wrong))
        if not any(abs(n - key) < 0.006 for n in numbers):
            return CheckResult(0.0, failed=("the correlation is missing",))
        return CheckResult(1.0, passed=("numbers",))

    return check


PLANET_Q = "Which planet is the largest in the Solar System? Name it and say what it is mostly made of."
PLANET_RUBRIC = Rubric((
    Criterion("names_planet", "Names the largest planet.", 1.0, ("Jupiter",)),
    Criterion("composition", "Says what the planet is mostly made of.", 1.0, ("hydrogen",)),
), name="planet")
PLANET_TRUTH = "Jupiter is the largest planet of the Solar System; it is mostly hydrogen, with some helium."


def items() -> list[JudgedItem]:
    returns = Rubric((
        Criterion("names_column", "Names the column most associated with returns.", 2.0, ("quantity",)),
        Criterion("gives_strength", "Gives the correlation as a number.", 1.0, ("0.64",)),
        Criterion("gives_caveat", "Adds a caveat about causation or confounding.", 1.0, ("causation|confound",)),
    ), name="returns")
    return [JudgedItem("sales", QUESTION, RUBRIC, TRUTH, number_checks({0.81, 120.0}, 0.81)),
            JudgedItem("returns", QUESTION.replace("revenue", "returns"), returns, OTHER,
                       number_checks({0.64, 97.0}, 0.64)),
            JudgedItem("planet", PLANET_Q, PLANET_RUBRIC, PLANET_TRUTH, None)]
