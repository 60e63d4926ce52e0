"""Arithmetic word problems with exact integer answers (the Calculator-v0 task source).

A task is a pure function of ``(task_seed, difficulty)``, so a seed names a task forever.
Splits are assigned by the task seed, so train, validation and test never share a task.

Difficulty:
    1: one addition or subtraction;
    2: two operations, multiplication allowed;
    3: three operations with parentheses and exact division.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["CalculatorTask", "Split", "make_task", "sample_task", "split_of", "grade_numeric", "parse_number"]

Split = Literal["train", "validation", "test"]

_NAMES = ("Ada", "Bo", "Chen", "Dara", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun")
_THINGS = ("apples", "books", "coins", "marbles", "stamps", "tickets", "shells", "pencils")


@dataclass(frozen=True, slots=True)
class CalculatorTask:
    """A word problem, the expression that solves it, and the integer answer."""

    task_id: str
    question: str
    expression: str
    answer: int
    difficulty: int


def split_of(task_seed: int) -> Split:
    """80/10/10 split by task seed (disjoint by construction)."""
    r = task_seed % 10
    return "train" if r < 8 else ("validation" if r == 8 else "test")


def _story_1(rng: np.random.Generator, who: str, thing: str) -> tuple[str, str]:
    a, b = (int(x) for x in rng.integers(2, 100, size=2))
    if rng.random() < 0.5:
        return f"{who} has {a} {thing} and gets {b} more. How many {thing} does {who} have now?", f"{a} + {b}"
    a, b = max(a, b), min(a, b)
    return f"{who} has {a} {thing} and gives away {b}. How many {thing} are left?", f"{a} - {b}"


def _story_2(rng: np.random.Generator, who: str, thing: str) -> tuple[str, str]:
    boxes, per, extra = int(rng.integers(2, 20)), int(rng.integers(2, 30)), int(rng.integers(1, 50))
    if rng.random() < 0.5:
        return (f"{who} buys {boxes} boxes with {per} {thing} each, then finds {extra} more {thing}. "
                f"How many {thing} does {who} have?", f"{boxes} * {per} + {extra}")
    extra = min(extra, boxes * per - 1)
    return (f"{who} packs {boxes} bags of {per} {thing} and then loses {extra} {thing}. "
            f"How many {thing} remain?", f"{boxes} * {per} - {extra}")


def _story_3(rng: np.random.Generator, who: str, thing: str) -> tuple[str, str]:
    friends, each = int(rng.integers(2, 9)), int(rng.integers(2, 25))
    a = int(rng.integers(1, friends * each))
    b = friends * each - a  # (a + b) / friends is exact
    bonus = int(rng.integers(1, 20))
    return (f"{who} has {a} {thing} and buys {b} more, shares them equally among {friends} friends, "
            f"and then gives each friend {bonus} extra. How many {thing} does each friend get?",
            f"({a} + {b}) / {friends} + {bonus}")


_STORIES = {1: _story_1, 2: _story_2, 3: _story_3}


def make_task(task_seed: int, difficulty: int) -> CalculatorTask:
    """The task named by ``task_seed`` at ``difficulty`` (pure function)."""
    if difficulty not in _STORIES:
        raise ValueError(f"Expected difficulty in {sorted(_STORIES)}, actual value: {difficulty}")
    rng = np.random.default_rng([task_seed, difficulty])
    who = _NAMES[int(rng.integers(len(_NAMES)))]
    thing = _THINGS[int(rng.integers(len(_THINGS)))]
    question, expression = _STORIES[difficulty](rng, who, thing)
    answer = _exact_int(expression)
    return CalculatorTask(f"calc-d{difficulty}-{task_seed}", question, expression, answer, difficulty)


def sample_task(rng: np.random.Generator, difficulty: int, split: Split) -> CalculatorTask:
    """Draw a task of ``split`` from ``rng`` (rejection on the split of the task seed)."""
    while True:
        seed = int(rng.integers(0, 2**31 - 1))
        if split_of(seed) == split:
            return make_task(seed, difficulty)


def _exact_int(expression: str) -> int:
    # Evaluated with fractions-free integer arithmetic: the generators keep division exact.
    from fractions import Fraction

    tokens = re.findall(r"\d+|[()+\-*/]", expression)
    value = _eval_tokens(tokens, lambda s: Fraction(int(s)))
    if value.denominator != 1:
        raise ValueError(f"generator produced a non-integer answer for {expression!r}")
    return int(value)


def _eval_tokens(tokens: list[str], num):  # tiny precedence-climbing evaluator for generator output
    pos = 0

    def expr():
        nonlocal pos
        v = term()
        while pos < len(tokens) and tokens[pos] in "+-":
            op = tokens[pos]; pos += 1
            v = v + term() if op == "+" else v - term()
        return v

    def term():
        nonlocal pos
        v = atom()
        while pos < len(tokens) and tokens[pos] in "*/":
            op = tokens[pos]; pos += 1
            v = v * atom() if op == "*" else v / atom()
        return v

    def atom():
        nonlocal pos
        tok = tokens[pos]; pos += 1
        if tok == "(":
            v = expr(); pos += 1
            return v
        return num(tok)

    return expr()


_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def parse_number(value: object) -> float | None:
    """A number given as a JSON number or a string that is *only* a number.

    Text with a number inside ("about 42", "42 or 43") is not a number: that would let an
    agent spray candidates.

    >>> parse_number("42"), parse_number(" -3.5 "), parse_number("42 apples"), parse_number(True)
    (42.0, -3.5, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        s = value.strip().replace(",", "") if re.fullmatch(r"\s*[+-]?\d{1,3}(,\d{3})+\s*", value) else value.strip()
        if _NUMBER.fullmatch(s):
            f = float(s)
            return f if math.isfinite(f) else None
    return None


def grade_numeric(answer: object, truth: int) -> float:
    """1.0 when ``answer`` is exactly the integer ``truth`` (as a number), else 0.0."""
    value = parse_number(answer)
    return 1.0 if value is not None and abs(value - truth) < 1e-9 else 0.0
