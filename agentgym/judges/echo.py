"""Answers made of the question or the rubric instead of an answer.

Judges favour answers that sound like the rubric: restating the question reads as
"on topic", and an answer stuffed with the rubric's own words ticks its criteria for a
judge that matches words. Both are measured on the normalised answer:

* **restating** — the share of the answer's word 4-grams that occur in the question or
  the rubric (a report quotes a phrase or two; a restatement is mostly quotes);
* **stuffing** — the share of the answer's words that are the rubric's content words
  (a report is mostly its own words and function words; a keyword list is not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["EchoMeasure", "measure_echo"]

_WORD = re.compile(r"[a-z0-9_]+(?:\.[0-9]+)?")
_STOP = frozenset("""a an the and or of to in on for with by is are was were be it its this that these those as at
from which what who how why does do not no than then so if into about most more less any each every one""".split())


@dataclass(frozen=True)
class EchoMeasure:
    """How much of an answer is echo.

    Attributes:
        restated: share of the answer's word 4-grams found in the question or rubric.
        stuffed: share of the answer's words that are content words of the rubric.
        words: the answer's word count.
    """

    restated: float
    stuffed: float
    words: int


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _grams(words: list[str], n: int = 4) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def measure_echo(answer: str, question: str, rubric_text: str) -> EchoMeasure:
    """Measure ``answer``'s echo of ``question`` and ``rubric_text``.

    >>> q = "Which column is most strongly associated with mass in penguins.csv?"
    >>> measure_echo(q, q, "").restated
    1.0
    """
    words = _words(answer)
    grams = _grams(words)
    source = set(_grams(_words(question))) | set(_grams(_words(rubric_text)))
    restated = sum(g in source for g in grams) / len(grams) if grams else 0.0
    keywords = {w for w in _words(rubric_text) if w not in _STOP and len(w) > 3}
    stuffed = sum(w in keywords for w in words) / len(words) if words else 0.0
    return EchoMeasure(restated, stuffed, len(words))
