"""The question templates of the bundled dataset: wording, slot grammar and hop count.

Every question is rendered from a ``Template`` by filling typed slots (a country name, a
city name, a person's name, a phrase that leads to a person's country). The same
template turns into a regular expression that checks the rendered text: each slot must
match its slot grammar (a proper name starts with a capital, has no commas, brackets or
dangling particles), and the text as a whole must match exactly one template. That is
the grammar check of the quality gate, and it is also how the ``no_tool`` baseline
recognises a question's template from its text alone (no hidden field is needed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["SLOT_PATTERNS", "TEMPLATES", "Template", "TemplateGrammarError", "match_template", "render"]

Kind = Literal["lookup", "bridge", "comparison", "intersection"]

# A proper name: capitalised words, joined by single spaces, with the particles names use
# ("Bosnia and Herzegovina", "Leonardo da Vinci"); never starting or ending on a particle.
_PARTICLE = (r"(?:and|of|the|de|da|das|do|dos|du|del|della|des|di|la|las|le|les|los|van|von|der|den|zu|am|an|im|"
             r"y|e|es|al|el|bin|ibn|ben|upon|on|in|sur|en|na|nad|pod)")
_WORD = r"[^\W\d_a-z][\w'’.\-]*"  # starts with a letter that is not lower-case ASCII
_NAME = rf"{_WORD}(?: (?:{_PARTICLE} )*{_WORD})*"

SLOT_PATTERNS: dict[str, str] = {
    "country": _NAME,
    "city": _NAME,
    "capital": _NAME,
    "person": _NAME,
    # Who the person's country is: "home country" only when the country existed in their
    # lifetime; otherwise the phrase that is true (the present-day country of the nationality).
    "home": rf"the home country of {_NAME}|the present-day country of {_NAME}'s nationality",
}


class TemplateGrammarError(ValueError):
    """A rendered question does not match its template's grammar (a broken slot value)."""


@dataclass(frozen=True)
class Template:
    """One kind of question.

    Attributes:
        name: the template id questions carry (``Question.template``).
        text: the wording with ``{slot}`` or ``{slot_2}`` placeholders; a slot's type is
            its name without the ``_2`` suffix.
        hops: how many different documents a question of this template needs.
        kind: lookup (one fact), bridge (a chain), comparison (two chains, pick one) or
            intersection (two chains meet in one entity).
    """

    name: str
    text: str
    hops: int
    kind: Kind

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.text)


_cache: dict[str, re.Pattern[str]] = {}


def _compiled(text: str) -> re.Pattern[str]:
    if text not in _cache:
        parts = re.split(r"\{(\w+)\}", text)
        regex = "".join(re.escape(p) if i % 2 == 0 else f"(?:{SLOT_PATTERNS[p.removesuffix('_2')]})"
                        for i, p in enumerate(parts))
        _cache[text] = re.compile(regex)
    return _cache[text]


_T = Template
TEMPLATES: dict[str, Template] = {t.name: t for t in (
    # one document
    _T("capital_of_country", "What is the capital of {country}?", 1, "lookup"),
    _T("country_of_capital", "{capital} is the capital of which country?", 1, "lookup"),
    _T("currency_of_country", "What is the currency of {country}?", 1, "lookup"),
    _T("country_of_city", "In which country is the city of {city}?", 1, "lookup"),
    _T("birth_year", "In what year was {person} born?", 1, "lookup"),
    _T("death_year", "In what year did {person} die?", 1, "lookup"),
    # two documents
    _T("city_country_capital", "What is the capital of the country in which the city of {city} lies?", 2, "bridge"),
    _T("city_country_currency", "What currency is used in the country where the city of {city} is?", 2, "bridge"),
    _T("city_country_language", "What is the official language of the country where the city of {city} is?",
       2, "bridge"),
    _T("person_country_capital", "What is the capital of {home}?", 2, "bridge"),
    _T("person_country_currency", "What currency is used in {home}?", 2, "bridge"),
    _T("born_earlier", "Who was born earlier, {person} or {person_2}?", 2, "comparison"),
    _T("shared_neighbour", "Which country borders both {country} and {country_2}?", 2, "intersection"),
    # three documents
    _T("shared_neighbour_capital", "What is the capital of the country that borders both {country} and {country_2}?",
       3, "intersection"),
    _T("shared_neighbour_currency", "What currency is used in the country that borders both {country} and "
       "{country_2}?", 3, "intersection"),
    _T("city_shared_neighbour", "Which country borders both {country} and the country where the city of {city} "
       "lies?", 3, "intersection"),
    _T("person_shared_neighbour", "Which country borders both {country} and {home}?", 3, "intersection"),
    # four documents
    _T("city_shared_neighbour_capital", "What is the capital of the country that borders both {country} and the "
       "country where the city of {city} lies?", 4, "intersection"),
    _T("person_shared_neighbour_capital", "What is the capital of the country that borders both {country} and "
       "{home}?", 4, "intersection"),
    _T("cities_shared_neighbour", "Which country borders both the country where the city of {city} lies and the "
       "country where the city of {city_2} lies?", 4, "intersection"),
    _T("home_countries_more_populous", "Which has more people, {home} or {home_2}?", 4, "comparison"),
)}


def match_template(question: str) -> list[str]:
    """The templates whose grammar the text matches (exactly one for a well-formed question).

    >>> match_template("What is the capital of France?")
    ['capital_of_country']
    >>> match_template("What is the capital of the and American actor?")
    []
    """
    return [t.name for t in TEMPLATES.values() if t.pattern.fullmatch(question)]


def render(template: str, **slots: str) -> str:
    """The question text of ``template`` with ``slots`` filled, grammar-checked.

    Raises ``TemplateGrammarError`` when a slot value breaks its grammar or the text
    reads as another template too (the quality gate records the reason and drops it).
    """
    spec = TEMPLATES[template]
    text = spec.text.format(**slots)
    if "  " in text or re.search(r"\b([a-z]+) \1\b", text):
        raise TemplateGrammarError(f"doubled space or word in {text!r}")
    matched = match_template(text)
    if matched != [template]:
        raise TemplateGrammarError(f"expected {text!r} to read as {template!r} only, actual reading: {matched}")
    return text
