"""Search-v2's templates: hop counts that count documents, and several wordings each.

A template's ``hops`` is the number of distinct documents a solver needs over the v2
corpus (borders in their own documents), checked per question by the generator and
measured by the shortcut audit (``agentgym dataset-report agentgym/Search-v2``). Every
template has at least three wordings; each question gets one, drawn by the generator's
seeded RNG, so one regular expression per template no longer reads the set.

Slots: ``{country}``, ``{city}``, ``{capital}``, ``{person}`` are names; ``{place}`` is the
title of a Wikipedia article whose description places it in a country ("River in Russia"); ``{home}`` is a
person's country phrase (v1's ``home_phrase``: "the home country of X", or "the
present-day country of X's nationality" before that country existed); ``{who}`` is a
person described by Wikipedia's own words: the occupation of their description and the
decade of their birth ("the composer born in the 1860s").
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

from tasks.search.templates import SLOT_PATTERNS

__all__ = ["TEMPLATES_V2", "TemplateV2", "answer_kind", "match_template_v2"]

_SLOTS = {**SLOT_PATTERNS, "place": SLOT_PATTERNS["city"], "who": r"the [a-z][a-z\-]+ born in the \d{3,4}s"}

Kind = Literal["lookup", "bridge", "comparison", "intersection"]


@dataclass(frozen=True)
class TemplateV2:
    """One kind of question.

    Attributes:
        name: the id questions carry (``Question.template``).
        hops: the distinct documents a question needs.
        kind: lookup, bridge, comparison (pick one of two named options) or intersection.
        wordings: at least three phrasings with ``{slot}`` placeholders.
        choices: how many options the question names (2 for a two-way choice: chance 50%).
    """

    name: str
    hops: int
    kind: Kind
    wordings: tuple[str, ...]
    choices: int = 0

    def __post_init__(self) -> None:
        if len(self.wordings) < 3:
            raise ValueError(f"Expected at least 3 wordings for {self.name}, actual value: {len(self.wordings)}")


# Country phrases that lead to the country C (the ``{c}`` of the wordings below).
_BY_CITY = "the country where the city of {city} lies"
_BY_NEIGHBOURS = "the country that borders both {country} and {country_2}"
_BY_CITY_NEIGHBOURS = "the country that borders both {country} and the country where the city of {city} lies"
_BY_CITIES = "the country that borders both the country where the city of {city} lies and the country where " \
             "the city of {city_2} lies"
_BY_CAPITAL = "the country whose capital is {capital}"
_BY_PLACE = "the country where {place} is located"
_BY_CAPITAL_NEIGHBOURS = "the country that borders both {country} and the country whose capital is {capital}"

_CAPITAL = ("What is the capital of {c}?", "Which city is the capital of {c}?", "Name the capital city of {c}.")
_CURRENCY = ("What currency is used in {c}?", "What is the currency of {c}?", "Which currency does {c} use?")
_LANGUAGE = ("What is the official language of {c}?", "Which language is official in {c}?",
             "Name the official language of {c}.")
_WHO = ("Who is {who} whose nationality is that of {c}?", "Name {who} who had the nationality of {c}.",
        "Who was {who} with the nationality of {c}?")
_DIED = ("In what year did {who} whose nationality is that of {c} die?",
         "When did {who} who had the nationality of {c} die?",
         "What year did {who}, a national of {c}, die in?")


_BORDERING = ("Which country borders both {a} and {b}?", "Name the country that shares a border with {a} and with {b}.",
              "Which country is a neighbour of both {a} and {b}?")


def _on(wordings: tuple[str, ...], phrase: str) -> tuple[str, ...]:
    return tuple(w.replace("{c}", phrase) for w in wordings)


def _both(a: str, b: str) -> tuple[str, ...]:
    """The country bordering ``a`` and ``b`` (two country phrases), in each wording."""
    return tuple(w.replace("{a}", a).replace("{b}", b) for w in _BORDERING)


_T = TemplateV2
TEMPLATES_V2: dict[str, TemplateV2] = {t.name: t for t in (
    # one document
    _T("capital_of_country", 1, "lookup", _on(_CAPITAL, "{country}")),
    _T("country_of_capital", 1, "lookup", ("{capital} is the capital of which country?",
                                           "Which country has {capital} as its capital?",
                                           "Of which country is {capital} the capital city?")),
    _T("currency_of_country", 1, "lookup", ("What is the currency of {country}?", "Which currency is used in "
                                            "{country}?", "What money does {country} use as its currency?")),
    _T("country_of_city", 1, "lookup", ("In which country is the city of {city}?", "Which country is the city of "
                                        "{city} in?", "The city of {city} lies in which country?")),
    _T("birth_year", 1, "lookup", ("In what year was {person} born?", "When was {person} born?",
                                   "What is the birth year of {person}?")),
    _T("death_year", 1, "lookup", ("In what year did {person} die?", "When did {person} die?",
                                   "What year did {person} die in?")),
    _T("shared_neighbour", 1, "intersection", _both("{country}", "{country_2}")),
    _T("place_country", 1, "lookup", ("In which country is {place}?", "Which country is {place} located in?",
                                      "{place} lies in which country?")),
    # two documents
    _T("city_country_capital", 2, "bridge", _on(_CAPITAL, _BY_CITY)),
    _T("city_country_currency", 2, "bridge", _on(_CURRENCY, _BY_CITY)),
    _T("city_country_language", 2, "bridge", _on(_LANGUAGE, _BY_CITY)),
    _T("person_country_capital", 2, "bridge", _on(_CAPITAL, "{home}")),
    _T("person_country_currency", 2, "bridge", _on(_CURRENCY, "{home}")),
    _T("shared_neighbour_capital", 2, "intersection", _on(_CAPITAL, _BY_NEIGHBOURS)),
    _T("shared_neighbour_currency", 2, "intersection", _on(_CURRENCY, _BY_NEIGHBOURS)),
    _T("city_shared_neighbour", 2, "intersection", _both("{country}", _BY_CITY)),
    _T("person_of_capital_country", 2, "bridge", _on(_WHO, _BY_CAPITAL)),
    _T("death_of_capital_country", 2, "bridge", _on(_DIED, _BY_CAPITAL)),
    _T("compatriot", 2, "bridge", ("Who is {who} who shared the nationality of {person}?",
                                   "Name {who} of the same nationality as {person}.",
                                   "Who was {who} with the same nationality as {person}?")),
    _T("compatriot_death", 2, "bridge", ("In what year did {who} who shared the nationality of {person} die?",
                                         "When did {who} of the same nationality as {person} die?",
                                         "What year did {who}, a compatriot of {person}, die in?")),
    # three documents
    _T("person_shared_neighbour", 3, "intersection", _both("{country}", "{home}")),
    _T("city_shared_neighbour_capital", 3, "intersection", _on(_CAPITAL, _BY_CITY_NEIGHBOURS)),
    _T("cities_shared_neighbour", 3, "intersection", _both(_BY_CITY, _BY_CITY.replace("{city}", "{city_2}"))),
    _T("person_of_place_country", 3, "bridge", _on(_WHO, _BY_PLACE)),
    _T("person_of_city_country", 3, "bridge", _on(_WHO, _BY_CITY)),
    _T("death_of_city_country", 3, "bridge", _on(_DIED, _BY_CITY)),
    _T("person_of_neighbour", 3, "intersection", _on(_WHO, _BY_NEIGHBOURS)),
    _T("death_of_neighbour", 3, "intersection", _on(_DIED, _BY_NEIGHBOURS)),
    # four documents
    _T("person_shared_neighbour_capital", 4, "intersection", _on(_CAPITAL, "the country that borders both "
                                                                 "{country} and {home}")),
    _T("cities_shared_neighbour_capital", 4, "intersection", _on(_CAPITAL, _BY_CITIES)),
    _T("person_of_city_neighbour", 4, "intersection", _on(_WHO, _BY_CITY_NEIGHBOURS)),
    _T("death_of_city_neighbour", 4, "intersection", _on(_DIED, _BY_CITY_NEIGHBOURS)),
    _T("person_of_capital_neighbour", 4, "intersection", _on(_WHO, _BY_CAPITAL_NEIGHBOURS)),
    _T("death_of_capital_neighbour", 4, "intersection", _on(_DIED, _BY_CAPITAL_NEIGHBOURS)),
    _T("home_countries_more_populous", 4, "comparison", ("Which has more people, {home} or {home_2}?",
                                                         "Which is more populous, {home} or {home_2}?",
                                                         "Which of the two has the larger population: {home} or "
                                                         "{home_2}?"), choices=2),
)}


def answer_kind(template: str) -> str | None:
    """What a v2 template's answer is, for the v2 scorer's ``kind`` ("capital" accepts every
    seat of a contested capital; "year" compares numbers; "currency_named" where the question
    names the country, so a unit several currencies share, "dollar", says which one; "currency"
    where the country is a hidden hop); ``None`` for an unknown template.

    >>> answer_kind("death_of_neighbour"), answer_kind("city_shared_neighbour_capital")
    ('year', 'capital')
    >>> answer_kind("currency_of_country"), answer_kind("person_country_currency")
    ('currency_named', 'currency')
    """
    if template not in TEMPLATES_V2:
        return None
    if template == "currency_of_country":
        return "currency_named"
    if template.startswith("country_of") or template == "place_country":
        return "country"
    if template.endswith("_year") or template.startswith("death_of") or template == "compatriot_death":
        return "year"
    for kind in ("capital", "currency", "language"):
        if template.endswith(kind) or template.startswith(f"{kind}_of"):
            return kind
    if template.startswith("person_of") or template == "compatriot":
        return "person"
    return "country"


@functools.lru_cache(maxsize=None)
def _patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for t in TEMPLATES_V2.values():
        for wording in t.wordings:
            parts = re.split(r"\{(\w+)\}", wording)
            regex = "".join(re.escape(p) if i % 2 == 0 else f"(?:{_SLOTS[p.removesuffix('_2')]})"
                            for i, p in enumerate(parts))
            out.append((t.name, re.compile(regex)))
    return tuple(out)


def match_template_v2(question: str) -> list[str]:
    """The v2 templates one of whose wordings the text matches (exactly one when well formed).

    >>> match_template_v2("Which city is the capital of the country where the city of Yazd lies?")
    ['city_country_capital']
    """
    return sorted({name for name, pattern in _patterns() if pattern.fullmatch(question)})
