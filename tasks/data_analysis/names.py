"""Made-up names shaped like real ones, for tables and columns no model has seen.

A policy trained on a fixed set of tables can recall ``'seattle_weather.csv'`` instead of
reading it; on a held-out table it then garbles the name (measured on the tiny baseline
model: ``'seattleweather.csv'``, ``'forensicg'``). Training questions whose files and
columns carry made-up names (:class:`tasks.data_analysis.variants.VariantConfig`'s
``invent_probability``) leave copying as the only way to a right answer. The made-up
name keeps the real one's shape (separators, digits, case, camelCase humps), because a
model that only ever copied smooth syllable strings drops the underscore of a real one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["ONSETS", "VOWELS", "check_pieces", "made_up_name", "made_up_word", "piece_speller"]

ONSETS = tuple("b c d f g h j k l m n p r s t v w z br dr gr kr st tr ch sh th".split())
VOWELS = tuple("a e i o u a e i o u y ae ou ei".split())
_CODAS = "nrlsmtk"

_PIECE = re.compile(r"[a-z]+")
"""A name piece: a non-empty lowercase word (compiled: a tokenizer has ~1,400 of them)."""

_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^A-Za-z\d]+")
"""A name's parts: an all-caps run, a (capitalised) lowercase word, digits, anything else."""


def made_up_word(length: int, rng: Any) -> str:
    """Lowercase syllables (onset, vowel, sometimes a coda) of about ``length`` letters;
    ``rng`` is a ``numpy.random.Generator``."""
    out = ""
    while len(out) < length:
        out += ONSETS[int(rng.integers(len(ONSETS)))] + VOWELS[int(rng.integers(len(VOWELS)))]
        if rng.random() < 0.3:
            out += _CODAS[int(rng.integers(len(_CODAS)))]
    return out


def piece_speller(pieces: Sequence[str]) -> Callable[[int, Any], str]:
    """A :func:`made_up_name` speller that joins random ``pieces`` (lowercase words, e.g. a
    tokenizer's letter tokens) up to about ``length`` letters. Syllables never hold ``ps``,
    ``x`` or ``qu``, so a tokenizer's pieces for such letters occur in no syllable name,
    and a policy that never copied them garbles them in a held-out name (the tiny model:
    ``tips.csv`` -> ``tiokes.csv``); spelling with the tokenizer's own pieces puts each of
    them into some name."""
    pieces = check_pieces(pieces)

    def spell(length: int, rng: Any) -> str:
        out = ""
        while len(out) < length:
            out += pieces[int(rng.integers(len(pieces)))]
        return out
    return spell


def check_pieces(pieces: Sequence[str]) -> tuple[str, ...]:
    """``pieces`` as a tuple, or ValueError unless it is a non-empty sequence of lowercase words.
    A set is refused: its order follows the string-hash seed, and the order decides the names."""
    ordered = not isinstance(pieces, (str, set, frozenset))
    if not ordered or not pieces or not all(isinstance(p, str) and _PIECE.fullmatch(p) for p in pieces):
        raise ValueError("Expected name pieces: a non-empty list of lowercase words (a-z), actual value: "
                         f"{str(pieces)[:80]!r}")
    return tuple(pieces)


def made_up_name(like: str, rng: Any, spell: Callable[[int, Any], str] = made_up_word) -> str:
    """A made-up name with ``like``'s shape: each word of three or more letters becomes
    syllables of about its length in its case (``TEMP`` -> ``BRAKO``, ``Percap`` ->
    ``Stoulim``); separators, digits and one- or two-letter words (``pm`` in ``pm2_5``)
    stay, unless the name has no longer word (``RI``, ``co2``: those are made up too).
    ``rng`` is a ``numpy.random.Generator``: the same state gives the same name.
    ``spell(length, rng)`` makes a word (:func:`made_up_word`'s syllables by default)."""
    parts = _PARTS.findall(like)
    short_too = not any(p[:1].isalpha() and len(p) > 2 for p in parts)  # "RI", "co2": no long word
    out = []
    for part in parts:
        if not part[:1].isalpha() or (len(part) <= 2 and not short_too):
            out.append(part)
            continue
        length = len(part) if len(part) <= 2 else max(3, len(part) + int(rng.integers(-2, 3)))
        word = spell(length, rng)
        out.append(word.upper() if part.isupper() else word.capitalize() if part[0].isupper() else word)
    return "".join(out)
